// Package garbagecollection removes what no NodeClaim accounts for: EC2
// instances tagged for the cluster whose NodeClaim is gone, NodeClaims whose
// instance is gone, Nodes Karpless made that have no NodeClaim, and launch
// templates no launch needs any more.
//
// Every decision compares a snapshot of the cluster with a list of
// instances taken after it, and only touches instances older than a grace
// period measured from the snapshot: an instance that young may belong to a
// NodeClaim created after the snapshot was read.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/ticks/lifecycle"
)

// Instances is the EC2 side of garbage collection.
type Instances interface {
	Get(ctx context.Context, id string) (*instance.Instance, error)
	// Delete terminates instances, a failure counted on failures
	// (instance.Provider.Delete).
	Delete(ctx context.Context, failures instance.Counter, insts ...instance.Instance) error
}

// Templates deletes launch templates nothing needs (launchtemplate.Provider).
type Templates interface {
	DeleteUnused(ctx context.Context, clusterName string, inUse func(name string) bool, minAge time.Duration) ([]string, error)
}

// Collector collects one cluster's garbage.
type Collector struct {
	Kube      *kube.Clients
	Instances Instances
	// Templates is optional: nil leaves launch templates alone.
	Templates Templates
	Cluster   string
	Clock     clock.PassiveClock
	Log       *slog.Logger
	Events    *record.Recorder
	Metrics   *record.Metrics
	// InstanceGrace and TemplateMinAge default to the constants above.
	InstanceGrace  time.Duration
	TemplateMinAge time.Duration
}

// Summary counts what a run removed.
type Summary struct {
	Instances  []string `json:"instances,omitempty"`
	NodeClaims []string `json:"nodeClaims,omitempty"`
	Nodes      []string `json:"nodes,omitempty"`
	Templates  []string `json:"templates,omitempty"`
}

var nodeClaimGVK = karpv1.SchemeGroupVersion.WithKind("NodeClaim")

// Run collects garbage. snap is the cluster as read at snapTime; live are
// the cluster's instances (instance.Provider.List), listed after snapTime.
func (c *Collector) Run(ctx context.Context, snap *cluster.Snapshot, snapTime time.Time, live []instance.Instance) (Summary, error) {
	grace := c.InstanceGrace
	if grace <= 0 {
		grace = timing.InstanceGrace
	}
	var s Summary
	var errs []error
	claims := map[string]*karpv1.NodeClaim{}
	claimByProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		claims[nc.Name] = nc
		if nc.Status.ProviderID != "" {
			claimByProvider[wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)] = nc
		}
	}
	liveByID := map[string]instance.Instance{}
	for _, i := range live {
		liveByID[i.ID] = i
	}

	// 1. Instances no NodeClaim accounts for.
	var orphaned []instance.Instance
	for _, i := range live {
		if i.State == "shutting-down" || i.State == "terminated" || !i.LaunchTime.Before(snapTime.Add(-grace)) {
			continue
		}
		if owner := claimByProvider[i.ID]; owner != nil {
			continue
		}
		if name := i.Tags[wellknown.NodeClaimTagKey]; name != "" {
			// The claim exists but has not recorded its instance yet: a
			// launch whose result is still to be adopted.
			if nc := claims[name]; nc != nil && nc.Status.ProviderID == "" {
				continue
			}
		}
		orphaned = append(orphaned, i)
	}
	orphans := make([]string, len(orphaned))
	for k, i := range orphaned {
		orphans[k] = i.ID
	}
	if len(orphans) > 0 {
		err := c.Instances.Delete(ctx, c.Metrics, orphaned...)
		switch {
		case instance.OnlyZonallyShifted(err):
			// Not a failure: the ones in a zone shifted away from are
			// terminated once the shift ends (the others were).
			c.Log.Info("instances without a nodeclaim in a zonally shifted zone are left until the shift ends", "error", err)
		case err != nil:
			cloud.Errors{Metrics: c.Metrics, Controller: cloud.ControllerInstanceGC}.Count(cloud.MethodDelete, err)
			errs = append(errs, fmt.Errorf("terminating instances without a nodeclaim: %w", err))
		default:
			s.Instances = orphans
			c.Metrics.Count("karpless_garbage_collected_instances_total", float64(len(orphans)), nil)
			c.Log.Info("terminated instances without a nodeclaim", "instances", orphans)
		}
	}

	// 2. NodeClaims whose instance is gone. As in Karpenter, only
	// registered claims (an unregistered one is retired by the registration
	// timeout), and only while their node is not Ready (a Ready kubelet
	// proves the instance runs); and never on one answer: EC2 lists a new
	// instance seconds after its launch, so a missing instance must stay
	// missing for timing.NotFoundPatience (recorded on the claim).
	nodeByName := map[string]*corev1.Node{}
	for _, n := range snap.Nodes {
		nodeByName[n.Name] = n
	}
	for _, nc := range snap.NodeClaims {
		id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)
		if nc.DeletionTimestamp != nil || id == "" || !nc.IsTrue(karpv1.ConditionTypeRegistered) {
			continue
		}
		if n := nodeByName[nc.Status.NodeName]; n != nil && nodeReady(n) {
			continue
		}
		if _, ok := liveByID[id]; ok {
			if _, err := lifecycle.ConfirmMissing(ctx, c.Kube, c.Clock, nc, false); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		// Not listed: a direct read (the list filters on tags, which lag).
		inst, err := c.Instances.Get(ctx, id)
		if err != nil && !errors.Is(err, instance.ErrNotFound) {
			cloud.Errors{Metrics: c.Metrics, Controller: cloud.ControllerNodeClaimGC}.Count(cloud.MethodGet, err)
			errs = append(errs, err)
			continue
		}
		gone := err == nil && (inst.State == "terminated" || inst.State == "shutting-down")
		if !gone {
			confirmed, err := lifecycle.ConfirmMissing(ctx, c.Kube, c.Clock, nc, err != nil)
			if err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
				continue
			}
			if !confirmed {
				continue
			}
		}
		c.Events.Warning(record.ObjectOf(nodeClaimGVK, nc), "InstanceGone", "instance %s no longer exists; deleting the NodeClaim", id)
		if err := c.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		s.NodeClaims = append(s.NodeClaims, nc.Name)
		c.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": "garbage_collected", "nodepool": nc.Labels[wellknown.NodePoolLabel], "capacity_type": nc.Labels[wellknown.CapacityTypeLabel],
		})
		c.Log.Info("deleted nodeclaim whose instance is gone", "nodeclaim", nc.Name, "instance", id)
	}

	// 3. Nodes Karpless made that no NodeClaim owns.
	for _, n := range snap.Nodes {
		if n.DeletionTimestamp != nil || !ours(n) {
			continue
		}
		id := wellknown.InstanceIDFromProviderID(n.Spec.ProviderID)
		if claimByProvider[id] != nil || !n.CreationTimestamp.Time.Before(snapTime.Add(-grace)) {
			continue
		}
		if i, ok := liveByID[id]; ok && !slices.Contains(orphans, id) && claims[i.Tags[wellknown.NodeClaimTagKey]] != nil {
			continue // its claim has not recorded the instance yet
		}
		if err := c.Kube.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting node %s: %w", n.Name, err))
			continue
		}
		s.Nodes = append(s.Nodes, n.Name)
		c.Log.Info("deleted node without a nodeclaim", "node", n.Name)
	}

	// 4. Launch templates.
	if c.Templates != nil {
		age := c.TemplateMinAge
		if age <= 0 {
			age = timing.TemplateMinAge
		}
		deleted, err := c.Templates.DeleteUnused(ctx, c.Cluster, func(string) bool { return false }, age)
		if err != nil {
			errs = append(errs, err)
		}
		s.Templates = deleted
	}
	return s, errors.Join(errs...)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ours reports a Node Karpless (or Karpenter before it) registered: it
// carries the termination finalizer or the nodepool label, and an EC2
// provider ID.
func ours(n *corev1.Node) bool {
	if wellknown.InstanceIDFromProviderID(n.Spec.ProviderID) == "" {
		return false
	}
	_, labelled := n.Labels[wellknown.NodePoolLabel]
	return labelled || slices.Contains(n.Finalizers, wellknown.TerminationFinalizer)
}
