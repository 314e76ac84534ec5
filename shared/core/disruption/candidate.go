package disruption

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/static"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Candidate is a node a method may take, with what it costs to take it.
type Candidate struct {
	NodeClaim    *karpv1.NodeClaim
	Node         *corev1.Node
	NodePool     *karpv1.NodePool
	InstanceType *scheduling.InstanceType // nil when no longer offered
	Zone         string
	CapacityType string
	// Price is the $/h of the node's offering (0 when unknown), plus the
	// surplus CPU credits its pods spend on a burstable type (credits.go).
	Price float64
	// Pods are every pod bound to the node; Reschedulable those that must
	// find room elsewhere when it goes.
	Pods          []*corev1.Pod
	Reschedulable []*corev1.Pod
	// DisruptionCost is Karpenter's: the pods' eviction costs, scaled by
	// the share of the node's lifetime left.
	DisruptionCost float64
	// RescheduleCost is 1 plus the positive eviction costs of the pods that
	// must move (Karpenter's base of the savings ratio).
	RescheduleCost float64
}

// Name is the candidate's NodeClaim name.
func (c *Candidate) Name() string { return c.NodeClaim.Name }

// IsEmpty is Karpenter v1.14's emptiness: no pod that must move carries a
// positive eviction cost.
func (c *Candidate) IsEmpty() bool { return c.RescheduleCost <= 1 }

// SavingsRatio is $/h per unit of disruption; consolidation tries the
// highest first.
func (c *Candidate) SavingsRatio() float64 { return c.Price / c.RescheduleCost }

// candidate builds the candidate for nc, or says why nc cannot be
// voluntarily disrupted now. eventual relaxes pod-level blocks for claims
// with a terminationGracePeriod (drift). busy are claims in other commands.
func (c *view) candidate(nc *karpv1.NodeClaim, eventual bool, busy map[string]bool) (*Candidate, string) {
	now := c.in.Now
	npName, managed := nc.Labels[wellknown.NodePoolLabel]
	node := c.nodeOf[nc.Name]
	// Karpenter's ValidateNodeDisruptable, in its order and words.
	switch {
	case busy[nc.Name]:
		return nil, AlreadyDisrupting
	case node == nil:
		return nil, "nodeclaim does not have an associated node"
	case !nc.IsTrue(karpv1.ConditionTypeInitialized):
		return nil, "node isn't initialized"
	case nc.DeletionTimestamp != nil || node.DeletionTimestamp != nil || wellknown.IsDisrupted(node) || nc.IsTrue(karpv1.ConditionTypeInstanceTerminating):
		return nil, "node is deleting or marked for deletion"
	case c.nominated(nc):
		return nil, NominatedForPod
	case node.Annotations[wellknown.DoNotDisruptAnnotation] == "true" || nc.Annotations[wellknown.DoNotDisruptAnnotation] == "true":
		return nil, fmt.Sprintf("disruption is blocked through the %q annotation", wellknown.DoNotDisruptAnnotation)
	case !managed:
		return nil, fmt.Sprintf("node doesn't have required label (label=%s)", wellknown.NodePoolLabel)
	}
	np := c.pools[npName]
	if np == nil {
		return nil, fmt.Sprintf("NodePool not found (NodePool=%s)", npName)
	}
	pods := c.podsOn[node.Name]
	relax := eventual && nc.Spec.TerminationGracePeriod != nil
	if !relax {
		for _, p := range pods {
			if podutil.IsTerminal(p) || podutil.IsTerminating(p) {
				continue
			}
			if blocked, _ := podutil.DoNotDisrupt(p, now); blocked {
				return nil, fmt.Sprintf("pod has %q annotation (Pod=%s/%s)", wellknown.DoNotDisruptAnnotation, p.Namespace, p.Name)
			}
		}
		if why := c.pdbs.blocking(pods, now); why != "" {
			return nil, why
		}
	}
	cand := &Candidate{
		NodeClaim:    nc,
		Node:         node,
		NodePool:     np,
		InstanceType: c.instanceType(nc),
		Zone:         node.Labels[wellknown.ZoneLabel],
		CapacityType: node.Labels[wellknown.CapacityTypeLabel],
		Pods:         pods,
	}
	if cand.Zone == "" {
		cand.Zone = nc.Labels[wellknown.ZoneLabel]
	}
	if cand.CapacityType == "" {
		cand.CapacityType = nc.Labels[wellknown.CapacityTypeLabel]
	}
	if i, ok := c.simIndex[node.Name]; ok {
		cand.Price = c.in.Simulation.Nodes[i].Price
	}
	if cand.Price == 0 && cand.InstanceType != nil {
		cand.Price = offeringPrice(cand.InstanceType, cand.Zone, cand.CapacityType)
	}
	if cand.Price > 0 && cand.InstanceType != nil && scheduling.Burstable(cand.InstanceType) {
		// A burstable node costs its surplus CPU credits too (credits.go).
		requested := corev1.ResourceList(nil)
		if i, ok := c.simIndex[node.Name]; ok {
			requested = c.in.Simulation.Nodes[i].Requested
		}
		if requested == nil {
			requested = scheduling.SumRequests(pods)
		}
		cand.Price += nodeCredits(cand.InstanceType, requested)
	}
	all := 0.0
	cand.RescheduleCost = 1
	for _, p := range pods {
		cost := podutil.EvictionCost(p)
		all += cost
		if reschedulable(p) {
			cand.Reschedulable = append(cand.Reschedulable, p)
			cand.RescheduleCost += math.Max(0, cost)
		}
	}
	cand.DisruptionCost = all * static.LifetimeRemaining(nc, now)
	return cand, ""
}

// The reasons a node is not a candidate that callers match on.
const (
	AlreadyDisrupting = "candidate is already being disrupted"
	NominatedForPod   = "node is nominated for a pending pod"
)

// nominated is Karpenter's node nomination, kept on the objects: a
// provisioning pass expects pending pods on the node for a short while
// (NominatedUntilAnnotation), or the claim is the replacement of a command
// whose candidates are still on the cluster (being drained, or about to
// be) and whose pods are on their way to it. Either way it must not be
// taken away meanwhile, even while it looks empty.
func (c *view) nominated(nc *karpv1.NodeClaim) bool {
	if NominatedAt(nc, c.in.Now) {
		return true
	}
	id, ok := nc.Annotations[ReplacementAnnotation]
	if !ok {
		return false
	}
	for _, p := range c.cmds {
		if p.Record.ID == id {
			for _, name := range p.Record.Candidates {
				if p.Claims[name] != nil {
					return true
				}
			}
		}
	}
	return false
}

// candidates builds every candidate for method m; notes say why managed
// nodes are not candidates, for the ones worth telling people about.
func (c *view) candidates(m Method, busy map[string]bool) ([]*Candidate, []Note) {
	var out []*Candidate
	var notes []Note
	for _, nc := range c.in.Cluster.NodeClaims {
		cand, why := c.candidate(nc, m.eventual(), busy)
		if cand != nil {
			out = append(out, cand)
			continue
		}
		if worthTelling(why) {
			n := Note{NodeClaim: nc.Name, Message: sentence(why)}
			if node := c.nodeOf[nc.Name]; node != nil {
				n.Node = node.Name
			}
			notes = append(notes, n)
		}
	}
	slices.SortFunc(out, func(a, b *Candidate) int { return compareStrings(a.Name(), b.Name()) })
	return out, notes
}

// worthTelling filters out the transient reasons (not initialized yet,
// already leaving) that would only be noise in Events; Karpenter publishes
// those too, every ten seconds, but a tick has no dedupe memory to keep
// them from repeating.
func worthTelling(why string) bool {
	switch why {
	case AlreadyDisrupting, "nodeclaim does not have an associated node",
		"node isn't initialized", "node is deleting or marked for deletion":
		return false
	}
	return true
}

// sentence is Karpenter's pretty.Sentence: an error made an Event message.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// offeringPrice is the price of the type's offering in zone and capacity
// type, available or not (a running node keeps its price); 0 if none.
func offeringPrice(it *scheduling.InstanceType, zone, capacityType string) float64 {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o.Price
		}
	}
	return 0
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
