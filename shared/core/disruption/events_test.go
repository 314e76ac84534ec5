package disruption

import (
	"testing"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestConsolidationEventWording: the ConsolidationCandidate and
// ConsolidationRejected messages are Karpenter v1.14.1's
// (disruption/events and Command.StringForNode), with its failure
// categories.
func TestConsolidationEventWording(t *testing.T) {
	f := newFixture(t)
	f.node("n", "m.4xlarge", zones[0], wellknown.CapacityTypeOnDemand)
	f.pod("p", "n", "1", "1Gi")
	cmd, rec := f.propose(t)
	got := CandidateMessage(cmd.EventCommand(cmd.Candidates[0]), 0.7)
	if want := "Consolidation candidate: replace: [n] -> [1 replacement] (savings: $0.70)"; got != want {
		t.Errorf("candidate message %q, want %q", got, want)
	}
	if got, want := EventCommand("delete", 0, []string{"a", "b", "c"}, "b"), "delete: [b] (part of 3-node consolidation)"; got != want {
		t.Errorf("multi-node %q, want %q", got, want)
	}
	if got, want := RejectedMessage("delete: [n]", "churn", 1), "Consolidation rejected: delete: [n], reason: churn (savings: $1.00)"; got != want {
		t.Errorf("rejected message %q, want %q", got, want)
	}
	// The categories: a pod arriving that makes the replacement another
	// is a scheduling failure; a do-not-disrupt pod churn; a budget
	// closing, budget.
	f.now = f.now.Add(rec.Method.ValidationDelay() + 1)
	for _, tc := range []struct {
		name   string
		mutate func(f *fixture)
		want   string
	}{
		{"bigger pods", func(f *fixture) { f.pod("big", "n", "7", "1Gi") }, "scheduling"},
		{"do-not-disrupt", func(f *fixture) { f.pod("dnd", "n", "100m", "64Mi", doNotDisrupt("true")) }, "churn"},
		{"budget", func(f *fixture) { f.pool().Spec.Disruption.Budgets[0].Nodes = "0" }, "budget"},
	} {
		g := newFixture(t)
		g.now = f.now
		g.node("n", "m.4xlarge", zones[0], wellknown.CapacityTypeOnDemand)
		g.pod("p", "n", "1", "1Gi")
		tc.mutate(g)
		if v := Revalidate(g.input(), rec); v.Command != nil || v.Reason != tc.want {
			t.Errorf("%s: validated %v, reason %q (%s), want %q", tc.name, v.Command, v.Reason, v.Why, tc.want)
		}
	}
}
