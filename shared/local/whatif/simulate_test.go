package whatif

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSimulateCost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		// want: before, added by provisioning, change by disruption
		before, added, change float64
		method, decision      string
		newClaims             int
		check                 func(t *testing.T, r *SimulationReport, text string)
	}{
		{
			name: "empty node deleted, pending pod gets a new claim, unmanaged node not counted",
			setup: func(f *fixture) {
				f.node("idle", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.node("busy", "default", "m5.xlarge", zoneB, wellknown.CapacityTypeSpot, time.Hour)
				f.pod("web", "a", "3", "4Gi", "busy")
				f.snap.Nodes = append(f.snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ng-1"}})
				f.pod("web", "pending", "3", "2Gi", "")
			},
			// idle m5.large on-demand + busy m5.xlarge spot in 1b (0.090).
			before: onDemandPrice("m5.large") + 0.090,
			// 3 cpu fits neither node, nor m5.large: m5.xlarge spot, cheapest in 1a.
			added:  0.080,
			change: -onDemandPrice("m5.large"),
			method: "Emptiness", decision: "delete", newClaims: 1,
			check: func(t *testing.T, r *SimulationReport, text string) {
				if r.Cluster.Nodes != 3 || r.Cluster.ManagedNodes != 2 || r.Cluster.Pending != 1 {
					t.Errorf("cluster %+v", r.Cluster)
				}
				if c := r.Disruption.Command; len(c.Remove) != 1 || c.Remove[0].NodeClaim != "claim-idle" {
					t.Errorf("command %+v", c)
				}
				for _, s := range []string{"create a NodeClaim of NodePool default for 1 pod(s): m5.xlarge spot in us-east-1a at $0.0800/h",
					"Emptiness: delete claim-idle (node idle)", "Cost of Karpless-managed capacity: $0.1860/h now, $0.2660/h after provisioning, $0.1700/h after disruption (-0.0160 $/h)"} {
					if !strings.Contains(text, s) {
						t.Errorf("text lacks %q", s)
					}
				}
			},
		},
		{
			name: "oversized on-demand node replaced by a cheaper spot node",
			setup: func(f *fixture) {
				f.node("big", "default", "m5.2xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "a", "1", "2Gi", "big")
			},
			before: onDemandPrice("m5.2xlarge"),
			change: 0.035 - onDemandPrice("m5.2xlarge"),
			method: "SingleNodeConsolidation", decision: "replace",
		},
		{
			name: "two half-used on-demand nodes replaced by one spot node",
			setup: func(f *fixture) {
				f.node("a", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.node("b", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "a", "1200m", "2Gi", "a")
				f.pod("web", "b", "1200m", "2Gi", "b")
			},
			before: 2 * onDemandPrice("m5.xlarge"),
			// Both pods (2.4 cpu) fit one m5.xlarge, spot in 1a at 0.080.
			change: 0.080 - 2*onDemandPrice("m5.xlarge"),
			method: "MultiNodeConsolidation", decision: "replace",
			check: func(t *testing.T, r *SimulationReport, text string) {
				c := r.Disruption.Command
				if len(c.Remove) != 2 || len(c.Replacements) != 1 || len(c.Replacements[0].Pods) != 2 {
					t.Errorf("command %+v", c)
				}
			},
		},
		{
			name: "of two half-used on-demand-only nodes one goes, its pod moves to the other",
			setup: func(f *fixture) {
				f.node("a", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.node("b", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "a", "1200m", "2Gi", "a")
				f.pod("web", "b", "1200m", "2Gi", "b")
				f.poolNamed("default").Spec.Template.Spec.Requirements[0].Values = []string{wellknown.CapacityTypeOnDemand}
			},
			before: 2 * onDemandPrice("m5.xlarge"),
			// Multi-node consolidation may not replace both with the type
			// they already are (as in Karpenter); single-node deletes one.
			change: -onDemandPrice("m5.xlarge"),
			method: "SingleNodeConsolidation", decision: "delete",
			check: func(t *testing.T, r *SimulationReport, text string) {
				if c := r.Disruption.Command; len(c.Remove) != 1 || len(c.Replacements) != 0 || r.Disruption.Eligible["MultiNodeConsolidation"] != 2 {
					t.Errorf("command %+v eligible %v", c, r.Disruption.Eligible)
				}
			},
		},
		{
			name: "a burstable node above its baseline costs its CPU credits",
			setup: func(f *fixture) {
				for i, r := range f.poolNamed("default").Spec.Template.Spec.Requirements {
					if r.Key == wellknown.InstanceTypeLabel {
						f.poolNamed("default").Spec.Template.Spec.Requirements[i].Values = append(slices.Clone(mTypes), "t3.medium")
					}
				}
				f.market.Book.Zones["t3.medium"] = []string{zoneA, zoneB}
				f.node("t", "default", "t3.medium", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "a", "1500m", "2Gi", "t")
			},
			// t3.medium's baseline is 20% of 2 vCPUs: 1100m above it at
			// $0.05 per vCPU-hour. Counted, the node costs more than an
			// m5.large spot in 1b, which replaces it.
			before: onDemandPrice("t3.medium") + 1.1*0.05,
			change: 0.035 - onDemandPrice("t3.medium") - 1.1*0.05,
			method: "SingleNodeConsolidation", decision: "replace",
		},
		{
			name: "nothing to do",
			setup: func(f *fixture) {
				f.node("a", "default", "m5.large", zoneA, wellknown.CapacityTypeSpot, time.Hour)
				f.pod("web", "a", "1500m", "2Gi", "a")
			},
			before: 0.040,
			check: func(t *testing.T, r *SimulationReport, text string) {
				if r.Disruption.Command != nil || !strings.Contains(text, "no pending pod: nothing to do") || !strings.Contains(text, "no voluntary disruption now") {
					t.Errorf("report %+v\n%s", r.Disruption, text)
				}
			},
		},
		{
			name: "expired claim listed, not counted",
			setup: func(f *fixture) {
				_, nc := f.node("old", "default", "m5.large", zoneA, wellknown.CapacityTypeSpot, 48*time.Hour)
				nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("24h")
				f.pod("web", "a", "1500m", "2Gi", "old")
			},
			before: 0.040,
			check: func(t *testing.T, r *SimulationReport, text string) {
				if len(r.Disruption.Expired) != 1 || r.Disruption.Expired[0] != "claim-old" || !strings.Contains(text, "delete claim-old: past its expireAfter") {
					t.Errorf("expired %v\n%s", r.Disruption.Expired, text)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			r := f.world().Simulate()
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			c := r.Cost
			if !near(c.Before, tc.before) || !near(c.AfterProvisioning, tc.before+tc.added) || !near(c.AfterDisruption, tc.before+tc.added+tc.change) {
				t.Errorf("cost %+v, want before %v, +%v, %+v", c, tc.before, tc.added, tc.change)
			}
			if !near(r.Provisioning.AddedPerHour, tc.added) || len(r.Provisioning.NewNodeClaims) != tc.newClaims {
				t.Errorf("provisioning %+v", r.Provisioning)
			}
			switch cmd := r.Disruption.Command; {
			case tc.method == "" && cmd != nil:
				t.Errorf("unexpected command %+v", cmd)
			case tc.method != "" && (cmd == nil || cmd.Method != tc.method || cmd.Decision != tc.decision):
				t.Errorf("command %+v, want %s/%s", cmd, tc.method, tc.decision)
			case cmd != nil && !near(cmd.PriceAfter-cmd.PriceBefore, tc.change):
				t.Errorf("command prices %v -> %v", cmd.PriceBefore, cmd.PriceAfter)
			}
			if tc.check != nil {
				tc.check(t, r, text)
			}
			if t.Failed() {
				t.Logf("text:\n%s", text)
			}
		})
	}
}

func onDemandPrice(name string) float64 {
	return map[string]float64{"m5.large": 0.096, "m5.xlarge": 0.192, "m5.2xlarge": 0.384, "t3.medium": 0.0416}[name]
}

func TestOnDemandPricesMatchCatalog(t *testing.T) {
	for _, n := range append(slices.Clone(mTypes), "t3.medium") {
		if onDemandPrice(n) != onDemand(t, n) {
			t.Errorf("%s: test price %v, catalog %v", n, onDemandPrice(n), onDemand(t, n))
		}
	}
}
