// Package drain decides how a node being terminated is drained, as
// Karpenter's node termination controller does: which pods the drain waits
// for, which it evicts next (non-critical workloads, non-critical daemons,
// critical workloads, critical daemons), and which the NodeClaim's
// terminationGracePeriod deletes past their PDBs. The termination tick
// reads the node's pods, asks these functions and acts.
package drain

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/core/podutil"
)

// stuckAfter is how long past the end of its grace a terminating pod is
// still waited for: after that its kubelet is gone or wedged.
const stuckAfter = time.Minute

// Drainable says whether the drain waits for p: not a pod that is done,
// nor a static pod (it cannot be evicted), nor one that tolerates the
// disrupted taint (it would come straight back), nor one terminating for
// over a minute past the end of its grace period. A pod's
// deletionTimestamp is already its deletion plus its grace.
func Drainable(p *corev1.Pod, now time.Time) bool {
	stuck := podutil.IsTerminating(p) && now.Sub(p.DeletionTimestamp.Time) > stuckAfter
	return !podutil.IsTerminal(p) && !podutil.IsOwnedByNode(p) && !podutil.ToleratesDisrupted(p) && !stuck
}

// Next is what the drain evicts now, in Karpenter's order: the
// non-critical workloads, then the non-critical daemons, the critical
// workloads and the critical daemons, each group only once every pod of the
// ones before it is gone, not merely leaving (a daemon outlives the
// workloads that may log through it). Of the current group it evicts the
// pods not leaving yet (terminating, or in leaving: deleted by this pass),
// which are never evicted twice. remaining counts every pod the drain still
// waits for; zero: the node is drained.
func Next(pods []*corev1.Pod, leaving map[types.UID]bool, now time.Time) (evict []*corev1.Pod, remaining int) {
	var groups [4][]*corev1.Pod
	for _, p := range pods {
		if !Drainable(p, now) {
			continue
		}
		i := 0
		if podutil.IsOwnedByDaemonSet(p) {
			i = 1
		}
		if podutil.IsCritical(p) {
			i += 2
		}
		groups[i] = append(groups[i], p)
		remaining++
	}
	for _, g := range groups {
		if len(g) == 0 {
			continue
		}
		for _, p := range g {
			if !podutil.IsTerminating(p) && !leaving[p.UID] {
				evict = append(evict, p)
			}
		}
		break
	}
	return evict, remaining
}

// Expiry is a pod the terminationGracePeriod ends: to delete now with
// Grace seconds, what is left until the deadline.
type Expiry struct {
	Pod   *corev1.Pod
	Grace int64
}

// Expiring are the pods that would outlive the NodeClaim's
// terminationGracePeriod (deadline; zero for none) unless deleted now: a
// pod is deleted once less than its own terminationGracePeriodSeconds is
// left before the deadline, so it gets all the graceful time there is, and
// a pod already terminating past the deadline is deleted again with less.
// Karpenter (DeleteExpiringPods) does this past PDBs and do-not-disrupt.
// The grace is at least a second: never a forced deletion.
func Expiring(pods []*corev1.Pod, deadline, now time.Time) []Expiry {
	if deadline.IsZero() {
		return nil
	}
	var out []Expiry
	for _, p := range pods {
		if !Drainable(p, now) || p.Spec.TerminationGracePeriodSeconds == nil {
			continue
		}
		if podutil.IsTerminating(p) && !p.DeletionTimestamp.After(deadline) {
			continue // it ends by the deadline already
		}
		deleteAt := deadline.Add(-time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second)
		if !now.After(deleteAt) {
			continue
		}
		out = append(out, Expiry{Pod: p, Grace: max(int64(deadline.Sub(now).Seconds()), 1)})
	}
	return out
}
