package disruption

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption/budget"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/static"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Compute runs the methods in Karpenter's order (emptiness, drift,
// multi-node consolidation, single-node consolidation) and returns the
// first command one of them finds, within each NodePool's budget for the
// method's reason. Nodes already in a recorded command are not candidates,
// and count against budgets; their pods, like those of deleting nodes, are
// rescheduled in every simulation.
func Compute(in *Input) *Plan {
	c := newCluster(in)
	plan := &Plan{Budgets: map[karpv1.DisruptionReason]map[string]budget.Remaining{}, Eligible: map[Method]int{}}
	w := c.newWorld("")
	c.hosts = w.bufferHosts()
	busy := Busy(c.cmds, "")
	counts := c.budgetCounts("")
	graceful, notes := c.candidates(Emptiness, busy)
	plan.Blocked = notes
	var eventual []*Candidate
	for _, m := range Methods {
		if plan.Stopped = c.stopped(); plan.Stopped {
			break
		}
		all := graceful
		if m.eventual() {
			if eventual == nil {
				eventual, _ = c.candidates(m, busy)
			}
			all = eventual
		}
		cands := c.shouldDisrupt(m, all, plan)
		plan.Eligible[m] = len(cands)
		left := remaining(in, counts, m.Reason(), plan)
		if len(cands) == 0 || (in.Options.Consolidated && m.consolidation()) || (in.Options.SkipMultiNode && m == MultiNodeConsolidation) {
			continue
		}
		var cmd *Command
		switch m {
		case Emptiness:
			cmd = emptiness(cands, left)
		case Drift:
			// Static NodePools first, as Karpenter's StaticDrift runs
			// before Drift.
			fixed, dynamic := splitStatic(cands)
			if cmd = w.staticDrift(fixed, left, plan); cmd == nil {
				cmd = w.drift(dynamic, left, plan)
			}
		case MultiNodeConsolidation:
			cmd = w.multiNode(cands, left, plan)
		case SingleNodeConsolidation:
			cmd = w.singleNode(cands, left, plan)
			if cmd == nil && !plan.Stopped {
				cmd = w.pairs(cands, left, plan)
			}
		}
		if cmd != nil {
			plan.Command = cmd
			break
		}
	}
	plan.Simulations = w.sims
	plan.NothingToConsolidate = plan.Command == nil && !plan.Stopped && !in.Options.Consolidated && !in.Options.SkipMultiNode && !plan.budgetBlocked
	return plan
}

func (m Method) consolidation() bool {
	return m == MultiNodeConsolidation || m == SingleNodeConsolidation
}

func (c *view) stopped() bool {
	return c.in.Options.Stop != nil && c.in.Options.Stop()
}

// remaining is each NodePool's budget left for reason, recorded in plan.
func remaining(in *Input, counts map[string]budget.Count, reason karpv1.DisruptionReason, plan *Plan) map[string]int {
	m := budget.Mapping(in.Cluster.NodePools, counts, reason, in.Now)
	if plan != nil {
		plan.Budgets[reason] = m
	}
	left := make(map[string]int, len(m))
	for k, v := range m {
		left[k] = v.Left
	}
	return left
}

// shouldDisrupt keeps the candidates method m applies to (Karpenter's
// ShouldDisrupt), noting why consolidation skips some.
func (c *view) shouldDisrupt(m Method, cands []*Candidate, plan *Plan) []*Candidate {
	var out []*Candidate
	for _, cn := range cands {
		np := cn.NodePool
		if static.IsStatic(np) && m != Drift {
			// A static NodePool keeps its size: its nodes are neither
			// emptied nor consolidated, only replaced when drifted.
			continue
		}
		consolidatable := cn.NodeClaim.IsTrue(karpv1.ConditionTypeConsolidatable)
		switch m {
		case Emptiness:
			// Karpenter's Emptiness.ShouldDisrupt, in its order: every
			// NodePool policy deletes empty nodes, unless consolidation is
			// off or the node holds a CapacityBuffer's room.
			switch {
			case consolidateAfter(np) == nil:
				plan.unconsolidatable(cn, fmt.Sprintf("NodePool %q has consolidation disabled", np.Name))
			case c.hosts[cn.Node.Name] > 0:
				// Not empty: its room is a CapacityBuffer's, and deleting
				// it would only provision it again.
				plan.unconsolidatable(cn, fmt.Sprintf("Node %q has buffer pods", cn.Node.Name))
			case cn.IsEmpty() && consolidatable:
				out = append(out, cn)
			}
		case Drift:
			if cn.NodeClaim.IsTrue(karpv1.ConditionTypeDrifted) {
				out = append(out, cn)
			}
		case MultiNodeConsolidation, SingleNodeConsolidation:
			// Karpenter's consolidation.ShouldDisrupt, in its order and
			// words: what it cannot price, then the NodePool's policy.
			why := ""
			switch {
			case cn.InstanceType == nil:
				why = fmt.Sprintf("Instance Type %q not found", cn.NodeClaim.Labels[wellknown.InstanceTypeLabel])
			case cn.CapacityType == "":
				why = fmt.Sprintf("Node does not have label %q", wellknown.CapacityTypeLabel)
			case cn.Zone == "":
				why = fmt.Sprintf("Node does not have label %q", wellknown.ZoneLabel)
			case consolidateAfter(np) == nil:
				why = fmt.Sprintf("NodePool %q has consolidation disabled", np.Name)
			case cn.IsEmpty():
				continue // emptiness's, under the Empty budget
			case np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty:
				why = fmt.Sprintf("NodePool %q has consolidation policy WhenEmpty, but node is not empty", np.Name)
			case !consolidatable:
				continue
			}
			if why != "" {
				plan.unconsolidatable(cn, why)
				continue
			}
			out = append(out, cn)
		}
	}
	return out
}

// byRatio sorts candidates by savings ratio, highest first (Karpenter
// v1.14's consolidation order), then by disruption cost and name.
func byRatio(cands []*Candidate) []*Candidate {
	out := slices.Clone(cands)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.SavingsRatio() != b.SavingsRatio() {
			return a.SavingsRatio() > b.SavingsRatio()
		}
		if a.DisruptionCost != b.DisruptionCost {
			return a.DisruptionCost < b.DisruptionCost
		}
		return a.Name() < b.Name()
	})
	return out
}

// emptiness deletes every empty candidate the budgets allow, in one command.
func emptiness(cands []*Candidate, left map[string]int) *Command {
	var take []*Candidate
	price := 0.0
	for _, cn := range byRatio(cands) {
		if left[cn.NodePool.Name] <= 0 {
			continue
		}
		left[cn.NodePool.Name]--
		take = append(take, cn)
		price += cn.Price
	}
	if len(take) == 0 {
		return nil
	}
	return &Command{Method: Emptiness, Candidates: take, PriceBefore: price, Why: fmt.Sprintf("%d empty node(s)", len(take))}
}

// drift replaces the drifted candidate that has been drifted longest (empty
// ones first), launching whatever its pods need.
func (w *world) drift(cands []*Candidate, left map[string]int, plan *Plan) *Command {
	for _, cn := range driftOrder(cands) {
		if left[cn.NodePool.Name] <= 0 {
			continue
		}
		if w.c.stopped() {
			plan.Stopped = true
			return nil
		}
		cmd, why := w.replaceDrifted(cn)
		if cmd == nil {
			plan.Blocked = append(plan.Blocked, Note{NodeClaim: cn.Name(), Node: cn.Node.Name, Message: why})
			continue
		}
		return cmd
	}
	return nil
}

// driftOrder is the order drift takes candidates in: empty ones first,
// then those drifted longest.
func driftOrder(cands []*Candidate) []*Candidate {
	since := func(cn *Candidate) int64 {
		if cond := meta.FindStatusCondition(cn.NodeClaim.Status.Conditions, karpv1.ConditionTypeDrifted); cond != nil {
			return cond.LastTransitionTime.UnixNano()
		}
		return 0
	}
	ordered := slices.Clone(cands)
	sort.SliceStable(ordered, func(i, j int) bool {
		ei, ej := len(ordered[i].Reschedulable) == 0, len(ordered[j].Reschedulable) == 0
		if ei != ej {
			return ei
		}
		if si, sj := since(ordered[i]), since(ordered[j]); si != sj {
			return si < sj
		}
		return ordered[i].Name() < ordered[j].Name()
	})
	return ordered
}

func (w *world) replaceDrifted(cn *Candidate) (*Command, string) {
	sim := w.simulate([]*Candidate{cn}, -1, false)
	if sim.failure != "" {
		return nil, sim.failure
	}
	reason := ""
	if cond := meta.FindStatusCondition(cn.NodeClaim.Status.Conditions, karpv1.ConditionTypeDrifted); cond != nil {
		reason = cond.Reason
	}
	cmd := &Command{Method: Drift, Candidates: []*Candidate{cn}, PriceBefore: cn.Price, Replacements: sim.results.NewNodeClaims}
	for _, n := range cmd.Replacements {
		cmd.PriceAfter += n.HourlyPrice()
	}
	cmd.Why = fmt.Sprintf("drifted (%s); %d replacement(s)", reason, len(cmd.Replacements))
	return cmd, ""
}

// multiNode looks for the largest prefix of the candidates (sorted by
// savings ratio, within budgets, at most 100) that can all go at once,
// replaced by at most one cheaper node, by binary search on its length.
func (w *world) multiNode(cands []*Candidate, left map[string]int, plan *Plan) *Command {
	var within []*Candidate
	for _, cn := range byRatio(cands) {
		if left[cn.NodePool.Name] <= 0 {
			plan.budgetBlocked = true
			continue
		}
		left[cn.NodePool.Name]--
		within = append(within, cn)
	}
	limit := w.c.in.Options.MaxMultiNodeBatch
	if limit <= 0 {
		limit = defaultMaxMultiNodeBatch
	}
	if len(within) < 2 {
		return nil
	}
	lo, hi := 1, min(len(within), limit)
	if len(within) <= hi {
		hi = len(within) - 1
	}
	var best *Command
	for lo <= hi {
		if w.c.stopped() {
			plan.Stopped = true
			break
		}
		mid := (lo + hi) / 2
		cmd, _ := w.consolidate(MultiNodeConsolidation, within[:mid+1])
		if cmd != nil && len(cmd.Replacements) == 1 {
			n, err := withoutSameTypes(cmd.Replacements[0], cmd.Candidates)
			if err != nil || len(n.InstanceTypes) == 0 {
				cmd = nil
			} else {
				cmd.replaceWith(n)
			}
		}
		if cmd != nil && !w.c.scored(cmd) {
			cmd = nil // a Balanced pool finds it not worth its disruption
		}
		if cmd != nil {
			best = cmd
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// pairs is Karpless's addition to Karpenter's search, tried when neither
// multi-node consolidation (which only tries prefixes of one ordering) nor
// single-node consolidation found anything: two candidates at a time,
// drawn from the best savings ratios, that can go with their pods moving to
// the other nodes plus at most one node cheaper than both. Without it, a
// cluster churned into many small nodes stays well above what a fresh
// packing of its pods costs. The command is a multi-node consolidation, and
// is validated and carried out as one.
func (w *world) pairs(cands []*Candidate, left map[string]int, plan *Plan) *Command {
	var order []*Candidate
	for _, cn := range byRatio(cands) {
		if left[cn.NodePool.Name] <= 0 {
			plan.budgetBlocked = true
		} else if len(order) < maxPairCandidates {
			order = append(order, cn)
		}
	}
	tries := 0
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			a, b := order[i], order[j]
			if a.NodePool.Name == b.NodePool.Name && left[a.NodePool.Name] < 2 {
				continue
			}
			if tries == maxPairSimulations || w.c.stopped() {
				plan.Stopped = plan.Stopped || w.c.stopped()
				return nil
			}
			tries++
			cmd, _ := w.consolidate(MultiNodeConsolidation, []*Candidate{a, b})
			if cmd == nil {
				continue
			}
			if len(cmd.Replacements) == 1 {
				n, err := withoutSameTypes(cmd.Replacements[0], cmd.Candidates)
				if err != nil || len(n.InstanceTypes) == 0 {
					continue
				}
				cmd.replaceWith(n)
			}
			if cmd.Savings() > 0 && w.c.scored(cmd) {
				return cmd
			}
		}
	}
	return nil
}

// singleNode tries candidates one at a time (by savings ratio, NodePools
// interleaved) and returns the first that can be deleted or replaced by a
// cheaper node. Candidates that certainly cannot be consolidated are ruled
// out without a simulation. When a previous pass ran out of time, the
// search resumes after Options.ResumeSingleNodeAfter and wraps around.
func (w *world) singleNode(cands []*Candidate, left map[string]int, plan *Plan) *Command {
	order := singleNodeOrder(cands, w.c.in.Options.ResumeSingleNodeAfter)
	rm := w.room()
	last := ""
	for _, cn := range order {
		if left[cn.NodePool.Name] <= 0 {
			plan.budgetBlocked = true
			continue
		}
		if w.c.stopped() {
			plan.Stopped = true
			plan.ResumeSingleNodeAfter = last
			return nil
		}
		last = cn.Name()
		// Under the Balanced policy, a candidate whose deletion outright
		// would not be worth its disruption is not simulated: no
		// replacement would be either. Karpenter says nothing of these
		// (there would be too many); neither is it an Event here.
		if !w.c.canPass(cn) {
			continue
		}
		if why := rm.hopeless(cn); why != "" {
			plan.unconsolidatable(cn, why)
			continue
		}
		cmd, why := w.consolidate(SingleNodeConsolidation, []*Candidate{cn})
		if cmd == nil {
			plan.unconsolidatable(cn, why)
			continue
		}
		if !w.c.scored(cmd) {
			continue
		}
		return cmd
	}
	return nil
}

// singleNodeOrder is the order single-node consolidation tries candidates
// in: by savings ratio, NodePools interleaved, starting after the candidate
// a stopped pass evaluated last (after), so that the NodePools it did not
// reach come first, as Karpenter puts the NodePools a timed-out pass left
// unseen first.
func singleNodeOrder(cands []*Candidate, after string) []*Candidate {
	order := interleave(byRatio(cands))
	if after != "" {
		if k := slices.IndexFunc(order, func(c *Candidate) bool { return c.Name() == after }); k >= 0 {
			order = append(order[k+1:], order[:k+1]...)
		}
	}
	return order
}

// interleave takes one candidate per NodePool in turn (NodePools by name),
// keeping each NodePool's order.
func interleave(cands []*Candidate) []*Candidate {
	byPool := map[string][]*Candidate{}
	var pools []string
	for _, cn := range cands {
		if _, ok := byPool[cn.NodePool.Name]; !ok {
			pools = append(pools, cn.NodePool.Name)
		}
		byPool[cn.NodePool.Name] = append(byPool[cn.NodePool.Name], cn)
	}
	sort.Strings(pools)
	out := make([]*Candidate, 0, len(cands))
	for i := 0; len(out) < len(cands); i++ {
		for _, p := range pools {
			if i < len(byPool[p]) {
				out = append(out, byPool[p][i])
			}
		}
	}
	return out
}

// BudgetsAllow checks the budgets once more for a command about to start,
// on an Input whose NodeClaims and Nodes were read just now: a node another
// function began deleting since the pass's snapshot (an interruption) counts
// against the budget too. It returns why not, or "".
func BudgetsAllow(in *Input, rec *Record, candidates []string) string {
	c := newCluster(in)
	left := remaining(in, c.budgetCounts(rec.ID), rec.Method.Reason(), nil)
	for _, name := range candidates {
		nc := c.claims[name]
		if nc == nil {
			continue
		}
		pool := nc.Labels[wellknown.NodePoolLabel]
		if left[pool] <= 0 {
			return fmt.Sprintf("candidate %s can no longer be disrupted without violating budgets", name)
		}
		left[pool]--
	}
	return ""
}

// Validate checks a proposal again against a fresh Input, as Karpenter does
// after its 15 s wait: the candidates must still be candidates for the
// method (for emptiness, those still empty are kept), the budgets must
// still allow them, and the simulation must still reach the same decision
// (delete stays delete, replace stays replace with a cheaper node). It
// returns the command to carry out, with replacements computed afresh, or
// nil and why not.
func Validate(in *Input, rec *Record) (*Command, string) {
	v := Revalidate(in, rec)
	return v.Command, v.Why
}

// Validation is what Revalidate found.
type Validation struct {
	// Command is the command to carry out, nil when the proposal fails.
	Command *Command
	// Why the proposal fails ("" when it does not).
	Why string
	// Failed is how many of the proposal's candidates failed their
	// validation, as Karpenter's failed_validations_total counts them: a
	// consolidation's every candidate when one of them is no longer a
	// candidate (pods arrived, nominated, gone) or over its budget, an
	// emptiness command's every candidate when none is still one, else
	// those its budgets leave out. A simulation reaching another decision
	// is not counted, nor is drift (Karpenter does not validate it).
	Failed int
	// Reason is Karpenter's category of the failure, as its
	// ConsolidationRejected Event says it: "budget" (over budget, or
	// nominated), "churn" (a candidate no longer one) or "scheduling"
	// (the simulation reached another decision); "" when valid.
	Reason string
}

// Revalidate is Validate, also counting the candidates that failed.
func Revalidate(in *Input, rec *Record) Validation {
	cmd, why, failed := validate(in, rec)
	v := Validation{Command: cmd, Why: why, Failed: failed}
	switch {
	case cmd != nil:
	case failed == 0:
		v.Reason = "scheduling"
	case strings.Contains(why, NominatedForPod) || strings.Contains(why, overBudget):
		v.Reason = "budget"
	default:
		v.Reason = "churn"
	}
	if rec.Method == Drift {
		v.Failed = 0 // Karpenter validates no drift command
	}
	return v
}

func validate(in *Input, rec *Record) (*Command, string, int) {
	all := len(rec.Candidates)
	c := newCluster(in)
	m := rec.Method
	if m == Emptiness {
		c.hosts = c.newWorld(rec.ID).bufferHosts()
	}
	busy := Busy(c.cmds, rec.ID)
	plan := &Plan{Budgets: map[karpv1.DisruptionReason]map[string]budget.Remaining{}}
	var cands []*Candidate
	for _, name := range rec.Candidates {
		nc := c.claims[name]
		if nc == nil {
			if m == Emptiness {
				continue
			}
			return nil, fmt.Sprintf("candidate %s is gone", name), all
		}
		cn, why := c.candidate(nc, m.eventual(), busy)
		if cn != nil && len(c.shouldDisrupt(m, []*Candidate{cn}, plan)) == 0 {
			cn, why = nil, fmt.Sprintf("no longer a candidate for %s", m)
		}
		if cn == nil {
			if m == Emptiness {
				continue
			}
			return nil, fmt.Sprintf("candidate %s: %s", name, why), all
		}
		cands = append(cands, cn)
	}
	if len(cands) == 0 {
		return nil, "no candidate is still valid", all
	}
	left := remaining(in, c.budgetCounts(rec.ID), m.Reason(), nil)
	var within []*Candidate
	dropped := 0
	for _, cn := range cands {
		if left[cn.NodePool.Name] <= 0 {
			if m == Emptiness {
				dropped++
				continue
			}
			return nil, fmt.Sprintf("candidate %s %s", cn.Name(), overBudget), all
		}
		left[cn.NodePool.Name]--
		within = append(within, cn)
	}
	if len(within) == 0 {
		return nil, "no candidate is still valid", dropped
	}
	w := c.newWorld(rec.ID)
	switch m {
	case Emptiness:
		price := 0.0
		for _, cn := range within {
			price += cn.Price
		}
		return &Command{Method: m, Candidates: within, PriceBefore: price, Why: fmt.Sprintf("%d empty node(s)", len(within))}, "", dropped
	case Drift:
		if static.IsStatic(within[0].NodePool) {
			cmd, why := w.replaceStatic(driftOrder(within))
			return cmd, why, 0
		}
		cmd, why := w.replaceDrifted(within[0])
		return cmd, why, 0
	}
	// Karpenter's validateCommand: the simulation, run again, must reach
	// the same decision; a replacement must still be one of the instance
	// types proposed (they must all still be options: the new simulation
	// does no price filtering, so it offers at least those unless the
	// pods now need something else, as bigger). Otherwise the command is
	// dropped, not re-planned: a new plan is for a new pass to propose.
	sim := w.simulateConsolidation(within)
	if sim.failure != "" {
		return nil, sim.failure, 0
	}
	news := sim.results.NewNodeClaims
	switch {
	case len(news) > 1,
		rec.Decision == "replace" && len(news) == 0,
		rec.Decision == "delete" && len(news) == 1,
		len(news) == 1 && rec.ReplacementTypes != nil && !typesSubset(rec.ReplacementTypes, news[0].InstanceTypes):
		return nil, NewResults, 0
	}
	var cmd *Command
	var why string
	if len(news) == 1 && rec.ReplacementTypes != nil {
		cmd, why = w.proposed(m, within, sim.results, rec.ReplacementTypes)
	} else {
		// A record without the types (written by an older version, or a
		// question of the CLI's): planned afresh.
		cmd, why = w.fromSimulation(m, within, sim.results)
		if cmd != nil && m == MultiNodeConsolidation && len(cmd.Replacements) == 1 {
			n, err := withoutSameTypes(cmd.Replacements[0], cmd.Candidates)
			if err != nil || len(n.InstanceTypes) == 0 {
				return nil, NewResults, 0
			}
			cmd.replaceWith(n)
		}
	}
	if cmd == nil {
		return nil, why, 0
	}
	if rec.Decision != "" && cmd.Decision() != rec.Decision {
		return nil, NewResults, 0
	}
	if cmd.Savings() <= 0 && cmd.Decision() == "replace" {
		return nil, "replacement is no longer cheaper", 0
	}
	return cmd, "", 0
}

// overBudget ends the reason a validation drops a candidate its budget
// no longer allows.
const overBudget = "can no longer be disrupted without violating budgets"

// NewResults is why a validation drops a consolidation whose simulation no
// longer reaches the decision proposed (Karpenter's words).
const NewResults = "scheduling simulation produced new results"

// typesSubset reports whether every name is among the types.
func typesSubset(names []string, types []*scheduling.InstanceType) bool {
	have := make(map[string]bool, len(types))
	for _, it := range types {
		have[it.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}
