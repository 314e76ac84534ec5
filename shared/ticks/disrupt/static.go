package disrupt

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/static"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
)

// overprovisioned is Karpenter's reason for a static NodePool's scale-down.
const overprovisioned = "overprovisioned"

// scaleDown deletes the NodeClaims static NodePools have beyond their
// replicas, in the order core/static chooses; termination drains them as
// any deleted claim. Like Karpenter's, it is not a voluntary disruption:
// no budget holds it back. A claim deleted is no longer active, so a pass
// killed halfway, or run twice, deletes no more than the excess.
func (d *Disrupter) scaleDown(ctx context.Context, in *disruption.Input, sum *Summary) ([]string, error) {
	var out []string
	var errs []error
	now := metav1.NewTime(d.Clock.Now())
	for _, sp := range static.Plan(disruption.StaticInput(in.Cluster, in.Classes, in.Now)) {
		if len(sp.Delete) == 0 {
			continue
		}
		d.Log.Info("scaling static nodepool down", "nodepool", sp.NodePool.Name, "replicas", sp.Replicas, "active", sp.Count.Active, "deleting", len(sp.Delete))
		for _, nc := range sp.Delete {
			if d.shadow() {
				price := claimPrice(in, nc.Name)
				dec := shadow.Deletion(shadow.KindScaleDown, nc, price, fmt.Sprintf("static nodepool %s scaled to %d", sp.NodePool.Name, sp.Replicas))
				dec.Savings = price
				d.decided(sum, dec)
				continue
			}
			if err := d.Kube.DeleteNodeClaim(ctx, nc); err != nil {
				errs = append(errs, err)
				continue
			}
			nc.DeletionTimestamp = &now
			out = append(out, nc.Name)
			d.Events.Normal(record.ObjectOf(nodeClaimGVK, nc), "DisruptionTerminating", "Disrupting NodeClaim: %s (static nodepool %s scaled to %d)", overprovisioned, sp.NodePool.Name, sp.Replicas)
			d.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
				"reason": overprovisioned, "nodepool": sp.NodePool.Name, "capacity_type": nc.Labels[wellknown.CapacityTypeLabel],
			})
		}
	}
	return out, errors.Join(errs...)
}
