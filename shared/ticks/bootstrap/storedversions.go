package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/migrate"
	"github.com/karpless/karpless/shared/kube"
)

// checkStoredVersions runs before any other step and changes nothing. A
// CRD left by Karpenter v1.0 may still list v1beta1 in
// status.storedVersions; the API server then refuses Karpless's CRD,
// which has only v1 ("must appear in spec.versions"). Finding that out by
// applying would fail after the conversion webhook was already removed,
// leaving objects stored as v1beta1 unreadable. So read first, and stop
// with what to do.
func checkStoredVersions(ctx context.Context, c *kube.Clients, o Options, _ *Result) error {
	want, err := crdsOf(o)
	if err != nil {
		return err
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	var live []apiextensionsv1.CustomResourceDefinition
	for _, w := range want {
		got, err := api.Get(ctx, w.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading CRD %s: %w", w.Name, err)
		}
		live = append(live, *got)
	}
	problems := migrate.UnservedStoredVersions(live, want)
	if len(problems) == 0 {
		return nil
	}
	// The facts first: CloudFormation's answer is cut at maxReason.
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	msg := strings.Join(msgs, "; ") + ". Nothing was changed. " + problems[0].Fix()
	if len(problems) > 1 {
		msg += " Likewise for the other CRDs."
	}
	return &StoredVersionsError{Problems: problems, msg: msg}
}

// StoredVersionsError is why Install refused to start.
type StoredVersionsError struct {
	Problems []migrate.StoredVersionProblem
	msg      string
}

func (e *StoredVersionsError) Error() string { return e.msg }

// IsStoredVersions reports whether err is Install's refusal over stored versions.
func IsStoredVersions(err error) bool {
	var e *StoredVersionsError
	return errors.As(err, &e)
}
