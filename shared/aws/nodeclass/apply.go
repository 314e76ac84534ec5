package nodeclass

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// ResolvedAtAnnotation records when the status was last resolved (RFC 3339,
// UTC). Conditions only move on transitions, so they cannot tell a fresh
// status from one nobody refreshed for an hour; this annotation can.
const ResolvedAtAnnotation = "karpless.dev/nodeclass-resolved-at"

// IsStale reports whether nc's status must be resolved before it is used:
// it was never resolved, the spec changed since (the Ready condition's
// observedGeneration is behind), or it was resolved more than maxAge ago
// (maxAge <= 0 means timing.NodeClassRefresh).
func IsStale(nc *awsv1.EC2NodeClass, now time.Time, maxAge time.Duration) bool {
	if maxAge <= 0 {
		maxAge = timing.NodeClassRefresh
	}
	c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if c == nil || c.ObservedGeneration != nc.Generation {
		return true
	}
	at, ok := ResolvedAt(nc)
	return !ok || now.Sub(at) >= maxAge
}

// ResolvedAt returns the time of the last resolution, if recorded.
func ResolvedAt(nc *awsv1.EC2NodeClass) (time.Time, bool) {
	v, ok := nc.Annotations[ResolvedAtAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// IsReady reports whether the class's Ready condition is true for its
// current generation, the test a tick applies before launching with it.
func IsReady(nc *awsv1.EC2NodeClass) bool {
	c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == nc.Generation
}

// Client is the part of the EC2NodeClass client Apply uses; kube.Clients'
// EC2NodeClasses has it.
type Client interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*awsv1.EC2NodeClass, error)
	UpdateStatus(ctx context.Context, nc *awsv1.EC2NodeClass, opts metav1.UpdateOptions) (*awsv1.EC2NodeClass, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*awsv1.EC2NodeClass, error)
}

// Apply writes status to the class's status subresource and stamps the
// annotations ResolvedAtAnnotation, karpenter.k8s.aws/ec2nodeclass-hash (of
// the class and caBundle, the cluster's CA the nodes' user data carries) and
// -hash-version. The status is written with an update that retries on
// conflict against a fresh read: a concurrent writer resolved the same AWS
// state, so our status wins, but a condition whose status did not change
// keeps the other writer's lastTransitionTime. The update is skipped when
// nothing changed. Both writes are idempotent; a Lambda killed between
// them leaves a correct status with an old timestamp, which IsStale reports.
func Apply(ctx context.Context, c Client, nc *awsv1.EC2NodeClass, status awsv1.EC2NodeClassStatus, caBundle string, now time.Time) (*awsv1.EC2NodeClass, error) {
	cur := nc
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh, err := c.Get(ctx, nc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = fresh
		}
		want := *status.DeepCopy()
		for i := range want.Conditions {
			if old := meta.FindStatusCondition(cur.Status.Conditions, want.Conditions[i].Type); old != nil && old.Status == want.Conditions[i].Status {
				want.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
		if equality.Semantic.DeepEqual(cur.Status, want) {
			return nil
		}
		next := cur.DeepCopy()
		next.Status = want
		updated, err := c.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			cur = nil
			return err
		}
		cur = updated
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing status of EC2NodeClass %s: %w", nc.Name, err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		ResolvedAtAnnotation:                        now.UTC().Format(time.RFC3339),
		wellknown.EC2NodeClassHashAnnotation:        Hash(cur, caBundle),
		wellknown.EC2NodeClassHashVersionAnnotation: HashVersion,
	}}})
	out, err := c.Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return cur, nil // deleted meanwhile: nothing left to stamp
		}
		return cur, fmt.Errorf("annotating EC2NodeClass %s: %w", nc.Name, err)
	}
	return out, nil
}
