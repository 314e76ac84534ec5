package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	return setStatus(ctx, statusWrite[v1alpha1.NodeOverlay, *v1alpha1.NodeOverlay]{
		obj:      o,
		resource: v1alpha1.SchemeGroupVersion.WithResource("nodeoverlays").GroupResource(),
		get: func(ctx context.Context, name string) (*v1alpha1.NodeOverlay, error) {
			return c.NodeOverlays.Get(ctx, name, metav1.GetOptions{})
		},
		update: func(ctx context.Context, o *v1alpha1.NodeOverlay) (*v1alpha1.NodeOverlay, error) {
			return c.NodeOverlays.UpdateStatus(ctx, o, metav1.UpdateOptions{})
		},
		set: func(cur, next *v1alpha1.NodeOverlay) {
			for _, want := range conds {
				want.ObservedGeneration = cur.Generation
				meta.SetStatusCondition(&next.Status.Conditions, want)
			}
		},
		status: func(o *v1alpha1.NodeOverlay) any { return o.Status },
	})
}
