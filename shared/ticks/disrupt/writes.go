package disrupt

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/kube"
)

const mergePatch = types.MergePatchType

// The disruption tick's writes: the write layer's, with one reading of an
// object gone meanwhile (nothing left to do for it).

// patchAnnotations sets (or, for nil values, removes) annotations on this
// very claim and mirrors them on nc; a claim gone needs nothing.
func (d *Disrupter) patchAnnotations(ctx context.Context, nc *karpv1.NodeClaim, vals map[string]*string) error {
	if err := d.Kube.AnnotateNodeClaim(ctx, nc, vals); err != nil && !kube.IsGone(err) {
		return err
	}
	return nil
}

// taint adds karpenter.sh/disrupted:NoSchedule to the node if missing; a
// node gone needs nothing.
func (d *Disrupter) taint(ctx context.Context, name string) error {
	if _, _, err := d.Kube.TaintDisrupted(ctx, name, d.Clock.Now()); err != nil && !kube.IsGone(err) {
		return err
	}
	return nil
}

// untaint removes karpenter.sh/disrupted:NoSchedule unless the node is
// being deleted meanwhile (termination wants it then).
func (d *Disrupter) untaint(ctx context.Context, node *corev1.Node) error {
	return d.Kube.UntaintDisrupted(ctx, node)
}

func (d *Disrupter) setDisruptionReason(ctx context.Context, nc *karpv1.NodeClaim, reason karpv1.DisruptionReason) error {
	now := metav1.NewTime(d.Clock.Now())
	return d.updateStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		c.SetCondition(karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, string(reason), string(reason), now)
	})
}

func (d *Disrupter) clearDisruptionReason(ctx context.Context, nc *karpv1.NodeClaim) error {
	if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil {
		return nil
	}
	return d.updateStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		meta.RemoveStatusCondition(&c.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
	})
}

// updateStatus writes mutate to the claim's status and, once written, to
// the caller's copy too; a claim already gone needs nothing.
func (d *Disrupter) updateStatus(ctx context.Context, nc *karpv1.NodeClaim, mutate func(*karpv1.NodeClaim)) error {
	if err := d.Kube.UpdateNodeClaimStatus(ctx, nc, mutate); err != nil && !kube.IsGone(err) {
		return err
	}
	return nil
}

func nodeNamed(in *disruption.Input, name string) *corev1.Node {
	for _, n := range in.Cluster.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
