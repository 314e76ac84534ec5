package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestReplacementMinValues: a replacement narrowed by price keeps its
// minValues, counted as the simulator counts them: zones and capacity
// types from the offerings its requirements allow, not from labels
// (Karpenter's RemoveInstanceTypeOptionsByPriceAndMinValues and the
// spot-to-spot minimum of SatisfiesMinValues).
func TestReplacementMinValues(t *testing.T) {
	mk := func(name, family string, zones ...string) *scheduling.InstanceType {
		it := &scheduling.InstanceType{Name: name, Labels: map[string]string{wellknown.InstanceFamilyLabel: family}}
		for _, z := range zones {
			it.Offerings = append(it.Offerings, scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: 0.1, Available: true})
		}
		return it
	}
	types := []*scheduling.InstanceType{mk("c.large", "c", "a"), mk("c.xlarge", "c", "b"), mk("m.large", "m", "a", "b", "c")}
	req := func(key string, n int, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		op := corev1.NodeSelectorOpIn
		if len(vals) == 0 {
			op = corev1.NodeSelectorOpExists
		}
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals, MinValues: &n}
	}
	for _, tc := range []struct {
		name   string
		reqs   []karpv1.NodeSelectorRequirementWithMinValues
		keep   int // types kept, cheapest first
		ok     bool
		needed int
	}{
		{"zones counted from offerings", []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.ZoneLabel, 2, "a", "b", "c")}, 2, true, 2},
		{"zones only those the claim allows", []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.ZoneLabel, 2, "a")}, 3, false, 0},
		{"a third zone needs the third type", []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.ZoneLabel, 3, "a", "b", "c")}, 2, false, 3},
		{"families from labels", []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.InstanceFamilyLabel, 2)}, 2, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &scheduling.NewNodeClaim{Requirements: tc.reqs, InstanceTypes: types}
			if got := minValuesNeeded(n); got != tc.needed {
				t.Errorf("minValuesNeeded = %d, want %d", got, tc.needed)
			}
			_, err := narrowTo(n, scheduling.RequirementsFromNodePool(tc.reqs), types[:tc.keep])
			if (err == nil) != tc.ok {
				t.Errorf("narrowTo %d types: error %v, want ok=%v", tc.keep, err, tc.ok)
			}
		})
	}
}
