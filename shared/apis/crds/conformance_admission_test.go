package crds_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/karpless/karpless/shared/local/kubetest"
)

// Karpenter v1.14.1's API validation suites (core pkg/apis/v1 and
// v1alpha1, the AWS provider's pkg/apis/v1) create objects and expect the
// API server to admit or refuse them by the CRDs' OpenAPI and CEL rules.
// The ports send the same objects to this package's one API server, which
// serves the CRDs Karpless installs. A create that only asks for a verdict
// is a server-side dry run: the full admission and validation chain runs,
// nothing is stored, so cases need no cleanup and cannot collide. Where
// Karpenter also calls RuntimeValidate, the port asks Karpless's runtime
// validation the same question.

// dryRun validates a create without storing it.
var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// creator is a typed client's Create.
type creator[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// verdict dry-runs the create of obj, named for the test, and returns the
// API server's answer.
func verdict[T metav1.Object](t *testing.T, c creator[T], obj T) error {
	t.Helper()
	obj.SetName(kubetest.Name(t))
	obj.SetResourceVersion("")
	_, err := c.Create(context.Background(), obj, dryRun)
	return err
}

// store creates obj for real (for cases that update it next) and deletes it
// when the test ends; it returns the stored object.
func store[T metav1.Object](t *testing.T, c interface {
	creator[T]
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}, obj T) (T, error) {
	t.Helper()
	obj.SetName(kubetest.Name(t))
	got, err := c.Create(context.Background(), obj, metav1.CreateOptions{})
	if err == nil {
		name := obj.GetName()
		t.Cleanup(func() { _ = c.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	return got, err
}

// verdictWith dry-runs the create of obj with one field set to a raw value
// the typed object cannot hold (Karpenter's tables set them through
// unstructured objects too).
func verdictWith(t *testing.T, gvk schema.GroupVersionKind, resource string, obj runtime.Object, value any, path ...string) error {
	t.Helper()
	e := kubetest.Need(t, env)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u, value, path...); err != nil {
		t.Fatal(err)
	}
	o := &unstructured.Unstructured{Object: u}
	o.SetGroupVersionKind(gvk)
	o.SetName(kubetest.Name(t))
	_, err = dyn(t, e).Resource(gvk.GroupVersion().WithResource(resource)).Create(context.Background(), o, dryRun)
	return err
}

// admitted fails the test unless the API server admitted the object.
func admitted(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("refused (%v); Karpenter admits it", err)
	}
}

// refused fails the test unless the API server refused the object as
// invalid (a refusal for another reason, say a missing CRD, proves nothing).
func refused(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("admitted; Karpenter's CRD refuses it")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("failed (%v), not refused as invalid", err)
	}
}

// valid and invalid check a runtime validation's answer where Karpenter's
// case calls RuntimeValidate.
func valid(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("runtime validation refused it (%v); Karpenter's RuntimeValidate passes it", err)
	}
}

func invalid(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("runtime validation passed it; Karpenter's RuntimeValidate refuses it")
	}
}
