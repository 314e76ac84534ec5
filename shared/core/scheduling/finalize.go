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
	// Every type that fits, cheapest first. The positions are gathered in
	// the solver's scratch first so that the slices of the result get their
	// exact size: a solve finalizes thousands of claims, and slices sized
	// for the 600 types a claim may carry were most of its allocations.
	var cts uint8
	kept := s.scratchKept[:0]
	// Block by block: a claim of small pods fits every type of most blocks,
	// tested once for the block rather than once per type.
	for b := c.cursor / orderBlock; b*orderBlock < len(c.order.idx) && len(kept) < s.opts.MaxInstanceTypes; b++ {
		lo, hi, some, all := c.order.block(b, c.req)
		if !some {
			continue
		}
		for i := max(lo, c.cursor); i < hi && len(kept) < s.opts.MaxInstanceTypes; i++ {
			ti := c.order.idx[i]
			tt := t.types[ti]
			if !c.mask.has(int(ti)) || !(all || fits(c.req, tt.alloc)) || (t.hasLimits && !t.withinLimits(tt, c.reserved)) {
				continue
			}
			if len(c.held) > 0 && !c.reservedType(tt) {
				continue // pinned to its reservations below
			}
			kept = append(kept, ti)
			for ct := 0; ct < numCT; ct++ {
				if c.ctm&(1<<ct) != 0 && tt.zones[ct]&c.zm != 0 {
					cts |= 1 << ct
				}
			}
		}
	}
	s.scratchKept = kept
	groups := s.scratchGroups[:len(t.groups)]
	clear(groups)
	chosen := s.scratchChosen[:len(t.all)]
	clear(chosen)
	out.InstanceTypes = make([]*InstanceType, len(kept))
	var fitting []*tType // for minValues only
	if len(t.minValueKeys) > 0 {
		fitting = make([]*tType, len(kept))
	}
	for i, ti := range kept {
		tt := t.types[ti]
		out.InstanceTypes[i] = tt.it
		if fitting != nil {
			fitting[i] = tt
		}
		chosen.set(int(ti))
		groups[tt.group] = true
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

	out.Labels = maps.Clone(t.labels)
	for k, r := range reqs {
		if IsWellKnown(k) || wellknown.IsRestrictedLabel(k) {
			continue
		}
		if r.Operator() == corev1.NodeSelectorOpIn && len(r.Values()) == 1 {
			out.Labels[k] = r.Values()[0]
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
