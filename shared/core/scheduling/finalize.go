package scheduling

import (
	"maps"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// finalize turns a claim into the NodeClaim to create.
func (s *solver) finalize(c *claim) *NewNodeClaim {
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
	// Every type that fits, cheapest first.
	var cts uint8
	groups := make([]bool, len(t.groups))
	fitting := make([]*tType, 0, min(s.opts.MaxInstanceTypes, len(t.types)))
	out.InstanceTypes = make([]*InstanceType, 0, min(s.opts.MaxInstanceTypes, len(t.types)))
	chosen := newBitset(len(t.types))
	for i := c.cursor; i < len(c.order.idx) && len(out.InstanceTypes) < s.opts.MaxInstanceTypes; i++ {
		ti := int(c.order.idx[i])
		tt := t.types[ti]
		if !c.mask.has(ti) || !fits(c.req, tt.alloc) || (t.hasLimits && !t.withinLimits(tt, c.reserved)) {
			continue
		}
		out.InstanceTypes = append(out.InstanceTypes, tt.it)
		fitting = append(fitting, tt)
		chosen.set(ti)
		groups[tt.group] = true
		for ct := 0; ct < numCT; ct++ {
			if c.ctm&(1<<ct) != 0 && tt.zones[ct]&c.zm != 0 {
				cts |= 1 << ct
			}
		}
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
	out.Requirements = append(reqs.NodeSelectorRequirements(), itReq)
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
	out.MinValuesRelaxed = c.minRelaxed
	out.launchType, out.launchOffering = s.launch(fitting, c.zm, c.ctm, len(t.minValueKeys) > 0)
	return out
}

// launch is CheapestOffering over a claim's types, from their price tables.
// types are in price order, exotic ones last.
func (s *solver) launch(types []*tType, zm uint64, ctm uint8, minValues bool) (*InstanceType, Offering) {
	nz := len(s.zones)
	generic := false
	for _, tt := range types {
		if !tt.exotic {
			generic = true
			break
		}
	}
	skip := func(tt *tType) bool { return !minValues && generic && tt.exotic }
	reserved := false
	for _, tt := range types {
		if !skip(tt) && tt.zones[ctReserved]&zm != 0 && ctm&(1<<ctReserved) != 0 {
			reserved = true
			break
		}
	}
	// Without reservations, when the cheapest offering of the cheapest type
	// is spot, it is the launch's choice: every other offering costs at
	// least as much, so the spot filter keeps it and spot wins.
	if !reserved && len(types) > 0 && !skip(types[0]) {
		first := types[0]
		best := math.Inf(1)
		var pick *Offering
		for i := range first.it.Offerings {
			o := &first.it.Offerings[i]
			z, ok := s.zoneIdx[o.Zone]
			ct := ctIndex(o.CapacityType)
			if !o.Available || !ok || ct < 0 || !maskHas(zm, z) || ctm&(1<<ct) == 0 || o.Price >= best {
				continue
			}
			best, pick = o.Price, o
		}
		if pick != nil && pick.CapacityType == ctNames[ctSpot] {
			return first.it, *pick
		}
	}
	cheapestOD, hasSpot := math.Inf(1), false
	for _, tt := range types {
		if skip(tt) {
			continue
		}
		if ctm&(1<<ctOnDemand) != 0 {
			cheapestOD = min(cheapestOD, tt.priceIn(zm, 1<<ctOnDemand, nz))
		}
		if ctm&(1<<ctSpot) != 0 && tt.zones[ctSpot]&zm != 0 {
			hasSpot = true
		}
	}
	spotFilter := !minValues && hasSpot && !math.IsInf(cheapestOD, 1)
	for ct := 0; ct < numCT; ct++ {
		if ctm&(1<<ct) == 0 {
			continue
		}
		var best *tType
		bestZ, bestP := -1, math.Inf(1)
		for _, tt := range types {
			if skip(tt) {
				continue
			}
			for m := tt.zones[ct] & zm; m != 0; m &= m - 1 {
				z := trailing(m)
				p := tt.price[ct*nz+z]
				if spotFilter && ct == ctSpot && p > cheapestOD {
					continue
				}
				if p < bestP {
					best, bestZ, bestP = tt, z, p
				}
			}
		}
		if best == nil {
			continue
		}
		for _, o := range best.it.Offerings {
			if o.Available && o.Zone == s.zones[bestZ] && o.CapacityType == ctNames[ct] && o.Price == bestP {
				return best.it, o
			}
		}
	}
	return nil, Offering{}
}
