package nodeclass

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's capacity reservation provider suite
// (aws/karpenter-provider-aws pkg/providers/capacityreservation/suite_test.go),
// its listing: what each reservation a selector finds can still take, read
// with it (the launch side's counting is shared/cloud's).
func TestConformanceCapacityReservationList(t *testing.T) {
	cr := func(id string, avail int32) ec2types.CapacityReservation {
		return ec2types.CapacityReservation{AvailabilityZone: aws.String("test-zone-1a"), InstanceType: aws.String("m5.large"), OwnerId: aws.String("012345678901"),
			InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted, CapacityReservationId: aws.String(id), AvailableInstanceCount: aws.Int32(avail),
			Tags: ec2Tags("karpenter.sh/discovery", "test"), State: ec2types.CapacityReservationStateActive}
	}
	conformance.Run(t, conformance.Case{Suite: "aws/providers/capacityreservation", File: "pkg/providers/capacityreservation/suite_test.go",
		Spec: "Capacity Reservation Provider > Availability Cache > should sync availability cache when listing reservations"}, func(t *testing.T) {
		api := &fakeEC2{crs: []ec2types.CapacityReservation{cr("cr-m5.large-1a-1", 10), cr("cr-m5.large-1a-2", 15)}}
		found, err := DescribeReservations(context.Background(), api, time.Now(),
			CapacityReservationInputs([]awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}}))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, f := range found {
			got[f.Status.ID] = f.Available
		}
		if want := map[string]int{"cr-m5.large-1a-1": 10, "cr-m5.large-1a-2": 15}; !reflect.DeepEqual(got, want) {
			t.Errorf("availability %v, want %v", got, want)
		}
	})
}
