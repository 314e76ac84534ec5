package scheduling

import (
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// finalize turns a claim into the NodeClaim to create. It returns nil and
// the reason when the types kept (at most Options.MaxInstanceTypes) no
// longer meet a minValues under Strict, as Karpenter's
// TruncateInstanceTypes fails the claim's pods.
func (s *solver) finalize(c *claim) (*NewNodeClaim, string) {
	t := c.t
	out := &NewNodeClaim{
		NodePool:      t.name,
		NodeClass:     t.class.Name,
		Taints:        t.taints,
		StartupTaints: t.startup,
	}
	for _, p := range c.pods {
		out.Pods = append(out.Pods, p.pod)
	}
	// Every type that fits, cheapest first, in the solver's scratch: the
	// slices of the result then get their exact size (a solve finalizes
	// thousands of claims; slices sized for the 600 types a claim may carry
	// were most of its allocations). Block by block: a claim of small pods
	// fits every type of most blocks, tested once for the block rather than
	// once per type.
	var cts uint8
	groups := s.scratchGroups[:len(t.groups)]
	clear(groups)
	fitting := s.scratchFitting[:0]
	prices := s.scratchPrices[:0]
	burstable := false
	for b := c.cursor / orderBlock; b*orderBlock < len(c.order.idx) && len(fitting) < s.opts.MaxInstanceTypes; b++ {
		lo, hi, some, all := c.order.block(b, c.req)
		if !some {
			continue
		}
		for i := max(lo, c.cursor); i < hi && len(fitting) < s.opts.MaxInstanceTypes; i++ {
			ti := int(c.order.idx[i])
			tt := t.types[ti]
			if !c.mask.has(ti) || !(all || fits(c.req, tt.alloc)) || (t.hasLimits && !t.withinLimits(tt, c.reserved)) {
				continue
			}
			if len(c.held) > 0 && !c.reservedType(tt) {
				continue // pinned to its reservations below
			}
			fitting = append(fitting, tt)
			prices = append(prices, c.order.price[i])
			burstable = burstable || tt.credits.burstable()
		}
	}
	s.scratchFitting, s.scratchPrices = fitting, prices
	if burstable {
		fitting = s.dropCostlyBurstable(c, fitting, prices)
	}
	out.InstanceTypes = make([]*InstanceType, 0, len(fitting))
	chosen := s.scratchChosen[:len(t.all)]
	clear(chosen)
	for _, tt := range fitting {
		out.InstanceTypes = append(out.InstanceTypes, tt.it)
		chosen.set(tt.pos)
		groups[tt.group] = true
		for ct := 0; ct < numCT; ct++ {
			if c.ctm&(1<<ct) != 0 && tt.zones[ct]&c.zm != 0 {
				cts |= 1 << ct
			}
		}
	}
	minVals, relaxed, why := s.minValuesAfterCut(c, fitting)
	if why != "" {
		return nil, why
	}
	var allowedCT []string
	for ct := 0; ct < numCT; ct++ {
		if c.ctm&(1<<ct) != 0 {
			allowedCT = append(allowedCT, ctNames[ct])
		}
	}
	out.zoneReq = NewRequirement(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, c.zoneNames(s)...)
	out.ctReq = NewRequirement(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, allowedCT...)

	reqs := c.reqs.Copy()
	if zr, ok := t.reqs[wellknown.ZoneLabel]; ok || c.zoneC {
		z := NewRequirement(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, c.zoneNames(s)...)
		if ok {
			z = zr.Intersect(z)
		}
		reqs[wellknown.ZoneLabel] = z
	}
	var ctVals []string
	for ct := 0; ct < numCT; ct++ {
		if cts&(1<<ct) != 0 {
			ctVals = append(ctVals, ctNames[ct])
		}
	}
	if len(c.held) > 0 {
		// As Karpenter's FinalizeScheduling: reserved only, in the
		// reservations held, so the launch cannot overfill one and a
		// reservation's end shows as drift.
		ctVals = []string{wellknown.CapacityTypeReserved}
		out.ctReq = NewRequirement(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, ctVals...)
		rr := NewRequirement(wellknown.CapacityReservationIDLabel, corev1.NodeSelectorOpIn, c.held...)
		reqs[wellknown.CapacityReservationIDLabel] = rr
		out.resReq = rr
	}
	ctReq := NewRequirement(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, ctVals...)
	if r, ok := t.reqs[wellknown.CapacityTypeLabel]; ok {
		ctReq = r.Intersect(ctReq)
	}
	reqs[wellknown.CapacityTypeLabel] = ctReq
	// The instance-type requirement lists the chosen types by name; the
	// template keeps them in name order so no sort is needed.
	itReq := karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: make([]string, 0, len(out.InstanceTypes))}
	for _, ti := range t.byName {
		if chosen.has(int(ti)) {
			itReq.Values = append(itReq.Values, t.types[ti].it.Name)
		}
	}
	if r, ok := reqs[wellknown.InstanceTypeLabel]; ok {
		itReq.MinValues = r.MinValues
	}
	delete(reqs, wellknown.InstanceTypeLabel)
	delete(reqs, wellknown.HostnameLabel)
	// One more entry for the instance types, one for a doubly bounded key.
	out.Requirements = reqs.appendNodeSelectorRequirements(make([]karpv1.NodeSelectorRequirementWithMinValues, 0, len(reqs)+2))
	out.Requirements = append(out.Requirements, itReq)
	setMinValues(out.Requirements, t.minValueKeys, minVals)
	sort.SliceStable(out.Requirements, func(i, j int) bool { return out.Requirements[i].Key < out.Requirements[j].Key })

	// As Karpenter's NodeClaimTemplate: every custom key the NodeClaim
	// requires gets a label value that meets the requirement, so that pods
	// selecting the key (In, Exists, Gt, ...) can bind to the node. Keys
	// whose value the instance type gives are left to the launch.
	out.Labels = maps.Clone(t.labels)
	for k, r := range reqs {
		if IsWellKnown(k) || wellknown.IsRestrictedLabel(k) || s.isTypeKey(k) {
			continue
		}
		if v, ok := r.Any(); ok {
			out.Labels[k] = v
		}
	}

	// Requests: the pods plus the smallest DaemonSet overhead among the
	// remaining types, as Karpenter reports it.
	req := make([]int64, len(c.req))
	copy(req, c.req)
	var overhead []int64
	for g, used := range groups {
		if !used {
			continue
		}
		o := t.groups[g].overhead
		if overhead == nil {
			overhead = append([]int64(nil), o...)
			continue
		}
		for i := range overhead {
			overhead[i] = min(overhead[i], o[i])
		}
	}
	if overhead != nil {
		addInto(req, overhead)
	}
	out.Requests = s.d.list(req)
	out.MinValuesRelaxed = c.minRelaxed || relaxed
	return out, ""
}

// dropCostlyBurstable leaves out of a claim's types (fitting, in the
// claim's price order, with their offering prices) the burstable ones that
// EC2 would pick for their lower offering price though they cost more with
// the surplus CPU credits of the claim's requests than a type after them
// (keepInEC2Order). It keeps them all when leaving them out would break a
// minValues the full list meets: the NodeClaim then carries them, as
// Karpenter's would, and EC2 may launch one.
func (s *solver) dropCostlyBurstable(c *claim, fitting []*tType, prices []float64) []*tType {
	t := c.t
	credits := s.scratchCredits[:0]
	spends := false
	for _, tt := range fitting {
		cr := t.creditsAt(tt, c.req[dimCPU])
		credits = append(credits, cr)
		spends = spends || cr > 0
	}
	s.scratchCredits = credits
	if !spends {
		return fitting
	}
	keep := s.scratchKeep[:0]
	for range fitting {
		keep = append(keep, false)
	}
	s.scratchKeep = keep
	keepInEC2Order(prices, credits, keep)
	kept := make([]*tType, 0, len(fitting))
	for i, tt := range fitting {
		if keep[i] {
			kept = append(kept, tt)
		}
	}
	if len(kept) == len(fitting) || len(t.minValueKeys) == 0 {
		return kept
	}
	all, some := newMinValues(t.minValueKeys), newMinValues(t.minValueKeys)
	for _, tt := range fitting {
		all.add(tt, c.zm, c.ctm)
	}
	for _, tt := range kept {
		some.add(tt, c.zm, c.ctm)
	}
	for k := range t.minValueKeys {
		if need := c.minValueOf(k); some.count(k) < need && some.count(k) < all.count(k) {
			return fitting
		}
	}
	return kept
}

// minValuesAfterCut counts the minValues keys again over the types the
// claim keeps (the cut to Options.MaxInstanceTypes and to reserved types
// can drop values). Under Strict a shortfall fails the claim; under
// BestEffort the minValues are lowered to what is left, so the NodeClaim
// never lists fewer values than its minValues (Karpenter's BestEffort
// keeps the minValues it had, which its NodeClaim CRD may then refuse).
func (s *solver) minValuesAfterCut(c *claim, kept []*tType) (minVals []int, relaxed bool, why string) {
	t := c.t
	if len(t.minValueKeys) == 0 {
		return nil, false, ""
	}
	m := newMinValues(t.minValueKeys)
	for _, tt := range kept {
		m.add(tt, c.zm, c.ctm)
	}
	minVals = make([]int, len(t.minValueKeys))
	for k, key := range t.minValueKeys {
		need, got := c.minValueOf(k), m.count(k)
		minVals[k] = need
		if got >= need {
			continue
		}
		if s.opts.MinValues != MinValuesBestEffort {
			return nil, false, fmt.Sprintf("NodePool %s: the %d cheapest instance types a NodeClaim carries have %d values of %s, fewer than its minValues %d",
				t.name, len(kept), got, key, need)
		}
		minVals[k], relaxed = got, true
	}
	return minVals, relaxed, ""
}

// setMinValues writes the claim's minValues on its requirements. A
// minValues relaxed to nothing is dropped: the NodeClaim CRD takes 1 to 50.
func setMinValues(reqs []karpv1.NodeSelectorRequirementWithMinValues, keys []string, vals []int) {
	for k, key := range keys {
		for i := range reqs {
			if reqs[i].Key != key || reqs[i].MinValues == nil {
				continue
			}
			if vals[k] < 1 {
				reqs[i].MinValues = nil
				continue
			}
			v := vals[k]
			reqs[i].MinValues = &v
		}
	}
}
