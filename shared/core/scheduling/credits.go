package scheduling

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Burstable types (t3, t3a, t4g) launch in unlimited mode: a node whose
// pods keep it above its baseline pays surplus CPU credits on top of its
// offering (catalog.Credits has the model and its sources). Karpless
// prices them wherever it compares types: a claim's type is the one whose
// offering plus credits for the claim's requests costs least (fitClaim),
// the types a claim sends to CreateFleet leave out the burstable ones EC2
// would pick for a lower offering price though they cost more with credits
// (finalize, LaunchOrder), and consolidation compares nodes and
// replacements with their credits (shared/core/disruption). Karpenter
// ignores credits.

// CreditHourly is the $/h of surplus CPU credits a node of type it spends
// when its pods and DaemonSets request requestedCPUMilli millicores: 0 for
// types that are not burstable and at or below the baseline.
func CreditHourly(it *InstanceType, requestedCPUMilli int64) float64 {
	c, ok := typeCredits(it)
	if !ok {
		return 0
	}
	return c.Hourly(vcpusOf(it), requestedCPUMilli)
}

// NodeCredits is the $/h of surplus CPU credits node n spends with the
// pods on it (Requested, else its pods' requests, DaemonSets' included):
// its labels name the type (family and size), its capacity the vCPUs.
func NodeCredits(n *Node) float64 {
	req := n.Requested
	if req == nil {
		req = SumRequests(n.Pods)
	}
	q := req[corev1.ResourceCPU]
	return CreditHourly(NodeType(n), q.MilliValue())
}

// NodeType is the credit view of node n: its labels (the instance family
// and size) and capacity (its vCPUs).
func NodeType(n *Node) *InstanceType {
	return &InstanceType{Name: n.Name, Labels: n.Labels, Capacity: n.Capacity, Allocatable: n.Allocatable}
}

// Burstable reports whether nodes of type it spend surplus CPU credits above
// a baseline (t3, t3a, t4g).
func Burstable(it *InstanceType) bool {
	_, ok := typeCredits(it)
	return ok
}

func typeCredits(it *InstanceType) (catalog.Credits, bool) {
	if it == nil {
		return catalog.Credits{}, false
	}
	return catalog.Burstable(it.Labels[wellknown.InstanceFamilyLabel], it.Labels[wellknown.InstanceSizeLabel])
}

// vcpusOf is the type's vCPUs: its cpu capacity (allocatable when no
// capacity is given), rounded up.
func vcpusOf(it *InstanceType) int64 {
	if q, ok := it.Capacity[corev1.ResourceCPU]; ok {
		return q.Value()
	}
	q := it.Allocatable[corev1.ResourceCPU]
	return q.Value()
}

// creditModel is a type's credit model as the solver keeps it: the zero
// value for types that are not burstable.
type creditModel struct {
	c     catalog.Credits
	vcpus int64
}

func newCreditModel(it *InstanceType) creditModel {
	c, ok := typeCredits(it)
	if !ok {
		return creditModel{}
	}
	return creditModel{c: c, vcpus: vcpusOf(it)}
}

func (m creditModel) burstable() bool { return m.vcpus > 0 }

// hourly is the credits' $/h at requestedCPUMilli (pods and DaemonSets).
func (m creditModel) hourly(requestedCPUMilli int64) float64 {
	if m.vcpus == 0 {
		return 0
	}
	return m.c.Hourly(m.vcpus, requestedCPUMilli)
}

// keepInEC2Order sets keep[i] for the types a claim should send to
// CreateFleet, given in the order EC2 prefers them (by offering price:
// CreateFleet takes the lowest price on-demand and weighs price with
// capacity for spot), with each type's offering price and the surplus
// credits it would spend: a burstable type is left out when a type EC2
// would take after it costs less with credits. The rule keeps every type
// that spends no credits (its price is what EC2 compares: types that are
// not burstable, and burstable ones within their baseline), and it never
// leaves out the type that costs least with credits, so EC2's pick is
// always among the effectively cheapest of what remains, whichever it
// falls back to on a capacity error.
func keepInEC2Order(price, credits []float64, keep []bool) {
	cheapestAfter := float64(0)
	seen := false
	for i := len(price) - 1; i >= 0; i-- {
		eff := price[i] + credits[i]
		keep[i] = credits[i] == 0 || !seen || eff <= cheapestAfter
		if keep[i] && (!seen || eff < cheapestAfter) {
			cheapestAfter, seen = eff, true
		}
	}
}
