package disruption

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/scheduling"
)

// Consolidation compares nodes with the surplus CPU credits of burstable
// types included (scheduling.CreditHourly), as the provisioning solve
// chooses types with them: a candidate costs its offering plus the credits
// its pods spend; a replacement costs its offering plus the credits its
// pods will spend on it; and pods moved onto staying burstable nodes add
// those nodes' extra credits to the command's price after. Without this,
// consolidation would replace a node that is not burstable by a burstable
// one whose offering is cheaper but which costs more with credits, undoing
// the solve's choice. Karpenter compares offering prices only.

// nodeCredits is the $/h of surplus credits a node of type it spends with
// requested (its pods', DaemonSets' included).
func nodeCredits(it *scheduling.InstanceType, requested corev1.ResourceList) float64 {
	if it == nil {
		return 0
	}
	q := requested[corev1.ResourceCPU]
	return scheduling.CreditHourly(it, q.MilliValue())
}

// creditsAdded is the $/h of extra surplus credits that the pods the
// simulation put on staying nodes make those nodes spend, for the pods in
// moved (the candidates' pods) only: what the move adds to the bill on top
// of the replacement.
func (w *world) creditsAdded(res *scheduling.Results, moved map[*corev1.Pod]bool) float64 {
	if len(res.Existing) == 0 {
		return 0
	}
	extra := 0.0
	for _, n := range w.nodes {
		placed := res.Existing[n.Name]
		if len(placed) == 0 {
			continue
		}
		it := scheduling.NodeType(n)
		if !scheduling.Burstable(it) {
			continue
		}
		before := n.Requested
		if before == nil {
			before = scheduling.SumRequests(n.Pods)
		}
		q := before[corev1.ResourceCPU]
		cpu := q.MilliValue()
		add := int64(0)
		for _, p := range placed {
			if moved[p] {
				r := scheduling.PodRequests(p)
				add += r.Cpu().MilliValue()
			}
		}
		if add > 0 {
			extra += scheduling.CreditHourly(it, cpu+add) - scheduling.CreditHourly(it, cpu)
		}
	}
	return extra
}
