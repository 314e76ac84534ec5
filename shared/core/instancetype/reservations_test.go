package instancetype

import (
	"testing"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestWithReservations ports Karpenter v1.14.1's ReservedCapacityResolver
// cases: a reserved offering per reservation of the type, priced at the
// on-demand price over 10,000,000, available only with capacity left, in
// the class's zones, not expiring and not marked unavailable; the input
// types are not changed.
func TestWithReservations(t *testing.T) {
	od := scheduling.Offering{Zone: "z-a", CapacityType: wellknown.CapacityTypeOnDemand, Price: 0.096, Available: true}
	base := []*scheduling.InstanceType{{Name: "m5.large", Offerings: []scheduling.Offering{od}}, {Name: "c5.large"}}
	nc := &awsv1.EC2NodeClass{Status: awsv1.EC2NodeClassStatus{
		Subnets: []awsv1.Subnet{{ID: "s-a", Zone: "z-a"}, {ID: "s-b", Zone: "z-b"}},
		CapacityReservations: []awsv1.CapacityReservation{
			{ID: "cr-1", InstanceType: "m5.large", AvailabilityZone: "z-a", ReservationType: "default", State: "active"},
			{ID: "cr-2", InstanceType: "m5.large", AvailabilityZone: "z-a", ReservationType: "capacity-block", State: "expiring"},
			{ID: "cr-3", InstanceType: "m5.large", AvailabilityZone: "z-c", State: "active"},
			{ID: "cr-4", InstanceType: "m5.large", AvailabilityZone: "z-b", State: "active", Interruptible: true},
			{ID: "cr-5", InstanceType: "m5.large", AvailabilityZone: "z-b", State: "active"},
			{ID: "cr-6", InstanceType: "r9.large", AvailabilityZone: "z-a", State: "active"},
		},
	}}
	avail := map[string]int{"cr-1": 2, "cr-2": 1, "cr-3": 1, "cr-4": 0, "cr-5": 3}
	marked := func(ct, it, zone string) bool {
		return ct == wellknown.CapacityTypeReserved && zone == "z-b" && it == "m5.large"
	}
	got := WithReservations(base, nc, func(id string) int { return avail[id] }, marked)
	if len(base[0].Offerings) != 1 {
		t.Fatalf("input type changed: %+v", base[0].Offerings)
	}
	want := map[string]struct {
		available bool
		capacity  int
		typ       string
	}{
		"cr-1": {true, 2, "default"},         // active, capacity left
		"cr-2": {false, 1, "capacity-block"}, // expiring
		"cr-3": {false, 1, "default"},        // not in the class's zones
		"cr-4": {false, 0, "default"},        // no capacity left
		"cr-5": {false, 3, "default"},        // marked unavailable
	}
	offs := got[0].Offerings[1:]
	if len(offs) != len(want) || len(got[1].Offerings) != 0 {
		t.Fatalf("offerings %+v / %+v", offs, got[1].Offerings)
	}
	for _, o := range offs {
		w := want[o.ReservationID]
		if o.CapacityType != wellknown.CapacityTypeReserved || o.Available != w.available || o.ReservationCapacity != w.capacity || o.ReservationType != w.typ ||
			o.Price != 0.096/10_000_000 || o.ReservationInterruptible != (o.ReservationID == "cr-4") {
			t.Errorf("offering %+v, want %+v", o, w)
		}
	}
}
