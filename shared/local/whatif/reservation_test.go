package whatif

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestSimulateWithReservations: simulate launches into a class's capacity
// reservation (priced as Karpenter prices prepaid capacity, named in the
// answer) while it has room, says when its room is assumed, and falls back
// to spot once it is told the reservation is used up.
func TestSimulateWithReservations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		room  map[string]int
		wants []string
	}{
		{name: "room assumed", wants: []string{
			"m5.large reserved in us-east-1a at $0.0000/h in capacity reservation cr-0a1 (prepaid)",
			"capacity reservations cr-0a1: EC2's remaining count is not in the cluster",
		}},
		{name: "used up", room: map[string]int{"cr-0a1": 0}, wants: []string{"m5.large spot in us-east-1b at $0.0350/h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			np := f.poolNamed("default")
			np.Spec.Template.Spec.Requirements[0] = karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn,
				Values: []string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand}}
			f.snap.NodeClasses[0].Status.CapacityReservations = []awsv1.CapacityReservation{{
				ID: "cr-0a1", InstanceType: "m5.large", AvailabilityZone: zoneA, InstanceMatchCriteria: "targeted", OwnerID: "123456789012", ReservationType: "default", State: "active",
			}}
			f.pod("web", "pending", "1", "2Gi", "")
			in := Input{Cluster: f.snap, Market: f.market, Options: Options{Now: t0, Reservations: tc.room}}
			w, err := New(in)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := w.Simulate().WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.wants {
				if !strings.Contains(b.String(), s) {
					t.Errorf("text lacks %q:\n%s", s, b.String())
				}
			}
		})
	}
}
