// Package podutil answers the questions every tick asks about a pod: may
// Karpless provision for it, must it move with its node, may it be evicted.
package podutil

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// IsTerminal reports a pod that finished and holds no resources.
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// IsTerminating reports a pod being deleted.
func IsTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// IsOwnedByDaemonSet reports a DaemonSet's pod: any owner reference to an
// apps/v1 DaemonSet, controller or not, as Karpenter's IsOwnedByDaemonSet
// (an API server always sets apiVersion; an empty one is taken as apps/v1).
func IsOwnedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && (o.APIVersion == "apps/v1" || o.APIVersion == "") {
			return true
		}
	}
	return false
}

// IsOwnedByNode reports a static (mirror) pod, which the kubelet owns.
func IsOwnedByNode(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Node" {
			return true
		}
	}
	return false
}

// IsUnschedulable reports that kube-scheduler tried and found no node.
func IsUnschedulable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// IsProvisionable is Karpenter's rule for pods that should get new capacity:
// marked unschedulable by the scheduler, not preempting (no nominated node),
// not being deleted, and not a DaemonSet or static pod (they come with nodes).
func IsProvisionable(p *corev1.Pod) bool {
	return IsUnschedulable(p) && p.Status.NominatedNodeName == "" && !IsTerminating(p) && !IsTerminal(p) &&
		!IsOwnedByDaemonSet(p) && !IsOwnedByNode(p)
}

// IsReschedulable is Karpenter's IsReschedulable: a bound pod that must
// find another node when its node goes away: active, or a terminating
// StatefulSet pod (its replacement is created only once it is gone, and
// needs the same room, so capacity is made ready ahead); not finished, not
// a DaemonSet or static pod.
func IsReschedulable(p *corev1.Pod) bool {
	if IsTerminal(p) || IsOwnedByDaemonSet(p) || IsOwnedByNode(p) {
		return false
	}
	return !IsTerminating(p) || IsOwnedByStatefulSet(p)
}

// IsOwnedByStatefulSet reports a StatefulSet's pod.
func IsOwnedByStatefulSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.APIVersion == "apps/v1" && o.Kind == "StatefulSet" {
			return true
		}
	}
	return false
}

// IsActive reports a pod neither finished nor being deleted.
func IsActive(p *corev1.Pod) bool { return !IsTerminal(p) && !IsTerminating(p) }

// IsCurrentlyReschedulable is Karpenter's pdb.Limits.IsCurrentlyReschedulable,
// the pods of a node being deleted that get replacement capacity ahead of
// their eviction: reschedulable, not held by an active do-not-disrupt
// annotation, and not held for ever by a PDB (FullyBlocked), since capacity
// for a pod that is never evicted is wasted.
func IsCurrentlyReschedulable(p *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, now time.Time) bool {
	if !IsReschedulable(p) {
		return false
	}
	if blocked, _ := DoNotDisrupt(p, now); blocked && IsActive(p) {
		return false
	}
	return !FullyBlocked(p, pdbs, now)
}

// FullyBlocked reports a pod whose eviction a PDB will never allow: one
// that the drain would evict (Karpenter's IsEvictable) and that several
// PDBs select (the eviction API refuses those), or one PDB with
// maxUnavailable 0 or 0% or minAvailable 100%, unless that PDB lets an
// unready pod go (unhealthyPodEvictionPolicy AlwaysAllow) and it is unready.
func FullyBlocked(p *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, now time.Time) bool {
	if !IsActive(p) || IsOwnedByNode(p) || ToleratesDisrupted(p) {
		return false
	}
	if blocked, _ := DoNotDisrupt(p, now); blocked {
		return false
	}
	var matching []*policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != p.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			// An unparsable selector matches nothing for the API server
			// either.
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			matching = append(matching, pdb)
		}
	}
	switch {
	case len(matching) > 1:
		return true
	case len(matching) == 0:
		return false
	}
	pdb := matching[0]
	if pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow && unready(p) {
		return false
	}
	mu, ma := pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable
	return (mu != nil && mu.Type == intstr.Int && mu.IntVal == 0) ||
		(mu != nil && mu.Type == intstr.String && mu.StrVal == "0%") ||
		(ma != nil && ma.Type == intstr.String && ma.StrVal == "100%")
}

// unready reports a pod whose Ready condition is False.
func unready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}

// ToleratesDisrupted reports a pod that tolerates the
// karpenter.sh/disrupted:NoSchedule taint: the drain leaves it.
func ToleratesDisrupted(p *corev1.Pod) bool {
	t := wellknown.DisruptedNoScheduleTaint
	for _, tol := range p.Spec.Tolerations {
		if tol.ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}

// IsEvictable reports a pod the drain should evict (everything but
// finished pods, static pods and pods already going).
func IsEvictable(p *corev1.Pod) bool {
	return !IsTerminal(p) && !IsTerminating(p) && !IsOwnedByNode(p)
}

// IsCritical reports pods drained last (system-cluster/node-critical).
func IsCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

// DoNotDisrupt reports whether the pod's karpenter.sh/do-not-disrupt
// annotation blocks voluntary disruption at now. The value "true" blocks for
// ever; a duration (e.g. "5m") blocks until that long after the pod started
// (status.startTime), and while it has not started.
// Any other value, a duration not above zero included, is ignored, as
// Karpenter does (it also emits an Event).
func DoNotDisrupt(p *corev1.Pod, now time.Time) (blocked bool, valid bool) {
	v, ok := p.Annotations[wellknown.DoNotDisruptAnnotation]
	if !ok {
		return false, true
	}
	if v == "true" {
		return true, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false, false
	}
	if p.Status.StartTime == nil {
		// Not started (or its start unknown): the grace period has not
		// begun, so it holds, as Karpenter fails safe. Falling back to the
		// creation time would let a pod that waited long to start be
		// disrupted before it had run its grace period.
		return true, true
	}
	return now.Before(p.Status.StartTime.Add(d)), true
}

// EvictionCost is Karpenter's cost of evicting a pod, which orders nodes
// for disruption: 1, plus the pod-deletion-cost annotation and the
// priority scaled down, clamped to [-10, 10].
func EvictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			cost += f / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Min(math.Max(cost, -10), 10)
}
