package whatif

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	corenodeclaim "github.com/karpless/karpless/shared/core/nodeclaim"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/static"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// NodeClaimNotFoundError is a name that is neither a NodeClaim nor the
// node of one.
type NodeClaimNotFoundError struct {
	Name string
	// Unmanaged is set when a node of that name exists without a NodeClaim.
	Unmanaged bool
}

func (e *NodeClaimNotFoundError) Error() string {
	if e.Unmanaged {
		return fmt.Sprintf("node %s has no NodeClaim: Karpless did not launch it (a managed node group, Fargate or a self-managed node) and never disrupts it", e.Name)
	}
	return fmt.Sprintf("no NodeClaim or node named %s (kubectl get nodeclaims lists them)", e.Name)
}

// NodeClaimReport is the answer to "why this node, what will happen to it?".
type NodeClaimReport struct {
	NodeClaim  string    `json:"nodeClaim"`
	At         time.Time `json:"at"`
	NodePool   string    `json:"nodePool"`
	NodeClass  string    `json:"nodeClass"`
	Node       string    `json:"node,omitempty"`
	InstanceID string    `json:"instanceID,omitempty"`
	Created    time.Time `json:"created"`
	// Offering is what it runs as; PricePerHour is 0 when the type or
	// offering is not in the catalog.
	Offering Offering `json:"offering"`
	// Lifecycle are the NodeClaim's launch conditions.
	Lifecycle []ConditionState `json:"lifecycle"`
	// Waiting says what the claim waits for when it is not initialized.
	Waiting    string          `json:"waiting,omitempty"`
	Deleting   bool            `json:"deleting,omitempty"`
	Choice     Choice          `json:"choice"`
	Expiry     Expiry          `json:"expiry"`
	Drift      Drift           `json:"drift"`
	Pods       PodCounts       `json:"pods"`
	Disruption DisruptionState `json:"disruption"`
	Notes      []string        `json:"notes,omitempty"`
}

// ConditionState is one status condition.
type ConditionState struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitzero"`
}

// Choice explains the instance type, zone and capacity type.
type Choice struct {
	// Options are the instance types the claim's requirements allow that
	// still have an available offering it may use.
	Options int `json:"options"`
	// Rank is the claim's type's place among them by price now (1 =
	// cheapest; 0 when it is not among them).
	Rank int `json:"rank"`
	// CheapestNow is what a launch with the same requirements would pick now.
	CheapestNow *Offering `json:"cheapestNow,omitempty"`
	// Zones and CapacityTypes are what the requirements allowed.
	Zones         []string `json:"zones,omitempty"`
	CapacityTypes []string `json:"capacityTypes,omitempty"`
	Why           []string `json:"why"`
}

// Expiry is when expireAfter takes the claim (forcefully).
type Expiry struct {
	ExpireAfter string     `json:"expireAfter"`
	At          *time.Time `json:"at,omitempty"`
	Expired     bool       `json:"expired"`
}

// Drift is the claim's drift status.
type Drift struct {
	// Recorded is the Drifted reason on the object ("" when not drifted).
	Recorded string `json:"recorded"`
	// Now is the reason the disruption tick would compute now.
	Now string `json:"now"`
	// NetworkChecked is false: security group and subnet drift need the
	// instance's details from EC2, which a read-only answer does not ask.
	NetworkChecked bool `json:"networkChecked"`
}

// PodCounts are the pods on the claim's node.
type PodCounts struct {
	Total int `json:"total"`
	// MustMove are those that need room elsewhere when the node goes
	// (not DaemonSet, static or finished pods).
	MustMove int `json:"mustMove"`
	// DoNotDisrupt are pods whose karpenter.sh/do-not-disrupt annotation
	// is in force now.
	DoNotDisrupt []string `json:"doNotDisrupt,omitempty"`
}

// DisruptionState is what voluntary disruption would do with the claim.
type DisruptionState struct {
	ConsolidationPolicy string `json:"consolidationPolicy"`
	ConsolidateAfter    string `json:"consolidateAfter"`
	// Consolidatable is the condition as the disruption tick would set it now.
	Consolidatable bool       `json:"consolidatable"`
	LastPodEvent   *time.Time `json:"lastPodEvent,omitempty"`
	// ConsolidatableAt is when consolidateAfter elapses (if in the future).
	ConsolidatableAt *time.Time `json:"consolidatableAt,omitempty"`
	// Methods are each method's verdict on the claim taken alone.
	Methods []MethodVerdict `json:"methods"`
	// NextPass is the command the next disruption pass would start on the
	// whole cluster, when it includes this claim.
	NextPass *CommandSummary `json:"nextPass,omitempty"`
	// Static is its static NodePool's state and what the next ticks do
	// with it ("" for a NodePool without replicas).
	Static string `json:"static,omitempty"`
	// Blockers are what stops voluntary disruption of the claim now.
	Blockers []string      `json:"blockers"`
	Budgets  []BudgetState `json:"budgets"`
}

// MethodVerdict is one disruption method's verdict.
type MethodVerdict struct {
	Method string `json:"method"`
	// Applies is false when the method does not look at this claim at all
	// (not empty, not drifted, policy WhenEmpty, ...).
	Applies bool `json:"applies"`
	// Acts is true when the method would take the claim now.
	Acts    bool            `json:"acts"`
	Verdict string          `json:"verdict"`
	Command *CommandSummary `json:"command,omitempty"`
}

// ExplainNodeClaim explains one NodeClaim, named by its name or its node's.
func (w *World) ExplainNodeClaim(name string) (*NodeClaimReport, error) {
	v := w.disruption()
	nc, node := findClaim(v.in.Cluster.NodeClaims, v.in.Cluster.Nodes, name)
	if nc == nil {
		unmanaged := false
		for _, n := range w.snap.Nodes {
			unmanaged = unmanaged || n.Name == name
		}
		return nil, &NodeClaimNotFoundError{Name: name, Unmanaged: unmanaged}
	}
	r := &NodeClaimReport{
		NodeClaim: nc.Name, At: w.now, NodePool: nc.Labels[wellknown.NodePoolLabel], Created: nc.CreationTimestamp.Time,
		InstanceID: wellknown.InstanceIDFromProviderID(nc.Status.ProviderID), Deleting: nc.DeletionTimestamp != nil,
		Offering: Offering{InstanceType: nc.Labels[wellknown.InstanceTypeLabel], Zone: nc.Labels[wellknown.ZoneLabel], CapacityType: nc.Labels[wellknown.CapacityTypeLabel]},
	}
	if nc.Spec.NodeClassRef != nil {
		r.NodeClass = nc.Spec.NodeClassRef.Name
	}
	if node != nil {
		r.Node = node.Name
	}
	r.Offering.PricePerHour = scheduledPrice(v.in.Simulation, nc.Name)
	r.Offering.PriceOverlay = w.overlays.PriceOverlay(nc.Labels[wellknown.NodePoolLabel], r.Offering.InstanceType, r.Offering.Zone, r.Offering.CapacityType)
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		cs := ConditionState{Type: t, Status: "Unknown"}
		if c := meta.FindStatusCondition(nc.Status.Conditions, t); c != nil {
			cs = ConditionState{Type: t, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		}
		r.Lifecycle = append(r.Lifecycle, cs)
	}
	r.Waiting = waiting(nc, node, w.now)
	r.Notes = append(r.Notes, w.notes...)
	r.Choice = w.choice(nc)
	r.Expiry = expiry(nc, w.now)
	var recorded *karpv1.NodeClaim
	for _, c := range w.snap.NodeClaims {
		if c.Name == nc.Name {
			recorded = c
		}
	}
	r.Drift = driftOf(recorded, nc)
	var pods []*corev1.Pod
	if node != nil {
		for _, p := range w.snap.Pods {
			if p.Spec.NodeName == node.Name && !podutil.IsTerminal(p) {
				pods = append(pods, p)
			}
		}
	}
	r.Pods = podCounts(pods, w.now)
	r.Disruption = w.disruptionState(v, nc, node, r)
	return r, nil
}

// waiting says what a claim that is not initialized waits for.
func waiting(nc *karpv1.NodeClaim, node *corev1.Node, now time.Time) string {
	age := now.Sub(nc.CreationTimestamp.Time)
	switch {
	case nc.IsTrue(karpv1.ConditionTypeInitialized):
		return ""
	case !nc.IsTrue(karpv1.ConditionTypeLaunched):
		msg := "not launched yet: the provisioner launches it on its next pass"
		if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); c != nil && c.Message != "" {
			msg += "; last attempt: " + c.Message
		}
		return msg + " (kubectl describe nodeclaim shows the InsufficientCapacityError and NodeClassNotReady events)"
	case node == nil:
		left := timing.DefaultRegistrationTTL - age
		if left <= 0 {
			return fmt.Sprintf("launched %s ago and no node has registered: past the registration timeout (%s), the provisioner deletes it (RegistrationTimeout event)", ago(age), timing.DefaultRegistrationTTL)
		}
		return fmt.Sprintf("launched %s ago; waiting for its node to register (deleted if none has after %s, in %s)", ago(age), timing.DefaultRegistrationTTL, ago(left))
	}
	if why := corenodeclaim.NotInitializedReason(nc, node); why != "" {
		return "registered, not initialized: " + why
	}
	return "registered and ready: the provisioner marks it Initialized on its next pass"
}

func findClaim(claims []*karpv1.NodeClaim, nodes []*corev1.Node, name string) (*karpv1.NodeClaim, *corev1.Node) {
	byProvider := map[string]*corev1.Node{}
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
		if n.Spec.ProviderID != "" {
			byProvider[n.Spec.ProviderID] = n
		}
	}
	nodeOf := func(nc *karpv1.NodeClaim) *corev1.Node {
		if n := byProvider[nc.Status.ProviderID]; nc.Status.ProviderID != "" && n != nil {
			return n
		}
		if nc.Status.NodeName != "" {
			return byName[nc.Status.NodeName]
		}
		return nil
	}
	for _, nc := range claims {
		if nc.Name == name {
			return nc, nodeOf(nc)
		}
	}
	for _, nc := range claims {
		if n := nodeOf(nc); n != nil && n.Name == name {
			return nc, n
		}
	}
	return nil, nil
}

// choice explains the type, zone and capacity type against what a launch
// with the claim's requirements would pick at today's prices.
func (w *World) choice(nc *karpv1.NodeClaim) Choice {
	var c Choice
	reqs := scheduling.RequirementsFromNodePool(nc.Spec.Requirements)
	zoneReq, ctReq, typeReq := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel), reqs.Get(wellknown.InstanceTypeLabel)
	class := (*scheduling.NodeClass)(nil)
	if nc.Spec.NodeClassRef != nil {
		class = w.classes[nc.Spec.NodeClassRef.Name]
	}
	if class == nil {
		c.Why = append(c.Why, "its EC2NodeClass is gone: the choice cannot be reconstructed")
		return c
	}
	type priced struct {
		it    *scheduling.InstanceType
		price float64
	}
	var opts []priced
	zones, cts := map[string]bool{}, map[string]bool{}
	for _, it := range class.InstanceTypes {
		if !typeReq.Matches(it.Name, true) {
			continue
		}
		best := math.Inf(1)
		for _, o := range it.Offerings {
			if !zoneReq.Has(o.Zone) || !ctReq.Has(o.CapacityType) {
				continue
			}
			zones[o.Zone], cts[o.CapacityType] = true, true
			if o.Available {
				best = min(best, o.Price)
			}
		}
		if !math.IsInf(best, 1) {
			opts = append(opts, priced{it, best})
		}
	}
	sort.SliceStable(opts, func(i, j int) bool {
		if opts[i].price != opts[j].price {
			return opts[i].price < opts[j].price
		}
		return opts[i].it.Name < opts[j].it.Name
	})
	c.Options = len(opts)
	types := make([]*scheduling.InstanceType, len(opts))
	for i, o := range opts {
		types[i] = o.it
		if o.it.Name == nc.Labels[wellknown.InstanceTypeLabel] {
			c.Rank = i + 1
		}
	}
	c.Zones, c.CapacityTypes = sortedKeys(zones), sortedKeys(cts)
	c.CheapestNow = w.launchOffering(&scheduling.NewNodeClaim{Requirements: nc.Spec.Requirements, InstanceTypes: types})

	typ, zone, ct := nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.ZoneLabel], nc.Labels[wellknown.CapacityTypeLabel]
	if typ == "" {
		c.Why = append(c.Why, "not launched yet: the launch will pick "+describe(c.CheapestNow))
		return c
	}
	c.Why = append(c.Why, fmt.Sprintf("its requirements allowed %d instance type(s) (provisioning kept every type that fit its pods, cheapest first; CreateFleet gets the 60 cheapest) in zone(s) %s as %s",
		len(opts), strings.Join(c.Zones, ", "), strings.Join(c.CapacityTypes, ", ")))
	switch {
	case ct == wellknown.CapacityTypeSpot && len(c.CapacityTypes) > 1:
		c.Why = append(c.Why, "spot: a launch prefers spot whenever the requirements allow it and a spot offering is no dearer than on-demand")
	case ct == wellknown.CapacityTypeOnDemand && cts[wellknown.CapacityTypeSpot]:
		c.Why = append(c.Why, "on-demand although spot was allowed: at launch no spot offering was available (capacity error) or cheaper than on-demand")
	case ct != "":
		c.Why = append(c.Why, ct+": the only capacity type its requirements allow")
	}
	overlaid := nc.Annotations[wellknown.PriceOverlayAppliedAnnotation] == "true"
	switch {
	case ct == wellknown.CapacityTypeSpot && overlaid:
		c.Why = append(c.Why, "spot launches priced by a NodeOverlay use CreateFleet's capacity-optimized-prioritized strategy: EC2 picks the pools with the most spare capacity, breaking ties by the overlay's price order")
	case ct == wellknown.CapacityTypeOnDemand && overlaid:
		c.Why = append(c.Why, "on-demand launches priced by a NodeOverlay use CreateFleet's prioritized strategy: the first offering with capacity in the overlay's price order")
	case ct == wellknown.CapacityTypeSpot:
		c.Why = append(c.Why, "spot launches use CreateFleet's price-capacity-optimized strategy: EC2 picks, among the cheapest spot offerings, the pools with the most spare capacity, so the type need not be the very cheapest")
	case ct == wellknown.CapacityTypeOnDemand:
		c.Why = append(c.Why, "on-demand launches use CreateFleet's lowest-price strategy: the cheapest offering with capacity")
	}
	switch {
	case c.Rank == 1:
		c.Why = append(c.Why, fmt.Sprintf("%s is the cheapest of them at today's prices", typ))
	case c.Rank > 1:
		c.Why = append(c.Why, fmt.Sprintf("%s ranks %d of %d by price today; a launch now would pick %s", typ, c.Rank, len(opts), describe(c.CheapestNow)))
	default:
		c.Why = append(c.Why, fmt.Sprintf("%s in %s has no available offering under its requirements today (not offered, or marked unavailable)", typ, zone))
	}
	if c.CheapestNow != nil && c.CheapestNow.InstanceType == typ && c.CheapestNow.CapacityType == ct && c.CheapestNow.Zone != zone {
		c.Why = append(c.Why, fmt.Sprintf("zone %s: %s is cheaper today, or %s had no capacity when it launched", zone, c.CheapestNow.Zone, c.CheapestNow.Zone))
	}
	return c
}

func describe(o *Offering) string {
	if o == nil {
		return "nothing (no available offering)"
	}
	return o.String()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func expiry(nc *karpv1.NodeClaim, now time.Time) Expiry {
	e := Expiry{ExpireAfter: nc.Spec.ExpireAfter.String()}
	if d := nc.Spec.ExpireAfter.Duration; d != nil {
		at := nc.CreationTimestamp.Add(*d)
		e.At, e.Expired = &at, !now.Before(at)
	}
	return e
}

// driftOf compares the Drifted condition recorded on the object with the
// one the disruption tick would write now.
func driftOf(recorded, now *karpv1.NodeClaim) Drift {
	reason := func(nc *karpv1.NodeClaim) string {
		if nc == nil {
			return ""
		}
		if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted); c != nil && c.Status == "True" {
			return c.Reason
		}
		return ""
	}
	return Drift{Recorded: reason(recorded), Now: reason(now)}
}

func podCounts(pods []*corev1.Pod, now time.Time) PodCounts {
	var c PodCounts
	for _, p := range pods {
		c.Total++
		if podutil.IsReschedulable(p) {
			c.MustMove++
		}
		if blocked, _ := podutil.DoNotDisrupt(p, now); blocked && !podutil.IsTerminating(p) {
			c.DoNotDisrupt = append(c.DoNotDisrupt, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(c.DoNotDisrupt)
	return c
}

// disruptionState runs the disruption core on the claim: each method alone
// through Validate, the whole cluster through Compute.
func (w *World) disruptionState(v *disruptionView, nc *karpv1.NodeClaim, node *corev1.Node, r *NodeClaimReport) DisruptionState {
	var s DisruptionState
	var np *karpv1.NodePool
	for _, p := range v.in.Cluster.NodePools {
		if p.Name == r.NodePool {
			np = p
		}
	}
	block := func(format string, args ...any) { s.Blockers = append(s.Blockers, fmt.Sprintf(format, args...)) }
	if np == nil {
		block("its NodePool %q does not exist: voluntary disruption leaves it alone (expiry still applies)", r.NodePool)
		return s
	}
	s.ConsolidationPolicy = string(np.Spec.Disruption.ConsolidationPolicy)
	after := consolidateAfter(np)
	s.ConsolidateAfter = karpv1.Never
	if after != nil {
		s.ConsolidateAfter = after.String()
	}
	s.Consolidatable = nc.IsTrue(karpv1.ConditionTypeConsolidatable)
	if t := nc.Status.LastPodEventTime.Time; !t.IsZero() {
		s.LastPodEvent = &t
	}
	if after != nil && !s.Consolidatable && nc.IsTrue(karpv1.ConditionTypeInitialized) {
		since := nc.Status.LastPodEventTime.Time
		if since.IsZero() {
			if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); c != nil {
				since = c.LastTransitionTime.Time
			}
		}
		at := since.Add(*after)
		s.ConsolidatableAt = &at
	}
	s.Budgets = budgets(v.in, np)

	// Gates that stop every voluntary method, in the disruption core's order.
	gate := ""
	busy := disruption.Busy(disruption.Commands(v.in.Cluster), "")
	switch {
	case busy[nc.Name]:
		gate = "it is already part of a disruption command in progress (annotation " + disruption.CommandAnnotation + ")"
	case node == nil:
		gate = "it has no node yet"
	case !nc.IsTrue(karpv1.ConditionTypeInitialized):
		gate = "its node is not initialized yet"
	case nc.DeletionTimestamp != nil || node.DeletionTimestamp != nil:
		gate = "it is being deleted"
	case wellknown.IsDisrupted(node):
		gate = "its node carries the karpenter.sh/disrupted taint: it is being disrupted"
	}
	if gate != "" {
		block("%s", gate)
	}

	plan := w.compute(v)
	if plan.Command != nil {
		for _, cn := range plan.Command.Candidates {
			if cn.Name() == nc.Name {
				s.NextPass = w.summarizeCommand(plan.Command)
			}
		}
	}
	candidateBlock := ""
	for _, n := range plan.Blocked {
		if n.NodeClaim == nc.Name && candidateBlock == "" {
			candidateBlock = n.Message
		}
	}
	if candidateBlock != "" {
		block("%s", candidateBlock)
	}
	if static.IsStatic(np) {
		block("its NodePool is static (spec.replicas): never emptied nor consolidated (drift and expiry still apply)")
		_, plan := w.staticPools()
		for _, sp := range plan {
			if sp.NodePool.Name != np.Name {
				continue
			}
			s.Static = sp.Why
			for _, d := range sp.Delete {
				if d.Name == nc.Name {
					s.Static += "; the next disruption tick deletes this claim (scale-down)"
				}
			}
		}
	}
	notElapsed := ""
	if after != nil && !s.Consolidatable && s.ConsolidatableAt != nil {
		notElapsed = fmt.Sprintf("consolidateAfter (%s) has not elapsed since the last pod event: consolidatable at %s", after, s.ConsolidatableAt.UTC().Format(time.RFC3339))
	}
	empty := nc.IsTrue(karpv1.ConditionTypeEmpty)
	drifted := nc.IsTrue(karpv1.ConditionTypeDrifted)

	budgetLeft := func(reason karpv1.DisruptionReason) (BudgetState, bool) {
		for _, b := range s.Budgets {
			if b.Reason == string(reason) {
				return b, b.Left > 0
			}
		}
		return BudgetState{}, true
	}
	judge := func(m disruption.Method, label string, applies string) MethodVerdict {
		mv := MethodVerdict{Method: label}
		switch {
		case static.IsStatic(np) && m != disruption.Drift:
			mv.Verdict = "static NodePool: never emptied nor consolidated"
			return mv
		case applies != "":
			mv.Verdict = applies
			return mv
		}
		mv.Applies = true
		if b, ok := budgetLeft(m.Reason()); !ok {
			mv.Verdict = budgetText(np.Name, b)
			block("%s", mv.Verdict)
			return mv
		}
		if gate != "" {
			mv.Verdict = gate
			return mv
		}
		if candidateBlock != "" && m != disruption.Drift {
			mv.Verdict = candidateBlock
			return mv
		}
		cmd, why := w.validate(v, m, nc.Name)
		if cmd == nil {
			mv.Verdict = strings.TrimPrefix(why, "candidate "+nc.Name+": ")
			return mv
		}
		mv.Acts, mv.Command = true, w.summarizeCommand(cmd)
		mv.Verdict = "would act: " + mv.Command.line()
		if cmd.Decision() == "replace" || m != disruption.Emptiness {
			mv.Verdict += fmt.Sprintf(" (%s -> %s)", money(cmd.PriceBefore), money(cmd.PriceAfter))
		}
		return mv
	}

	// Emptiness.
	why := ""
	switch {
	case after == nil:
		why = "consolidateAfter is Never"
	case !empty:
		why = fmt.Sprintf("not empty: %d pod(s) must move", r.Pods.MustMove)
	case !s.Consolidatable && notElapsed != "":
		why = notElapsed
	case !s.Consolidatable:
		why = "not consolidatable yet"
	}
	s.Methods = append(s.Methods, judge(disruption.Emptiness, "Emptiness", why))
	// Drift.
	why = ""
	if !drifted {
		why = "not drifted"
	}
	s.Methods = append(s.Methods, judge(disruption.Drift, "Drift", why))
	// Consolidation (underutilized).
	why = ""
	switch {
	case after == nil:
		why = "consolidateAfter is Never"
	case np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty:
		why = "consolidationPolicy is WhenEmpty: only empty nodes are consolidated"
	case empty:
		why = "empty: Emptiness handles it"
	case !s.Consolidatable && notElapsed != "":
		why = notElapsed
	case !s.Consolidatable:
		why = "not consolidatable yet"
	}
	s.Methods = append(s.Methods, judge(disruption.SingleNodeConsolidation, "Consolidation", why))

	// What stops it, beyond the gates and the budgets: the timing and the
	// policy.
	if notElapsed != "" {
		block("%s", notElapsed)
	}
	if after == nil {
		block("consolidateAfter is Never: no emptiness or consolidation (drift and expiry still apply)")
	} else if np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty && !empty {
		block("consolidationPolicy is WhenEmpty and %d pod(s) must move: it is not consolidated while it runs them", r.Pods.MustMove)
	}
	if s.Blockers == nil {
		s.Blockers = []string{}
	}
	return s
}

func budgetText(pool string, b BudgetState) string {
	if b.Error != "" {
		return fmt.Sprintf("budget for reason %s of NodePool %s cannot be evaluated, so it allows 0 (%s)", b.Reason, pool, b.Error)
	}
	return fmt.Sprintf("budget for reason %s of NodePool %s allows 0 more now (allowed %d, already disrupting %d of %d nodes)", b.Reason, pool, b.Allowed, b.Disrupting, b.Total)
}

// WriteText renders the report for people.
func (r *NodeClaimReport) WriteText(w io.Writer) error {
	p := &printer{w: w}
	node := r.Node
	if node == "" {
		node = "none yet"
	}
	p.line("NodeClaim %s (NodePool %s, EC2NodeClass %s), node %s, instance %s", r.NodeClaim, r.NodePool, r.NodeClass, node, orNone(r.InstanceID))
	price := money(r.Offering.PricePerHour)
	if r.Offering.PricePerHour == 0 {
		price = "price unknown"
	}
	p.line("  runs as: %s %s in %s, %s%s", orNone(r.Offering.InstanceType), r.Offering.CapacityType, orNone(r.Offering.Zone), price, r.Offering.overlaid())
	var lc []string
	for _, c := range r.Lifecycle {
		lc = append(lc, c.Type+"="+c.Status)
	}
	age := ago(r.At.Sub(r.Created))
	p.line("  age %s; %s", age, strings.Join(lc, ", "))
	if r.Waiting != "" {
		p.line("  %s", r.Waiting)
	}
	if r.Deleting {
		p.line("  being deleted")
	}
	p.line("")
	p.line("Why this type, zone and capacity type:")
	for _, s := range r.Choice.Why {
		p.line("  - %s", s)
	}
	p.line("")
	switch e := r.Expiry; {
	case e.At == nil:
		p.line("Expiry: never (expireAfter: %s)", e.ExpireAfter)
	case e.Expired:
		p.line("Expiry: expired at %s (expireAfter %s): the next disruption tick deletes it, whatever the budgets, do-not-disrupt or PDBs say (the drain still honours PDBs until terminationGracePeriod)", e.At.UTC().Format(time.RFC3339), e.ExpireAfter)
	default:
		p.line("Expiry: at %s, in %s (expireAfter %s); forceful, not subject to budgets", e.At.UTC().Format(time.RFC3339), ago(e.At.Sub(r.At)), e.ExpireAfter)
	}
	switch d := r.Drift; {
	case d.Now != "" && d.Recorded == d.Now:
		p.line("Drift: drifted (%s)", d.Now)
	case d.Now != "":
		p.line("Drift: drifted (%s), to be recorded by the next disruption tick", d.Now)
	case d.Recorded != "":
		p.line("Drift: recorded as drifted (%s), which the next disruption tick clears: it matches its NodePool and EC2NodeClass again", d.Recorded)
	default:
		p.line("Drift: not drifted (security group and subnet drift not checked: they need EC2)")
	}
	p.line("Pods: %d on the node, %d must move if it goes", r.Pods.Total, r.Pods.MustMove)
	if len(r.Pods.DoNotDisrupt) > 0 {
		p.line("  with karpenter.sh/do-not-disrupt in force: %s", list(r.Pods.DoNotDisrupt, 5))
	}
	d := r.Disruption
	p.line("")
	p.line("Disruption: policy %s, consolidateAfter %s, consolidatable %v", orNone(d.ConsolidationPolicy), orNone(d.ConsolidateAfter), d.Consolidatable)
	for _, m := range d.Methods {
		p.line("  %-14s %s", m.Method+":", m.Verdict)
	}
	if d.NextPass != nil {
		p.line("  next pass: %s (%s -> %s)", d.NextPass.line(), money(d.NextPass.PriceBefore), money(d.NextPass.PriceAfter))
	}
	if d.Static != "" {
		p.line("  %s", d.Static)
	}
	var bs []string
	for _, b := range d.Budgets {
		allowed := "unlimited"
		if b.Allowed >= 0 {
			allowed = fmt.Sprint(b.Allowed)
		}
		bs = append(bs, fmt.Sprintf("%s %s allowed, %d disrupting, %d left", b.Reason, allowed, b.Disrupting, b.Left))
	}
	if len(bs) > 0 {
		p.line("  budgets (of %d nodes): %s", d.Budgets[0].Total, strings.Join(bs, "; "))
	}
	if len(d.Blockers) == 0 {
		p.line("  nothing blocks voluntary disruption now")
	} else {
		p.line("  blocked by:")
		for _, b := range d.Blockers {
			p.line("    - %s", b)
		}
	}
	for _, n := range r.Notes {
		p.line("note: %s", n)
	}
	return p.err
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
