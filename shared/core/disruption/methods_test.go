package disruption

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestEmptinessDeletesEmptyNodesWithinBudget(t *testing.T) {
	f := newFixture(t)
	f.node("busy", "m.xlarge", "test-1a", "on-demand")
	f.node("empty-1", "m.xlarge", "test-1a", "on-demand")
	f.node("empty-2", "m.large", "test-1b", "on-demand")
	f.pod("web", "busy", "3", "1Gi")
	// A DaemonSet pod does not make a node non-empty.
	f.pod("ds", "empty-1", "100m", "64Mi", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: new(true)}}
	})
	cmd := mustCommand(t, Compute(f.input()), Emptiness)
	if got := names(cmd.Candidates); got != "empty-1,empty-2" {
		t.Fatalf("candidates %s", got)
	}
	if cmd.Decision() != "delete" || !near(cmd.Savings(), 0.30) {
		t.Fatalf("decision %s savings %.2f", cmd.Decision(), cmd.Savings())
	}
	t.Logf("emptiness: $%.2f/h -> $%.2f/h", cmd.PriceBefore, cmd.PriceAfter)

	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	cmd = mustCommand(t, Compute(f.input()), Emptiness)
	if len(cmd.Candidates) != 1 || cmd.Candidates[0].Name() != "empty-1" {
		t.Fatalf("budget 1: got %s, want the dearer empty node", names(cmd.Candidates))
	}
}

func TestEmptinessNeedsConsolidatableAndConsolidateAfter(t *testing.T) {
	f := newFixture(t)
	nc := f.node("empty", "m.large", "test-1a", "on-demand")
	nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
	if p := Compute(f.input()); p.Command != nil {
		t.Fatalf("not consolidatable yet, got %s", p.Command)
	}
	nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "", "", metav1.NewTime(f.now))
	f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	if p := Compute(f.input()); p.Command != nil {
		t.Fatalf("consolidateAfter Never, got %s", p.Command)
	}
}

func TestSingleNodeConsolidationDeletes(t *testing.T) {
	f := newFixture(t)
	onlyType(f, "m.2xlarge")
	f.node("a", "m.2xlarge", "test-1a", "on-demand")
	f.node("b", "m.2xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "2", "1Gi")
	f.pod("p2", "b", "1", "1Gi")
	p := Compute(f.input())
	cmd := p.Command
	if cmd == nil || cmd.Decision() != "delete" || len(cmd.Candidates) != 1 {
		t.Fatalf("want one node deleted, got %v (unconsolidatable %v)", cmd, p.Unconsolidatable)
	}
	t.Logf("%s: $%.2f/h before, $%.2f/h after the command, saving $%.2f/h (cluster $0.80/h -> $%.2f/h)",
		cmd.Method, cmd.PriceBefore, cmd.PriceAfter, cmd.Savings(), 0.80-cmd.Savings())
	if cmd.Method != SingleNodeConsolidation || !near(cmd.Savings(), 0.40) {
		t.Fatalf("savings %.2f", cmd.Savings())
	}
}

func TestSingleNodeConsolidationReplacesWithCheaper(t *testing.T) {
	f := newFixture(t)
	f.node("big", "m.4xlarge", "test-1a", "on-demand")
	f.pod("p1", "big", "1", "2Gi")
	f.pod("p2", "big", "500m", "1Gi")
	cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
	if cmd.Decision() != "replace" {
		t.Fatalf("want a replacement, got %s", cmd)
	}
	r := cmd.Replacements[0]
	for _, it := range r.InstanceTypes {
		if p := cheapestAllowed(it, reqGet(r, wellknown.ZoneLabel), reqGet(r, wellknown.CapacityTypeLabel)); p >= 0.80 {
			t.Errorf("replacement option %s costs %.2f, not cheaper", it.Name, p)
		}
	}
	if cmd.PriceAfter != 0.10 {
		t.Fatalf("want m.large at $0.10/h, got %.2f", cmd.PriceAfter)
	}
	t.Logf("replace: $%.2f/h -> $%.2f/h (saving $%.2f/h)", cmd.PriceBefore, cmd.PriceAfter, cmd.Savings())
}

func TestOnDemandReplacementNarrowsToSpot(t *testing.T) {
	f := newFixture(t)
	allowSpot(f.pool())
	f.node("big", "m.2xlarge", "test-1a", "on-demand")
	f.pod("p1", "big", "3", "2Gi")
	cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
	r := cmd.Replacements[0]
	ct := reqGet(r, wellknown.CapacityTypeLabel)
	if !ct.Has("spot") || ct.Has("on-demand") {
		t.Fatalf("replacement capacity type %s, want spot only", ct)
	}
	t.Logf("on-demand -> spot: $%.3f/h -> $%.3f/h", cmd.PriceBefore, cmd.PriceAfter)
}

func TestSpotToSpot(t *testing.T) {
	f := newFixture(t)
	allowSpot(f.pool())
	f.node("spot", "m.2xlarge", "test-1a", "spot")
	f.pod("p1", "spot", "3", "2Gi")
	p := Compute(f.input())
	if p.Command != nil {
		t.Fatalf("spot-to-spot is off, got %s", p.Command)
	}
	if len(p.Unconsolidatable) != 1 || !strings.Contains(p.Unconsolidatable[0].Message, "SpotToSpotConsolidation is disabled") {
		t.Fatalf("notes %v", p.Unconsolidatable)
	}
	f.opts.SpotToSpotConsolidation = true
	p = Compute(f.input())
	if p.Command != nil || len(p.Unconsolidatable) != 1 || !strings.Contains(p.Unconsolidatable[0].Message, "requires 15 cheaper") {
		t.Fatalf("only 1 cheaper type: command %v notes %v", p.Command, p.Unconsolidatable)
	}
	f.types = manyTypes()
	cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
	r := cmd.Replacements[0]
	if len(r.InstanceTypes) != 15 {
		t.Fatalf("spot-to-spot keeps the 15 cheapest, got %d", len(r.InstanceTypes))
	}
	if ct := reqGet(r, wellknown.CapacityTypeLabel); ct.Has("on-demand") {
		t.Fatalf("capacity type %s", ct)
	}
	t.Logf("spot -> spot: $%.3f/h -> $%.3f/h", cmd.PriceBefore, cmd.PriceAfter)
}

func TestMultiNodeConsolidationSavesMoney(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		f.node(n, "m.xlarge", "test-1a", "on-demand")
		f.pod("p-"+n, n, "1", "2Gi")
	}
	cmd := mustCommand(t, Compute(f.input()), MultiNodeConsolidation)
	if len(cmd.Candidates) < 3 {
		t.Fatalf("want at least 3 nodes consolidated, got %s", cmd)
	}
	before := 0.80
	after := before - cmd.Savings()
	t.Logf("multi-node: %s; cluster $%.2f/h -> $%.2f/h", cmd, before, after)
	if cmd.Savings() <= 0.39 {
		t.Fatalf("savings %.2f", cmd.Savings())
	}
}

func TestMultiNodeDoesNotReplaceWithACandidateType(t *testing.T) {
	// Three nodes whose pods fit one m.2xlarge: the replacement must not be
	// as dear as a candidate's own type (that would just be a deletion).
	f := newFixture(t)
	f.node("x1", "m.2xlarge", "test-1a", "on-demand")
	f.node("x2", "m.2xlarge", "test-1a", "on-demand")
	f.node("s1", "m.large", "test-1a", "on-demand")
	f.pod("p1", "x1", "3", "2Gi")
	f.pod("p2", "x2", "3", "2Gi")
	f.pod("p3", "s1", "1", "1Gi")
	// Multi-node would replace x1+x2 by one m.2xlarge; that is the same as
	// deleting one of them, which single-node consolidation then does.
	cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
	if cmd.Decision() != "delete" || !strings.HasPrefix(cmd.Candidates[0].Name(), "x") {
		t.Fatalf("got %s", cmd)
	}
	t.Logf("%s", cmd)
}

func TestPodsMustFitOrNothingHappens(t *testing.T) {
	f := newFixture(t)
	f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m.xlarge"}})
	f.node("a", "m.xlarge", "test-1a", "on-demand")
	f.node("b", "m.xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "3", "2Gi")
	f.pod("p2", "b", "3", "2Gi")
	p := Compute(f.input())
	if p.Command != nil {
		t.Fatalf("nothing fits elsewhere and nothing is cheaper, got %s", p.Command)
	}
	if len(p.Unconsolidatable) != 2 {
		t.Fatalf("want both nodes noted unconsolidatable, got %v", p.Unconsolidatable)
	}
}

func TestCandidatePodsNeverLandOnUninitializedNodes(t *testing.T) {
	f := newFixture(t)
	f.node("a", "m.xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "1", "1Gi")
	nc := f.node("fresh", "m.xlarge", "test-1a", "on-demand")
	nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
	f.pod("p2", "fresh", "100m", "64Mi")
	p := Compute(f.input())
	if p.Command != nil && len(p.Command.Replacements) == 0 {
		t.Fatalf("deleting a would rely on an uninitialized node: %s", p.Command)
	}
}

func TestPendingPodsKeepTheirRoom(t *testing.T) {
	// Two half-used nodes would merge, but a pending pod needs the room.
	f := newFixture(t)
	f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m.xlarge"}})
	f.node("a", "m.xlarge", "test-1a", "on-demand")
	f.node("b", "m.xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "2", "1Gi")
	f.pod("p2", "b", "1500m", "1Gi")
	if p := Compute(f.input()); p.Command == nil {
		t.Fatalf("without pending pods the nodes merge")
	}
	f.pod("pending", "", "2", "1Gi")
	if p := Compute(f.input()); p.Command != nil && p.Command.Decision() == "delete" {
		t.Fatalf("a pending pod needs the room, got %s", p.Command)
	}
}

func TestEligibility(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(f *fixture)
		blocked string // substring of the Blocked note, "" for a candidate
	}{
		{"plain node is a candidate", func(f *fixture) {}, ""},
		{"node annotation", func(f *fixture) {
			f.nodeObj("a").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}, "do-not-disrupt"},
		{"claim annotation", func(f *fixture) {
			f.claim("a").Annotations[wellknown.DoNotDisruptAnnotation] = "true"
		}, "do-not-disrupt"},
		{"do-not-disrupt pod", func(f *fixture) {
			f.snap.Pods[0].Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}, `pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/web)`},
		{"do-not-disrupt duration still running", func(f *fixture) {
			f.snap.Pods[0].Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "4h"}
		}, "do-not-disrupt"},
		{"do-not-disrupt duration elapsed", func(f *fixture) {
			f.snap.Pods[0].Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "1h"}
		}, ""},
		{"invalid do-not-disrupt is ignored", func(f *fixture) {
			f.snap.Pods[0].Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "soon"}
		}, ""},
		{"do-not-disrupt daemon pod blocks too", func(f *fixture) {
			f.pod("ds", "a", "10m", "10Mi", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: new(true)}}
				p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			})
		}, "do-not-disrupt"},
		{"PDB allowing no disruption", func(f *fixture) { f.pdb("web", 0, map[string]string{"app": "web"}) }, "pdb prevents pod evictions"},
		{"PDB allowing one", func(f *fixture) { f.pdb("web", 1, map[string]string{"app": "web"}) }, ""},
		{"two PDBs on one pod", func(f *fixture) {
			f.pdb("web", 1, map[string]string{"app": "web"})
			f.pdb("all", 5, map[string]string{})
		}, "multiple PDBs"},
		{"PDB in another namespace", func(f *fixture) {
			f.pdb("web", 0, map[string]string{"app": "web"}, func(p *policyv1.PodDisruptionBudget) { p.Namespace = "other" })
		}, ""},
		{"PDB lets unhealthy pods go", func(f *fixture) {
			f.pdb("web", 0, map[string]string{"app": "web"}, func(p *policyv1.PodDisruptionBudget) {
				p.Spec.UnhealthyPodEvictionPolicy = new(policyv1.AlwaysAllow)
			})
			f.snap.Pods[0].Status.Conditions[1].Status = corev1.ConditionFalse
		}, ""},
		{"pod tolerating the disrupted taint is not evicted, so its PDB does not matter", func(f *fixture) {
			f.pdb("web", 0, map[string]string{"app": "web"})
			f.snap.Pods[0].Spec.Tolerations = []corev1.Toleration{{Key: wellknown.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
		}, ""},
		{"nodepool gone", func(f *fixture) { f.snap.NodePools[0].Name = "other" }, "NodePool not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.node("a", "m.xlarge", "test-1a", "on-demand")
			f.pod("web", "a", "1", "1Gi")
			c.setup(f)
			cl := newCluster(f.input())
			cand, why := cl.candidate(f.claim("a"), false, nil)
			if c.blocked == "" {
				if cand == nil {
					t.Fatalf("blocked: %s", why)
				}
				return
			}
			if cand != nil || !strings.Contains(why, c.blocked) {
				t.Fatalf("got candidate=%v why=%q, want blocked by %q", cand != nil, why, c.blocked)
			}
			// And the plan reports it.
			found := false
			for _, n := range Compute(f.input()).Blocked {
				found = found || (n.NodeClaim == "a" && strings.Contains(strings.ToLower(n.Message), strings.ToLower(c.blocked)))
			}
			if !found {
				t.Fatalf("plan does not report the block")
			}
		})
	}
}

func TestDriftTakesBlockedPodsWhenTerminationGracePeriodIsSet(t *testing.T) {
	f := newFixture(t)
	nc := f.node("old", "m.xlarge", "test-1a", "on-demand")
	f.pod("web", "old", "1", "1Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"} })
	nc.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now))
	if p := Compute(f.input()); p.Command != nil {
		t.Fatalf("do-not-disrupt blocks drift without a grace period: %s", p.Command)
	}
	nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
	cmd := mustCommand(t, Compute(f.input()), Drift)
	if len(cmd.Replacements) != 0 {
		// The do-not-disrupt pod is not currently reschedulable: nothing to launch for it.
		t.Fatalf("replacements %d", len(cmd.Replacements))
	}
}

func TestDriftReplacesAndOrders(t *testing.T) {
	f := newFixture(t)
	older := f.node("older", "m.xlarge", "test-1a", "on-demand")
	newer := f.node("newer", "m.xlarge", "test-1a", "on-demand")
	f.pod("a", "older", "3", "1Gi")
	f.pod("b", "newer", "3", "1Gi")
	older.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now.Add(-time.Hour)))
	newer.SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now))
	cmd := mustCommand(t, Compute(f.input()), Drift)
	if cmd.Candidates[0].Name() != "older" || len(cmd.Replacements) != 1 {
		t.Fatalf("got %s", cmd)
	}
	t.Logf("drift: $%.2f/h -> $%.2f/h", cmd.PriceBefore, cmd.PriceAfter)
	// Budget for Drifted at 0 stops drift; consolidation is not blocked by it.
	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}, {Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}}
	p := Compute(f.input())
	if p.Command != nil && p.Command.Method == Drift {
		t.Fatalf("drift budget 0, got %s", p.Command)
	}
	if p.Budgets[karpv1.DisruptionReasonDrifted]["default"].Left != 0 {
		t.Fatalf("budgets %+v", p.Budgets)
	}
}

func TestBudgetZeroInScheduleWindowBlocksConsolidation(t *testing.T) {
	f := newFixture(t)
	f.node("a", "m.2xlarge", "test-1a", "on-demand")
	f.node("b", "m.2xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "1", "1Gi")
	f.pod("p2", "b", "1", "1Gi")
	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{
		{Nodes: "10"},
		{Nodes: "0", Schedule: new("0 9 * * 1-5"), Duration: &metav1.Duration{Duration: 8 * time.Hour}},
	}
	if p := Compute(f.input()); p.Command != nil {
		t.Fatalf("10:30 on a Monday is inside the 0 window, got %s", p.Command)
	}
	f.now = time.Date(2026, 3, 7, 10, 30, 0, 0, time.UTC) // Saturday
	if p := Compute(f.input()); p.Command == nil {
		t.Fatalf("Saturday is outside the window, want a command")
	}
}

func TestBusyNodesCountAgainstBudgets(t *testing.T) {
	f := newFixture(t)
	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	f.node("e1", "m.large", "test-1a", "on-demand")
	f.node("e2", "m.large", "test-1a", "on-demand")
	f.record(&Record{ID: "abc", Method: Emptiness, Phase: Proposed, ProposedAt: f.now, Candidates: []string{"e1"}})
	p := Compute(f.input())
	if p.Command != nil {
		t.Fatalf("e1 is in a command and uses the budget of 1, got %s", p.Command)
	}
}

func TestValidate(t *testing.T) {
	f := newFixture(t)
	f.node("a", "m.2xlarge", "test-1a", "on-demand")
	f.node("b", "m.2xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "2", "1Gi")
	f.pod("p2", "b", "1", "1Gi")
	cmd := Compute(f.input()).Command
	if cmd == nil {
		t.Fatal("no command")
	}
	rec := NewRecord(cmd, f.now)
	f.record(rec)
	f.now = f.now.Add(20 * time.Second)
	if v, why := Validate(f.input(), rec); v == nil {
		t.Fatalf("still valid, got %s", why)
	}
	// A pod arrives on the other node and the candidate's pods no longer fit.
	other := "a"
	if rec.Candidates[0] == "a" {
		other = "b"
	}
	f.pod("late", other, "6", "1Gi")
	if v, why := Validate(f.input(), rec); v != nil || why == "" {
		t.Fatalf("want invalid, got %v", v)
	}
}

func TestValidateEmptinessKeepsTheStillEmpty(t *testing.T) {
	f := newFixture(t)
	f.node("e1", "m.large", "test-1a", "on-demand")
	f.node("e2", "m.large", "test-1a", "on-demand")
	cmd := Compute(f.input()).Command
	rec := NewRecord(cmd, f.now)
	f.record(rec)
	f.pod("late", "e2", "1", "1Gi")
	v, why := Validate(f.input(), rec)
	if v == nil || names(v.Candidates) != "e1" {
		t.Fatalf("want only e1, got %v %s", v, why)
	}
}

func TestExpirations(t *testing.T) {
	f := newFixture(t)
	a := f.node("a", "m.large", "test-1a", "on-demand")
	f.node("b", "m.large", "test-1a", "on-demand")
	a.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h")
	got := Expirations(f.input())
	if len(got) != 1 || got[0].NodeClaim.Name != "a" {
		t.Fatalf("got %v", got)
	}
	a.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
	if got := Expirations(f.input()); len(got) != 0 {
		t.Fatalf("Never expires, got %v", got)
	}
}

func reqGet(n *scheduling.NewNodeClaim, key string) *scheduling.Requirement {
	return scheduling.RequirementsFromNodePool(n.Requirements).Get(key)
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// onlyType restricts the NodePool to one instance type.
func onlyType(f *fixture, name string) {
	f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{name}})
}

func TestSingleNodeResumesWhereItStopped(t *testing.T) {
	f := newFixture(t)
	onlyType(f, "m.xlarge")
	for _, n := range []string{"a", "b", "c"} {
		f.node(n, "m.xlarge", "test-1a", "on-demand")
		f.pod("p-"+n, n, "3", "2Gi")
	}
	run := func(resume string) *Plan {
		calls := 0
		f.opts.Stop = func() bool { calls++; return calls > 1 } // one candidate, then stop
		f.opts.ResumeSingleNodeAfter = resume
		c := newCluster(f.input())
		cands, _ := c.candidates(SingleNodeConsolidation, nil)
		plan := &Plan{}
		if cmd := c.newWorld("").singleNode(cands, map[string]int{"default": 3}, plan); cmd != nil {
			t.Fatalf("nothing consolidates, got %s", cmd)
		}
		return plan
	}
	p := run("")
	if !p.Stopped || p.ResumeSingleNodeAfter == "" || len(p.Unconsolidatable) != 1 {
		t.Fatalf("want a stop after one candidate, got %+v", p)
	}
	first := p.ResumeSingleNodeAfter
	p = run(first)
	if len(p.Unconsolidatable) != 1 || p.Unconsolidatable[0].NodeClaim == first || p.ResumeSingleNodeAfter == first {
		t.Fatalf("resumed at %v, want after %s", p.Unconsolidatable, first)
	}
}

func TestPrefilterRulesOutOnlyHopelessCandidates(t *testing.T) {
	f := newFixture(t)
	onlyType(f, "m.xlarge")
	f.node("a", "m.xlarge", "test-1a", "on-demand")
	f.node("b", "m.xlarge", "test-1a", "on-demand")
	f.pod("p1", "a", "3", "2Gi")
	f.pod("p2", "b", "3", "2Gi")
	in := f.input()
	c := newCluster(in)
	w := c.newWorld("")
	rm := w.room()
	cands, _ := c.candidates(SingleNodeConsolidation, nil)
	for _, cn := range cands {
		why := rm.hopeless(cn)
		cmd, _ := w.consolidate(SingleNodeConsolidation, []*Candidate{cn})
		if why != "" && cmd != nil {
			t.Fatalf("pruned %s but it consolidates: %s", cn.Name(), cmd)
		}
		if why == "" {
			t.Fatalf("%s: 3 cpu fit nowhere else and nothing cheaper than m.xlarge exists: want pruned", cn.Name())
		}
	}
	// Free room on b makes a's pod movable: no longer hopeless.
	f.snap.Pods[1].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resourceMust("500m")
	in = f.input()
	c = newCluster(in)
	w = c.newWorld("")
	cands, _ = c.candidates(SingleNodeConsolidation, nil)
	if why := w.room().hopeless(cands[0]); why != "" {
		t.Fatalf("a can move to b: %s", why)
	}
}

func TestReplacementIsNominatedWhileItsCandidatesRemain(t *testing.T) {
	f := newFixture(t)
	f.node("old", "m.xlarge", "test-1a", "on-demand")
	repl := f.node("new", "m.large", "test-1a", "on-demand")
	f.pod("web", "old", "1", "1Gi")
	rec := &Record{ID: "cmd9", Method: SingleNodeConsolidation, Phase: Executing, ProposedAt: f.now, Candidates: []string{"old"}, Replacements: []string{"new"}}
	f.record(rec)
	repl.Annotations[ReplacementAnnotation] = "cmd9"
	now := metav1.NewTime(f.now)
	f.claim("old").DeletionTimestamp = &now // being drained
	if p := Compute(f.input()); p.Command != nil {
		t.Fatalf("the empty replacement must wait for the drained pods: %s", p.Command)
	}
	// Once the candidate is gone, the replacement is an ordinary node.
	f.snap.NodeClaims = slices.DeleteFunc(f.snap.NodeClaims, func(nc *karpv1.NodeClaim) bool { return nc.Name == "old" })
	f.snap.Pods = nil
	if p := Compute(f.input()); p.Command == nil || p.Command.Candidates[0].Name() != "new" {
		t.Fatalf("want the empty node deleted, got %v", p.Command)
	}
}

// TestPrefilterIsSound draws random clusters (capacity types, spot-to-spot
// on or off, few or many cheaper types, pods of every size) and checks that
// every candidate the pre-filter rules out also fails the simulation: the
// pre-filter may only save work, never change a decision.
func TestPrefilterIsSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	sizes := []string{"m.large", "m.xlarge", "m.2xlarge", "m.4xlarge"}
	pruned, total := 0, 0
	for round := range 300 {
		f := newFixture(t)
		if rng.IntN(2) == 0 {
			f.types = manyTypes()
		}
		if rng.IntN(3) > 0 {
			allowSpot(f.pool())
		}
		f.opts.SpotToSpotConsolidation = rng.IntN(2) == 0
		for i := range 2 + rng.IntN(4) {
			ct := wellknown.CapacityTypeOnDemand
			if rng.IntN(2) == 0 {
				ct = wellknown.CapacityTypeSpot
			}
			name := fmt.Sprintf("n%d", i)
			f.node(name, sizes[rng.IntN(len(sizes))], zones[rng.IntN(len(zones))], ct)
			for j := range 1 + rng.IntN(3) {
				f.pod(fmt.Sprintf("p%d-%d", i, j), name, fmt.Sprintf("%dm", 250*(1+rng.IntN(12))), fmt.Sprintf("%dGi", 1+rng.IntN(6)))
			}
		}
		c := newCluster(f.input())
		w := c.newWorld("")
		rm := w.room()
		cands, _ := c.candidates(SingleNodeConsolidation, nil)
		for _, cn := range cands {
			total++
			why := rm.hopeless(cn)
			if why == "" {
				continue
			}
			pruned++
			if cmd, _ := w.consolidate(SingleNodeConsolidation, []*Candidate{cn}); cmd != nil {
				t.Fatalf("round %d: pruned %s (%s, %s: %q) but it consolidates: %s", round, cn.Name(), cn.CapacityType, cn.InstanceType.Name, why, cmd)
			}
		}
	}
	if pruned == 0 || pruned == total {
		t.Fatalf("pruned %d of %d candidates: the draw does not exercise both outcomes", pruned, total)
	}
	t.Logf("pruned %d of %d candidates, each confirmed by the simulation", pruned, total)
}

func TestPrefilterKnowsTheSpotToSpotRule(t *testing.T) {
	f := newFixture(t)
	allowSpot(f.pool())
	f.opts.SpotToSpotConsolidation = true
	f.node("a", "m.2xlarge", "test-1a", "spot")
	f.node("b", "m.2xlarge", "test-1a", "spot")
	f.pod("pa", "a", "7", "2Gi")
	f.pod("pb", "b", "3", "2Gi")
	c := newCluster(f.input())
	cands, _ := c.candidates(SingleNodeConsolidation, nil)
	var b *Candidate
	for _, cn := range cands {
		if cn.Node.Name == f.nodeObj("b").Name {
			b = cn
		}
	}
	if b == nil {
		t.Fatalf("no candidate for b in %s", names(cands))
	}
	// b's 3 cpu fit nowhere else; only m.xlarge is cheaper on spot.
	if why := c.newWorld("").room().hopeless(b); !strings.Contains(why, "requires 15 cheaper instance type options") || !strings.Contains(why, "got 1") {
		t.Fatalf("want the spot-to-spot rule, got %q", why)
	}
	f.types = manyTypes()
	c = newCluster(f.input())
	if why := c.newWorld("").room().hopeless(b); why != "" {
		t.Fatalf("20 cheaper spot types: want a simulation, got %q", why)
	}
}

func TestPrefilterCountsTheRoomLeftNotJustOneSlot(t *testing.T) {
	f := newFixture(t)
	onlyType(f, "m.xlarge")
	// a and b are full; c has room for one 1-cpu pod. Each of a's pods
	// fits on c alone, but not all three: a needs a new m.xlarge, which is
	// not cheaper.
	for _, n := range []string{"a", "b"} {
		f.node(n, "m.xlarge", "test-1a", "on-demand")
		for i := range 3 {
			f.pod(fmt.Sprintf("%s-%d", n, i), n, "1", "1Gi")
		}
	}
	f.node("c", "m.xlarge", "test-1a", "on-demand")
	f.pod("c-0", "c", "3", "1Gi")
	c := newCluster(f.input())
	w := c.newWorld("")
	cands, _ := c.candidates(SingleNodeConsolidation, nil)
	for _, cn := range cands {
		why := w.room().hopeless(cn)
		if why == "" {
			t.Errorf("%s: want pruned, the room left cannot take its pods", cn.Name())
		}
		if cmd, _ := w.consolidate(SingleNodeConsolidation, []*Candidate{cn}); cmd != nil {
			t.Fatalf("%s consolidates: %s", cn.Name(), cmd)
		}
	}
}

// TestBudgetsAllow: a command about to start is checked against budgets
// counted on a fresh read: a node another function began deleting since
// the snapshot takes a budget slot too.
func TestBudgetsAllow(t *testing.T) {
	f := newFixture(t)
	f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "2"}}
	for _, n := range []string{"a", "b", "c", "d"} {
		f.node(n, "m.large", "test-1a", "on-demand")
	}
	rec := &Record{ID: "cmd", Method: SingleNodeConsolidation, Reason: karpv1.DisruptionReasonUnderutilized, Phase: Proposed, Candidates: []string{"a"}}
	if why := BudgetsAllow(f.input(), rec, []string{"a"}); why != "" {
		t.Fatalf("one of four with a budget of two: %s", why)
	}
	// Two others start deleting (an interruption, an expiry) meanwhile.
	now := metav1.NewTime(f.now)
	f.claim("c").DeletionTimestamp = &now
	f.claim("d").DeletionTimestamp = &now
	if why := BudgetsAllow(f.input(), rec, []string{"a"}); why == "" {
		t.Fatal("two nodes deleting and a budget of two: the command must wait")
	}
}

// TestPairConsolidation: two small nodes neither of which can go alone (no
// room elsewhere, nothing cheaper holds its pod) but whose pods fit one
// node cheaper than both, behind a first candidate that spoils every
// prefix Karpenter's multi-node search tries: the pair search finds them.
func TestPairConsolidation(t *testing.T) {
	f := newFixture(t)
	f.types = append(baseTypes(), mkType("r.large", 2, 16, 0.13))
	f.node("a", "m.xlarge", "test-1a", "on-demand")
	f.node("b", "m.large", "test-1a", "on-demand")
	f.node("c", "m.large", "test-1a", "on-demand")
	f.pod("a1", "a", "3900m", "1Gi")
	f.pod("b1", "b", "500m", "5Gi")
	f.pod("c1", "c", "500m", "5Gi")
	plan := Compute(f.input())
	cmd := plan.Command
	if cmd == nil || cmd.Method != MultiNodeConsolidation || names(cmd.Candidates) != "b,c" {
		t.Fatalf("want b and c replaced together, got %v (unconsolidatable %v)", cmd, plan.Unconsolidatable)
	}
	if it, _ := cmd.Replacements[0].CheapestOffering(); it.Name != "r.large" || cmd.PriceAfter >= cmd.PriceBefore {
		t.Fatalf("replacement %s $%.2f for $%.2f", it.Name, cmd.PriceAfter, cmd.PriceBefore)
	}
	// The proposal validates as a multi-node consolidation.
	rec := NewRecord(cmd, f.now)
	f.record(rec)
	f.now = f.now.Add(20 * time.Second)
	if v, why := Validate(f.input(), rec); v == nil {
		t.Fatalf("the pair's proposal does not validate: %s", why)
	}
}
