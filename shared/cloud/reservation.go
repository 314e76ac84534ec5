package cloud

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// reservations is what each capacity reservation can still take, as this
// invocation knows it: EC2's count read once per invocation (Karpenter
// reads it once a minute), less this invocation's launches into it
// (Karpenter's MarkLaunched); a reservation a launch found full takes
// nothing more until the next invocation reads it again (MarkUnavailable).
type reservations struct {
	mu    sync.Mutex
	count map[string]int
	read  map[string]bool
}

// readReservations asks EC2 once per invocation for the reservations the
// classes resolved that it has not read yet. A failed read leaves them at
// nothing (their offerings unavailable), which only costs reserved
// launches for a minute; it is logged.
func (c *Cloud) readReservations(ctx context.Context, ncs []*awsv1.EC2NodeClass) {
	r := &c.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == nil {
		r.count, r.read = map[string]int{}, map[string]bool{}
	}
	var missing []string
	for _, id := range nodeclass.ReservationIDs(ncs) {
		if !r.read[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return
	}
	if c.Reservations == nil {
		c.Log.Warn("no EC2 client for capacity reservations; reserved offerings are unavailable", "reservations", missing)
		return
	}
	got, err := nodeclass.ReservationAvailability(ctx, c.Reservations, c.Clock.Now(), missing)
	if err != nil {
		c.Log.Warn("reading capacity reservations; their offerings are unavailable this invocation", "reservations", missing, "error", err)
		return
	}
	for _, id := range missing {
		r.read[id] = true
		r.count[id] = got[id]
	}
}

// available is what a reservation can still take.
func (c *Cloud) available(id string) int {
	c.resv.mu.Lock()
	defer c.resv.mu.Unlock()
	return c.resv.count[id]
}

// markLaunched counts a launch into a reservation.
func (c *Cloud) markLaunched(id string) {
	c.resv.mu.Lock()
	defer c.resv.mu.Unlock()
	if c.resv.count[id] > 0 {
		c.resv.count[id]--
	}
}

// markReservationsFull records the reservations a reserved launch found
// full (or gone): nothing more launches into them this invocation, and its
// reserved offering is marked unavailable like any capacity error, so the
// next invocations (which read EC2's count afresh, and EC2 may still show
// room it cannot give) fall back to on-demand or spot meanwhile, as
// Karpenter's in-memory mark does until its next read.
func (c *Cloud) markReservationsFull(id string, errs []instance.FleetError) {
	for _, e := range errs {
		if awserr.IsCapacityCode(e.Code) || e.Code == "InvalidCapacityReservationId.NotFound" {
			c.resv.mu.Lock()
			c.resv.count[id] = 0
			c.resv.mu.Unlock()
			if e.InstanceType != "" && e.Zone != "" {
				c.ice.Mark(wellknown.CapacityTypeReserved, e.InstanceType, e.Zone, e.Code)
			}
			c.Log.Info("capacity reservation unavailable", "reservation", id, "code", e.Code)
			return
		}
	}
}

// reservedOffering reports whether a reserved offering can be launched
// into now for a claim: the claim allows it, and the reservation has room
// or the claim is pinned to it (pinnedReservation).
func (c *Cloud) reservedOffering(o scheduling.Offering, reservationReq *scheduling.Requirement) bool {
	if !scheduling.OfferingMatchesReservation(reservationReq, &o) {
		return false
	}
	if o.CapacityType != wellknown.CapacityTypeReserved || pinnedTo(reservationReq, o.ReservationID) {
		return true
	}
	return c.available(o.ReservationID) > 0
}

// pinnedReservation reports whether a reserved offering whose count shows
// no room may still be tried by a claim pinned to its reservation: the
// simulation that made the claim counted it, and a tick killed after its
// CreateFleet may have put the claim's instance there already, which the
// count (and a DescribeInstances that does not list the instance yet) then
// shows as full. Launching again with the attempt's ClientToken returns
// that instance; a reservation that is really full answers
// ReservationCapacityExceeded, which marks it (markReservationsFull). The
// reservation must still be one of the class's, not expiring, in its zones,
// and its zone not shifted away from (ARC zonal shift).
func (c *Cloud) pinnedReservation(view *classView, o scheduling.Offering, reservationReq *scheduling.Requirement) bool {
	if o.CapacityType != wellknown.CapacityTypeReserved || !pinnedTo(reservationReq, o.ReservationID) {
		return false
	}
	zoned := false
	for _, s := range view.nc.Status.Subnets {
		zoned = zoned || s.Zone == o.Zone
	}
	for _, cr := range view.nc.Status.CapacityReservations {
		if cr.ID == o.ReservationID {
			return zoned && cr.State != nodeclass.ReservationStateExpiring && !c.zoneShifted(view.nc, o.Zone)
		}
	}
	return false
}

// pinnedTo reports whether a claim's capacity-reservation-id requirement
// names the reservation.
func pinnedTo(r *scheduling.Requirement, id string) bool {
	return r != nil && r.Operator() == corev1.NodeSelectorOpIn && r.Has(id)
}

// oneReservation keeps, of a reserved launch's offerings, those of the
// reservation of the first (cheapest) one: Karpless launches into one
// reservation per CreateFleet call and moves on to the next one a full
// reservation leaves.
func oneReservation(offs []scheduling.LaunchOffering) ([]scheduling.LaunchOffering, scheduling.Offering) {
	first := offs[0].Offering
	return slices.DeleteFunc(offs, func(o scheduling.LaunchOffering) bool { return o.Offering.ReservationID != first.ReservationID }), first
}

// reservationLabels are the labels Karpenter v1.14.1 puts on a reserved
// NodeClaim: the reservation's id, type and interruptibility.
func reservationLabels(inst *instance.Instance, view *classView) map[string]string {
	if inst.CapacityType != wellknown.CapacityTypeReserved || inst.CapacityReservationID == "" {
		return nil
	}
	out := map[string]string{
		wellknown.CapacityReservationIDLabel:            inst.CapacityReservationID,
		wellknown.CapacityReservationTypeLabel:          inst.CapacityReservationType,
		wellknown.CapacityReservationInterruptibleLabel: "false",
	}
	if out[wellknown.CapacityReservationTypeLabel] == "" {
		out[wellknown.CapacityReservationTypeLabel] = nodeclass.ReservationTypeDefault
	}
	if view != nil {
		for _, cr := range view.nc.Status.CapacityReservations {
			if cr.ID == inst.CapacityReservationID && cr.Interruptible {
				out[wellknown.CapacityReservationInterruptibleLabel] = "true"
			}
		}
	}
	return out
}

// claimReservationReq is a claim's capacity-reservation-id requirement,
// nil when it has none.
func claimReservationReq(nc *karpv1.NodeClaim) *scheduling.Requirement {
	reqs := scheduling.RequirementsFromNodePool(nc.Spec.Requirements)
	if r, ok := reqs[wellknown.CapacityReservationIDLabel]; ok {
		return r
	}
	return nil
}
