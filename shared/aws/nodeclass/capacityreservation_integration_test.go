package nodeclass_test

import (
	"context"
	"testing"
	"time"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

// TestIntegrationCapacityReservations resolves the emulator's seeded
// reservations through the real SDK client as Karpenter queries them: by
// discovery tag (all three, the Capacity Block with its end time), by tag
// and match criteria, by id; and reads what each can still take.
func TestIntegrationCapacityReservations(t *testing.T) {
	emu, c := emulatortest.SDKClients(t, 7, "provisioner")
	ctx := context.Background()
	cl := emu.ClusterName()
	byKind := map[string]emulator.CapacityReservation{}
	for _, r := range emu.CapacityReservations() {
		byKind[r.Tags["Name"]] = r
	}
	targeted := byKind[emulator.SeededCapacityReservationName(cl, "targeted")]
	block := byKind[emulator.SeededCapacityReservationName(cl, "capacity-block")]
	now := time.Now()
	for _, tc := range []struct {
		name  string
		terms []awsv1.CapacityReservationSelectorTerm
		want  int
	}{
		{"by discovery tag", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cl}}}, 3},
		{"targeted only", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cl}, InstanceMatchCriteria: "targeted"}}, 2},
		{"by id", []awsv1.CapacityReservationSelectorTerm{{ID: targeted.ID}}, 1},
		{"an unknown id", []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123456789abcdef0"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nodeclass.DescribeReservations(ctx, c.EC2, now, nodeclass.CapacityReservationInputs(tc.terms))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d reservations, want %d: %+v", len(got), tc.want, got)
			}
			for _, r := range got {
				if r.Status.ID == block.ID && (r.Status.ReservationType != "capacity-block" || r.Status.EndTime == nil || !r.Status.EndTime.Time.Equal(block.End) || r.Status.State != "active") {
					t.Errorf("capacity block %+v", r.Status)
				}
				if r.Status.ID == targeted.ID && (r.Status.InstanceType != "m5.large" || r.Status.AvailabilityZone != targeted.Zone || r.Status.InstanceMatchCriteria != "targeted" || r.Available != targeted.Total) {
					t.Errorf("targeted %+v available %d", r.Status, r.Available)
				}
			}
		})
	}
	avail, err := nodeclass.ReservationAvailability(ctx, c.EC2, now, []string{targeted.ID, block.ID})
	if err != nil || avail[targeted.ID] != 2 || avail[block.ID] != 1 {
		t.Fatalf("availability %v, %v", avail, err)
	}
}
