package provision

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/overlay"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// overlays are the NodeOverlays of the invocation's last snapshot and the
// NodePools they may select by, applied again after every Use.
type overlays struct {
	items []*v1alpha1.NodeOverlay
	pools []*karpv1.NodePool
	// applied is what the last application changed.
	applied overlay.Result
}

// applyOverlays applies the overlays to the instance types of the
// invocation's Cloud (after a Use).
func (inv *invocation) applyOverlays() overlay.Result {
	inv.overlays.applied = inv.cloud.ApplyOverlays(inv.overlays.items, inv.overlays.pools)
	return inv.overlays.applied
}

// recordOverlays writes each overlay's ValidationSucceeded and Ready
// conditions where they changed (Karpenter's nodeoverlay controller writes
// the same). A failed write is logged, not returned: the overlay was
// applied, or not, all the same, and the next pass writes again.
func (p *Provisioner) recordOverlays(ctx context.Context, items []*v1alpha1.NodeOverlay, res overlay.Result) {
	now := p.Clock.Now()
	for _, o := range items {
		out, ok := res.Overlays[o.Name]
		if !ok {
			continue
		}
		wrote, err := p.Kube.SetNodeOverlayConditions(ctx, o, overlay.Conditions(out, now))
		switch {
		case err != nil:
			p.Log.Warn("writing nodeoverlay status", "nodeoverlay", o.Name, "error", err)
		case wrote && out.Applied:
			p.Log.Info("nodeoverlay applied", "nodeoverlay", o.Name, "instance_types", out.Types)
		case wrote:
			p.Log.Warn("nodeoverlay not applied", "nodeoverlay", o.Name, "reason", out.Reason, "message", out.Message)
		}
	}
}

// readOverlays lists what a Session, which takes no snapshot, applies.
func (p *Provisioner) readOverlays(ctx context.Context) (overlays, error) {
	var out overlays
	l, err := p.Kube.NodeOverlays.List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		for i := range l.Items {
			out.items = append(out.items, &l.Items[i])
		}
	case !apierrors.IsNotFound(err): // NotFound: the CRD is not installed yet
		return out, fmt.Errorf("listing nodeoverlays: %w", err)
	}
	if len(out.items) == 0 {
		return out, nil
	}
	pools, err := p.Kube.NodePools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, fmt.Errorf("listing nodepools: %w", err)
	}
	for i := range pools.Items {
		out.pools = append(out.pools, &pools.Items[i])
	}
	return out, nil
}

// annotateOverlays marks a new claim as Karpenter does when an overlay set
// the price or added capacity of one of its instance types.
func annotateOverlays(claim *karpv1.NodeClaim, n *scheduling.NewNodeClaim, res overlay.Result) *karpv1.NodeClaim {
	changes := res.Changes[n.NodePool]
	if len(changes) == 0 {
		return claim
	}
	for _, it := range n.InstanceTypes {
		ch := changes[it.Name]
		if ch == nil {
			continue
		}
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		if len(ch.Price) > 0 {
			claim.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] = "true"
		}
		if len(ch.Capacity) > 0 {
			claim.Annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] = "true"
		}
	}
	return claim
}
