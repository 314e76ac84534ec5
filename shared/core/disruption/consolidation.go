package disruption

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// SpotToSpotRule begins the reason Karpenter gives when its spot-to-spot
// rule (15 cheaper instance types) keeps a spot candidate; readers of the
// Unconsolidatable Events match on it.
const SpotToSpotRule = "SpotToSpotConsolidation requires"

// NoCheaperReplacement starts the message of a candidate whose pods the
// room elsewhere cannot take and no cheaper instance type can hold.
const NoCheaperReplacement = "Can't replace with a cheaper node"

// consolidate is Karpenter's computeConsolidation: can the candidates go,
// their pods moving to the other nodes plus at most one new node that is
// cheaper than all of them together? It returns the command, or nil and
// why not.
func (w *world) consolidate(m Method, cands []*Candidate) (*Command, string) {
	sim := w.simulateConsolidation(cands)
	if sim.failure != "" {
		return nil, sim.failure
	}
	return w.fromSimulation(m, cands, sim.results)
}

// fromSimulation is the rest of computeConsolidation, on a simulation of
// the candidates' going.
func (w *world) fromSimulation(m Method, cands []*Candidate, results *scheduling.Results) (*Command, string) {
	sim := simulation{results: results}
	before := 0.0
	allSpot := true
	for _, cn := range cands {
		before += cn.Price
		if cn.CapacityType != wellknown.CapacityTypeSpot {
			allSpot = false
		}
	}
	moved := map[*corev1.Pod]bool{}
	for _, cn := range cands {
		for _, p := range cn.Reschedulable {
			moved[p] = true
		}
	}
	// The credits the moved pods make staying burstable nodes spend.
	extra := w.creditsAdded(sim.results, moved)
	cmd := &Command{Method: m, Candidates: cands, PriceBefore: before, PriceAfter: extra}
	switch len(sim.results.NewNodeClaims) {
	case 0:
		if extra > 0 && extra >= before {
			return nil, fmt.Sprintf("Can't remove: the CPU credits its pods would spend on the burstable nodes that take them ($%.4f/h) cost more than the node(s) ($%.4f/h)", extra, before)
		}
		cmd.Why = fmt.Sprintf("%d node(s) can go, their pods fit on other nodes", len(cands))
		return cmd, ""
	case 1:
	default:
		return nil, fmt.Sprintf("Can't remove without creating %d candidates", len(sim.results.NewNodeClaims))
	}
	n := sim.results.NewNodeClaims[0]
	reqs := scheduling.RequirementsFromNodePool(n.Requirements)
	ct := reqs.Get(wellknown.CapacityTypeLabel)
	var err error
	if allSpot && ct.Has(wellknown.CapacityTypeSpot) {
		if !w.c.in.Options.SpotToSpotConsolidation {
			return nil, "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
		}
		reqs[wellknown.CapacityTypeLabel] = scheduling.NewRequirement(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeSpot)
		n, err = narrow(n, reqs, before-extra)
		if err != nil {
			return nil, fmt.Sprintf("Filtering by price: %v", err)
		}
		if len(n.InstanceTypes) == 0 {
			return nil, NoCheaperReplacement
		}
		if len(cands) == 1 {
			// Keep only the cheapest options, so that the node launched is
			// one of them and is not itself replaced at once.
			if len(n.InstanceTypes) < minSpotToSpotOptions {
				return nil, fmt.Sprintf(SpotToSpotRule+" %d cheaper instance type options than the current candidate to consolidate, got %d",
					minSpotToSpotOptions, len(n.InstanceTypes))
			}
			keep := max(minSpotToSpotOptions, minValuesNeeded(n))
			if len(n.InstanceTypes) > keep {
				n, _ = narrowTo(n, scheduling.RequirementsFromNodePool(n.Requirements), n.InstanceTypes[:keep])
			}
		}
	} else {
		n, err = narrow(n, reqs, before-extra)
		if err != nil {
			return nil, fmt.Sprintf("Filtering by price: %v", err)
		}
		if len(n.InstanceTypes) == 0 {
			return nil, NoCheaperReplacement
		}
		// The price filter assumed spot would launch when both capacity
		// types are allowed; insist on it, so that a spot shortage fails
		// the launch instead of launching a dearer on-demand node.
		r := scheduling.RequirementsFromNodePool(n.Requirements)
		if c := r.Get(wellknown.CapacityTypeLabel); c.Has(wellknown.CapacityTypeSpot) && c.Has(wellknown.CapacityTypeOnDemand) {
			r[wellknown.CapacityTypeLabel] = scheduling.NewRequirement(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeSpot)
			n, _ = narrowTo(n, r, n.InstanceTypes)
		}
	}
	it, o := n.CheapestOffering()
	if it == nil {
		return nil, NoCheaperReplacement
	}
	cmd.Replacements = []*scheduling.NewNodeClaim{n}
	cmd.PriceAfter = n.HourlyPrice() + extra
	cmd.Why = fmt.Sprintf("%d node(s) can be replaced by one cheaper node (%s %s in %s)", len(cands), it.Name, o.CapacityType, o.Zone)
	return cmd, ""
}

// proposed is the command a validation carries out: the proposal's
// replacement (its instance types, in its order) on the simulation just
// run, with the capacity type consolidation launches, as Karpenter
// launches the command it validated rather than a new plan.
func (w *world) proposed(m Method, cands []*Candidate, results *scheduling.Results, names []string) (*Command, string) {
	before, allSpot := 0.0, true
	moved := map[*corev1.Pod]bool{}
	for _, cn := range cands {
		before += cn.Price
		allSpot = allSpot && cn.CapacityType == wellknown.CapacityTypeSpot
		for _, p := range cn.Reschedulable {
			moved[p] = true
		}
	}
	extra := w.creditsAdded(results, moved)
	n := results.NewNodeClaims[0]
	byName := make(map[string]*scheduling.InstanceType, len(n.InstanceTypes))
	for _, it := range n.InstanceTypes {
		byName[it.Name] = it
	}
	types := make([]*scheduling.InstanceType, 0, len(names))
	for _, name := range names {
		if it := byName[name]; it != nil {
			types = append(types, it)
		}
	}
	n, err := narrowTo(n, launchRequirements(allSpot, n), types)
	if err != nil {
		return nil, fmt.Sprintf("Filtering by price: %v", err)
	}
	it, o := n.CheapestOffering()
	if it == nil {
		return nil, NoCheaperReplacement
	}
	cmd := &Command{Method: m, Candidates: cands, PriceBefore: before, Replacements: []*scheduling.NewNodeClaim{n}, PriceAfter: n.HourlyPrice() + extra}
	cmd.Why = fmt.Sprintf("%d node(s) can be replaced by one cheaper node (%s %s in %s)", len(cands), it.Name, o.CapacityType, o.Zone)
	return cmd, ""
}

// launchRequirements are the claim's requirements with the capacity type
// consolidation launches: spot only when every candidate is spot and spot
// is allowed (spot-to-spot), or when both spot and on-demand are (the
// price filter judged the spot offerings).
func launchRequirements(allSpot bool, n *scheduling.NewNodeClaim) scheduling.Requirements {
	reqs := scheduling.RequirementsFromNodePool(n.Requirements)
	if ct := reqs.Get(wellknown.CapacityTypeLabel); ct.Has(wellknown.CapacityTypeSpot) && (allSpot || ct.Has(wellknown.CapacityTypeOnDemand)) {
		reqs[wellknown.CapacityTypeLabel] = scheduling.NewRequirement(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeSpot)
	}
	return reqs
}

// replaceWith makes n (the command's one replacement, narrowed further) its
// replacement, and its price after follow: the credits moved pods add on
// staying nodes stay counted.
func (cmd *Command) replaceWith(n *scheduling.NewNodeClaim) {
	cmd.PriceAfter += n.HourlyPrice() - cmd.Replacements[0].HourlyPrice()
	cmd.Replacements[0] = n
}

// narrow keeps the claim's instance types every offering of which the
// launch could pick under reqs costs less than maxPrice, plus the surplus
// CPU credits the claim's requests spend on a burstable type, cheapest
// first, and checks that minValues still hold: Karpenter's
// RemoveInstanceTypeOptionsByPriceAndMinValues, which judges a type by its
// worst launch price (the dearest available offering of the capacity type
// the launch would use) and has no credits. Judging by the cheapest
// offering would let a spot launch land on a dearer zone's offering than
// the node it replaces.
func narrow(n *scheduling.NewNodeClaim, reqs scheduling.Requirements, maxPrice float64) (*scheduling.NewNodeClaim, error) {
	zone, ct := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	type priced struct {
		it    *scheduling.InstanceType
		price float64
	}
	var kept []priced
	for _, it := range n.InstanceTypes {
		credits := n.CreditHourly(it)
		if worstLaunchPrice(it, zone, ct)+credits < maxPrice {
			kept = append(kept, priced{it, cheapestAllowed(it, zone, ct) + credits})
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].price < kept[j].price })
	types := make([]*scheduling.InstanceType, len(kept))
	for i, k := range kept {
		types[i] = k.it
	}
	return narrowTo(n, reqs, types)
}

// launchOrder is the order in which a launch prefers capacity types when a
// claim allows several (Karpenter's WorstLaunchPrice precedence).
var launchOrder = []string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand}

// worstLaunchPrice is the price of the type's dearest available offering in
// an allowed zone, of the first capacity type in launchOrder that has one;
// +Inf when there is none.
func worstLaunchPrice(it *scheduling.InstanceType, zone, ct *scheduling.Requirement) float64 {
	for _, want := range launchOrder {
		if !ct.Has(want) {
			continue
		}
		worst, found := 0.0, false
		for _, o := range it.Offerings {
			if o.Available && o.CapacityType == want && zone.Has(o.Zone) {
				worst, found = max(worst, o.Price), true
			}
		}
		if found {
			return worst
		}
	}
	return math.Inf(1)
}

// narrowTo is a copy of the claim restricted to types (in that order) and
// reqs, with the instance-type requirement rewritten to match. It errors
// when a minValues requirement can no longer be met.
func narrowTo(n *scheduling.NewNodeClaim, reqs scheduling.Requirements, types []*scheduling.InstanceType) (*scheduling.NewNodeClaim, error) {
	reqs = reqs.Copy()
	names := make([]string, len(types))
	for i, it := range types {
		names[i] = it.Name
	}
	itReq := scheduling.NewRequirement(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, names...)
	if old, ok := reqs[wellknown.InstanceTypeLabel]; ok && old.MinValues != nil {
		itReq = scheduling.NewRequirementWithMinValues(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, old.MinValues, names...)
	}
	reqs[wellknown.InstanceTypeLabel] = itReq
	out := &scheduling.NewNodeClaim{
		NodePool:         n.NodePool,
		NodeClass:        n.NodeClass,
		Requirements:     reqs.NodeSelectorRequirements(),
		Labels:           n.Labels,
		Taints:           n.Taints,
		StartupTaints:    n.StartupTaints,
		Requests:         n.Requests,
		Pods:             n.Pods,
		InstanceTypes:    types,
		MinValuesRelaxed: n.MinValuesRelaxed,
	}
	var short []string
	for _, k := range reqs.Keys() {
		r := reqs[k]
		if r.MinValues == nil || len(types) == 0 {
			continue
		}
		if got := scheduling.MinValuesCount(types, k, reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)); got < *r.MinValues {
			short = append(short, k)
		}
	}
	if len(short) > 0 {
		// Karpenter's words (SatisfiesMinValues), which its Unconsolidatable
		// Event carries after "Filtering by price: ".
		sort.Strings(short)
		return out, fmt.Errorf("minValues requirement is not met for label(s) (label(s)=%v)", short)
	}
	return out, nil
}

// minValuesNeeded is how many of the claim's types (cheapest first) it takes
// to meet every minValues requirement.
func minValuesNeeded(n *scheduling.NewNodeClaim) int {
	reqs := scheduling.RequirementsFromNodePool(n.Requirements)
	zone, ct := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	need := 0
	for _, k := range reqs.Keys() {
		r := reqs[k]
		if r.MinValues == nil {
			continue
		}
		for i := range n.InstanceTypes {
			if scheduling.MinValuesCount(n.InstanceTypes[:i+1], k, zone, ct) >= *r.MinValues {
				need = max(need, i+1)
				break
			}
		}
	}
	return need
}

// cheapestAllowed is the price of the type's cheapest available offering in
// an allowed zone and capacity type, +Inf when there is none.
func cheapestAllowed(it *scheduling.InstanceType, zone, ct *scheduling.Requirement) float64 {
	best := math.Inf(1)
	for _, o := range it.Offerings {
		if o.Available && zone.Has(o.Zone) && ct.Has(o.CapacityType) && o.Price < best {
			best = o.Price
		}
	}
	return best
}

// withoutSameTypes is Karpenter's filterOutSameInstanceType for multi-node
// consolidation: when the replacement could be one of the candidates' own
// instance types, only types cheaper than the cheapest such candidate are
// worth it (otherwise deleting the others and keeping that one is the same
// saving with less disruption).
func withoutSameTypes(n *scheduling.NewNodeClaim, cands []*Candidate) (*scheduling.NewNodeClaim, error) {
	priceOf := map[string]float64{}
	for _, cn := range cands {
		if cn.InstanceType == nil {
			continue
		}
		p := offeringPrice(cn.InstanceType, cn.Zone, cn.CapacityType)
		if old, ok := priceOf[cn.InstanceType.Name]; !ok || p < old {
			priceOf[cn.InstanceType.Name] = p
		}
	}
	limit := math.MaxFloat64
	for _, it := range n.InstanceTypes {
		if p, ok := priceOf[it.Name]; ok && p < limit {
			limit = p
		}
	}
	if limit == math.MaxFloat64 {
		return n, nil
	}
	return narrow(n, scheduling.RequirementsFromNodePool(n.Requirements), limit)
}
