package instance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/karpless/karpless/shared/core/zonalshift"
)

type fakeEC2 struct {
	EC2
	free map[string]int32
}

func (f fakeEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	out := &ec2.DescribeSubnetsOutput{}
	for _, id := range in.SubnetIds {
		if n, ok := f.free[id]; ok {
			out.Subnets = append(out.Subnets, ec2types.Subnet{SubnetId: aws.String(id), AvailableIpAddressCount: aws.Int32(n)})
		}
	}
	return out, nil
}

func TestFleetInput(t *testing.T) {
	p := NewProvider(fakeEC2{free: map[string]int32{"subnet-a1": 10, "subnet-a2": 200, "subnet-b1": 50, "subnet-c1": 0}}, "demo")
	var offerings []Offering
	var types []string
	for i := range 70 {
		it := fmt.Sprintf("m%d.large", i)
		types = append(types, it)
		for _, z := range []string{"us-west-2a", "us-west-2b", "us-west-2c"} {
			offerings = append(offerings, Offering{InstanceType: it, Zone: z, Price: float64(i) / 100})
		}
	}
	r := Request{
		NodeClaimName: "default-abc", NodeClaimUID: "6f1c6c2e-0000-4000-8000-000000000001", CapacityType: "spot",
		Offerings:       offerings,
		LaunchTemplates: []LaunchTemplate{{Name: "karpenter.k8s.aws/lt-amd64", ImageID: "ami-1", InstanceTypes: types}},
		Subnets:         map[string][]string{"us-west-2a": {"subnet-a1", "subnet-a2"}, "us-west-2b": {"subnet-b1"}, "us-west-2c": {"subnet-c1"}},
		Tags:            map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": "default-abc"},
	}
	in, err := p.fleetInput(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.LaunchTemplateConfigs) != 1 {
		t.Fatalf("%d launch template configs", len(in.LaunchTemplateConfigs))
	}
	ovs := in.LaunchTemplateConfigs[0].Overrides
	// 60 cheapest types x 2 zones with free addresses (2c's subnet is full).
	if len(ovs) != MaxInstanceTypes*2 {
		t.Fatalf("%d overrides, want %d", len(ovs), MaxInstanceTypes*2)
	}
	seen := map[string]bool{}
	for _, o := range ovs {
		seen[string(o.InstanceType)] = true
		if aws.ToString(o.AvailabilityZone) == "us-west-2a" && aws.ToString(o.SubnetId) != "subnet-a2" {
			t.Errorf("zone a uses %s, want the subnet with most free addresses", aws.ToString(o.SubnetId))
		}
		if aws.ToString(o.AvailabilityZone) == "us-west-2c" {
			t.Error("override in a zone whose subnets are full")
		}
		if aws.ToString(o.ImageId) != "ami-1" {
			t.Error("override without the template's image")
		}
	}
	if seen["m60.large"] || !seen["m59.large"] {
		t.Error("did not keep the 60 cheapest types")
	}
	if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyPriceCapacityOptimized || in.OnDemandOptions != nil {
		t.Error("spot request without price-capacity-optimized")
	}
	if *in.TargetCapacitySpecification.TotalTargetCapacity != 1 || in.Type != ec2types.FleetTypeInstant {
		t.Error("not an instant fleet of one")
	}
	if len(in.TagSpecifications) != 3 {
		t.Error("want instance, volume and fleet tag specifications")
	}
	again, _ := p.fleetInput(context.Background(), r)
	if aws.ToString(again.ClientToken) != aws.ToString(in.ClientToken) {
		t.Error("the same request produced a different client token")
	}
	r.Attempt = 1
	next, _ := p.fleetInput(context.Background(), r)
	if aws.ToString(next.ClientToken) == aws.ToString(in.ClientToken) || len(aws.ToString(in.ClientToken)) > 64 {
		t.Error("a new attempt must use a new token of at most 64 characters")
	}
	r.CapacityType = "on-demand"
	od, _ := p.fleetInput(context.Background(), r)
	if od.OnDemandOptions == nil || od.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyLowestPrice || od.SpotOptions != nil {
		t.Error("on-demand request without lowest-price")
	}
}

func TestFleetInputRejectsImpossibleRequests(t *testing.T) {
	p := NewProvider(fakeEC2{free: map[string]int32{"subnet-a1": 0}}, "demo")
	_, err := p.fleetInput(context.Background(), Request{NodeClaimName: "x", Offerings: []Offering{{InstanceType: "m5.large", Zone: "us-west-2a"}},
		LaunchTemplates: []LaunchTemplate{{Name: "lt", InstanceTypes: []string{"m5.large"}}}, Subnets: map[string][]string{"us-west-2a": {"subnet-a1"}}})
	if err == nil {
		t.Fatal("launch into full subnets was accepted")
	}
	if _, err := p.fleetInput(context.Background(), Request{NodeClaimName: "x"}); err == nil {
		t.Fatal("launch without offerings was accepted")
	}
}

// fleetEC2 answers CreateFleet with out and DescribeInstances with inst.
type fleetEC2 struct {
	fakeEC2
	out  *ec2.CreateFleetOutput
	inst *ec2types.Instance
}

func (f fleetEC2) CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return f.out, nil
}

func (f fleetEC2) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if f.inst == nil {
		return &ec2.DescribeInstancesOutput{}, nil
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: []ec2types.Instance{*f.inst}}}}, nil
}

// TestCreateTenancyAndErrorSubnets: the instance's tenancy is EC2's
// Placement.Tenancy (default when unsaid, the request's when EC2 does not
// list the instance yet), and each fleet error names its override's subnet
// (an InsufficientFreeAddressesInSubnet is the subnet's, not the type's).
func TestCreateTenancyAndErrorSubnets(t *testing.T) {
	override := func(it, zone, subnet string) *ec2types.LaunchTemplateAndOverridesResponse {
		return &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String(zone), SubnetId: aws.String(subnet)}}
	}
	out := &ec2.CreateFleetOutput{
		Errors:    []ec2types.CreateFleetError{{ErrorCode: aws.String("InsufficientFreeAddressesInSubnet"), LaunchTemplateAndOverrides: override("m5.large", "us-west-2a", "subnet-a1")}},
		Instances: []ec2types.CreateFleetInstance{{InstanceIds: []string{"i-1"}, InstanceType: "m5.large", LaunchTemplateAndOverrides: override("m5.large", "us-west-2b", "subnet-b1")}},
	}
	r := Request{
		NodeClaimName: "x", NodeClaimUID: "u", CapacityType: "on-demand", Tenancy: "dedicated",
		Offerings:       []Offering{{InstanceType: "m5.large", Zone: "us-west-2a"}, {InstanceType: "m5.large", Zone: "us-west-2b"}},
		LaunchTemplates: []LaunchTemplate{{Name: "lt", ImageID: "ami-1", InstanceTypes: []string{"m5.large"}}},
		Subnets:         map[string][]string{"us-west-2a": {"subnet-a1"}, "us-west-2b": {"subnet-b1"}},
	}
	free := fakeEC2{free: map[string]int32{"subnet-a1": 5, "subnet-b1": 5}}
	for _, tc := range []struct {
		name string
		inst *ec2types.Instance
		want string
	}{
		{"listed dedicated", &ec2types.Instance{InstanceId: aws.String("i-1"), Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2b"), Tenancy: ec2types.TenancyDedicated}}, "dedicated"},
		{"listed without tenancy", &ec2types.Instance{InstanceId: aws.String("i-1"), Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2b")}}, "default"},
		{"not listed yet", nil, "dedicated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := NewProvider(fleetEC2{fakeEC2: free, out: out, inst: tc.inst}, "demo").Create(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if res.Instance.Tenancy != tc.want {
				t.Errorf("tenancy %q, want %q", res.Instance.Tenancy, tc.want)
			}
			if len(res.Errors) != 1 || res.Errors[0].Subnet != "subnet-a1" || res.Errors[0].Zone != "us-west-2a" {
				t.Errorf("errors %+v, want one naming subnet-a1", res.Errors)
			}
		})
	}
}

// TestDeleteCountsFailures: a failed TerminateInstances counts once per
// instance it was for, by zone and zone ID; an instance already gone, or
// a call that succeeded, counts nothing; a nil counter is allowed.
func TestDeleteCountsFailures(t *testing.T) {
	a := Instance{ID: "i-a", Zone: "us-west-2a", ZoneID: "usw2-az1"}
	b := Instance{ID: "i-b", Zone: "us-west-2b", ZoneID: "usw2-az2"}
	for name, tc := range map[string]struct {
		err     error
		wantErr bool
		want    counter
	}{
		"succeeded":     {nil, false, counter{}},
		"already gone":  {&smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound"}, false, counter{}},
		"throttled":     {&smithy.GenericAPIError{Code: "RequestLimitExceeded"}, true, counter{TerminationFailuresMetric + " zone=us-west-2a zone_id=usw2-az1": 1, TerminationFailuresMetric + " zone=us-west-2b zone_id=usw2-az2": 1}},
		"unknown error": {errors.New("connection reset"), true, counter{TerminationFailuresMetric + " zone=us-west-2a zone_id=usw2-az1": 1, TerminationFailuresMetric + " zone=us-west-2b zone_id=usw2-az2": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			api := &confEC2{terminateErr: tc.err}
			got := counter{}
			p := NewProvider(api, "demo")
			if err := p.Delete(context.Background(), got, a, b); (err != nil) != tc.wantErr {
				t.Fatalf("delete: %v, want an error: %v", err, tc.wantErr)
			}
			if api.terminations != 1 {
				t.Errorf("%d TerminateInstances calls, want 1 for both", api.terminations)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("counted %v, want %v", got, tc.want)
			}
			if err := p.Delete(context.Background(), nil, a); (err != nil) != tc.wantErr {
				t.Errorf("delete without a counter: %v", err)
			}
		})
	}
}

// termEC2 records the instances TerminateInstances was asked for.
type termEC2 struct {
	confEC2
	terminated []string
}

func (f *termEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.terminated = append(f.terminated, in.InstanceIds...)
	return &ec2.TerminateInstancesOutput{}, nil
}

func TestWithZonalShift(t *testing.T) {
	ctx := context.Background()
	shifted := zonalshift.Zones{"usw2-az1": true}
	inA := Instance{ID: "i-a", Zone: "us-west-2a", ZoneID: "usw2-az1"}
	inB := Instance{ID: "i-b", Zone: "us-west-2b", ZoneID: "usw2-az2"}
	t.Run("delete terminates only what is outside the shifted zone", func(t *testing.T) {
		api := &termEC2{}
		err := NewProvider(api, "demo").WithZonalShift(shifted, nil).Delete(ctx, nil, inA, inB)
		if !errors.Is(err, ErrZonallyShifted) {
			t.Errorf("delete: %v, want ErrZonallyShifted for i-a", err)
		}
		if !slices.Equal(api.terminated, []string{"i-b"}) {
			t.Errorf("terminated %v, want [i-b]", api.terminated)
		}
	})
	t.Run("no shift: the same provider, every call made", func(t *testing.T) {
		p := NewProvider(&termEC2{}, "demo")
		if p.WithZonalShift(nil, []Instance{inA}) != p {
			t.Error("WithZonalShift without a shift made a new provider")
		}
		api := &termEC2{}
		if err := NewProvider(api, "demo").WithZonalShift(zonalshift.Zones{}, nil).Delete(ctx, nil, inA); err != nil || len(api.terminated) != 1 {
			t.Errorf("delete without a shift: %v, terminated %v", err, api.terminated)
		}
	})
	t.Run("a known instance outside the shifted zone is read from EC2", func(t *testing.T) {
		api := &termEC2{}
		api.instances = map[string]ec2types.Instance{"i-b": {InstanceId: aws.String("i-b"), State: &ec2types.InstanceState{Name: "stopped"}}}
		got, err := NewProvider(api, "demo").WithZonalShift(shifted, []Instance{inA, inB}).Get(ctx, "i-b")
		if err != nil || got.State != "stopped" || api.describes != 1 {
			t.Errorf("get: %+v %v after %d describes, want EC2's answer", got, err, api.describes)
		}
	})
	t.Run("list in chosen states adds nothing known", func(t *testing.T) {
		api := &termEC2{}
		got, err := NewProvider(api, "demo").WithZonalShift(shifted, []Instance{inA}).List(ctx, "running")
		if err != nil || len(got) != 0 {
			t.Errorf("list: %v %v, want EC2's empty answer", got, err)
		}
	})
	t.Run("tag of an unknown instance in a shifted zone goes ahead", func(t *testing.T) {
		api := &termEC2{}
		if err := NewProvider(api, "demo").WithZonalShift(shifted, nil).Tag(ctx, "i-a", map[string]string{"k": "v"}); err != nil || api.tags != 1 {
			t.Errorf("tag: %v after %d CreateTags, want one call", err, api.tags)
		}
	})
}

func TestOnlyZonallyShifted(t *testing.T) {
	shifted := fmt.Errorf("instance i-1 ...: %w", ErrZonallyShifted)
	other := errors.New("RequestLimitExceeded")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"one shifted", shifted, true},
		{"several shifted", errors.Join(shifted, shifted), true},
		{"shifted and a failure", errors.Join(shifted, other), false},
		{"a failure", other, false},
	} {
		if got := OnlyZonallyShifted(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
