package wellknown

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// IsEphemeralTaint reports a taint that goes away on its own as a node
// starts (not ready, unreachable, uninitialized, unregistered, readiness
// gates): the simulator and initialization both ignore it.
func IsEphemeralTaint(t *corev1.Taint) bool {
	if strings.HasPrefix(t.Key, EphemeralTaintPrefix) {
		return true
	}
	return slices.ContainsFunc(EphemeralTaints, func(e corev1.Taint) bool { return e.MatchTaint(t) })
}

// IsDisrupted reports a node tainted karpenter.sh/disrupted:NoSchedule.
func IsDisrupted(n *corev1.Node) bool {
	_, ok := DisruptedSince(n)
	return ok
}

// DisruptedSince is when the node's disrupted taint was added; a taint
// without a time (added by someone else) reads as the zero time.
func DisruptedSince(n *corev1.Node) (time.Time, bool) {
	for i := range n.Spec.Taints {
		if t := &n.Spec.Taints[i]; t.MatchTaint(&DisruptedNoScheduleTaint) {
			if t.TimeAdded == nil {
				return time.Time{}, true
			}
			return t.TimeAdded.Time, true
		}
	}
	return time.Time{}, false
}
