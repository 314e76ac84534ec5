package disruption

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestScoreMove ports Karpenter's ScoreMove cases (its RFC's example
// pool: ten nodes, eight at $4.84 a day and two at $9.68, 80 pods, so a
// disruption total of 90).
func TestScoreMove(t *testing.T) {
	pool := poolTotals{cost: 58.08, disruption: 90}
	for _, tc := range []struct {
		name                string
		savings, disruption float64
		totals              poolTotals
		approved            bool
		score               float64 // NaN: +Inf
	}{
		{"an oversized node replaced", 7.26, 4, pool, true, (7.26 / 58.08) / (4.0 / 90)},
		{"a spare node deleted", 4.84, 5, pool, true, (4.84 / 58.08) / (5.0 / 90)},
		{"a marginal move", 2.42, 9, pool, false, (2.42 / 58.08) / (9.0 / 90)},
		{"a well-packed node, no savings", 0, 11, pool, false, 0},
		{"a replacement in a uniform pool", 2.42, 9, poolTotals{cost: 48.40, disruption: 90}, true, (2.42 / 48.40) / (9.0 / 90)},
		{"a node of few pods in a varied pool", 4.84, 5, poolTotals{cost: 58.08, disruption: 117}, true, (4.84 / 58.08) / (5.0 / 117)},
		{"a node of many pods in a varied pool", 4.84, 32, poolTotals{cost: 58.08, disruption: 117}, false, (4.84 / 58.08) / (32.0 / 117)},
		{"the same share of a pool ten times larger scores the same", 72.6, 40, poolTotals{cost: 580.8, disruption: 900}, true, (7.26 / 58.08) / (4.0 / 90)},
		{"savings without disruption", 4.84, 0, pool, true, math.NaN()},
		{"neither savings nor disruption", 0, 0, pool, false, 0},
		{"a pool without cost", 4.84, 5, poolTotals{disruption: 90}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scoreMove(tc.savings, tc.disruption, tc.totals)
			if s.Approved() != tc.approved {
				t.Errorf("approved = %v (score %.3f), want %v", s.Approved(), s.Value(), tc.approved)
			}
			switch {
			case math.IsNaN(tc.score):
				if !math.IsInf(s.Value(), 1) {
					t.Errorf("score = %v, want +Inf", s.Value())
				}
			case math.Abs(s.Value()-tc.score) > 0.005:
				t.Errorf("score = %.4f, want %.4f", s.Value(), tc.score)
			}
		})
	}
	// Karpenter's k is 2: the marginal move (score 0.42) fails at 0.5 but
	// would pass at 1/3; a move is proportional, not absolute.
	if s := scoreMove(2.42, 9, pool); s.Value() < 1.0/3 || s.Approved() {
		t.Errorf("marginal move score %.3f: want between 1/3 and 1/2", s.Value())
	}
	od, spot := scoreMove(4.84, 4, poolTotals{cost: 58.08, disruption: 90}), scoreMove(1.452, 4, poolTotals{cost: 17.424, disruption: 90})
	if math.Abs(od.Value()-spot.Value()) > 0.01 {
		t.Errorf("proportionally equal moves score %.3f and %.3f", od.Value(), spot.Value())
	}
}

// TestBalancedPolicy: a marginal replacement (an m.xlarge of six small
// pods for an m.large, saving a fifth of the pool's cost for more than
// half its disruption) is made under WhenEmptyOrUnderutilized and not
// under Balanced; a large saving for little disruption is made under both.
func TestBalancedPolicy(t *testing.T) {
	world := func(policy karpv1.ConsolidationPolicy, big bool) *Plan {
		f := newFixture(t)
		f.pool().Spec.Disruption.ConsolidationPolicy = policy
		// Three full nodes no method may take (do-not-disrupt): they are
		// not candidates, and still count in the pool's totals.
		for _, n := range []string{"l1", "l2", "l3"} {
			f.node(n, "m.large", "test-1a", "on-demand")
			f.pod(n+"-p", n, "1900m", "1Gi", func(p *corev1.Pod) {
				p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			})
		}
		if big {
			f.node("x", "m.4xlarge", "test-1a", "on-demand")
			f.pod("x-1", "x", "500m", "1Gi")
			f.pod("x-2", "x", "500m", "1Gi")
		} else {
			f.node("x", "m.xlarge", "test-1a", "on-demand")
			for i := range 6 {
				f.pod(fmt.Sprintf("x-%d", i), "x", "250m", "512Mi")
			}
		}
		return Compute(f.input())
	}
	if cmd := mustCommand(t, world(karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, false), SingleNodeConsolidation); cmd.Decision() != "replace" || !near(cmd.Savings(), 0.10) {
		t.Fatalf("WhenEmptyOrUnderutilized: want the m.xlarge replaced, saving $0.10/h; got %s", cmd.Why)
	}
	if p := world(karpv1.ConsolidationPolicyBalanced, false); p.Command != nil {
		t.Errorf("Balanced made the marginal move (score %.2f): %s", scoreMove(0.10, 7, poolTotals{cost: 0.50, disruption: 13}).Value(), p.Command.Why)
	}
	cmd := mustCommand(t, world(karpv1.ConsolidationPolicyBalanced, true), SingleNodeConsolidation)
	s, ok := cmd.Scores["default"]
	if !ok || !s.Approved() || !near(s.SavingsFraction, 0.70/1.10) || !near(s.DisruptionFraction, 3.0/9) {
		t.Errorf("Balanced: scores %+v, want savings 0.70/1.10 and disruption 3/9 of the pool", cmd.Scores)
	}
	if !strings.Contains(cmd.Why, "Balanced default: score 1.91 >= threshold 0.50") {
		t.Errorf("why = %q", cmd.Why)
	}
}
