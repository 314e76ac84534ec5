package instance

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/core/repair"
)

// statusEC2 answers DescribeInstanceStatus per filter name.
type statusEC2 struct {
	EC2
	by map[string][]ec2types.InstanceStatus
}

func (f statusEC2) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return &ec2.DescribeInstanceStatusOutput{InstanceStatuses: f.by[aws.ToString(in.Filters[0].Name)]}, nil
}

func TestHealth(t *testing.T) {
	since := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	impaired := &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusImpaired, Details: []ec2types.InstanceStatusDetails{
		{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: aws.Time(since)},
	}}
	ok := &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusOk, Details: []ec2types.InstanceStatusDetails{
		{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypePassed},
	}}
	both := ec2types.InstanceStatus{InstanceId: aws.String("i-1"), InstanceStatus: impaired, SystemStatus: impaired,
		Events: []ec2types.InstanceStatusEvent{{Code: ec2types.EventCodeSystemReboot, Description: aws.String("scheduled reboot")}}}
	api := statusEC2{by: map[string][]ec2types.InstanceStatus{
		"instance-status.status": {both},
		// Listed again by the other filters: once in the answer.
		"system-status.status": {both},
		"event.code": {both, {InstanceId: aws.String("i-2"), InstanceStatus: ok, SystemStatus: ok, Events: []ec2types.InstanceStatusEvent{
			{Code: ec2types.EventCodeInstanceRetirement, Description: aws.String("The instance is running on degraded hardware")},
			{Code: ec2types.EventCodeInstanceStop, Description: aws.String("[Completed] The instance is running on degraded hardware")},
			{Code: ec2types.EventCodeSystemReboot, Description: aws.String("[Canceled] scheduled reboot")},
		}}},
	}}
	got, err := NewProvider(api, "demo").Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []repair.InstanceStatus{
		{InstanceID: "i-1", Checks: []repair.Check{
			{Category: repair.CategoryInstance, Name: "reachability", Failed: true, ImpairedSince: since},
			{Category: repair.CategorySystem, Name: "reachability", Failed: true, ImpairedSince: since},
			{Category: repair.CategoryEvent, Name: "system-reboot", Failed: true},
		}},
		{InstanceID: "i-2", Checks: []repair.Check{
			{Category: repair.CategoryInstance, Name: "reachability"},
			{Category: repair.CategorySystem, Name: "reachability"},
			{Category: repair.CategoryEvent, Name: "instance-retirement", Failed: true},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Health:\n got %+v\nwant %+v", got, want)
	}
}
