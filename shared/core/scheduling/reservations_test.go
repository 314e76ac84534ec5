package scheduling

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// reservedPrice is Karpenter's price of a reserved offering: the on-demand
// price over 10,000,000, so reserved capacity is all but free and keeps
// the types' order.
func reservedPrice(od float64) float64 { return od / 10_000_000 }

// withReservation adds a reserved offering of id to a type in a zone.
func withReservation(it *InstanceType, id, zone string, capacity int, od float64) *InstanceType {
	it.Offerings = append(it.Offerings, Offering{Zone: zone, CapacityType: wellknown.CapacityTypeReserved, Price: reservedPrice(od),
		Available: capacity > 0, ReservationID: id, ReservationCapacity: capacity, ReservationType: "default"})
	return it
}

// reservedTypes are Karpenter's scheduling suite's reserved capacity types:
// small (2 cpu) and medium (3 cpu) with one reserved instance each in
// test-1a, and large (6 cpu) without.
func reservedTypes(small, medium int) []*InstanceType {
	return []*InstanceType{
		withReservation(mkType("small.large", 2, 2, 30, "amd64", 0.1), "cr-small", "test-1a", small, 0.1),
		withReservation(mkType("medium.large", 3, 3, 30, "amd64", 0.15), "cr-medium", "test-1a", medium, 0.15),
		mkType("large.large", 6, 6, 30, "amd64", 0.3),
	}
}

func reservedSnap(types []*InstanceType, pools []*karpv1.NodePool, pods ...*corev1.Pod) *Snapshot {
	return &Snapshot{Pods: pods, NodePools: pools, NodeClasses: map[string]*NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: types}}}
}

// claimSummary is what a test asserts of a new claim.
type claimSummary struct {
	pods     int
	reserved []string // the reservations it is pinned to, nil if none
	cheapest string   // type/capacity type CheapestOffering picks
}

func summarizeClaims(r *Results) []claimSummary {
	var out []claimSummary
	for _, c := range r.NewNodeClaims {
		s := claimSummary{pods: len(c.Pods)}
		if rr := reqOf(c, wellknown.CapacityReservationIDLabel); rr != nil && rr.Operator() == corev1.NodeSelectorOpIn {
			s.reserved = rr.Values()
			slices.Sort(s.reserved)
			if ct := reqOf(c, wellknown.CapacityTypeLabel); ct.Len() != 1 || !ct.Has(wellknown.CapacityTypeReserved) {
				s.cheapest = "pinned to reservations but capacity type " + ct.String()
				out = append(out, s)
				continue
			}
		}
		if it, o := c.CheapestOffering(); it != nil {
			s.cheapest = it.Name + "/" + o.CapacityType
		}
		out = append(out, s)
	}
	return out
}

func deferred(r *Results) int {
	n := 0
	for _, e := range r.Unschedulable {
		if e.ReservedDeferred {
			n++
		}
	}
	return n
}

// TestReservedCapacity ports the reserved capacity cases of Karpenter
// v1.14.1's scheduling suite and its reserved→on-demand rules: a claim
// holds one instance of every reservation it could launch into; strict
// mode (provisioning) leaves a pod whose compatible reservations are all
// held for the next pass (which, the reservations used up, falls back to
// on-demand or spot), does not fall back to a lower-weight NodePool and
// does not relax the pod; fallback mode (consolidation) lets it go to
// on-demand or spot at once; pods fill a reservation of N exactly.
func TestReservedCapacity(t *testing.T) {
	cpu := func(n int, c string) []*corev1.Pod {
		var ps []*corev1.Pod
		for i := range n {
			ps = append(ps, mkPod("p"+string(rune('a'+i)), c, "100Mi"))
		}
		return ps
	}
	pool := func(name string, w int32) *karpv1.NodePool { return mkPool(name, withWeight(w)) }
	for _, tc := range []struct {
		name     string
		types    []*InstanceType
		pools    []*karpv1.NodePool
		pods     []*corev1.Pod
		fallback bool
		want     []claimSummary
		deferred int
	}{
		{
			name:  "shouldn't fall back to on-demand or spot while compatible reserved offerings are available (pass 1: one claim holds both)",
			types: reservedTypes(1, 1), pools: []*karpv1.NodePool{pool("np", 0)}, pods: cpu(3, "1800m"),
			want:     []claimSummary{{pods: 1, reserved: []string{"cr-medium", "cr-small"}, cheapest: "small.large/reserved"}},
			deferred: 2,
		},
		{
			name:  "pass 2: the small reservation used up, the medium one is held",
			types: reservedTypes(0, 1), pools: []*karpv1.NodePool{pool("np", 0)}, pods: cpu(2, "1800m"),
			want:     []claimSummary{{pods: 1, reserved: []string{"cr-medium"}, cheapest: "medium.large/reserved"}},
			deferred: 1,
		},
		{
			name:  "pass 3: both used up, on-demand or spot",
			types: reservedTypes(0, 0), pools: []*karpv1.NodePool{pool("np", 0)}, pods: cpu(1, "1800m"),
			want: []claimSummary{{pods: 1, cheapest: "small.large/spot"}},
		},
		{
			name:  "fallback mode (consolidation) goes to spot at once",
			types: reservedTypes(1, 1), pools: []*karpv1.NodePool{pool("np", 0)}, pods: cpu(3, "1800m"), fallback: true,
			want: []claimSummary{
				{pods: 1, reserved: []string{"cr-medium", "cr-small"}, cheapest: "small.large/reserved"},
				{pods: 1, cheapest: "small.large/spot"}, {pods: 1, cheapest: "small.large/spot"},
			},
		},
		{
			name:  "pods fill a reservation of three exactly; the rest wait for the next pass",
			types: []*InstanceType{withReservation(mkType("small.large", 2, 2, 30, "amd64", 0.1), "cr-small", "test-1a", 3, 0.1)},
			pools: []*karpv1.NodePool{pool("np", 0)}, pods: cpu(5, "1800m"),
			want: []claimSummary{
				{pods: 1, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"},
				{pods: 1, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"},
				{pods: 1, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"},
			},
			deferred: 2,
		},
		{
			name:  "several pods share a reserved node",
			types: reservedTypes(1, 0), pools: []*karpv1.NodePool{pool("np", 0)}, pods: cpu(3, "500m"),
			want: []claimSummary{{pods: 3, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"}},
		},
		{
			name:  "a pod that outgrows the reserved type opens its own claim rather than taking the claim off its reservation",
			types: reservedTypes(1, 0), pools: []*karpv1.NodePool{pool("np", 0)}, pods: append(cpu(1, "1500m"), mkPod("big", "1", "100Mi")),
			want:     []claimSummary{{pods: 1, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"}},
			deferred: 1,
		},
		{
			name:  "reservations are tracked across NodePools sharing them",
			types: reservedTypes(1, 0), pools: []*karpv1.NodePool{pool("np-1", 0), pool("np-2", 0)}, pods: cpu(2, "1800m"),
			want:     []claimSummary{{pods: 1, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"}},
			deferred: 1,
		},
		{
			name:  "shouldn't fall back to a lower-weight NodePool while a reserved offering is held",
			types: reservedTypes(1, 0), pools: []*karpv1.NodePool{pool("np-primary", 100), pool("np-fallback", 50)}, pods: cpu(2, "1800m"),
			want:     []claimSummary{{pods: 1, reserved: []string{"cr-small"}, cheapest: "small.large/reserved"}},
			deferred: 1,
		},
		{
			name:  "a NodePool that allows only on-demand never holds a reservation",
			types: reservedTypes(1, 1), pools: []*karpv1.NodePool{mkPool("od", withReq(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeOnDemand))},
			pods: cpu(1, "1800m"),
			want: []claimSummary{{pods: 1, cheapest: "small.large/on-demand"}},
		},
		{
			name:  "a pod selecting a reservation by id gets it",
			types: reservedTypes(1, 1), pools: []*karpv1.NodePool{pool("np", 0)},
			pods: []*corev1.Pod{mkPod("sel", "1", "100Mi", nodeSelector(wellknown.CapacityReservationIDLabel, "cr-medium"))},
			want: []claimSummary{{pods: 1, reserved: []string{"cr-medium"}, cheapest: "medium.large/reserved"}},
		},
		{
			name:  "a pod selecting a used-up reservation does not go on-demand",
			types: reservedTypes(1, 0), pools: []*karpv1.NodePool{pool("np", 0)},
			pods: []*corev1.Pod{mkPod("sel", "1", "100Mi", nodeSelector(wellknown.CapacityReservationIDLabel, "cr-medium"))},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := reservedSnap(tc.types, tc.pools, tc.pods...)
			opts := Provisioning()
			opts.ReservedFallback = tc.fallback
			r := Solve(snap, opts)
			checkInvariants(t, snap, r)
			got := summarizeClaims(r)
			if !slices.EqualFunc(got, tc.want, func(a, b claimSummary) bool {
				return a.pods == b.pods && slices.Equal(a.reserved, b.reserved) && a.cheapest == b.cheapest
			}) {
				t.Errorf("claims = %+v, want %+v", got, tc.want)
			}
			if d := deferred(r); d != tc.deferred {
				t.Errorf("deferred = %d, want %d (unschedulable %+v)", d, tc.deferred, r.Unschedulable)
			}
			for _, c := range r.NewNodeClaims {
				if rr := reqOf(c, wellknown.CapacityReservationIDLabel); rr != nil && rr.Operator() == corev1.NodeSelectorOpIn {
					for _, it := range c.InstanceTypes {
						if !slices.ContainsFunc(it.Offerings, func(o Offering) bool {
							return o.CapacityType == wellknown.CapacityTypeReserved && rr.Has(o.ReservationID)
						}) {
							t.Errorf("claim pinned to %v carries %s, which has none of them", rr.Values(), it.Name)
						}
					}
				}
			}
		})
	}
}

// TestReservedPrice: a reserved claim's price is Karpenter's on-demand
// price over 10,000,000.
func TestReservedPrice(t *testing.T) {
	r := Solve(reservedSnap(reservedTypes(1, 0), []*karpv1.NodePool{mkPool("np")}, mkPod("a", "1", "100Mi")), Provisioning())
	it, o := r.NewNodeClaims[0].CheapestOffering()
	if it == nil || o.CapacityType != wellknown.CapacityTypeReserved || o.Price != 0.1/10_000_000 || o.ReservationID != "cr-small" {
		t.Fatalf("cheapest = %v %+v", it, o)
	}
}
