package disruption

import (
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// CapacityBlockExpiringWindow is how long before a Capacity Block's end
// Karpenter v1.14.1 deletes the NodeClaims in it (its
// capacityreservation.expiration controller polls the end dates).
const CapacityBlockExpiringWindow = timing.CapacityBlockExpiring

// CapacityBlockExpirations are the NodeClaims launched into a Capacity
// Block that ends within CapacityBlockExpiringWindow, as the EC2NodeClasses'
// status.capacityReservations record it: the disruption tick deletes them
// (forceful, no budget), as Karpenter's expiration controller does. It is
// the backstop of the interruption function, which drains them on EC2's
// expiration warning: a warning lost or late still leaves time to move
// the pods before EC2 reclaims the instances.
func CapacityBlockExpirations(in *Input) []*karpv1.NodeClaim {
	ending := map[string]bool{}
	for _, nc := range in.Cluster.NodeClasses {
		for _, cr := range nc.Status.CapacityReservations {
			if cr.ReservationType != "capacity-block" {
				continue
			}
			if cr.State == "expiring" || cr.EndTime != nil && !in.Now.Before(cr.EndTime.Add(-CapacityBlockExpiringWindow)) {
				ending[cr.ID] = true
			}
		}
	}
	if len(ending) == 0 {
		return nil
	}
	var out []*karpv1.NodeClaim
	for _, nc := range in.Cluster.NodeClaims {
		if nc.DeletionTimestamp == nil && nc.Labels[wellknown.NodePoolLabel] != "" && ending[nc.Labels[wellknown.CapacityReservationIDLabel]] {
			out = append(out, nc)
		}
	}
	return out
}

// CapacityTypeDemotions are the NodeClaims labelled reserved whose
// instance EC2 no longer shows in its reservation (an on-demand capacity
// reservation that ended or was cancelled leaves its instances running,
// on-demand): Karpenter's capacity type controller relabels them (and their
// Nodes) on-demand and drops the reservation labels, so drift, prices and
// consolidation see them as what they now are. Nothing without instance
// facts.
func CapacityTypeDemotions(in *Input) []*karpv1.NodeClaim {
	if in.Instances == nil {
		return nil
	}
	var out []*karpv1.NodeClaim
	for _, nc := range in.Cluster.NodeClaims {
		if nc.DeletionTimestamp != nil || nc.Labels[wellknown.CapacityTypeLabel] != wellknown.CapacityTypeReserved {
			continue
		}
		f, ok := in.Instances[wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)]
		if ok && !f.Reserved {
			out = append(out, nc)
		}
	}
	return out
}

// ReservedCapacityLabels are the labels a reserved NodeClaim carries and
// loses when it is demoted to on-demand.
var ReservedCapacityLabels = []string{
	wellknown.CapacityReservationIDLabel, wellknown.CapacityReservationTypeLabel, wellknown.CapacityReservationInterruptibleLabel,
}
