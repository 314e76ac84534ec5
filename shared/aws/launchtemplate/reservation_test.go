package launchtemplate

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestCapacityReservationSpecification: what Karpenter v1.14.1's
// CreateLaunchTemplateInputBuilder writes with its ReservedCapacity gate
// (on by default): a reserved launch targets its reservation, reservations
// only, with the capacity-block market for a Capacity Block; every other
// launch opts out of open reservations.
func TestCapacityReservationSpecification(t *testing.T) {
	for _, tc := range []struct {
		name, ct, id, typ string
		pref              ec2types.CapacityReservationPreference
		target            string
		market            ec2types.MarketType
	}{
		{name: "on-demand opts out", ct: wellknown.CapacityTypeOnDemand, pref: ec2types.CapacityReservationPreferenceNone},
		{name: "spot opts out", ct: wellknown.CapacityTypeSpot, pref: ec2types.CapacityReservationPreferenceNone},
		{name: "reserved targets its reservation", ct: wellknown.CapacityTypeReserved, id: "cr-0a1", typ: "default",
			pref: ec2types.CapacityReservationPreferenceCapacityReservationsOnly, target: "cr-0a1"},
		{name: "a capacity block sets the market type", ct: wellknown.CapacityTypeReserved, id: "cr-0b2", typ: "capacity-block",
			pref: ec2types.CapacityReservationPreferenceCapacityReservationsOnly, target: "cr-0b2", market: ec2types.MarketTypeCapacityBlock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &ec2types.RequestLaunchTemplateData{}
			capacityReservation(d, Request{CapacityType: tc.ct, CapacityReservationID: tc.id, CapacityReservationType: tc.typ})
			crs := d.CapacityReservationSpecification
			if crs == nil || crs.CapacityReservationPreference != tc.pref {
				t.Fatalf("specification %+v", crs)
			}
			if got := ""; crs.CapacityReservationTarget != nil {
				got = aws.ToString(crs.CapacityReservationTarget.CapacityReservationId)
				if got != tc.target {
					t.Errorf("target %q, want %q", got, tc.target)
				}
			} else if tc.target != "" {
				t.Errorf("no target, want %q", tc.target)
			}
			var market ec2types.MarketType
			if d.InstanceMarketOptions != nil {
				market = d.InstanceMarketOptions.MarketType
			}
			if market != tc.market {
				t.Errorf("market %q, want %q", market, tc.market)
			}
		})
	}
}
