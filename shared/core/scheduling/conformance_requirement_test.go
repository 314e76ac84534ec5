package scheduling

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter's pkg/scheduling package: its requirement algebra is Karpless's
// Requirement and Requirements (NewRequirementWithFlexibility is
// NewRequirementWithMinValues, Intersection is Intersect, a single
// NodeSelectorRequirement is NodeSelectorRequirements' one entry, the
// AllowUndefinedWellKnownLabels option is IsWellKnown).
const (
	requirementSuite = "core/scheduling"
	requirementFile  = "pkg/scheduling/requirement_test.go"
	requirementsFile = "pkg/scheduling/requirements_test.go"
)

// requirementFixtures are requirement_test.go's requirements on "key", by
// their names there.
func requirementFixtures() map[string]*Requirement {
	fx := map[string]*Requirement{}
	for _, f := range []struct {
		name      string
		op        corev1.NodeSelectorOperator
		minValues int
		values    []string
	}{
		{"exists", corev1.NodeSelectorOpExists, 1, nil},
		{"doesNotExist", corev1.NodeSelectorOpDoesNotExist, 1, nil},
		{"inA", corev1.NodeSelectorOpIn, 1, []string{"A"}},
		{"inB", corev1.NodeSelectorOpIn, 1, []string{"B"}},
		{"inAB", corev1.NodeSelectorOpIn, 2, []string{"A", "B"}},
		{"notInA", corev1.NodeSelectorOpNotIn, 1, []string{"A"}},
		{"in1", corev1.NodeSelectorOpIn, 1, []string{"1"}},
		{"in9", corev1.NodeSelectorOpIn, 1, []string{"9"}},
		{"in19", corev1.NodeSelectorOpIn, 2, []string{"1", "9"}},
		{"notIn12", corev1.NodeSelectorOpNotIn, 2, []string{"1", "2"}},
		{"greaterThan1", corev1.NodeSelectorOpGt, 1, []string{"1"}},
		{"greaterThan9", corev1.NodeSelectorOpGt, 1, []string{"9"}},
		{"lessThan1", corev1.NodeSelectorOpLt, 1, []string{"1"}},
		{"lessThan9", corev1.NodeSelectorOpLt, 1, []string{"9"}},
	} {
		fx[f.name] = NewRequirement("key", f.op, f.values...)
		fx[f.name+"OperatorWithFlexibility"] = NewRequirementWithMinValues("key", f.op, new(f.minValues), f.values...)
	}
	return fx
}

// sameRequirement is Gomega's Equal on Karpenter's Requirement: the same
// key, complement, values, bounds and minValues.
func sameRequirement(a, b *Requirement) bool {
	sameBound := func(ha bool, a int64, hb bool, b int64) bool { return ha == hb && (!ha || a == b) }
	sameMin := a.MinValues == nil && b.MinValues == nil || a.MinValues != nil && b.MinValues != nil && *a.MinValues == *b.MinValues
	return a.Key == b.Key && a.complement == b.complement && slices.Equal(a.values, b.values) &&
		sameBound(a.hasGte, a.gte, b.hasGte, b.gte) && sameBound(a.hasLte, a.lte, b.hasLte, b.lte) && sameMin
}

// dumpRequirement shows a requirement's representation, for failures.
func dumpRequirement(r *Requirement) string {
	s := fmt.Sprintf("{key=%s complement=%v values=%q", r.Key, r.complement, r.values)
	if r.hasGte {
		s += fmt.Sprintf(" gte=%d", r.gte)
	}
	if r.hasLte {
		s += fmt.Sprintf(" lte=%d", r.lte)
	}
	if r.MinValues != nil {
		s += fmt.Sprintf(" minValues=%d", *r.MinValues)
	}
	return s + "}"
}

type intersectRow struct {
	spec, a, b string
	want       *Requirement
}

type hasRow struct {
	spec, req, value string
	want             bool
}

type operatorRow struct {
	spec, req string
	want      corev1.NodeSelectorOperator
}

type lenRow struct {
	spec, req string
	want      int
}

type stringRow struct {
	spec string
	req  *Requirement
	want string
}

type nodeSelectorRow struct {
	spec string
	req  *Requirement
	want karpv1.NodeSelectorRequirementWithMinValues
}

func requirementCase(spec string) conformance.Case {
	return conformance.Case{Suite: requirementSuite, File: requirementFile, Spec: "Requirement > " + spec}
}

func TestConformanceRequirementNewRequirements(t *testing.T) {
	conformance.Run(t, requirementCase("NewRequirements > should normalize labels"), func(t *testing.T) {
		nodeSelector := map[string]string{
			corev1.LabelFailureDomainBetaZone:   "test",
			corev1.LabelFailureDomainBetaRegion: "test",
			"beta.kubernetes.io/arch":           "test",
			"beta.kubernetes.io/os":             "test",
			corev1.LabelInstanceType:            "test",
		}
		var exprs []corev1.NodeSelectorRequirement
		for k, v := range nodeSelector {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}}},
			}},
		}}
		want := []string{corev1.LabelArchStable, corev1.LabelOSStable, corev1.LabelInstanceTypeStable, corev1.LabelTopologyRegion, corev1.LabelTopologyZone}
		slices.Sort(want)
		for i, r := range []Requirements{RequirementsFromLabels(nodeSelector), RequirementsFromNodeSelector(exprs), PodRequirements(pod, false)} {
			if got := r.Keys(); !slices.Equal(got, want) {
				t.Fatalf("requirements %d: keys %v, want %v", i, got, want)
			}
		}
	})
}

func TestConformanceRequirementIntersection(t *testing.T) {
	fx := requirementFixtures()
	for _, table := range []struct {
		title string
		rows  []intersectRow
	}{
		{"should intersect two requirements without minValues", intersectWithoutMinValues(fx)},
		{"should intersect requirement with minValues with a requirement without", intersectMinValuesWithout(fx)},
		{"should intersect two requirements with minValues", intersectWithMinValues(fx)},
	} {
		for _, row := range table.rows {
			conformance.Run(t, requirementCase("Intersect requirements > "+table.title+" > "+row.spec), func(t *testing.T) {
				if got := fx[row.a].Intersect(fx[row.b]); !sameRequirement(got, row.want) {
					t.Fatalf("%s.Intersect(%s) = %s, want %s", row.a, row.b, dumpRequirement(got), dumpRequirement(row.want))
				}
			})
		}
	}
}

func TestConformanceRequirementHas(t *testing.T) {
	fx := requirementFixtures()
	for _, row := range hasRows {
		conformance.Run(t, requirementCase("Has > should have the right values > "+row.spec), func(t *testing.T) {
			if got := fx[row.req].Has(row.value); got != row.want {
				t.Fatalf("%s.Has(%q) = %v, want %v", row.req, row.value, got, row.want)
			}
		})
	}
}

func TestConformanceRequirementOperator(t *testing.T) {
	fx := requirementFixtures()
	for _, row := range operatorRows {
		conformance.Run(t, requirementCase("Operator > should return the right operator > "+row.spec), func(t *testing.T) {
			if got := fx[row.req].Operator(); got != row.want {
				t.Fatalf("%s.Operator() = %s, want %s", row.req, got, row.want)
			}
		})
	}
}

func TestConformanceRequirementLen(t *testing.T) {
	fx := requirementFixtures()
	for _, row := range lenRows {
		conformance.Run(t, requirementCase("Len > should have the correct length > "+row.spec), func(t *testing.T) {
			if got := fx[row.req].Len(); got != row.want {
				t.Fatalf("%s.Len() = %d, want %d", row.req, got, row.want)
			}
		})
	}
}

func TestConformanceRequirementAny(t *testing.T) {
	fx := requirementFixtures()
	conformance.Run(t, requirementCase("Any > should return any"), func(t *testing.T) {
		anyOf := func(name string) string {
			v, _ := fx[name].Any()
			return v
		}
		atoi := func(name string) int {
			n, err := strconv.Atoi(anyOf(name))
			if err != nil {
				t.Fatalf("%s.Any() = %q: %v", name, anyOf(name), err)
			}
			return n
		}
		oneOf := func(name string, want ...string) {
			if got := anyOf(name); !slices.Contains(want, got) {
				t.Errorf("%s.Any() = %q, want one of %q", name, got, want)
			}
		}
		noneOf := func(name string, not ...string) {
			if got := anyOf(name); got == "" || slices.Contains(not, got) {
				t.Errorf("%s.Any() = %q, want a value other than %q", name, got, not)
			}
		}
		noneOf("exists")
		oneOf("doesNotExist", "")
		oneOf("inA", "A")
		oneOf("inB", "B")
		oneOf("inAB", "A", "B")
		noneOf("notInA", "A")
		oneOf("in1", "1")
		oneOf("in9", "9")
		oneOf("in19", "1", "9")
		noneOf("notIn12", "1", "2")
		if n := atoi("greaterThan1"); n < 1 {
			t.Errorf("greaterThan1.Any() = %d", n)
		}
		if n := atoi("greaterThan9"); n < 9 || n == math.MaxInt64 {
			t.Errorf("greaterThan9.Any() = %d", n)
		}
		oneOf("lessThan1", "0")
		if n := atoi("lessThan9"); n < 0 || n >= 9 {
			t.Errorf("lessThan9.Any() = %d", n)
		}
	})
}

func TestConformanceRequirementString(t *testing.T) {
	fx := requirementFixtures()
	for _, row := range stringRows(fx) {
		conformance.Run(t, requirementCase("String > should print the right string > "+row.spec), func(t *testing.T) {
			if got := row.req.String(); got != row.want {
				t.Fatalf("String() = %q, want %q", got, row.want)
			}
		})
	}
}

func TestConformanceRequirementNodeSelector(t *testing.T) {
	fx := requirementFixtures()
	for _, row := range nodeSelectorRows(fx) {
		conformance.Run(t, requirementCase("NodeSelectorRequirements Conversion > should return the expected NodeSelectorRequirement > "+row.spec), func(t *testing.T) {
			got := row.req.NodeSelectorRequirements()
			if len(got) != 1 || !sameNodeSelector(got[0], row.want) {
				t.Fatalf("NodeSelectorRequirements() = %s, want [%s]", showNodeSelectors(got), showNodeSelectors([]karpv1.NodeSelectorRequirementWithMinValues{row.want}))
			}
		})
	}
}

// sameNodeSelector is Gomega's Equal on two rendered requirements (nil and
// empty values differ, as reflect.DeepEqual has them).
func sameNodeSelector(a, b karpv1.NodeSelectorRequirementWithMinValues) bool {
	sameMin := a.MinValues == nil && b.MinValues == nil || a.MinValues != nil && b.MinValues != nil && *a.MinValues == *b.MinValues
	return a.Key == b.Key && a.Operator == b.Operator && (a.Values == nil) == (b.Values == nil) && slices.Equal(a.Values, b.Values) && sameMin
}

func showNodeSelectors(rs []karpv1.NodeSelectorRequirementWithMinValues) string {
	s := "["
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("{%s %s %q", r.Key, r.Operator, r.Values)
		if r.MinValues != nil {
			s += fmt.Sprintf(" minValues %d", *r.MinValues)
		}
		s += "}"
	}
	return s + "]"
}

func TestConformanceRequirementGteLte(t *testing.T) {
	c := func(spec string) conformance.Case { return requirementCase("Gte and Lte Operators > " + spec) }
	gte := func(v string) *Requirement { return NewRequirement("key", karpv1.NodeSelectorOpGte, v) }
	lte := func(v string) *Requirement { return NewRequirement("key", karpv1.NodeSelectorOpLte, v) }
	expectHas := func(t *testing.T, r *Requirement, want map[string]bool) {
		t.Helper()
		for v, w := range want {
			if got := r.Has(v); got != w {
				t.Errorf("%s.Has(%q) = %v, want %v", dumpRequirement(r), v, got, w)
			}
		}
	}
	// expectRendered checks the single entry Karpenter's
	// NodeSelectorRequirement gives; values nil leaves them unchecked.
	expectRendered := func(t *testing.T, r *Requirement, op corev1.NodeSelectorOperator, values []string) {
		t.Helper()
		got := r.NodeSelectorRequirements()
		if len(got) != 1 || got[0].Operator != op || values != nil && !slices.Equal(got[0].Values, values) {
			t.Fatalf("NodeSelectorRequirements() = %s, want one %s %q", showNodeSelectors(got), op, values)
		}
	}

	conformance.Run(t, c("should treat Gte as inclusive lower bound"), func(t *testing.T) {
		expectHas(t, gte("2"), map[string]bool{"2": true, "3": true, "100": true, "1": false, "0": false})
	})
	conformance.Run(t, c("should treat Lte as inclusive upper bound"), func(t *testing.T) {
		expectHas(t, lte("8"), map[string]bool{"8": true, "7": true, "0": true, "9": false, "10": false})
	})
	conformance.Run(t, c("should intersect Gte and Lte correctly"), func(t *testing.T) {
		expectHas(t, gte("2").Intersect(lte("8")), map[string]bool{"2": true, "5": true, "8": true, "1": false, "9": false})
	})
	conformance.Run(t, c("should be equivalent to adjusted Gt/Lt"), func(t *testing.T) {
		gt1 := NewRequirement("key", corev1.NodeSelectorOpGt, "1")
		lt9 := NewRequirement("key", corev1.NodeSelectorOpLt, "9")
		for _, v := range []string{"2", "1"} {
			if gte("2").Has(v) != gt1.Has(v) {
				t.Errorf("Gte 2 and Gt 1 differ on %s", v)
			}
		}
		for _, v := range []string{"8", "9"} {
			if lte("8").Has(v) != lt9.Has(v) {
				t.Errorf("Lte 8 and Lt 9 differ on %s", v)
			}
		}
	})
	conformance.Run(t, c("should collapse redundant bounds in intersection"), func(t *testing.T) {
		r := NewRequirement("key", corev1.NodeSelectorOpGt, "4").Intersect(gte("5"))
		expectHas(t, r, map[string]bool{"5": true, "4": false})
		expectRendered(t, r, karpv1.NodeSelectorOpGte, []string{"5"})
	})
	conformance.Run(t, c("should keep Gt when Gt is more restrictive"), func(t *testing.T) {
		r := NewRequirement("key", corev1.NodeSelectorOpGt, "5").Intersect(gte("5"))
		expectHas(t, r, map[string]bool{"6": true, "5": false})
		expectRendered(t, r, karpv1.NodeSelectorOpGte, []string{"6"})
	})
	conformance.Run(t, c("should keep more restrictive Gte when Gte > Gt+1"), func(t *testing.T) {
		r := NewRequirement("key", corev1.NodeSelectorOpGt, "3").Intersect(gte("6"))
		expectHas(t, r, map[string]bool{"6": true, "5": false})
		expectRendered(t, r, karpv1.NodeSelectorOpGte, nil)
	})
	conformance.Run(t, c("should keep Lt when Lt is more restrictive"), func(t *testing.T) {
		r := NewRequirement("key", corev1.NodeSelectorOpLt, "5").Intersect(lte("5"))
		expectHas(t, r, map[string]bool{"4": true, "5": false})
		expectRendered(t, r, karpv1.NodeSelectorOpLte, []string{"4"})
	})
	conformance.Run(t, c("should keep more restrictive Lte when Lte < Lt-1"), func(t *testing.T) {
		r := NewRequirement("key", corev1.NodeSelectorOpLt, "9").Intersect(lte("5"))
		expectHas(t, r, map[string]bool{"5": true, "6": false})
		expectRendered(t, r, karpv1.NodeSelectorOpLte, []string{"5"})
	})
	conformance.Run(t, c("should handle Gte 0 boundary"), func(t *testing.T) {
		expectHas(t, gte("0"), map[string]bool{"0": true, "-1": false})
	})
	conformance.Run(t, c("should handle Lte 0 boundary"), func(t *testing.T) {
		expectHas(t, lte("0"), map[string]bool{"0": true, "1": false})
	})
	conformance.Run(t, c("should return valid value from Any() for Gte"), func(t *testing.T) {
		v, _ := gte("5").Any()
		if n, err := strconv.Atoi(v); err != nil || n < 5 {
			t.Fatalf("Gte 5 Any() = %q", v)
		}
	})
	conformance.Run(t, c("should return valid value from Any() for Lte"), func(t *testing.T) {
		v, _ := lte("10").Any()
		if n, err := strconv.Atoi(v); err != nil || n > 10 {
			t.Fatalf("Lte 10 Any() = %q", v)
		}
	})
	conformance.Run(t, c("should return DoesNotExist for Gt MaxInt"), func(t *testing.T) {
		r := NewRequirement("key", corev1.NodeSelectorOpGt, strconv.Itoa(math.MaxInt))
		if r.Operator() != corev1.NodeSelectorOpDoesNotExist || r.Len() != 0 {
			t.Fatalf("Gt MaxInt = %s (len %d), want DoesNotExist", dumpRequirement(r), r.Len())
		}
	})
}
