package scheduling

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

type compatibleRow struct {
	node, want string
	ok         bool
}

func requirementsCase(spec string) conformance.Case {
	return conformance.Case{Suite: requirementSuite, File: requirementsFile, Spec: "Requirements > " + spec}
}

// zoneFixtures are requirements_test.go's Compatibility requirement sets, on
// the zone: a well-known label, which behaves differently from custom ones.
func zoneFixtures() map[string]Requirements {
	z := corev1.LabelTopologyZone
	return map[string]Requirements{
		"unconstrained": NewRequirements(),
		"exists":        NewRequirements(NewRequirement(z, corev1.NodeSelectorOpExists)),
		"doesNotExist":  NewRequirements(NewRequirement(z, corev1.NodeSelectorOpDoesNotExist)),
		"inA":           NewRequirements(NewRequirement(z, corev1.NodeSelectorOpIn, "A")),
		"inB":           NewRequirements(NewRequirement(z, corev1.NodeSelectorOpIn, "B")),
		"inAB":          NewRequirements(NewRequirement(z, corev1.NodeSelectorOpIn, "A", "B")),
		"notInA":        NewRequirements(NewRequirement(z, corev1.NodeSelectorOpNotIn, "A")),
		"in1":           NewRequirements(NewRequirement(z, corev1.NodeSelectorOpIn, "1")),
		"in9":           NewRequirements(NewRequirement(z, corev1.NodeSelectorOpIn, "9")),
		"in19":          NewRequirements(NewRequirement(z, corev1.NodeSelectorOpIn, "1", "9")),
		"notIn12":       NewRequirements(NewRequirement(z, corev1.NodeSelectorOpNotIn, "1", "2")),
		"greaterThan1":  NewRequirements(NewRequirement(z, corev1.NodeSelectorOpGt, "1")),
		"greaterThan9":  NewRequirements(NewRequirement(z, corev1.NodeSelectorOpGt, "9")),
		"lessThan1":     NewRequirements(NewRequirement(z, corev1.NodeSelectorOpLt, "1")),
		"lessThan9":     NewRequirements(NewRequirement(z, corev1.NodeSelectorOpLt, "9")),
	}
}

func TestConformanceRequirementsCompatibility(t *testing.T) {
	c := func(spec string) conformance.Case { return requirementsCase("Compatibility > " + spec) }
	conformance.Run(t, c("should normalize aliased labels"), func(t *testing.T) {
		r := NewRequirements(NewRequirement(corev1.LabelFailureDomainBetaZone, corev1.NodeSelectorOpIn, "test"))
		if r.Has(corev1.LabelFailureDomainBetaZone) || !r.Get(corev1.LabelTopologyZone).Has("test") {
			t.Fatalf("requirements %s, want the zone In [test]", r)
		}
	})
	fx := zoneFixtures()
	for _, tc := range []struct {
		it             string
		rows           []compatibleRow
		allowUndefined func(string) bool
	}{
		{"should be compatible with well-known v1 labels undefined", compatibleUndefinedRows, IsWellKnown},
		{"should be strictly compatible", compatibleStrictRows, nil},
	} {
		conformance.Run(t, c(tc.it), func(t *testing.T) {
			for _, row := range tc.rows {
				err := fx[row.node].Compatible(fx[row.want], tc.allowUndefined)
				if (err == nil) != row.ok {
					t.Errorf("%s.Compatible(%s) = %v, want ok=%v", row.node, row.want, err, row.ok)
				}
			}
		})
	}
}

func TestConformanceRequirementsErrorMessages(t *testing.T) {
	names := map[string]int{}
	for _, table := range []struct {
		title   string
		entries [][3]string
	}{
		{"should detect well known label truncations", [][3]string{
			{"Zone Label", "zone", `label "zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`},
			{"Region Label", "region", `label "region" does not have known values (typo of "topology.kubernetes.io/region"?)`},
			{"NodePool Name Label", "nodepool", `label "nodepool" does not have known values (typo of "karpenter.sh/nodepool"?)`},
			{"Instance Type Label", "instance-type", `label "instance-type" does not have known values (typo of "node.kubernetes.io/instance-type"?)`},
			{"Architecture Label", "arch", `label "arch" does not have known values (typo of "kubernetes.io/arch"?)`},
			{"Capacity Type Label", "capacity-type", `label "capacity-type" does not have known values (typo of "karpenter.sh/capacity-type"?)`},
		}},
		{"should detect well known label typos", [][3]string{
			{"Zone Label #1", "topology.kubernetesio/zone", `label "topology.kubernetesio/zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`},
			// Karpenter names this entry "Zone Label #1" too.
			{"Zone Label #1", "node.io/zone", `label "node.io/zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`},
			{"Region Label #1", "topology.kubernetes.io/regio", `label "topology.kubernetes.io/regio" does not have known values (typo of "topology.kubernetes.io/region"?)`},
			{"Region Label #2", "node.kubernetes.io/region", `label "node.kubernetes.io/region" does not have known values (typo of "topology.kubernetes.io/region"?)`},
			{"NodePool Label #2", "karpenter/nodepool", `label "karpenter/nodepool" does not have known values (typo of "karpenter.sh/nodepool"?)`},
		}},
	} {
		for _, e := range table.entries {
			spec := "Error Messages > " + table.title + " > " + e[0]
			if names[spec]++; names[spec] > 1 {
				spec += " #2"
			}
			conformance.Run(t, requirementsCase(spec), func(t *testing.T) {
				err := NewRequirements().Compatible(NewRequirements(NewRequirement(e[1], corev1.NodeSelectorOpExists)), IsWellKnown)
				if err == nil || err.Error() != e[2] {
					t.Fatalf("Compatible = %v, want %q", err, e[2])
				}
			})
		}
	}
	conformance.Run(t, requirementsCase("Error Messages > should display an error message for unknown labels"), func(t *testing.T) {
		want := `label "deployment" does not have known values`
		err := NewRequirements().Compatible(NewRequirements(NewRequirement("deployment", corev1.NodeSelectorOpExists)), nil)
		if err == nil || err.Error() != want {
			t.Fatalf("Compatible = %v, want %q", err, want)
		}
	})
}

// keyedFixtures are the conversion cases' requirements, each on a key named
// for it, with minValues when flexible.
func keyedFixtures(flexible bool) Requirements {
	mv := func(n int) *int {
		if flexible {
			return new(n)
		}
		return nil
	}
	return NewRequirements(
		NewRequirementWithMinValues("exists", corev1.NodeSelectorOpExists, mv(3)),
		NewRequirementWithMinValues("doesNotExist", corev1.NodeSelectorOpDoesNotExist, mv(2)),
		NewRequirementWithMinValues("inA", corev1.NodeSelectorOpIn, mv(1), "A"),
		NewRequirementWithMinValues("inB", corev1.NodeSelectorOpIn, mv(1), "B"),
		NewRequirementWithMinValues("inAB", corev1.NodeSelectorOpIn, mv(2), "A", "B"),
		NewRequirementWithMinValues("notInA", corev1.NodeSelectorOpNotIn, mv(1), "A"),
		NewRequirementWithMinValues("in1", corev1.NodeSelectorOpIn, mv(1), "1"),
		NewRequirementWithMinValues("in9", corev1.NodeSelectorOpIn, mv(1), "9"),
		NewRequirementWithMinValues("in19", corev1.NodeSelectorOpIn, mv(2), "1", "9"),
		NewRequirementWithMinValues("notIn12", corev1.NodeSelectorOpNotIn, mv(2), "1", "2"),
		NewRequirementWithMinValues("greaterThan1", corev1.NodeSelectorOpGt, mv(1), "1"),
		NewRequirementWithMinValues("greaterThan9", corev1.NodeSelectorOpGt, mv(1), "9"),
		NewRequirementWithMinValues("lessThan1", corev1.NodeSelectorOpLt, mv(1), "1"),
		NewRequirementWithMinValues("lessThan9", corev1.NodeSelectorOpLt, mv(1), "9"),
	)
}

// expectNodeSelectors is ContainElements(want...) and HaveLen(len(want)).
func expectNodeSelectors(t *testing.T, got, want []karpv1.NodeSelectorRequirementWithMinValues) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("NodeSelectorRequirements() = %s, want %d entries", showNodeSelectors(got), len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g karpv1.NodeSelectorRequirementWithMinValues) bool { return sameNodeSelector(g, w) }) {
			t.Errorf("NodeSelectorRequirements() = %s, want it to contain %s", showNodeSelectors(got), showNodeSelectors([]karpv1.NodeSelectorRequirementWithMinValues{w}))
		}
	}
}

func TestConformanceRequirementsNodeSelector(t *testing.T) {
	c := func(spec string) conformance.Case {
		return requirementsCase("NodeSelectorRequirements Conversion > " + spec)
	}
	type nsr = karpv1.NodeSelectorRequirementWithMinValues
	expected := func(flexible bool) []nsr {
		mv := func(n int) *int {
			if flexible {
				return new(n)
			}
			return nil
		}
		return []nsr{
			{Key: "exists", Operator: corev1.NodeSelectorOpExists, MinValues: mv(3)},
			{Key: "doesNotExist", Operator: corev1.NodeSelectorOpDoesNotExist, MinValues: mv(2)},
			{Key: "inA", Operator: corev1.NodeSelectorOpIn, Values: []string{"A"}, MinValues: mv(1)},
			{Key: "inB", Operator: corev1.NodeSelectorOpIn, Values: []string{"B"}, MinValues: mv(1)},
			{Key: "inAB", Operator: corev1.NodeSelectorOpIn, Values: []string{"A", "B"}, MinValues: mv(2)},
			{Key: "notInA", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"A"}, MinValues: mv(1)},
			{Key: "in1", Operator: corev1.NodeSelectorOpIn, Values: []string{"1"}, MinValues: mv(1)},
			{Key: "in9", Operator: corev1.NodeSelectorOpIn, Values: []string{"9"}, MinValues: mv(1)},
			{Key: "in19", Operator: corev1.NodeSelectorOpIn, Values: []string{"1", "9"}, MinValues: mv(2)},
			{Key: "notIn12", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"1", "2"}, MinValues: mv(2)},
			{Key: "greaterThan1", Operator: karpv1.NodeSelectorOpGte, Values: []string{"2"}, MinValues: mv(1)},
			{Key: "greaterThan9", Operator: karpv1.NodeSelectorOpGte, Values: []string{"10"}, MinValues: mv(1)},
			{Key: "lessThan1", Operator: karpv1.NodeSelectorOpLte, Values: []string{"0"}, MinValues: mv(1)},
			{Key: "lessThan9", Operator: karpv1.NodeSelectorOpLte, Values: []string{"8"}, MinValues: mv(1)},
		}
	}
	conformance.Run(t, c("should convert combinations of labels to expected NodeSelectorRequirements"), func(t *testing.T) {
		expectNodeSelectors(t, keyedFixtures(false).NodeSelectorRequirements(), expected(false))
	})
	conformance.Run(t, c("should convert combinations of labels with flexiblity to expected NodeSelectorRequirements"), func(t *testing.T) {
		expectNodeSelectors(t, keyedFixtures(true).NodeSelectorRequirements(), expected(true))
	})
	conformance.Run(t, c("should return both Gte and Lte requirements when both bounds exist"), func(t *testing.T) {
		r := NewRequirements(NewRequirement("cpu", karpv1.NodeSelectorOpGte, "8"), NewRequirement("cpu", karpv1.NodeSelectorOpLte, "8"))
		expectNodeSelectors(t, r.NodeSelectorRequirements(), []nsr{
			{Key: "cpu", Operator: karpv1.NodeSelectorOpGte, Values: []string{"8"}},
			{Key: "cpu", Operator: karpv1.NodeSelectorOpLte, Values: []string{"8"}},
		})
	})
}

func TestConformanceRequirementsString(t *testing.T) {
	conformance.Run(t, requirementsCase("Stringify Requirements > should print Requirements in the same order"), func(t *testing.T) {
		want := "doesNotExist DoesNotExist, exists Exists, greaterThan1 Exists >=2, greaterThan9 Exists >=10, in1 In [1], in19 In [1 9], in9 In [9], inA In [A], inAB In [A B], inB In [B], lessThan1 Exists <=0, lessThan9 Exists <=8, notIn12 NotIn [1 2], notInA NotIn [A]"
		if got := keyedFixtures(false).String(); got != want {
			t.Fatalf("String() = %q, want %q", got, want)
		}
	})
}

// A pod selecting a label no NodePool sets is told, as in Karpenter's
// event, which well-known label it may have misspelt.
func TestUndefinedLabelReasonNamesTypo(t *testing.T) {
	pod := mkPod("p", "1", "1Gi", nodeSelector("zone", "a"))
	want := `NodePool default does not set label zone (typo of "topology.kubernetes.io/zone"?)`
	if got := reasonOf(solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, pod)), pod); !strings.Contains(got, want) {
		t.Fatalf("reason = %q, want it to contain %q", got, want)
	}
}
