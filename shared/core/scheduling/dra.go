package scheduling

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
)

// Dynamic Resource Allocation: Karpless, as Karpenter v1.14.1 by default
// (--ignore-dra-requests), does not simulate device claims. A pod with
// resource claims is not placed anywhere, since a node launched for it
// could not be known to hold its devices (the pod would stay pending on
// it, and the node be launched again and again); a DaemonSet's pod with
// claims is left out of a node's overhead.

// draReason is Karpenter's words for such a pod.
const draReason = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"

var errDRA = errors.New(draReason)

// hasDRARequirements is Karpenter's pod.HasDRARequirements: the pod or any
// of its containers claims resources.
func hasDRARequirements(p *corev1.Pod) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if len(cs[i].Resources.Claims) > 0 {
				return true
			}
		}
	}
	return false
}
