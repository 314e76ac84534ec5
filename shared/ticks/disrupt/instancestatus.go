package disrupt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/repair"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
)

// instanceStatus replaces the instances EC2 itself reports broken (a
// status check failed for two minutes) or scheduled for an event
// (retirement, reboot, maintenance, stop), as Karpenter v1.14.1's instance
// status controller does, always on and once a minute: once per
// invocation here. A broken instance's claim gets its termination grace
// period cut to now, then is deleted; one with an event only is deleted,
// so its pods drain within their budgets. Neither waits for a disruption
// budget or honours do-not-disrupt: the hardware decides. Both writes are
// idempotent, so a tick killed between them, or a second one, finishes
// the job; a claim already deleting is left alone.
func (d *Disrupter) instanceStatus(ctx context.Context, inv *invocation, in *disruption.Input, sum *Summary) ([]string, error) {
	if inv.healthRead {
		return nil, nil
	}
	statuses, err := d.Instances.Health(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading instance status: %w", err)
	}
	inv.healthRead = true
	impaired := repair.Judge(statuses, d.Clock.Now())
	if len(impaired) == 0 {
		return nil, nil
	}
	byInstance := map[string]int{}
	for i, nc := range in.Cluster.NodeClaims {
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			byInstance[id] = i
		}
	}
	var out []string
	var errs []error
	now := metav1.NewTime(d.Clock.Now())
	for _, u := range impaired {
		i, ok := byInstance[u.InstanceID]
		if !ok {
			continue // not this cluster's, or not known as a claim yet
		}
		nc := in.Cluster.NodeClaims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if d.shadow() {
			var reasons []string
			for _, c := range u.Categories {
				reasons = append(reasons, c.Reason())
			}
			d.decided(sum, shadow.Deletion(shadow.KindInstanceStatus, nc, claimPrice(in, nc.Name),
				fmt.Sprintf("instance %s: %s since %s", u.InstanceID, strings.Join(reasons, ","), u.Since.UTC().Format(time.RFC3339))))
			continue
		}
		if u.Forceful {
			if _, set := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; !set {
				ts := now.UTC().Format(time.RFC3339)
				if err := d.patchAnnotations(ctx, nc, map[string]*string{wellknown.NodeClaimTerminationTimestampAnnotation: &ts}); err != nil {
					errs = append(errs, err)
					continue
				}
			}
		}
		// Karpenter publishes it when it acts, before the deletion.
		d.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "InstanceUnhealthy", "An unhealthy warning was triggered for the instance")
		if nc.Status.NodeName != "" {
			d.Events.Warning(record.Object{Kind: nodeGVK.Kind, APIVersion: "v1", Name: nc.Status.NodeName}, "InstanceUnhealthy", "An unhealthy warning was triggered for the instance")
		}
		if err := d.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		nc.DeletionTimestamp = &now
		out = append(out, nc.Name)
		pool, capacity := nc.Labels[wellknown.NodePoolLabel], nc.Labels[wellknown.CapacityTypeLabel]
		var reasons []string
		for _, c := range u.Categories {
			reasons = append(reasons, c.Reason())
			d.Metrics.Count("karpenter_interruption_instance_status_unhealthy_total", 1, map[string]string{"category": string(c)})
		}
		// One deletion, counted once, by the gravest category (Karpenter
		// counts the category it happened to handle first).
		d.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": reasons[0], "nodepool": pool, "capacity_type": capacity,
		})
		d.Log.Info("deleting nodeclaim of an impaired instance", "nodeclaim", nc.Name, "node", nc.Status.NodeName,
			"instance", u.InstanceID, "reasons", strings.Join(reasons, ","), "forceful", u.Forceful, "since", u.Since)
	}
	return out, errors.Join(errs...)
}
