package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestCapacityBlockExpirations ports Karpenter v1.14.1's capacity
// reservation expiration cases: the NodeClaims of a Capacity Block within
// 40 minutes of its end are deleted; a block further from its end, a
// default reservation with an end date, and claims of other reservations
// are kept.
func TestCapacityBlockExpirations(t *testing.T) {
	end := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	for _, tc := range []struct {
		name string
		cr   awsv1.CapacityReservation
		want bool
	}{
		{"block 39 minutes from its end", awsv1.CapacityReservation{ID: "cr-1", ReservationType: "capacity-block", State: "active", EndTime: end(39 * time.Minute)}, true},
		{"block marked expiring", awsv1.CapacityReservation{ID: "cr-1", ReservationType: "capacity-block", State: "expiring", EndTime: end(time.Hour)}, true},
		{"block 41 minutes from its end", awsv1.CapacityReservation{ID: "cr-1", ReservationType: "capacity-block", State: "active", EndTime: end(41 * time.Minute)}, false},
		{"default reservation near its end", awsv1.CapacityReservation{ID: "cr-1", ReservationType: "default", State: "active", EndTime: end(10 * time.Minute)}, false},
		{"another reservation's block", awsv1.CapacityReservation{ID: "cr-2", ReservationType: "capacity-block", State: "expiring", EndTime: end(10 * time.Minute)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.class().Status.CapacityReservations = []awsv1.CapacityReservation{tc.cr}
			nc := f.node("n1", "m.xlarge", "test-1a", "reserved")
			nc.Labels[wellknown.CapacityReservationIDLabel] = "cr-1"
			f.node("n2", "m.xlarge", "test-1a", "on-demand")
			got := CapacityBlockExpirations(f.input())
			if (len(got) == 1 && got[0].Name == nc.Name) != tc.want || len(got) > 1 {
				t.Fatalf("expirations %v, want n1: %v", got, tc.want)
			}
		})
	}
}

// TestCapacityTypeDemotions ports Karpenter v1.14.1's capacity type
// controller: a reserved claim whose instance left its reservation is
// demoted; one still in it, an on-demand one, and any without instance
// facts are not.
func TestCapacityTypeDemotions(t *testing.T) {
	f := newFixture(t)
	left := f.node("left", "m.xlarge", "test-1a", "reserved")
	kept := f.node("kept", "m.xlarge", "test-1a", "reserved")
	od := f.node("od", "m.xlarge", "test-1a", "on-demand")
	in := f.input()
	in.Instances = nil
	if got := CapacityTypeDemotions(in); len(got) != 0 {
		t.Fatalf("demotions without instance facts: %v", got)
	}
	in.Instances = map[string]InstanceFacts{}
	for _, nc := range []*karpv1.NodeClaim{left, kept, od} {
		in.Instances[wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)] = InstanceFacts{Reserved: nc == kept}
	}
	got := CapacityTypeDemotions(in)
	if len(got) != 1 || got[0].Name != left.Name {
		t.Fatalf("demotions %v, want %s", got, left.Name)
	}
}
