package disruption

import (
	"math"
	"testing"
)

// TestConsolidationCredits: consolidation compares prices with the surplus
// CPU credits of burstable types: it does not replace a node that is not
// burstable by a burstable one whose offering is cheaper but which costs
// more with its pods' credits, it does when the pods stay within the
// baseline, and it replaces a burstable node that pays credits by a type
// that costs less than it with them.
func TestConsolidationCredits(t *testing.T) {
	// t3.large: 2 vCPU, 30% baseline (600m), $0.05 per vCPU-hour above it.
	t3 := mkType("t3.large", 2, 8, 0.0832)
	for _, tc := range []struct {
		name     string
		node     string // type of the one node
		cpu      string // its pod's request
		wantType string // the replacement, "" for no command
		before   float64
	}{
		// 1800m on t3.large spends 1.2 vCPU of credits: $0.06/h, $0.1432
		// in all against m.large's $0.10.
		{"not burstable, pods above the baseline: kept", "m.large", "1800m", "", 0.10},
		{"not burstable, pods within the baseline: t3.large", "m.large", "500m", "t3.large", 0.10},
		{"burstable above its baseline: m.large", "t3.large", "1800m", "m.large", 0.0832 + 0.06},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.types = append(baseTypes(), t3)
			f.node("a", tc.node, "test-1a", "on-demand")
			f.pod("a1", "a", tc.cpu, "1Gi")
			in := f.input()
			plan := Compute(in)
			cands, _ := newCluster(in).candidates(SingleNodeConsolidation, nil)
			if len(cands) != 1 || math.Abs(cands[0].Price-tc.before) > 1e-9 {
				t.Fatalf("candidate price %v, want %v (offering plus credits)", cands, tc.before)
			}
			if tc.wantType == "" {
				if plan.Command != nil {
					t.Fatalf("want no command, got %s", plan.Command)
				}
				return
			}
			cmd := mustCommand(t, plan, SingleNodeConsolidation)
			it, _ := cmd.Replacements[0].CheapestOffering()
			if it.Name != tc.wantType || cmd.PriceAfter >= cmd.PriceBefore {
				t.Fatalf("replacement %s at $%.4f/h for $%.4f/h, want %s cheaper", it.Name, cmd.PriceAfter, cmd.PriceBefore, tc.wantType)
			}
		})
	}
}
