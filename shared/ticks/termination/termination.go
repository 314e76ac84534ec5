// Package termination retires NodeClaims and Nodes being deleted: taint,
// drain through the Eviction API, wait for volumes, terminate, release finalizers.
//
// It advances each object by the steps it can take now and records progress
// on the objects themselves (taint, conditions, annotations), so a tick
// killed mid-drain loses nothing and the next tick resumes. A pod is only
// ever evicted while it is not terminating, so no pod is evicted twice; the
// instance is only terminated after a fresh read shows the node drained.
package termination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/drain"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/ticks/lifecycle"
)

// Instances is the EC2 side of termination.
type Instances = lifecycle.Instances

// Terminator retires deleted NodeClaims and Nodes.
type Terminator struct {
	Kube      *kube.Clients
	Instances Instances
	Clock     clock.PassiveClock
	Log       *slog.Logger
	Events    *record.Recorder
	Metrics   *record.Metrics
}

// Summary counts what one pass did. InFlight are the NodeClaims still
// being retired after it (draining, waiting for volumes or EC2).
type Summary struct {
	Draining, Evicted, Blocked, Terminated, Finished, InFlight int
}

var (
	nodeGVK = corev1.SchemeGroupVersion.WithKind("Node")
	podGVK  = corev1.SchemeGroupVersion.WithKind("Pod")
)

// Reconcile takes one step on every NodeClaim and Node being deleted.
func (t *Terminator) Reconcile(ctx context.Context, snap *cluster.Snapshot) (Summary, error) {
	var s Summary
	var errs []error
	nodeByProvider := map[string]*corev1.Node{}
	for _, n := range snap.Nodes {
		if n.Spec.ProviderID != "" {
			nodeByProvider[n.Spec.ProviderID] = n
		}
	}
	claimByProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
	}
	// A deleted Node deletes its NodeClaim, which then drains the node: one
	// path for `kubectl delete node` and `kubectl delete nodeclaim`.
	for _, n := range snap.Nodes {
		if n.DeletionTimestamp == nil || !slices.Contains(n.Finalizers, wellknown.TerminationFinalizer) {
			continue
		}
		nc := claimByProvider[n.Spec.ProviderID]
		if nc == nil {
			// No claim: nothing of ours to terminate, only the finalizer.
			if err := t.removeNodeFinalizer(ctx, n); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if nc.DeletionTimestamp == nil {
			if err := t.Kube.DeleteNodeClaim(ctx, nc); err != nil {
				errs = append(errs, fmt.Errorf("node %s is deleted: %w", n.Name, err))
			}
			now := metav1.NewTime(t.Clock.Now())
			nc.DeletionTimestamp = &now
		}
	}
	pvOf := map[string]string{}
	for _, c := range snap.PVCs {
		pvOf[c.Namespace+"/"+c.Name] = c.Spec.VolumeName
	}
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp == nil || !slices.Contains(nc.Finalizers, wellknown.TerminationFinalizer) {
			continue
		}
		node := nodeByProvider[nc.Status.ProviderID]
		if node == nil && nc.Status.NodeName != "" {
			for _, n := range snap.Nodes {
				if n.Name == nc.Status.NodeName {
					node = n
				}
			}
		}
		finished := s.Finished
		if err := t.terminate(ctx, nc, node, snap.VolumeAttachments, pvOf, &s); err != nil {
			errs = append(errs, fmt.Errorf("terminating nodeclaim %s: %w", nc.Name, err))
		}
		if s.Finished == finished {
			s.InFlight++
		}
	}
	return s, errors.Join(errs...)
}

func (t *Terminator) terminate(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, vas []*storagev1.VolumeAttachment, pvOf map[string]string, s *Summary) error {
	deadline := t.gracePeriodDeadline(ctx, nc)
	if node != nil {
		s.Draining++
		taintedAt, err := t.taint(ctx, node)
		if err != nil {
			return err
		}
		// What runs on the node is read after the taint is on it: a pod
		// bound after the snapshot was taken would otherwise be killed by
		// TerminateInstances without an eviction.
		pods, err := t.podsOn(ctx, node.Name)
		if err != nil {
			return err
		}
		drained, err := t.drain(ctx, nc, node, pods, deadline, s)
		if err != nil || !drained {
			return err
		}
		if t.Clock.Since(taintedAt) < timing.TaintSettle {
			return nil // the next pass reads again, once the scheduler has seen the taint
		}
		if waiting := t.attachedVolumes(node, pods, vas, pvOf); len(waiting) > 0 && (deadline.IsZero() || t.Clock.Now().Before(deadline)) {
			t.Events.Normal(record.ObjectOf(nodeGVK, node), "AwaitingVolumeDetachment", "Awaiting deletion of %d VolumeAttachments bound to node", len(waiting))
			return t.condition(ctx, nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionFalse, "AwaitingVolumeDetachment", fmt.Sprintf("%d volumes still attached", len(waiting)))
		}
	}
	// Drained (or never registered): terminate whatever instance the claim
	// has, and wait until EC2 confirms each one gone.
	live, sent, err := lifecycle.TerminateInstances(ctx, t.Kube, t.Instances, t.Clock, nc, cloud.Errors{Metrics: t.Metrics, Controller: cloud.ControllerNodeTermination})
	if err != nil {
		return err
	}
	s.Terminated += sent
	if sent > 0 {
		t.Log.Info("terminating instances", "nodeclaim", nc.Name, "instances", live)
	}
	if len(live) > 0 {
		return t.condition(ctx, nc, karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", fmt.Sprintf("waiting for %v to terminate", live))
	}
	if node != nil {
		if node.DeletionTimestamp == nil {
			if err := t.Kube.Core.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting node %s: %w", node.Name, err)
			}
		}
		if err := t.removeNodeFinalizer(ctx, node); err != nil {
			return err
		}
	}
	if err := t.Kube.RemoveNodeClaimFinalizer(ctx, nc); err != nil {
		return err
	}
	s.Finished++
	labels := map[string]string{"nodepool": nc.Labels[wellknown.NodePoolLabel], "capacity_type": nc.Labels[wellknown.CapacityTypeLabel], "zone": nc.Labels[wellknown.ZoneLabel]}
	t.Metrics.Count("karpenter_nodeclaims_terminated_total", 1, labels)
	if node != nil {
		t.Metrics.Count("karpenter_nodes_terminated_total", 1, map[string]string{"nodepool": labels["nodepool"], "zone": labels["zone"]})
	}
	t.Metrics.Observe("karpenter_nodeclaims_termination_duration_seconds", "Seconds", t.Clock.Since(nc.DeletionTimestamp.Time).Seconds(), map[string]string{"nodepool": labels["nodepool"]})
	t.Log.Info("terminated nodeclaim", "nodeclaim", nc.Name, "seconds", t.Clock.Since(nc.DeletionTimestamp.Time).Seconds())
	return nil
}

// gracePeriodDeadline is when the terminationGracePeriod runs out, recorded
// once on the claim so every tick (and a restart) agrees on it.
func (t *Terminator) gracePeriodDeadline(ctx context.Context, nc *karpv1.NodeClaim) time.Time {
	if v, ok := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; ok {
		if d, err := time.Parse(time.RFC3339, v); err == nil {
			return d
		}
	}
	if nc.Spec.TerminationGracePeriod == nil || nc.DeletionTimestamp == nil {
		return time.Time{}
	}
	d := nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration).UTC().Truncate(time.Second)
	if err := t.Kube.AnnotateNodeClaim(ctx, nc, map[string]*string{wellknown.NodeClaimTerminationTimestampAnnotation: new(d.Format(time.RFC3339))}); err != nil {
		t.Log.Warn("recording termination deadline", "nodeclaim", nc.Name, "error", err)
	}
	return d
}

// taint adds karpenter.sh/disrupted:NoSchedule to the node if missing and
// returns when the taint was added (now, or as the node records it).
func (t *Terminator) taint(ctx context.Context, node *corev1.Node) (time.Time, error) {
	if at, ok := wellknown.DisruptedSince(node); ok {
		return at, nil
	}
	n, _, err := t.Kube.TaintDisrupted(ctx, node.Name, t.Clock.Now())
	if err != nil {
		return time.Time{}, err
	}
	at, _ := wellknown.DisruptedSince(n)
	return at, nil
}

// podsOn lists the pods bound to a node now.
func (t *Terminator) podsOn(ctx context.Context, node string) ([]*corev1.Pod, error) {
	l, err := t.Kube.Core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("listing pods of node %s: %w", node, err)
	}
	out := make([]*corev1.Pod, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

// drain evicts the next group of pods in Karpenter's order: non-critical
// workloads, non-critical daemons, critical workloads, critical daemons.
// It reports true when nothing evictable is left.
func (t *Terminator) drain(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, pods []*corev1.Pod, deadline time.Time, s *Summary) (bool, error) {
	now := t.Clock.Now()
	deleted, err := t.deleteExpiring(ctx, pods, deadline, now, s)
	if err != nil {
		return false, err
	}
	// Pods leaving already (evicted or deleted) are waited for, never
	// evicted again.
	g, remaining := drain.Next(pods, deleted, now)
	if len(g) > 0 {
		blocked := 0
		for _, p := range g {
			// A do-not-disrupt pod is never evicted; the terminationGracePeriod
			// (deleteExpiring) is what ends it.
			if blockedByAnnotation, _ := podutil.DoNotDisrupt(p, now); blockedByAnnotation {
				blocked++
				continue
			}
			ok, err := t.evict(ctx, p)
			if err != nil {
				return false, err
			}
			if ok {
				s.Evicted++
			} else {
				blocked++
			}
		}
		s.Blocked += blocked
		msg := fmt.Sprintf("%d pods are waiting to be evicted (%d blocked by disruption budgets or do-not-disrupt)", remaining, blocked)
		if blocked > 0 {
			t.Events.Warning(record.ObjectOf(nodeGVK, node), "FailedDraining", "Failed to drain node, %s", msg)
		}
		return false, t.condition(ctx, nc, karpv1.ConditionTypeDrained, metav1.ConditionFalse, "Draining", msg)
	}
	if remaining > 0 {
		return false, t.condition(ctx, nc, karpv1.ConditionTypeDrained, metav1.ConditionFalse, "Draining", fmt.Sprintf("%d pods are waiting to be evicted (terminating)", remaining))
	}
	if err := t.condition(ctx, nc, karpv1.ConditionTypeDrained, metav1.ConditionTrue, "Drained", ""); err != nil {
		return false, err
	}
	return true, nil
}

// evict asks the Eviction API to evict p. It returns false when a
// PodDisruptionBudget refuses (429) or several budgets match (500); the
// eviction is tried again next tick.
//
// The eviction carries the pod's resource version as a precondition: two
// functions draining the same node at once (the interruption function and
// the disruption tick) both read the pod running, and without it the API
// server would accept the second eviction of a pod the first one already
// set terminating. With it, the second gets 409 Conflict and evicts nothing.
func (t *Terminator) evict(ctx context.Context, p *corev1.Pod) (bool, error) {
	err := t.Kube.Core.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion}},
	})
	code := "200"
	defer func() { t.Metrics.Count("karpenter_pods_eviction_requests_total", 1, map[string]string{"code": code}) }()
	switch {
	case err == nil:
		t.Events.Normal(record.ObjectOf(podGVK, p), "Evicted", "Evicted pod: node is being terminated")
		t.Metrics.Count("karpenter_pods_drained_total", 1, map[string]string{"reason": "termination"})
		return true, nil
	case apierrors.IsNotFound(err):
		code = "404" // gone already
		return true, nil
	case apierrors.IsConflict(err):
		// Replaced by a pod of the same name, or changed since it was read
		// (evicted by someone else, or only its status moved): the next
		// pass reads it again and evicts it if it still runs.
		code = "409"
		return true, nil
	case apierrors.IsTooManyRequests(err):
		code = "429"
		return false, nil
	case apierrors.IsInternalError(err):
		// More than one PodDisruptionBudget selects the pod.
		code = "500"
		return false, nil
	}
	return false, fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
}

// deleteExpiring deletes the pods the terminationGracePeriod ends
// (drain.Expiring) and returns them.
func (t *Terminator) deleteExpiring(ctx context.Context, pods []*corev1.Pod, deadline, now time.Time, s *Summary) (map[types.UID]bool, error) {
	deleted := map[types.UID]bool{}
	for _, e := range drain.Expiring(pods, deadline, now) {
		p := e.Pod
		err := t.Kube.Core.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &e.Grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("deleting pod %s/%s for the terminationGracePeriod: %w", p.Namespace, p.Name, err)
		}
		deleted[p.UID] = true
		s.Evicted++
		t.Events.Normal(record.ObjectOf(podGVK, p), "Disrupted", "Deleting the pod to accommodate the terminationTime %s of the node. The pod was granted %d seconds of grace-period of its %d terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
			deadline.Format(time.RFC3339), e.Grace, *p.Spec.TerminationGracePeriodSeconds)
	}
	return deleted, nil
}

// attachedVolumes are the VolumeAttachments on node that belong to pods the
// drain moved (volumes of daemons or static pods, which stay, are ignored).
func (t *Terminator) attachedVolumes(node *corev1.Node, pods []*corev1.Pod, vas []*storagev1.VolumeAttachment, pvOf map[string]string) []string {
	staying := map[string]bool{}
	for _, p := range pods {
		if podutil.IsEvictable(p) && !podutil.IsOwnedByDaemonSet(p) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				staying[pvOf[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]] = true
			}
		}
	}
	var out []string
	for _, va := range vas {
		if va.Spec.NodeName != node.Name || va.Spec.Source.PersistentVolumeName == nil || staying[*va.Spec.Source.PersistentVolumeName] {
			continue
		}
		out = append(out, va.Name)
	}
	return out
}

func (t *Terminator) removeNodeFinalizer(ctx context.Context, n *corev1.Node) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := t.Kube.Core.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !slices.Contains(cur.Finalizers, wellknown.TerminationFinalizer) {
			return nil
		}
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == wellknown.TerminationFinalizer })
		_, err = t.Kube.Core.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// condition records progress on the claim (only when it changes).
func (t *Terminator) condition(ctx context.Context, nc *karpv1.NodeClaim, typ string, status metav1.ConditionStatus, reason, msg string) error {
	for _, c := range nc.Status.Conditions {
		if c.Type == typ && c.Status == status && c.Reason == reason && c.Message == msg {
			return nil
		}
	}
	now := metav1.NewTime(t.Clock.Now())
	err := t.Kube.UpdateNodeClaimStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		c.SetCondition(typ, status, reason, msg, now)
	})
	if kube.IsGone(err) {
		return nil
	}
	return err
}
