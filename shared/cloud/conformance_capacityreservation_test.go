package cloud

import (
	"testing"

	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's capacity reservation provider suite
// (aws/karpenter-provider-aws pkg/providers/capacityreservation/suite_test.go),
// its availability counting: what a reservation can still take, as one
// invocation counts its launches into it (reservation.go).
func TestConformanceCapacityReservationAvailability(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "aws/providers/capacityreservation", File: "pkg/providers/capacityreservation/suite_test.go",
			Spec: "Capacity Reservation Provider > Availability Cache > " + spec}
	}
	conformance.Run(t, c("should decrement availability when reservation is marked as launched"), func(t *testing.T) {
		cl := &Cloud{}
		cl.resv.count = map[string]int{"cr-test": 5}
		cl.markLaunched("cr-test-2")
		if got := cl.available("cr-test"); got != 5 {
			t.Fatalf("another reservation's launch took from cr-test: %d", got)
		}
		cl.markLaunched("cr-test")
		if got := cl.available("cr-test"); got != 4 {
			t.Errorf("available %d, want 4", got)
		}
	})
	conformance.Run(t, conformance.Case{Suite: "aws/providers/capacityreservation", File: "pkg/providers/capacityreservation/suite_test.go",
		Spec:    "Capacity Reservation Provider > Availability Cache > should increment availability when reservation is marked as terminated",
		Differs: "Karpless keeps no reservation count across invocations: each provisioning invocation reads what a reservation can take from EC2 (DescribeCapacityReservations), so an instance terminated out of a reservation frees its place as soon as EC2 counts it, not through an in-memory increment"}, func(*testing.T) {})
}
