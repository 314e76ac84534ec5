package whatif

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/disruption/budget"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// whatifCommandID names the commands Validate is asked about; it never
// matches a command recorded on the cluster.
const whatifCommandID = "karpless-whatif"

// disruptionView is the disruption core's input with the NodeClaims'
// bookkeeping (Consolidatable, Drifted, Empty, lastPodEventTime) brought up
// to now in memory, as the disruption tick writes it before it decides.
type disruptionView struct {
	in      *disruption.Input
	changes map[string]disruption.ClaimStatus
}

func (w *World) disruption() *disruptionView {
	opts := disruption.Options{SpotToSpotConsolidation: w.opts.SpotToSpotConsolidation}
	base := &disruption.Input{
		Cluster: w.snap, Simulation: planning.SimulationInput(w.snap, nil, w.classes),
		Classes: w.classes, Now: w.now, Options: opts,
	}
	v := &disruptionView{changes: map[string]disruption.ClaimStatus{}}
	snap := *w.snap
	snap.NodeClaims = slices.Clone(w.snap.NodeClaims)
	now := metav1.NewTime(w.now)
	for _, ch := range disruption.StatusChanges(base) {
		i := slices.Index(snap.NodeClaims, ch.NodeClaim)
		if i < 0 {
			continue
		}
		nc := ch.NodeClaim.DeepCopy()
		for _, c := range ch.Set {
			nc.SetCondition(c.Type, c.Status, c.Reason, c.Message, now)
		}
		for _, t := range ch.Clear {
			meta.RemoveStatusCondition(&nc.Status.Conditions, t)
		}
		if !ch.LastPodEventTime.IsZero() {
			nc.Status.LastPodEventTime = metav1.NewTime(ch.LastPodEventTime)
		}
		if len(ch.Annotations) > 0 {
			nc.Annotations = maps.Clone(nc.Annotations)
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			maps.Copy(nc.Annotations, ch.Annotations)
		}
		snap.NodeClaims[i] = nc
		v.changes[nc.Name] = ch
	}
	v.in = &disruption.Input{
		Cluster: &snap, Simulation: planning.SimulationInput(&snap, nil, w.classes),
		Classes: w.classes, Now: w.now, Options: opts,
	}
	return v
}

// compute runs the disruption core's decision, bounded in wall time.
func (w *World) compute(v *disruptionView) *disruption.Plan {
	in := *v.in
	in.Options.Stop = w.stopper()
	return disruption.Compute(&in)
}

// validate asks whether method m would take the claim alone now.
func (w *World) validate(v *disruptionView, m disruption.Method, claim string) (*disruption.Command, string) {
	in := *v.in
	in.Options.Stop = w.stopper()
	return disruption.Validate(&in, &disruption.Record{ID: whatifCommandID, Method: m, Reason: m.Reason(), Candidates: []string{claim}})
}

func (w *World) stopper() func() bool {
	d := w.opts.ConsolidationTimeout
	if d <= 0 {
		d = time.Minute
	}
	deadline := time.Now().Add(d)
	return func() bool { return time.Now().After(deadline) }
}

// BudgetState is one NodePool's disruption budget for one reason, now.
type BudgetState struct {
	Reason string `json:"reason"`
	// Allowed is what the active budgets allow (-1: no limit).
	Allowed int `json:"allowed"`
	// Disrupting are nodes already counted against it.
	Disrupting int `json:"disrupting"`
	// Total are the nodes the budget is a share of.
	Total int `json:"total"`
	// Left is what a new command may still take.
	Left  int    `json:"left"`
	Error string `json:"error,omitempty"`
}

var reasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized}

// budgets is every reason's budget for the NodePool, counted as the
// disruption core counts it.
func budgets(in *disruption.Input, np *karpv1.NodePool) []BudgetState {
	c := disruption.BudgetCounts(in)[np.Name]
	var out []BudgetState
	for _, r := range reasons {
		m := budget.Mapping([]*karpv1.NodePool{np}, map[string]budget.Count{np.Name: c}, r, in.Now)[np.Name]
		s := BudgetState{Reason: string(r), Allowed: m.Allowed, Disrupting: m.Disrupting, Total: m.Total, Left: m.Left}
		if m.Allowed == budget.Unbounded {
			s.Allowed = -1
		}
		if m.Err != nil {
			s.Error = m.Err.Error()
		}
		out = append(out, s)
	}
	return out
}

// CommandSummary is a disruption decision.
type CommandSummary struct {
	// Method is Emptiness, Drift, MultiNodeConsolidation or
	// SingleNodeConsolidation.
	Method string `json:"method"`
	// Decision is delete or replace.
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Why      string `json:"why"`
	// Remove are the nodes it takes away.
	Remove []NodeSummary `json:"remove"`
	// Replacements are the NodeClaims launched first.
	Replacements []ClaimSummary `json:"replacements,omitempty"`
	PriceBefore  float64        `json:"priceBefore"`
	PriceAfter   float64        `json:"priceAfter"`
	Savings      float64        `json:"savings"`
}

// NodeSummary is a managed node and what it runs as.
type NodeSummary struct {
	NodeClaim string   `json:"nodeClaim"`
	Node      string   `json:"node,omitempty"`
	NodePool  string   `json:"nodePool"`
	Offering  Offering `json:"offering"`
}

func (w *World) summarizeCommand(c *disruption.Command) *CommandSummary {
	s := &CommandSummary{
		Method: string(c.Method), Decision: c.Decision(), Reason: string(c.Reason()), Why: c.Why,
		PriceBefore: c.PriceBefore, PriceAfter: c.PriceAfter, Savings: c.Savings(),
	}
	for _, cn := range c.Candidates {
		ns := NodeSummary{NodeClaim: cn.Name(), NodePool: cn.NodePool.Name, Offering: Offering{
			InstanceType: cn.NodeClaim.Labels[wellknown.InstanceTypeLabel], Zone: cn.Zone, CapacityType: cn.CapacityType, PricePerHour: cn.Price,
		}}
		if cn.Node != nil {
			ns.Node = cn.Node.Name
		}
		s.Remove = append(s.Remove, ns)
	}
	sort.Slice(s.Remove, func(i, j int) bool { return s.Remove[i].NodeClaim < s.Remove[j].NodeClaim })
	for _, r := range c.Replacements {
		s.Replacements = append(s.Replacements, w.summarizeClaim(r))
	}
	return s
}

func (s *CommandSummary) line() string {
	var names []string
	for _, r := range s.Remove {
		n := r.NodeClaim
		if r.Node != "" {
			n += " (node " + r.Node + ")"
		}
		names = append(names, n)
	}
	out := s.Method + ": " + s.Decision + " " + strings.Join(names, ", ")
	for _, r := range s.Replacements {
		if r.Launch != nil {
			out += ", replaced by " + r.Launch.String()
		} else {
			out += ", replaced by a new NodeClaim of NodePool " + r.NodePool
		}
	}
	return out
}

// consolidateAfter is the NodePool's consolidateAfter, nil for Never (an
// unset value counts as 0s, the CRD default).
func consolidateAfter(np *karpv1.NodePool) *time.Duration {
	ca := np.Spec.Disruption.ConsolidateAfter
	if ca.IsZero() {
		d := time.Duration(0)
		return &d
	}
	return ca.Duration
}

// scheduledPrice is the $/h the simulator knows for a node or claim.
func scheduledPrice(sim *scheduling.Snapshot, claim string) float64 {
	for _, n := range sim.Nodes {
		if n.NodeClaim == claim {
			return n.Price
		}
	}
	return 0
}
