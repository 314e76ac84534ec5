package disrupt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/repair"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
)

// repair replaces the nodes unhealthy past their toleration, as
// Karpenter's node repair does when its NodeRepair feature gate is on:
// the claim's termination grace period is cut to now, then the claim is
// deleted (no budget, no do-not-disrupt); the provisioner replaces its
// pods' capacity. Both writes are idempotent: a tick killed between them,
// or a second one, finds the annotation and deletes, or finds the claim
// already deleting and does nothing more.
func (d *Disrupter) repair(ctx context.Context, in *disruption.Input, sum *Summary) ([]string, error) {
	if !d.Config.NodeRepair {
		return nil, nil
	}
	plan := repair.Decide(repair.Input{
		Nodes: in.Cluster.Nodes, NodeClaims: in.Cluster.NodeClaims,
		Policies: repair.AWSPolicies(), Now: d.Clock.Now(),
	})
	if d.shadow() {
		for _, r := range plan.Repairs {
			if r.NodeClaim.DeletionTimestamp == nil {
				d.decided(sum, shadow.Deletion(shadow.KindRepair, r.NodeClaim, claimPrice(in, r.NodeClaim.Name),
					fmt.Sprintf("node %s %s=%s since %s", r.Node.Name, r.Condition.Type, r.Condition.Status, r.Condition.LastTransitionTime.UTC().Format(time.RFC3339))))
			}
		}
		return nil, nil
	}
	for _, b := range plan.Blocked {
		// Karpenter publishes it on the node (deduplicated per node,
		// claim and pool for 15 minutes; here once per tick).
		d.Events.Warning(record.ObjectOf(nodeGVK, b.Node), "NodeRepairBlocked", "%s", b.Message)
		d.Log.Info("node repair blocked", "node", b.Node.Name, "nodeclaim", b.NodeClaim.Name, "nodepool", b.NodePool, "reason", b.Message)
	}
	var out []string
	var errs []error
	now := metav1.NewTime(d.Clock.Now())
	for _, r := range plan.Repairs {
		nc := r.NodeClaim
		if ts := repair.TerminationTimestamp(nc, now.Time); ts != "" && nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation] != ts {
			if err := d.patchAnnotations(ctx, nc, map[string]*string{wellknown.NodeClaimTerminationTimestampAnnotation: &ts}); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := d.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		nc.DeletionTimestamp = &now
		out = append(out, nc.Name)
		pool, capacity := r.Node.Labels[wellknown.NodePoolLabel], r.Node.Labels[wellknown.CapacityTypeLabel]
		d.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": "unhealthy", "nodepool": pool, "capacity_type": capacity,
		})
		d.Metrics.Count("karpenter_nodeclaims_unhealthy_disrupted_total", 1, map[string]string{
			"condition": snakeCase(string(r.Condition.Type)), "nodepool": pool, "capacity_type": capacity, "image_id": nc.Status.ImageID,
		})
		d.Log.Info("deleting unhealthy node", "nodeclaim", nc.Name, "node", r.Node.Name,
			"condition", r.Condition.Type, "status", r.Condition.Status, "since", r.Condition.LastTransitionTime.Time)
	}
	return out, errors.Join(errs...)
}

// snakeCase writes a condition type as Karpenter's metric label does:
// AcceleratedHardwareReady becomes accelerated_hardware_ready.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
