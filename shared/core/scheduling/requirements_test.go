package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	return NewRequirement(key, op, values...)
}

const (
	opIn     = corev1.NodeSelectorOpIn
	opNotIn  = corev1.NodeSelectorOpNotIn
	opExists = corev1.NodeSelectorOpExists
	opDNE    = corev1.NodeSelectorOpDoesNotExist
	opGt     = corev1.NodeSelectorOpGt
	opLt     = corev1.NodeSelectorOpLt
)

func TestRequirementHas(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       *Requirement
		value   string
		present bool
		want    bool
	}{
		{"in hit", req("k", opIn, "a", "b"), "b", true, true},
		{"in miss", req("k", opIn, "a", "b"), "c", true, false},
		{"in absent", req("k", opIn, "a"), "", false, false},
		{"notin hit", req("k", opNotIn, "a"), "a", true, false},
		{"notin other", req("k", opNotIn, "a"), "b", true, true},
		{"notin absent", req("k", opNotIn, "a"), "", false, true},
		{"exists", req("k", opExists), "x", true, true},
		{"exists absent", req("k", opExists), "", false, false},
		{"dne present", req("k", opDNE), "x", true, false},
		{"dne absent", req("k", opDNE), "", false, true},
		{"gt above", req("k", opGt, "4"), "5", true, true},
		{"gt equal", req("k", opGt, "4"), "4", true, false},
		{"gt non-integer", req("k", opGt, "4"), "abc", true, false},
		{"gt absent", req("k", opGt, "4"), "", false, false},
		{"lt below", req("k", opLt, "4"), "3", true, true},
		{"lt equal", req("k", opLt, "4"), "4", true, false},
		{"gte equal", req("k", karpv1.NodeSelectorOpGte, "4"), "4", true, true},
		{"lte equal", req("k", karpv1.NodeSelectorOpLte, "4"), "4", true, true},
		{"gt bad value matches nothing", req("k", opGt, "x"), "5", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Matches(tc.value, tc.present); got != tc.want {
				t.Fatalf("%s.Matches(%q,%v) = %v, want %v", tc.r, tc.value, tc.present, got, tc.want)
			}
		})
	}
}

func TestRequirementIntersect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    *Requirement
		wantOp  corev1.NodeSelectorOperator
		wantVal []string
		probe   map[string]bool
	}{
		{"in in", req("k", opIn, "a", "b"), req("k", opIn, "b", "c"), opIn, []string{"b"}, nil},
		{"in in disjoint", req("k", opIn, "a"), req("k", opIn, "c"), opDNE, nil, nil},
		{"in notin", req("k", opIn, "a", "b"), req("k", opNotIn, "a"), opIn, []string{"b"}, nil},
		{"notin notin", req("k", opNotIn, "a"), req("k", opNotIn, "b"), opNotIn, []string{"a", "b"}, nil},
		{"exists in", req("k", opExists), req("k", opIn, "x"), opIn, []string{"x"}, nil},
		{"gt lt window", req("k", opGt, "2"), req("k", opLt, "5"), opExists, nil, map[string]bool{"2": false, "3": true, "4": true, "5": false}},
		{"gt lt empty", req("k", opGt, "5"), req("k", opLt, "5"), opDNE, nil, nil},
		{"gt in", req("k", opGt, "2"), req("k", opIn, "1", "3", "x"), opIn, []string{"3"}, nil},
		{"dne exists", req("k", opDNE), req("k", opExists), opDNE, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, got := range []*Requirement{tc.a.Intersect(tc.b), tc.b.Intersect(tc.a)} {
				if got.Operator() != tc.wantOp {
					t.Fatalf("operator = %s, want %s (%s)", got.Operator(), tc.wantOp, got)
				}
				if len(got.Values()) != len(tc.wantVal) {
					t.Fatalf("values = %v, want %v", got.Values(), tc.wantVal)
				}
				for i := range tc.wantVal {
					if got.Values()[i] != tc.wantVal[i] {
						t.Fatalf("values = %v, want %v", got.Values(), tc.wantVal)
					}
				}
				for v, want := range tc.probe {
					if got.Has(v) != want {
						t.Fatalf("%s.Has(%s) = %v", got, v, !want)
					}
				}
			}
		})
	}
}

func TestRequirementsCompatible(t *testing.T) {
	node := NewRequirements(req("zone", opIn, "a", "b"), req("team", opIn, "x"))
	for _, tc := range []struct {
		name      string
		want      Requirements
		allowUndf func(string) bool
		ok        bool
	}{
		{"intersecting", NewRequirements(req("zone", opIn, "b", "c")), nil, true},
		{"disjoint", NewRequirements(req("zone", opIn, "c")), nil, false},
		{"undefined custom In", NewRequirements(req("rack", opIn, "r1")), nil, false},
		{"undefined custom NotIn", NewRequirements(req("rack", opNotIn, "r1")), nil, true},
		{"undefined custom DoesNotExist", NewRequirements(req("rack", opDNE)), nil, true},
		{"undefined well-known allowed", NewRequirements(req("kubernetes.io/arch", opIn, "arm64")), IsWellKnown, true},
		{"both absent allowed", NewRequirements(req("team", opNotIn, "x")), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := node.Compatible(tc.want, tc.allowUndf)
			if (err == nil) != tc.ok {
				t.Fatalf("Compatible = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// Two requirements that both allow the label to be absent intersect.
	a := NewRequirements(req("k", opNotIn, "x"))
	if err := a.Compatible(NewRequirements(req("k", opDNE)), nil); err != nil {
		t.Fatalf("NotIn vs DoesNotExist: %v", err)
	}
}

func TestPodRequirements(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"beta.kubernetes.io/arch": "arm64"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: opIn, Values: []string{"a", "b"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: opIn, Values: []string{"c"}}}},
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: opIn, Values: []string{"a"}}}}},
				{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: opIn, Values: []string{"b"}}}}},
			},
		}},
	}}
	strict := PodRequirements(pod, true)
	if got := strict.Get("kubernetes.io/arch"); got.Operator() != opIn || got.Values()[0] != "arm64" {
		t.Fatalf("normalised nodeSelector: %s", got)
	}
	if got := strict.Get("zone"); len(got.Values()) != 2 {
		t.Fatalf("strict uses first required term only: %s", got)
	}
	all := PodRequirements(pod, false)
	if got := all.Get("zone"); len(got.Values()) != 1 || got.Values()[0] != "b" {
		t.Fatalf("heaviest preference is required first: %s", got)
	}
}

func TestNodeSelectorRoundTrip(t *testing.T) {
	two := 2
	r := NewRequirements(
		NewRequirementWithMinValues("family", opIn, &two, "c5", "m5"),
		req("cpu", opGt, "2").Intersect(req("cpu", opLt, "17")),
	)
	out := r.NodeSelectorRequirements()
	back := RequirementsFromNodePool(out)
	for _, v := range []string{"2", "3", "16", "17"} {
		if back.Get("cpu").Has(v) != r.Get("cpu").Has(v) {
			t.Fatalf("cpu %s differs after round trip: %v", v, out)
		}
	}
	if m := back.Get("family").MinValues; m == nil || *m != 2 {
		t.Fatalf("minValues lost: %v", out)
	}
}
