package disruption

import (
	"fmt"
	"maps"
	"math"
	"slices"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/podutil"
)

// balancedK is Karpenter's BalancedK: under the Balanced policy a move is
// made only when its share of the NodePool's cost saved is at least 1/k of
// its share of the NodePool's disruption. k=2 is the smallest value at
// which a replacement within an instance family passes.
const balancedK = 2

// poolTotals are one NodePool's $/h and disruption cost, over all its
// nodes (not only the candidates): the denominators of a Balanced score.
type poolTotals struct {
	cost, disruption float64
}

// Score is a consolidation move's Balanced score in one NodePool: the
// fraction of the pool's cost it saves over the fraction of the pool's
// disruption cost it causes.
type Score struct {
	SavingsFraction, DisruptionFraction float64
}

// Value is savings over disruption: 0 without savings, +Inf without
// disruption.
func (s Score) Value() float64 {
	if s.SavingsFraction <= 0 {
		return 0
	}
	if s.DisruptionFraction == 0 {
		return math.Inf(1)
	}
	return s.SavingsFraction / s.DisruptionFraction
}

// Approved says whether the score reaches 1/k.
func (s Score) Approved() bool { return s.Value() >= 1.0/balancedK }

// String is Karpenter's ConsolidationApproved message.
func (s Score) String() string {
	return fmt.Sprintf("score %.2f >= threshold %.2f (k: %d, savings %.1f%%, disruption %.1f%%)",
		s.Value(), 1.0/balancedK, balancedK, s.SavingsFraction*100, s.DisruptionFraction*100)
}

// scoreMove scores savings $/h and disruption against a pool's totals;
// a pool with nothing to compare against scores zero.
func scoreMove(savings, disruption float64, t poolTotals) Score {
	if t.cost <= 0 || t.disruption <= 0 {
		return Score{}
	}
	return Score{SavingsFraction: savings / t.cost, DisruptionFraction: disruption / t.disruption}
}

func balanced(np *karpv1.NodePool) bool {
	return np != nil && np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyBalanced
}

// totals are the Balanced denominators of every NodePool, computed once
// per pass over all its nodes: each node's price, and its disruption cost,
// 1 plus the positive eviction costs of the pods that would move (what a
// candidate's RescheduleCost counts), as Karpenter keeps them per node.
func (c *view) totals() map[string]poolTotals {
	if c.poolTotals != nil {
		return c.poolTotals
	}
	out := map[string]poolTotals{}
	for _, n := range c.in.Simulation.Nodes {
		if n.NodePool == "" || n.NodeClaim == "" {
			continue
		}
		cost := 1.0
		for _, p := range n.Pods {
			if reschedulable(p) {
				cost += math.Max(0, podutil.EvictionCost(p))
			}
		}
		t := out[n.NodePool]
		t.cost += n.Price
		t.disruption += cost
		out[n.NodePool] = t
	}
	c.poolTotals = out
	return out
}

// approve is Karpenter's Balanced evaluator for a computed move: every
// Balanced NodePool among the candidates must approve (the savings split
// between pools by their share of the candidates' cost); moves in other
// pools pass. It returns the scores of the Balanced pools.
func (c *view) approve(cmd *Command) (bool, map[string]Score) {
	byPool := map[string][]*Candidate{}
	for _, cn := range cmd.Candidates {
		byPool[cn.NodePool.Name] = append(byPool[cn.NodePool.Name], cn)
	}
	var scores map[string]Score
	ok := true
	for name, cands := range byPool {
		if !balanced(cands[0].NodePool) {
			continue
		}
		savings, price, disruption := cmd.Savings(), 0.0, 0.0
		for _, cn := range cands {
			price += cn.Price
			disruption += cn.RescheduleCost
		}
		if len(byPool) > 1 && cmd.PriceBefore > 0 {
			savings *= price / cmd.PriceBefore
		}
		s := scoreMove(savings, disruption, c.totals()[name])
		if scores == nil {
			scores = map[string]Score{}
		}
		scores[name] = s
		ok = ok && s.Approved()
	}
	return ok, scores
}

// canPass says whether a candidate's best move, deleting it outright,
// would pass its Balanced pool: when it would not, no replacement will.
func (c *view) canPass(cn *Candidate) bool {
	if !balanced(cn.NodePool) {
		return true
	}
	t := c.totals()[cn.NodePool.Name]
	if t.cost <= 0 {
		return true
	}
	return scoreMove(cn.Price, cn.RescheduleCost, t).Approved()
}

// scored runs approve on a move and keeps the Balanced pools' scores on it
// (for its Event and for people); it reports whether the move may go on.
func (c *view) scored(cmd *Command) bool {
	ok, scores := c.approve(cmd)
	cmd.Scores = scores
	if ok {
		for _, name := range slices.Sorted(maps.Keys(scores)) {
			cmd.Why += fmt.Sprintf("; Balanced %s: %s", name, scores[name])
		}
	}
	return ok
}
