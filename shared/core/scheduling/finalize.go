package scheduling

import (
	"maps"
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
		if len(c.held) > 0 && !c.reservedType(tt) {
			continue // pinned to its reservations below
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
	return out
}
