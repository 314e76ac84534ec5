package disruption

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// makeStatic turns the fixture's pool static with replicas, its budgets
// and node limit ("" for none).
func makeStatic(f *fixture, replicas int64, budget, limit string) {
	np := f.pool()
	np.Spec.Replicas = &replicas
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
	if limit != "" {
		np.Spec.Limits = karpv1.Limits{wellknown.ResourceNodes: resourceMust(limit)}
	}
}

func drifted(f *fixture, name string) {
	f.claim(name).SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now))
}

// Ported from Karpenter v1.14.1's StaticDrift suite
// (pkg/controllers/disruption/staticdrift_test.go): one command replaces
// as many drifted nodes as the budget and limits.nodes allow, each by a
// claim from the pool's template.
func TestStaticDrift(t *testing.T) {
	cases := []struct {
		name     string
		replicas int64
		budget   string
		limit    string
		nodes    int
		drift    int // the first this many nodes are drifted
		extra    func(*fixture)
		want     int    // candidates of the command (0: none)
		blocked  string // a Blocked note's prefix, when none
	}{
		{name: "budget in nodes", replicas: 5, budget: "2", nodes: 5, drift: 5, want: 2},
		{name: "budget in percent", replicas: 5, budget: "20%", nodes: 5, drift: 5, want: 1},
		{name: "budget zero", replicas: 5, budget: "0", nodes: 5, drift: 5},
		{name: "no room under the node limit", replicas: 5, budget: "100%", limit: "5", nodes: 5, drift: 5, blocked: "static nodepool default is at its node limit (5)"},
		{name: "partly within the node limit", replicas: 5, budget: "100%", limit: "7", nodes: 5, drift: 5, want: 2},
		{name: "no node limit", replicas: 3, budget: "100%", nodes: 3, drift: 2, want: 2},
		{name: "only drifted nodes", replicas: 4, budget: "100%", nodes: 4, drift: 1, want: 1},
		{name: "overscaled: scale-down first", replicas: 1, budget: "100%", nodes: 2, drift: 2, blocked: "static nodepool default has 2 of 1 replicas: drift waits for the scale-down"},
		{name: "zero replicas", replicas: 0, budget: "100%", nodes: 1, drift: 1, blocked: "static nodepool default has 1 of 0 replicas"},
		{
			// Karpenter drifts a pool still scaling up; Karpless waits for
			// the provisioner to fill it (see replaceStatic).
			name: "underscaled: scale-up first", replicas: 5, budget: "100%", limit: "5", nodes: 2, drift: 2,
			blocked: "static nodepool default has 2 of 5 replicas: drift waits for the scale-up",
		},
		{
			name: "do-not-disrupt node is no candidate", replicas: 2, budget: "100%", nodes: 2, drift: 2, want: 1,
			extra: func(f *fixture) {
				f.nodeObj("n1").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			makeStatic(f, tc.replicas, tc.budget, tc.limit)
			for i := range tc.nodes {
				name := fmt.Sprintf("n%d", i+1)
				f.node(name, "m.large", "test-1a", wellknown.CapacityTypeOnDemand)
				f.pod("p"+name, name, "500m", "1Gi")
				if i < tc.drift {
					drifted(f, name)
				}
			}
			if tc.extra != nil {
				tc.extra(f)
			}
			p := Compute(f.input())
			if tc.want == 0 {
				if p.Command != nil {
					t.Fatalf("command %s, want none", p.Command)
				}
				if tc.blocked != "" && (len(p.Blocked) == 0 || !strings.HasPrefix(p.Blocked[0].Message, tc.blocked)) {
					t.Errorf("blocked %v, want %q", p.Blocked, tc.blocked)
				}
				return
			}
			cmd := mustCommand(t, p, Drift)
			if len(cmd.Candidates) != tc.want || len(cmd.Replacements) != tc.want {
				t.Fatalf("%s: %d candidates, %d replacements; want %d of each", cmd, len(cmd.Candidates), len(cmd.Replacements), tc.want)
			}
			for _, r := range cmd.Replacements {
				// From the template: the pool's types, no pods, whatever
				// the candidates' pods are.
				if r.NodePool != "default" || len(r.Pods) != 0 || len(r.InstanceTypes) != len(f.types) {
					t.Errorf("replacement %+v is not the pool's template claim", r)
				}
			}
			// Validation (as a later pass would do) agrees.
			rec := NewRecord(cmd, f.now)
			again, why := Validate(f.input(), rec)
			if again == nil || len(again.Candidates) != tc.want {
				t.Errorf("validation: %v %s", again, why)
			}
		})
	}
}

// Static nodes are never emptied nor consolidated, however idle.
func TestStaticNodesAreNotConsolidated(t *testing.T) {
	f := newFixture(t)
	makeStatic(f, 3, "100%", "")
	f.node("big1", "m.4xlarge", "test-1a", wellknown.CapacityTypeOnDemand)
	f.node("big2", "m.4xlarge", "test-1a", wellknown.CapacityTypeOnDemand)
	f.node("empty", "m.4xlarge", "test-1a", wellknown.CapacityTypeOnDemand)
	f.pod("small1", "big1", "100m", "128Mi")
	f.pod("small2", "big2", "100m", "128Mi")
	for _, n := range []string{"big1", "big2", "empty"} {
		f.claim(n).SetCondition(karpv1.ConditionTypeEmpty, metav1.ConditionTrue, "Empty", "", metav1.NewTime(f.now))
	}
	p := Compute(f.input())
	if p.Command != nil {
		t.Fatalf("command %s on a static pool", p.Command)
	}
	for _, m := range []Method{Emptiness, MultiNodeConsolidation, SingleNodeConsolidation} {
		if p.Eligible[m] != 0 {
			t.Errorf("%s has %d eligible static candidates", m, p.Eligible[m])
		}
	}
	// The same nodes in a dynamic pool are consolidated: the fixture is
	// not what keeps them.
	f.pool().Spec.Replicas = nil
	if p := Compute(f.input()); p.Command == nil {
		t.Error("the dynamic pool's idle nodes were not consolidated either")
	}
}

// A drift command in flight counts: its candidate is being replaced, its
// replacement is active, and the pool is at its size (not over it).
func TestStaticDriftOneCommandAtATimePerPool(t *testing.T) {
	f := newFixture(t)
	makeStatic(f, 2, "1", "")
	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	f.node("n1", "m.large", "test-1a", wellknown.CapacityTypeOnDemand)
	f.node("n2", "m.large", "test-1a", wellknown.CapacityTypeOnDemand)
	drifted(f, "n1")
	drifted(f, "n2")
	cmd := mustCommand(t, Compute(f.input()), Drift)
	rec := NewRecord(cmd, f.now)
	rec.Phase = Executing
	rec.Replacements = []string{ReplacementName("default", rec.ID, 0)}
	f.record(rec)
	repl := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: rec.Replacements[0], Labels: map[string]string{wellknown.NodePoolLabel: "default"},
		Annotations: map[string]string{ReplacementAnnotation: rec.ID}}}
	repl.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}
	f.snap.NodeClaims = append(f.snap.NodeClaims, repl)
	if p := Compute(f.input()); p.Command != nil {
		t.Errorf("second command %s while the budget of 1 is taken", p.Command)
	}
	// With budget to spare it still waits: the pool has a node more than
	// its replicas until the first candidate goes.
	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	p := Compute(f.input())
	if p.Command != nil {
		t.Fatalf("second command %s while the first is in flight", p.Command)
	}
	if len(p.Blocked) == 0 || !strings.Contains(p.Blocked[0].Message, "being replaced: the next drift waits") {
		t.Errorf("blocked %v", p.Blocked)
	}
}
