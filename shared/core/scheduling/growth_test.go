package scheduling_test

import (
	"testing"

	"github.com/karpless/karpless/shared/core/scheduling"
)

// TestSolveKeepsTheCheaperGrowthRule: a provisioning solve runs both growth
// rules and keeps the plan that places more pods, then costs less, so its
// plan is never dearer than either rule's. On the bench's mixes neither
// rule wins everywhere (docs/bench.md), so the test also checks that each
// rule is kept somewhere: without that, one of them is dead weight.
func TestSolveKeepsTheCheaperGrowthRule(t *testing.T) {
	if testing.Short() {
		t.Skip("solves the bench's mixes")
	}
	kept := map[bool]int{}
	for _, c := range mixSnapshots(t, 1500) {
		t.Run(c.name, func(t *testing.T) {
			snap, opts := c.snap, scheduling.Provisioning()
			got := scheduling.Solve(snap, opts)
			for _, fill := range []bool{false, true} {
				one := scheduling.SolveOneRule(snap, opts, fill)
				if len(got.Unschedulable) > len(one.Unschedulable) {
					t.Fatalf("%d pods unplaced, the rule fill=%v alone leaves %d", len(got.Unschedulable), fill, len(one.Unschedulable))
				}
				if a, b := hourly(got), hourly(one); a > b*(1+1e-6) {
					t.Fatalf("$%.4f/h, the rule fill=%v alone $%.4f/h", a, fill, b)
				} else if a >= b*(1-1e-6) {
					kept[fill]++
				}
			}
		})
	}
	if kept[false] == 0 || kept[true] == 0 {
		t.Errorf("plans kept per rule %v: one rule never wins on these mixes", kept)
	}
}

func hourly(r *scheduling.Results) float64 {
	total := 0.0
	for _, c := range r.NewNodeClaims {
		total += c.HourlyPrice()
	}
	return total
}
