package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// SetNodePoolStatus writes want(the NodePool as read) as the status of
// this very NodePool (by UID), only when it changes, so a tick that finds
// the pools as it left them writes nothing. A conflict is retried against
// a fresh read (want is asked again); a NodePool gone or replaced by a
// namesake is no error. It reports whether it wrote.
func (c *Clients) SetNodePoolStatus(ctx context.Context, np *karpv1.NodePool, want func(cur *karpv1.NodePool) karpv1.NodePoolStatus) (bool, error) {
	return setStatus(ctx, statusWrite[karpv1.NodePool, *karpv1.NodePool]{
		obj:      np,
		resource: karpv1.SchemeGroupVersion.WithResource("nodepools").GroupResource(),
		get: func(ctx context.Context, name string) (*karpv1.NodePool, error) {
			return c.NodePools.Get(ctx, name, metav1.GetOptions{})
		},
		update: func(ctx context.Context, np *karpv1.NodePool) (*karpv1.NodePool, error) {
			return c.NodePools.UpdateStatus(ctx, np, metav1.UpdateOptions{})
		},
		set:    func(cur, next *karpv1.NodePool) { next.Status = want(cur) },
		status: func(np *karpv1.NodePool) any { return np.Status },
	})
}
