package whatif

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestExplainNodeClaim(t *testing.T) {
	type check func(t *testing.T, r *NodeClaimReport, text string)
	method := func(r *NodeClaimReport, name string) MethodVerdict {
		for _, m := range r.Disruption.Methods {
			if m.Method == name {
				return m
			}
		}
		return MethodVerdict{}
	}
	blocked := func(want string) check {
		return func(t *testing.T, r *NodeClaimReport, text string) {
			for _, b := range r.Disruption.Blockers {
				if strings.Contains(b, want) {
					return
				}
			}
			t.Errorf("blockers %q lack %q", r.Disruption.Blockers, want)
		}
	}
	for _, tc := range []struct {
		name   string
		setup  func(f *fixture)
		lookup string
		checks []check
	}{
		{
			name: "empty node: emptiness takes it, nothing blocks",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
			},
			checks: []check{func(t *testing.T, r *NodeClaimReport, text string) {
				if m := method(r, "Emptiness"); !m.Acts || m.Command == nil || m.Command.Decision != "delete" {
					t.Errorf("emptiness %+v", m)
				}
				if len(r.Disruption.Blockers) != 0 || r.Disruption.NextPass == nil || r.Disruption.NextPass.Method != "Emptiness" {
					t.Errorf("blockers %q next %+v", r.Disruption.Blockers, r.Disruption.NextPass)
				}
				if r.Offering.PricePerHour != onDemand(t, "m5.large") || r.Offering.InstanceType != "m5.large" || r.InstanceID != "i-00000000000000001" {
					t.Errorf("offering %+v id %s", r.Offering, r.InstanceID)
				}
				if !strings.Contains(text, "nothing blocks voluntary disruption now") {
					t.Errorf("text:\n%s", text)
				}
			}},
		},
		{
			name: "a pod's do-not-disrupt annotation blocks",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				p := f.pod("web", "api", "500m", "1Gi", "n1")
				p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			},
			checks: []check{blocked(`Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=web/api)`), func(t *testing.T, r *NodeClaimReport, text string) {
				if m := method(r, "Consolidation"); !m.Applies || m.Acts || !strings.Contains(m.Verdict, "do-not-disrupt") {
					t.Errorf("consolidation %+v", m)
				}
				if len(r.Pods.DoNotDisrupt) != 1 || r.Pods.MustMove != 1 {
					t.Errorf("pods %+v", r.Pods)
				}
			}},
		},
		{
			name: "the node's do-not-disrupt annotation blocks",
			setup: func(f *fixture) {
				n, _ := f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				n.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			},
			checks: []check{blocked(`Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`)},
		},
		{
			name: "a PDB that allows no disruption blocks",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "api", "500m", "1Gi", "n1")
				f.pdb("web", "api", 0)
			},
			checks: []check{blocked("Pdb prevents pod evictions (PodDisruptionBudget=[web/api-pdb])")},
		},
		{
			name: "a budget of 0 blocks",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.poolNamed("default").Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
			},
			checks: []check{blocked("budget for reason Empty of NodePool default allows 0 more now (allowed 0, already disrupting 0 of 1 nodes)"), func(t *testing.T, r *NodeClaimReport, text string) {
				if m := method(r, "Emptiness"); !m.Applies || m.Acts || !strings.Contains(m.Verdict, "allows 0") {
					t.Errorf("emptiness %+v", m)
				}
			}},
		},
		{
			name: "budgets count the pool's nodes and the NotReady ones as disrupting",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				n2, _ := f.node("n2", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				n2.Status.Conditions[0].Status = corev1.ConditionFalse
				f.node("n3", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
			},
			checks: []check{func(t *testing.T, r *NodeClaimReport, text string) {
				if len(r.Disruption.Budgets) == 0 {
					t.Fatal("no budget states")
				}
				for _, b := range r.Disruption.Budgets {
					if b.Total != 3 || b.Disrupting != 1 {
						t.Errorf("budget %s: total %d disrupting %d, want 3 and 1", b.Reason, b.Total, b.Disrupting)
					}
				}
			}},
		},
		{
			name: "a budget window open now blocks only its reason",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.2xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "api", "500m", "1Gi", "n1")
				f.poolNamed("default").Spec.Disruption.Budgets = []karpv1.Budget{
					{Nodes: "100%"},
					{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized}, Schedule: new("0 9 * * *"), Duration: &metav1.Duration{Duration: 8 * time.Hour}},
				}
			},
			checks: []check{blocked("budget for reason Underutilized of NodePool default allows 0"), func(t *testing.T, r *NodeClaimReport, text string) {
				if m := method(r, "Consolidation"); !m.Applies || m.Acts {
					t.Errorf("consolidation %+v", m)
				}
				for _, b := range r.Disruption.Budgets {
					if want := map[string]int{"Empty": 1, "Drifted": 1, "Underutilized": 0}[b.Reason]; b.Left != want {
						t.Errorf("budget %+v, want %d left", b, want)
					}
				}
			}},
		},
		{
			name: "consolidateAfter not elapsed since the last pod event",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, 3*time.Hour)
				p := f.pod("web", "api", "500m", "1Gi", "n1")
				p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-10 * time.Minute))
				f.poolNamed("default").Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1h")
			},
			checks: []check{blocked("consolidateAfter (1h0m0s) has not elapsed since the last pod event: consolidatable at 2026-05-04T12:50:00Z"), func(t *testing.T, r *NodeClaimReport, text string) {
				if r.Disruption.Consolidatable || r.Disruption.ConsolidatableAt == nil {
					t.Errorf("state %+v", r.Disruption)
				}
				if m := method(r, "Consolidation"); m.Applies {
					t.Errorf("consolidation %+v", m)
				}
			}},
		},
		{
			name: "policy WhenEmpty keeps a busy node",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "api", "500m", "1Gi", "n1")
				f.poolNamed("default").Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
			},
			checks: []check{blocked("consolidationPolicy is WhenEmpty and 1 pod(s) must move")},
		},
		{
			name: "consolidation replaces an oversized node with a cheaper one",
			setup: func(f *fixture) {
				f.node("n1", "default", "m5.2xlarge", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "api", "500m", "1Gi", "n1")
			},
			checks: []check{func(t *testing.T, r *NodeClaimReport, text string) {
				m := method(r, "Consolidation")
				if !m.Acts || m.Command.Decision != "replace" || len(m.Command.Replacements) != 1 {
					t.Fatalf("consolidation %+v", m)
				}
				l := m.Command.Replacements[0].Launch
				if l == nil || l.CapacityType != wellknown.CapacityTypeSpot || m.Command.PriceAfter >= m.Command.PriceBefore {
					t.Errorf("replacement %+v, %v -> %v", l, m.Command.PriceBefore, m.Command.PriceAfter)
				}
			}},
		},
		{
			name: "looked up by node name; drifted requirements are replaced",
			setup: func(f *fixture) {
				f.node("ip-10-0-0-1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				f.pod("web", "api", "500m", "1Gi", "ip-10-0-0-1")
				f.poolNamed("default").Spec.Template.Spec.Requirements[1].Values = []string{"m5.xlarge"}
			},
			lookup: "ip-10-0-0-1",
			checks: []check{func(t *testing.T, r *NodeClaimReport, text string) {
				if r.NodeClaim != "claim-ip-10-0-0-1" || r.Drift.Now != "RequirementsDrifted" || r.Drift.Recorded != "" {
					t.Fatalf("claim %s drift %+v", r.NodeClaim, r.Drift)
				}
				if m := method(r, "Drift"); !m.Acts || m.Command.Decision != "replace" {
					t.Errorf("drift %+v", m)
				}
				if !strings.Contains(text, "Drift: drifted (RequirementsDrifted), to be recorded by the next disruption tick") {
					t.Errorf("text:\n%s", text)
				}
			}},
		},
		{
			name: "expired",
			setup: func(f *fixture) {
				_, nc := f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, 2*time.Hour)
				nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h")
			},
			checks: []check{func(t *testing.T, r *NodeClaimReport, text string) {
				if !r.Expiry.Expired || !r.Expiry.At.Equal(t0.Add(-time.Hour)) || !strings.Contains(text, "expired at 2026-05-04T11:00:00Z") {
					t.Errorf("expiry %+v\n%s", r.Expiry, text)
				}
			}},
		},
		{
			name:  "the type is the cheapest its requirements allow",
			setup: func(f *fixture) { f.node("n1", "default", "m5.large", zoneB, wellknown.CapacityTypeSpot, time.Hour) },
			checks: []check{func(t *testing.T, r *NodeClaimReport, text string) {
				c := r.Choice
				if c.Options != 3 || c.Rank != 1 || c.CheapestNow == nil || c.CheapestNow.InstanceType != "m5.large" || c.CheapestNow.Zone != zoneB {
					t.Errorf("choice %+v", c)
				}
				if !strings.Contains(text, "m5.large is the cheapest of them at today's prices") || !strings.Contains(text, "price-capacity-optimized") {
					t.Errorf("text:\n%s", text)
				}
			}},
		},
		{
			name: "a claim in a disruption command already",
			setup: func(f *fixture) {
				_, nc := f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
				nc.Annotations = map[string]string{"karpless.dev/disruption": `{"id":"abc","method":"Emptiness","reason":"Empty","phase":"Executing","decision":"delete","proposedAt":"2026-05-04T11:59:00Z","candidates":["claim-n1"]}`}
			},
			checks: []check{blocked("it is already part of a disruption command in progress")},
		},
		{
			name: "not initialized yet",
			setup: func(f *fixture) {
				f.inFlight("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand)
			},
			lookup: "claim-n1",
			checks: []check{blocked("it has no node yet"), func(t *testing.T, r *NodeClaimReport, text string) {
				if !strings.Contains(r.Waiting, "launched 1m0s ago; waiting for its node to register (deleted if none has after 15m0s, in 14m0s)") {
					t.Errorf("waiting %q", r.Waiting)
				}
			}},
		},
		{
			name: "registered, not initialized: a startup taint is still there",
			setup: func(f *fixture) {
				n, nc := f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Minute)
				nc.Status.Conditions = nc.Status.Conditions[:2]
				nc.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}}
				n.Spec.Taints = nc.Spec.StartupTaints
			},
			checks: []check{blocked("its node is not initialized yet"), func(t *testing.T, r *NodeClaimReport, text string) {
				if r.Waiting != "registered, not initialized: startup taint example.com/agent:NoSchedule is still present" {
					t.Errorf("waiting %q", r.Waiting)
				}
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			name := tc.lookup
			if name == "" {
				name = "claim-n1"
			}
			r, err := f.world().ExplainNodeClaim(name)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.checks {
				c(t, r, b.String())
			}
			if t.Failed() {
				t.Logf("text:\n%s", b.String())
			}
		})
	}
}

func TestExplainNodeClaimErrors(t *testing.T) {
	f := newFixture(t)
	f.snap.Nodes = append(f.snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ng-node"}})
	w := f.world()
	var nf *NodeClaimNotFoundError
	if _, err := w.ExplainNodeClaim("ng-node"); !errors.As(err, &nf) || !nf.Unmanaged || !strings.Contains(err.Error(), "Karpless did not launch it") {
		t.Errorf("unmanaged node: %v", err)
	}
	if _, err := w.ExplainNodeClaim("nope"); !errors.As(err, &nf) || nf.Unmanaged {
		t.Errorf("missing: %v", err)
	}
}
