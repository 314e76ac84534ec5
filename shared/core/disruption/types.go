// Package disruption decides, from plain data, which nodes Karpless should
// take away and what (if anything) replaces them: Karpenter v1's voluntary
// disruption methods (emptiness, drift, multi-node and single-node
// consolidation) under NodePool budgets, plus the forceful expiration, the
// NodeClaim conditions those methods read (Consolidatable, Drifted, Empty)
// and the durable record a command leaves on its candidates.
//
// Nothing here talks to a server or keeps state between calls: Compute and
// Validate read an Input (a cluster snapshot, the launchable instance types,
// the time) and return values. The orchestration that acts on them across
// ticks lives in shared/ticks/disrupt.
package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/disruption/budget"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
)

// Method is one of Karpenter's voluntary disruption methods.
type Method string

// The methods, in the order Karpenter tries them; the first that yields a
// command wins the pass.
const (
	Emptiness               Method = "Emptiness"
	Drift                   Method = "Drift"
	MultiNodeConsolidation  Method = "MultiNodeConsolidation"
	SingleNodeConsolidation Method = "SingleNodeConsolidation"
)

// Karpenter's constants.
const (
	// minSpotToSpotOptions is how many cheaper spot types single-node
	// spot-to-spot consolidation needs, and keeps.
	minSpotToSpotOptions = 15
	// defaultMaxMultiNodeBatch caps multi-node consolidation's batch.
	defaultMaxMultiNodeBatch = 100
)

// Karpless's own bounds of the pair search (see world.pairs).
const (
	// maxPairCandidates: pairs are drawn from this many candidates, the
	// best savings ratios first.
	maxPairCandidates = 12
	// maxPairSimulations bounds one pass's pair search.
	maxPairSimulations = 40
)

// Methods is Karpenter's order.
var Methods = []Method{Emptiness, Drift, MultiNodeConsolidation, SingleNodeConsolidation}

// Reason is the budget reason the method disrupts for.
func (m Method) Reason() karpv1.DisruptionReason {
	switch m {
	case Emptiness:
		return karpv1.DisruptionReasonEmpty
	case Drift:
		return karpv1.DisruptionReasonDrifted
	}
	return karpv1.DisruptionReasonUnderutilized
}

// ConsolidationType is the metric label Karpenter uses for the method.
func (m Method) ConsolidationType() string {
	switch m {
	case Emptiness:
		return "empty"
	case MultiNodeConsolidation:
		return "multi"
	case SingleNodeConsolidation:
		return "single"
	}
	return ""
}

// ValidationDelay is how long a command of this method waits, as a
// proposal, before it is validated again and carried out. Drift acts at
// once, as in Karpenter; the others wait 15 s so that churn (pods arriving)
// can cancel them.
func (m Method) ValidationDelay() time.Duration {
	if m == Drift {
		return 0
	}
	return timing.CommandValidationDelay
}

// eventual reports Karpenter's "eventual" disruption class (drift): with a
// terminationGracePeriod, pods that would block eviction do not block it.
func (m Method) eventual() bool { return m == Drift }

// Options tune a computation.
type Options struct {
	// SpotToSpotConsolidation is Karpenter's feature gate: replace spot
	// nodes with cheaper spot nodes.
	SpotToSpotConsolidation bool
	// MinValues is Karpenter's MIN_VALUES_POLICY, for the replacements'
	// simulation: the provisioner's policy.
	MinValues scheduling.MinValuesPolicy
	// Preferences is Karpenter's PREFERENCE_POLICY for the simulations:
	// Respect (the zero value) or Ignore.
	Preferences scheduling.PreferencePolicy
	// MaxMultiNodeBatch caps the candidates multi-node consolidation
	// considers at once; 0 means 100, Karpenter's cap.
	MaxMultiNodeBatch int
	// Stop, when set, is polled between simulations; once it returns true
	// the search ends with what it has found (the deadline of the tick).
	Stop func() bool
	// ResumeSingleNodeAfter is Plan.ResumeSingleNodeAfter of an earlier pass
	// that ran out of time: single-node consolidation starts after that
	// candidate, so every candidate gets its turn over several ticks.
	ResumeSingleNodeAfter string
	// Consolidated says the cluster is as it was (same ConsolidationState)
	// when consolidation last ran to the end and found nothing, a short
	// while ago: multi- and single-node consolidation are skipped, as
	// Karpenter's IsConsolidated skips them until the cluster changes or
	// five minutes pass (prices and capacity move without a trace here).
	Consolidated bool
	// SkipMultiNode: a multi-node proposal failed its validation since the
	// last computation. Karpenter then goes on to single-node consolidation
	// in the same loop; skipping multi-node once does the same here.
	SkipMultiNode bool
}

// InstanceFacts is what drift needs to know of a running instance that the
// cluster objects do not say.
type InstanceFacts struct {
	SubnetID         string
	SecurityGroupIDs []string
	// Reserved: EC2 shows the instance in a capacity reservation it was
	// launched into on purpose (Karpenter's reserved capacity type).
	Reserved bool
}

// Input is everything a decision depends on.
type Input struct {
	Cluster *cluster.Snapshot
	// Simulation is provisioning.SimulationInput(Cluster, nil, Classes): the
	// existing nodes and in-flight NodeClaims as the simulator sees them,
	// with the $/h of each. Its Pods are ignored (each simulation sets its
	// own batch); it is never modified.
	Simulation *scheduling.Snapshot
	// Classes are the launchable instance types per EC2NodeClass name.
	Classes map[string]*scheduling.NodeClass
	// Instances by instance ID, for security group and subnet drift; nil
	// skips those two checks.
	Instances map[string]InstanceFacts
	Now       time.Time
	Options   Options
}

// Command is a decision: take Candidates away, launching Replacements
// first. A command without replacements only deletes.
type Command struct {
	Method       Method
	Candidates   []*Candidate
	Replacements []*scheduling.NewNodeClaim
	// PriceBefore is the candidates' $/h; PriceAfter the replacements' (the
	// cheapest offering each would launch as).
	PriceBefore, PriceAfter float64
	// Why says, for people, what the command does and why.
	Why string
	// Scores are the Balanced NodePools' scores of the move, nil when no
	// candidate's NodePool has the Balanced policy.
	Scores map[string]Score
}

// Reason is the command's disruption reason.
func (c *Command) Reason() karpv1.DisruptionReason { return c.Method.Reason() }

// Savings is the estimated $/h saved.
func (c *Command) Savings() float64 { return c.PriceBefore - c.PriceAfter }

// Decision is "delete" or "replace", as Karpenter's metrics label it.
func (c *Command) Decision() string {
	if len(c.Replacements) > 0 {
		return "replace"
	}
	return "delete"
}

// CandidateNames are the candidates' NodeClaim names, sorted.
func (c *Command) CandidateNames() []string {
	out := make([]string, 0, len(c.Candidates))
	for _, cn := range c.Candidates {
		out = append(out, cn.NodeClaim.Name)
	}
	sort.Strings(out)
	return out
}

// String is a one-line summary, e.g. for logs.
func (c *Command) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s: %s %s", c.Method, c.Reason(), c.Decision(), strings.Join(c.CandidateNames(), ","))
	if len(c.Replacements) > 0 {
		fmt.Fprintf(&b, " -> %d replacement(s)", len(c.Replacements))
	}
	fmt.Fprintf(&b, " ($%.4f/h -> $%.4f/h)", c.PriceBefore, c.PriceAfter)
	return b.String()
}

// Note is something about one NodeClaim worth an Event: why it cannot be
// disrupted, or why it cannot be consolidated.
type Note struct {
	NodeClaim string
	Node      string
	Message   string
}

// Plan is what Compute found.
type Plan struct {
	// Command is the first method's decision, nil when no method acts.
	Command *Command
	// Blocked are managed nodes no voluntary method may take now, and why
	// (Karpenter's DisruptionBlocked events).
	Blocked []Note
	// Unconsolidatable are candidates consolidation looked at and could not
	// act on (Karpenter's Unconsolidatable events).
	Unconsolidatable []Note
	// Budgets are each reason's remaining budget per NodePool.
	Budgets map[karpv1.DisruptionReason]map[string]budget.Remaining
	// Eligible counts candidates per method.
	Eligible map[Method]int
	// Simulations counts scheduling simulations run.
	Simulations int
	// Stopped is set when Options.Stop ended the search early.
	Stopped bool
	// NothingToConsolidate is set when both consolidation methods ran to
	// the end (not stopped, not skipped, no earlier method acted) and found
	// no command: the caller may remember ConsolidationState and set
	// Options.Consolidated while it holds.
	NothingToConsolidate bool
	// ResumeSingleNodeAfter is the last candidate single-node consolidation
	// evaluated before it was stopped ("" when it was not): pass it back in
	// Options to continue from there.
	ResumeSingleNodeAfter string

	// budgetBlocked: a consolidation candidate was passed over for its
	// NodePool's budget, so the cluster is not "consolidated" (Karpenter's
	// constrainedByBudgets): it may be once the budget allows.
	budgetBlocked bool
	// noted are the Unconsolidatable notes already made, by claim and
	// message (several methods find the same).
	noted map[string]bool
}

// unconsolidatable notes why consolidation passes the candidate over,
// once per candidate and message.
func (p *Plan) unconsolidatable(cn *Candidate, msg string) {
	key := cn.Name() + "\x00" + msg
	if p.noted[key] {
		return
	}
	if p.noted == nil {
		p.noted = map[string]bool{}
	}
	p.noted[key] = true
	p.Unconsolidatable = append(p.Unconsolidatable, Note{NodeClaim: cn.Name(), Node: cn.Node.Name, Message: msg})
}
