package emulator

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestLaunchTenancy: a launch template's Placement.Tenancy (or a fleet
// override's, or a RunInstances request's) is the instance's tenancy, as
// DescribeInstances shows and filters it; a value EC2 does not know fails
// the call, and host tenancy (no Dedicated Hosts here) fails the override.
func TestLaunchTenancy(t *testing.T) {
	h := DefaultHostility()
	h.FleetErrorRate = 0
	e, _ := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	tenancyOfLaunch := func(t *testing.T, out *ec2.CreateFleetOutput) ec2types.Tenancy {
		t.Helper()
		ids := launched(out)
		if len(ids) != 1 {
			t.Fatalf("launched %v, errors %v", ids, fleetErrs(out))
		}
		return describedPlacement(t, c, e, ids[0]).Tenancy
	}

	plain := createLT(t, c, e, "tenancy-none")
	dedicated := createLT(t, c, e, "tenancy-dedicated", func(d *ec2types.RequestLaunchTemplateData) {
		d.Placement = &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.TenancyDedicated}
	})
	if got := tenancyOfLaunch(t, placedFleet(t, c, e, plain, 1, nil, "us-west-2a")); got != ec2types.TenancyDefault {
		t.Errorf("no tenancy asked: %q, want default", got)
	}
	if got := tenancyOfLaunch(t, placedFleet(t, c, e, dedicated, 1, nil, "us-west-2a")); got != ec2types.TenancyDedicated {
		t.Errorf("template asks dedicated: %q", got)
	}
	if got := tenancyOfLaunch(t, placedFleet(t, c, e, plain, 1, &ec2types.Placement{Tenancy: ec2types.TenancyDedicated}, "us-west-2a")); got != ec2types.TenancyDedicated {
		t.Errorf("override asks dedicated: %q", got)
	}
	ri, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(plain)},
		InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnetIn(t, e, "us-west-2b")),
		Placement: &ec2types.Placement{Tenancy: ec2types.TenancyDedicated},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ri.Instances[0].Placement.Tenancy; got != ec2types.TenancyDedicated {
		t.Errorf("RunInstances asks dedicated: %q", got)
	}

	// The tenancy filter finds the three dedicated instances (once EC2
	// lists the last).
	describedPlacement(t, c, e, aws.ToString(ri.Instances[0].InstanceId))
	d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tenancy"), Values: []string{"dedicated"}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range d.Reservations {
		n += len(r.Instances)
	}
	if n != 3 {
		t.Errorf("%d dedicated instances listed, want 3", n)
	}

	// Values EC2 does not know fail the whole call.
	_, err = c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("tenancy-bad"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(imageFor(t, e, "AL2023", "x86_64", "standard")), Placement: &ec2types.LaunchTemplatePlacementRequest{Tenancy: "shared"}},
	})
	wantCode(t, err, "InvalidParameterValue")
	in := fleetInput(t, e, plain, "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
	in.LaunchTemplateConfigs[0].Overrides[0].Placement = &ec2types.Placement{Tenancy: "Dedicated"}
	_, err = c.CreateFleet(ctx, in)
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(plain)},
		InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnetIn(t, e, "us-west-2b")),
		Placement: &ec2types.Placement{Tenancy: "x"},
	})
	wantCode(t, err, "InvalidParameterValue")

	// Host tenancy needs a Dedicated Host: the override fails.
	out := placedFleet(t, c, e, plain, 1, &ec2types.Placement{Tenancy: ec2types.TenancyHost}, "us-west-2a")
	if len(launched(out)) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterValue" {
		t.Errorf("host tenancy: launched %v, errors %v", launched(out), fleetErrs(out))
	}
}
