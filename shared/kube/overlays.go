package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
)

// SetNodeOverlayConditions writes conditions into the status of this very
// overlay (by UID), each keeping its lastTransitionTime while its status
// does not change, and skips the write when nothing would change: a tick
// that finds the overlays as it left them writes nothing. A conflict is
// retried against a fresh read; an overlay gone or replaced by a namesake
// is no error (the next tick judges the new one). It reports whether it
// wrote.
func (c *Clients) SetNodeOverlayConditions(ctx context.Context, o *v1alpha1.NodeOverlay, conds []metav1.Condition) (bool, error) {
	cur, wrote := o, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh, err := c.NodeOverlays.Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != o.UID {
				return apierrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("nodeoverlays").GroupResource(), o.Name)
			}
			cur = fresh
		}
		next := cur.DeepCopy()
		for _, want := range conds {
			want.ObservedGeneration = cur.Generation
			meta.SetStatusCondition(&next.Status.Conditions, want)
		}
		if equality.Semantic.DeepEqual(cur.Status, next.Status) {
			return nil
		}
		_, err := c.NodeOverlays.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			cur = nil
			return err
		}
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("updating status of nodeoverlay %s: %w", o.Name, err)
	}
	return wrote, nil
}
