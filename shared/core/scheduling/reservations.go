package scheduling

import (
	"slices"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// Reserved capacity, as Karpenter v1.14.1's scheduler accounts for it
// (ReservationManager and NodeClaim.offeringsToReserve): a reservation
// holds ReservationCapacity more instances; a NodeClaim of the solve holds
// one of every reservation it could launch into (pessimistically: it
// launches into one of them), gives back those its pods no longer allow,
// and at the end is pinned to capacity type reserved and to the
// reservations it holds, so the launch cannot put more instances into a
// reservation than it has. When every reservation a pod could use is
// held, strict mode (provisioning) leaves the pod for the next pass and
// fallback mode (consolidation) lets it go to on-demand or spot.

// whyReserved is the evaluation failure of strict mode.
const whyReserved = "reserved"

// ctReservedBit is the capacity-type mask bit of reserved offerings.
const ctReservedBit = uint8(1) << ctReserved

// initReservations sets what each reservation can still take: the least
// any available offering of it says (two NodeClasses may have read its
// count at different moments, as Karpenter notes).
func (s *solver) initReservations() {
	s.resv = map[string]int{}
	count := func(types []*InstanceType) {
		for _, it := range types {
			if it == nil {
				continue
			}
			for _, o := range it.Offerings {
				if o.CapacityType != wellknown.CapacityTypeReserved || !o.Available || o.ReservationID == "" {
					continue
				}
				if cur, ok := s.resv[o.ReservationID]; !ok || o.ReservationCapacity < cur {
					s.resv[o.ReservationID] = max(0, o.ReservationCapacity)
				}
			}
		}
	}
	for _, nc := range s.snap.NodeClasses {
		if nc == nil {
			continue
		}
		count(nc.InstanceTypes)
		// A NodePool's own types (an overlay selecting it) may list
		// reservations the class's do not.
		for _, types := range nc.Pools {
			count(types)
		}
	}
	for id, n := range s.snap.ReservationsHeld {
		if cur, ok := s.resv[id]; ok {
			s.resv[id] = max(0, cur-n)
		}
	}
}

// reservationLabelReqs are the offering-level labels a pod or NodePool may
// select reservations by.
var reservationLabelReqs = []string{
	wellknown.CapacityReservationIDLabel, wellknown.CapacityReservationTypeLabel, wellknown.CapacityReservationInterruptibleLabel,
}

// offeringSelected reports whether a reserved offering meets the claim's
// requirements on the reservation labels.
func offeringSelected(v *claimView, o *Offering) bool {
	for _, k := range reservationLabelReqs {
		r, ok := v.reqs[k]
		if !ok {
			continue
		}
		var val string
		switch k {
		case wellknown.CapacityReservationIDLabel:
			val = o.ReservationID
		case wellknown.CapacityReservationTypeLabel:
			val = o.ReservationType
			if val == "" {
				val = "default"
			}
		default:
			val = "false"
			if o.ReservationInterruptible {
				val = "true"
			}
		}
		if !r.Matches(val, true) {
			return false
		}
	}
	return true
}

// mustReserve reports whether the claim's requirements only admit reserved
// offerings (a reservation label required to exist).
func mustReserve(v *claimView) bool {
	for _, k := range reservationLabelReqs {
		if r, ok := v.reqs[k]; ok && !r.AllowsAbsent() {
			return true
		}
	}
	return false
}

// checkReserved decides the reservations claim c holds with pod p added,
// after fitClaim succeeded on view v and mask: ev.resv. It returns false
// when p may not join c (strict mode, or a pod that requires a
// reservation); in fallback mode it may refit the claim without reserved
// offerings.
func (s *solver) checkReserved(c *claim, p *podState, v *claimView, mask bitset, ev *claimEval) bool {
	t := c.t
	ev.resv = nil
	must := mustReserve(v)
	if len(t.resvTypes) == 0 {
		if must {
			ev.why = "requirements"
			return false
		}
		return true
	}
	req := s.scratchReq[:len(c.req)]
	for i := range req {
		req[i] = c.req[i] + p.req[i]
	}
	compatible := false
	if v.ctm&ctReservedBit != 0 {
		for _, ti := range t.resvTypes {
			tt := t.types[ti]
			if !mask.has(int(ti)) || !fits(req, tt.alloc) || (t.hasLimits && !t.withinLimits(tt, c.reserved)) {
				continue
			}
			for _, ro := range tt.resv {
				if !maskHas(v.zm, ro.zone) || !offeringSelected(v, ro.o) {
					continue
				}
				compatible = true
				id := ro.o.ReservationID
				if (slices.Contains(c.held, id) || s.resv[id] > 0) && !slices.Contains(ev.resv, id) {
					ev.resv = append(ev.resv, id)
				}
			}
		}
	}
	switch {
	case len(ev.resv) > 0:
		slices.Sort(ev.resv)
		return true
	case must:
		// Only reserved offerings may do; waiting helps only if some are
		// there, held by other claims.
		ev.why = "requirements"
		if compatible {
			ev.why, p.resvBlocked = whyReserved, true
		}
		return false
	case !s.opts.ReservedFallback && (compatible || len(c.held) > 0):
		// Karpenter's strict mode: reserved capacity this pod could use is
		// all held (it waits for the next pass), or joining would take a
		// claim off the reservations it holds.
		ev.why = whyReserved
		if compatible {
			p.resvBlocked = true
		}
		return false
	case compatible && v.ctm&ctReservedBit != 0:
		// Fallback: on-demand or spot, priced without the reservations.
		v.ctm &^= ctReservedBit
		if v.ctm == 0 || !s.fitClaim(c, p, v, mask, ev) {
			ev.why = whyReserved
			return false
		}
	}
	return true
}

// holdReservations makes claim c hold what its last evaluation decided,
// giving back what it no longer holds.
func (s *solver) holdReservations(c *claim, ids []string) {
	for _, id := range c.held {
		if !slices.Contains(ids, id) {
			s.resv[id]++
		}
	}
	for _, id := range ids {
		if !slices.Contains(c.held, id) {
			s.resv[id]--
		}
	}
	c.held = slices.Clone(ids)
}

// reservedTypeFor reports whether a type of the claim has a reserved
// offering of a held reservation in the claim's zones.
func (c *claim) reservedType(tt *tType) bool {
	for _, ro := range tt.resv {
		if maskHas(c.zm, ro.zone) && slices.Contains(c.held, ro.o.ReservationID) {
			return true
		}
	}
	return false
}
