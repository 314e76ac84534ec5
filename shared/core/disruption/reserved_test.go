package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// reserve adds a reserved offering of id to a fixture type: Karpenter's
// price (on-demand over 10,000,000) and capacity left.
func reserve(it *scheduling.InstanceType, id, zone string, capacity int) {
	od := 0.0
	for _, o := range it.Offerings {
		if o.CapacityType == wellknown.CapacityTypeOnDemand {
			od = o.Price
		}
	}
	it.Offerings = append(it.Offerings, scheduling.Offering{Zone: zone, CapacityType: wellknown.CapacityTypeReserved, Price: od / 10_000_000,
		Available: capacity > 0, ReservationID: id, ReservationCapacity: capacity, ReservationType: "default"})
}

func allowReserved(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn,
		Values: []string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot}}}
}

// TestReservedConsolidation ports the "Reserved Capacity" consolidation
// cases of Karpenter v1.14.1: an on-demand or spot node is replaced by the
// same type's reserved capacity (priced on-demand/10,000,000), a reserved
// node by a cheaper type's reserved capacity, and a reserved node is never
// replaced by on-demand or spot (nothing is cheaper than capacity already
// paid for); an empty reserved node is still deleted.
func TestReservedConsolidation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		node, ct string
		resv     map[string]int // type -> reservation capacity (in test-1a)
		pod      string
		decision string
		want     string // reservation the replacement is pinned to
		why      string
	}{
		{name: "on-demand into reserved capacity of the same type", node: "m.xlarge", ct: "on-demand", resv: map[string]int{"m.xlarge": 1}, pod: "3", decision: "replace", want: "cr-m.xlarge"},
		{name: "spot into reserved capacity of the same type", node: "m.xlarge", ct: "spot", resv: map[string]int{"m.xlarge": 1}, pod: "3", decision: "replace", want: "cr-m.xlarge"},
		{name: "reserved into a cheaper type's reserved capacity", node: "m.2xlarge", ct: "reserved", resv: map[string]int{"m.2xlarge": 0, "m.xlarge": 1}, pod: "3", decision: "replace", want: "cr-m.xlarge"},
		{name: "reserved is not replaced by on-demand or spot", node: "m.2xlarge", ct: "reserved", resv: map[string]int{"m.2xlarge": 0}, pod: "3", why: "Can't replace with a cheaper node"},
		{name: "a used-up reservation is not a replacement", node: "m.xlarge", ct: "on-demand", resv: map[string]int{"m.xlarge": 0}, pod: "3", decision: "replace"},
		{name: "an empty reserved node is deleted", node: "m.xlarge", ct: "reserved", resv: map[string]int{"m.xlarge": 0}, decision: "delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			allowReserved(f.pool())
			for name, n := range tc.resv {
				reserve(f.typeNamed(name), "cr-"+name, "test-1a", n)
			}
			nc := f.node("n1", tc.node, "test-1a", tc.ct)
			if tc.ct == wellknown.CapacityTypeReserved {
				nc.Labels[wellknown.CapacityReservationIDLabel] = "cr-" + tc.node
			}
			if tc.pod != "" {
				f.pod("p1", "n1", tc.pod, "2Gi")
			}
			plan := Compute(f.input())
			cmd := plan.Command
			if tc.decision == "" {
				if cmd != nil {
					t.Fatalf("want nothing, got %s", cmd)
				}
				if len(plan.Unconsolidatable) != 1 || !strings.HasPrefix(plan.Unconsolidatable[0].Message, tc.why) {
					t.Fatalf("unconsolidatable %+v, want %q", plan.Unconsolidatable, tc.why)
				}
				return
			}
			if cmd == nil || cmd.Decision() != tc.decision {
				t.Fatalf("want %s, got %v (plan %+v)", tc.decision, cmd, plan.Unconsolidatable)
			}
			if tc.decision != "replace" {
				return
			}
			r := cmd.Replacements[0]
			it, o := r.CheapestOffering()
			got := ""
			if o.CapacityType == wellknown.CapacityTypeReserved {
				got = o.ReservationID
				if rr := reqGet(r, wellknown.CapacityReservationIDLabel); rr == nil || !rr.Has(got) {
					t.Errorf("replacement not pinned to %s: %v", got, r.Requirements)
				}
			}
			if got != tc.want {
				t.Fatalf("replacement %s/%s reservation %q, want %q", it.Name, o.CapacityType, got, tc.want)
			}
			t.Logf("%s: $%.8f/h -> $%.8f/h (%s %s)", tc.name, cmd.PriceBefore, cmd.PriceAfter, it.Name, o.CapacityType)
		})
	}
}
