package emulator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fleetInput is a Karpenter-shaped CreateFleet: one launch template, one
// override per (type, zone) with the price as priority, instance, volume
// and fleet tags.
func fleetInput(t testing.TB, e *Emulator, lt, capacityType string, types []string, zones []string) *ec2.CreateFleetInput {
	t.Helper()
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, it := range types {
		od, err := e.OnDemandPrice(it)
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zones {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(it), SubnetId: aws.String(subnetIn(t, e, z)),
				AvailabilityZone: aws.String(z), Priority: aws.Float64(od),
			})
		}
	}
	tags := []ec2types.Tag{
		{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
		{Key: aws.String("eks:eks-cluster-name"), Value: aws.String(e.ClusterName())},
		{Key: aws.String("kubernetes.io/cluster/" + e.ClusterName()), Value: aws.String("owned")},
	}
	return &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType),
		},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
		},
	}
}

var threeZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

func launched(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	return ids
}

func TestCreateFleet(t *testing.T) {
	type result struct {
		instances int
		types     []string // the instance types launched, in order
		zones     []string
		errors    []string // code:type:zone of errorSet items
	}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, e *Emulator)
		input  func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput
		want   result
		code   string // a whole-request error
		verify func(t *testing.T, e *Emulator, out *ec2.CreateFleetOutput)
	}{
		{
			name: "on-demand lowest price follows priority",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, lt, "on-demand", []string{"m5.xlarge", "m5.large", "c5.large"}, []string{"us-west-2b", "us-west-2a"})
			},
			// c5.large is the cheapest (0.085); the first listed zone wins the tie.
			want: result{instances: 1, types: []string{"c5.large"}, zones: []string{"us-west-2b"}},
			verify: func(t *testing.T, e *Emulator, out *ec2.CreateFleetOutput) {
				fi := out.Instances[0]
				o := fi.LaunchTemplateAndOverrides
				if fi.Lifecycle != ec2types.InstanceLifecycleOnDemand || o == nil || o.Overrides == nil || aws.ToString(o.Overrides.SubnetId) == "" ||
					aws.ToString(o.Overrides.AvailabilityZone) != "us-west-2b" || aws.ToFloat64(o.Overrides.Priority) != 0.085 ||
					aws.ToString(o.LaunchTemplateSpecification.LaunchTemplateId) == "" || aws.ToString(o.LaunchTemplateSpecification.Version) != "1" {
					t.Errorf("fleet instance decoded wrong: %+v %+v", fi, o)
				}
				i, _ := e.Instance(fi.InstanceIds[0])
				if i.CapacityType != "on-demand" || i.State != StatePending || i.Tags["karpenter.sh/nodepool"] != "default" || i.Tags["from-lt"] != "yes" ||
					i.Tags["aws:ec2:fleet-id"] != aws.ToString(out.FleetId) || i.Tags["aws:ec2launchtemplate:id"] == "" || i.VolumeTags["karpenter.sh/nodepool"] != "default" ||
					!strings.HasPrefix(i.PrivateDNSName, "ip-10-0-") || !strings.HasSuffix(i.PrivateDNSName, ".us-west-2.compute.internal") || i.ImageID == "" {
					t.Errorf("instance recorded wrong: %+v", i)
				}
			},
		},
		{
			name: "spot price-capacity-optimized picks among the cheapest pools",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, lt, "spot", []string{"m5.large", "m5a.large", "m6i.large", "c5.large", "r5.large"}, threeZones)
			},
			want: result{instances: 1},
			verify: func(t *testing.T, e *Emulator, out *ec2.CreateFleetOutput) {
				fi := out.Instances[0]
				i, _ := e.Instance(fi.InstanceIds[0])
				if fi.Lifecycle != ec2types.InstanceLifecycleSpot || i.CapacityType != "spot" || i.SpotRequestID == "" {
					t.Errorf("not a spot launch: %+v %+v", fi, i)
				}
				// The choice is among the three cheapest pools.
				var prices []float64
				for _, it := range []string{"m5.large", "m5a.large", "m6i.large", "c5.large", "r5.large"} {
					for _, z := range threeZones {
						prices = append(prices, e.SpotPrice(it, z))
					}
				}
				slices.Sort(prices)
				if got := e.SpotPrice(i.InstanceType, i.Zone); got > prices[2] {
					t.Errorf("launched %s in %s at %g, not among the three cheapest %v", i.InstanceType, i.Zone, got, prices[:3])
				}
			},
		},
		{
			name: "ICE on one pool, partial fulfilment elsewhere",
			setup: func(t *testing.T, e *Emulator) {
				e.Inject(ICE("on-demand", "c5.large", "us-west-2a"))
			},
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "on-demand", []string{"c5.large", "m5.large"}, []string{"us-west-2a"})
				in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(2)
				return in
			},
			want: result{instances: 2, types: []string{"m5.large"}, zones: []string{"us-west-2a"}, errors: []string{"InsufficientInstanceCapacity:c5.large:us-west-2a"}},
			verify: func(t *testing.T, e *Emulator, out *ec2.CreateFleetOutput) {
				fe := out.Errors[0]
				if fe.Lifecycle != ec2types.InstanceLifecycleOnDemand || aws.ToString(fe.ErrorMessage) == "" || fe.LaunchTemplateAndOverrides.LaunchTemplateSpecification == nil {
					t.Errorf("fleet error decoded wrong: %+v", fe)
				}
			},
		},
		{
			name: "ICE everywhere: HTTP 200, no instances, every pool in errorSet",
			setup: func(t *testing.T, e *Emulator) {
				e.Inject(ICE("spot", "", ""))
			},
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, lt, "spot", []string{"m5.large"}, []string{"us-west-2a", "us-west-2b"})
			},
			want: result{errors: []string{"InsufficientInstanceCapacity:m5.large:us-west-2a", "InsufficientInstanceCapacity:m5.large:us-west-2b"}},
		},
		{
			name: "fault count: the second pool of the same type still works",
			setup: func(t *testing.T, e *Emulator) {
				e.Inject(FleetError("UnfulfillableCapacity", "", "m5.large", "").Times(1))
			},
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a", "us-west-2b"})
			},
			want: result{instances: 1, zones: []string{"us-west-2b"}, errors: []string{"UnfulfillableCapacity:m5.large:us-west-2a"}},
		},
		{
			name: "type not offered in the zone",
			setup: func(t *testing.T, e *Emulator) {
				e.SetUnoffered(func(it, z string) bool { return it == "m5.large" && z == "us-west-2c" })
			},
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2c"})
			},
			want: result{errors: []string{"Unsupported:m5.large:us-west-2c"}},
		},
		{
			name: "exhausted subnet",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				id, err := e.AddSubnet("us-west-2a", "10.0.250.0/28", nil)
				if err != nil {
					t.Fatal(err)
				}
				in := fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
				in.LaunchTemplateConfigs[0].Overrides[0].SubnetId = aws.String(id)
				in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(12)
				return in
			},
			// A /28 has 11 usable addresses.
			want: result{instances: 11, errors: []string{"InsufficientFreeAddressesInSubnet:m5.large:us-west-2a"}},
		},
		{
			name: "architecture mismatch with the image",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, lt, "on-demand", []string{"m6g.large"}, []string{"us-west-2a"})
			},
			want: result{errors: []string{"InvalidParameterValue:m6g.large:us-west-2a"}},
		},
		{
			name: "image override wins over the template's",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "on-demand", []string{"m6g.large"}, []string{"us-west-2a"})
				in.LaunchTemplateConfigs[0].Overrides[0].ImageId = aws.String(imageFor(t, e, "AL2023", "arm64", "standard"))
				return in
			},
			want: result{instances: 1, types: []string{"m6g.large"}},
		},
		{
			name: "several capacity types split by target",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "spot", []string{"m5.large"}, []string{"us-west-2a"})
				in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(3)
				in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(1)
				return in
			},
			want: result{instances: 3},
			verify: func(t *testing.T, e *Emulator, out *ec2.CreateFleetOutput) {
				got := map[ec2types.InstanceLifecycle]int{}
				for _, fi := range out.Instances {
					got[fi.Lifecycle] += len(fi.InstanceIds)
				}
				if got["spot"] != 2 || got["on-demand"] != 1 {
					t.Errorf("lifecycles %v, want 2 spot and 1 on-demand", got)
				}
			},
		},
		{
			name: "spot max price below the market",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "spot", []string{"m5.large"}, []string{"us-west-2a"})
				in.LaunchTemplateConfigs[0].Overrides[0].MaxPrice = aws.String("0.001")
				return in
			},
			want: result{errors: []string{"SpotMaxPriceTooLow:m5.large:us-west-2a"}},
		},
		{
			name: "spot-instances-request tags on an on-demand launch",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				createLT(t, ec2Client(t, e), e, "spot-tags", func(d *ec2types.RequestLaunchTemplateData) {
					d.TagSpecifications = append(d.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: "spot-instances-request", Tags: []ec2types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}})
				})
				return fleetInput(t, e, "spot-tags", "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
			},
			want: result{errors: []string{"InvalidParameterValue:m5.large:us-west-2a"}},
		},
		{
			name: "unknown launch template",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				return fleetInput(t, e, "karpenter.k8s.aws/missing", "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
			},
			code: "InvalidLaunchTemplateName.NotFoundException",
		},
		{
			name: "not instant",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
				in.Type = ec2types.FleetTypeMaintain
				return in
			},
			code: "InvalidParameterValue",
		},
		{
			name: "reserved tag key",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
				in.TagSpecifications[0].Tags = append(in.TagSpecifications[0].Tags, ec2types.Tag{Key: aws.String("aws:mine"), Value: aws.String("x")})
				return in
			},
			code: "InvalidParameterValue",
		},
		{
			name: "dry run",
			input: func(t *testing.T, e *Emulator, lt string) *ec2.CreateFleetInput {
				in := fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
				in.DryRun = aws.Bool(true)
				return in
			},
			code: "DryRunOperation",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := DefaultHostility()
			// The table pins every pool's outcome: random fleet errors and
			// missing spot markets would add errorSet items of their own
			// (TestRandomFleetErrors and TestSpotMarketGaps cover them).
			h.FleetErrorRate, h.NoSpotMarketFraction = 0, 0
			e, _ := newTestEmulator(t, calm(h))
			c := ec2Client(t, e)
			lt := createLT(t, c, e, "karpenter.k8s.aws/test")
			if tc.setup != nil {
				tc.setup(t, e)
			}
			out, err := c.CreateFleet(context.Background(), tc.input(t, e, lt))
			if tc.code != "" {
				wantCode(t, err, tc.code)
				if n := len(e.Instances(nil)); n != 0 {
					t.Errorf("%d instances after a failed call", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToString(out.FleetId) == "" || !strings.HasPrefix(aws.ToString(out.FleetId), "fleet-") {
				t.Errorf("fleet id %q", aws.ToString(out.FleetId))
			}
			ids := launched(out)
			if len(ids) != tc.want.instances {
				t.Errorf("launched %d instances, want %d", len(ids), tc.want.instances)
			}
			var errs []string
			for _, fe := range out.Errors {
				o := fe.LaunchTemplateAndOverrides.Overrides
				errs = append(errs, fmt.Sprintf("%s:%s:%s", aws.ToString(fe.ErrorCode), o.InstanceType, aws.ToString(o.AvailabilityZone)))
			}
			if !slices.Equal(errs, tc.want.errors) {
				t.Errorf("errorSet %v, want %v", errs, tc.want.errors)
			}
			for k, id := range ids {
				i, ok := e.Instance(id)
				if !ok {
					t.Fatalf("instance %s not recorded", id)
				}
				if k < len(tc.want.types) && i.InstanceType != tc.want.types[k] {
					t.Errorf("instance %d is %s, want %s", k, i.InstanceType, tc.want.types[k])
				}
				if k < len(tc.want.zones) && i.Zone != tc.want.zones[k] {
					t.Errorf("instance %d is in %s, want %s", k, i.Zone, tc.want.zones[k])
				}
			}
			if n := len(e.Instances(nil)); n != len(ids) {
				t.Errorf("the emulator has %d instances, the answer names %d", n, len(ids))
			}
			if tc.verify != nil {
				tc.verify(t, e, out)
			}
		})
	}
}

func TestCreateFleetClientToken(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/token")
	in := fleetInput(t, e, lt, "on-demand", []string{"m5.large", "c5.large"}, threeZones)
	in.ClientToken = aws.String("nodeclaim-uid-1")
	first, err := c.CreateFleet(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Same token, same parameters: the original answer, no new instance,
	// even after an ICE fault that would change the outcome.
	e.Inject(ICE("", "", ""))
	again, err := c.CreateFleet(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(again.FleetId) != aws.ToString(first.FleetId) || !slices.Equal(launched(again), launched(first)) || len(again.Errors) != 0 {
		t.Errorf("replay answered %v %v, first %v %v", aws.ToString(again.FleetId), launched(again), aws.ToString(first.FleetId), launched(first))
	}
	if n := len(e.Instances(nil)); n != 1 {
		t.Errorf("%d instances after a replay, want 1", n)
	}
	// Same token, different parameters.
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(2)
	_, err = c.CreateFleet(ctx, in)
	wantCode(t, err, "IdempotentParameterMismatch")
	// A fresh token launches (or here, fails on ICE) anew.
	in.ClientToken = aws.String("nodeclaim-uid-2")
	out, err := c.CreateFleet(ctx, in)
	if err != nil || len(launched(out)) != 0 || len(out.Errors) != 6 {
		t.Errorf("new token under ICE: %d instances, %d errors, %v", len(launched(out)), len(out.Errors), err)
	}
	in.ClientToken = aws.String(strings.Repeat("x", 65))
	_, err = c.CreateFleet(ctx, in)
	wantCode(t, err, "InvalidParameterValue")
}

// TestDropAfterApply is the nasty case: the fleet is launched, the answer
// never arrives, the SDK retries. The ClientToken (the caller's or the one
// the SDK fills in) makes the retry return the same instances.
func TestDropAfterApply(t *testing.T) {
	for _, token := range []string{"nodeclaim-uid", ""} {
		t.Run("token="+token, func(t *testing.T) {
			e, _ := newTestEmulator(t)
			lt := createLT(t, ec2Client(t, e), e, "karpenter.k8s.aws/drop")
			e.Inject(DropAfterApply("CreateFleet", 1))
			c := ec2.NewFromConfig(sdkConfig(t, e, 3))
			in := fleetInput(t, e, lt, "spot", []string{"m5.large", "c5.large"}, threeZones)
			if token != "" {
				in.ClientToken = aws.String(token)
			}
			out, err := c.CreateFleet(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			// Calls that reached the handler: the dropped ones and the
			// answered replay (random throttles never reach it).
			applied, dropped := 0, 0
			for _, call := range e.Calls() {
				if call.Action == "CreateFleet" && call.Code == "" {
					applied++
					if call.Dropped {
						dropped++
					}
				}
			}
			alive := e.Instances(NotTerminated)
			if dropped < 1 || applied != dropped+1 || len(alive) != 1 || launched(out)[0] != alive[0].ID {
				t.Errorf("%d applied calls (%d dropped), %d instances %v, answer %v; want the dropped calls and one replay, 1 instance named in the answer", applied, dropped, len(alive), alive, launched(out))
			}
		})
	}
	// Without retries the caller sees a transport error and one instance
	// exists anyway: what a leak check must find. (An injected rule takes
	// precedence over random hostility: this one call is dropped.)
	e, _ := newTestEmulator(t)
	lt := createLT(t, ec2Client(t, e), e, "karpenter.k8s.aws/drop")
	e.Inject(DropAfterApply("CreateFleet", 1))
	c := ec2.NewFromConfig(sdkConfig(t, e, 1))
	_, err := c.CreateFleet(context.Background(), fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, threeZones))
	if err == nil || errorCode(err) != "" {
		t.Errorf("want a transport error, got %v", err)
	}
	if n := len(e.Instances(nil)); n != 1 {
		t.Errorf("%d instances, want the 1 launched before the drop", n)
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	// These pin the answers of injected faults call by call; random
	// throttles and server errors would add calls of their own
	// (TestHostileThrottles and TestHostileServerErrors cover those).
	h := DefaultHostility()
	h.ThrottleRate, h.ServerErrorRate = 0, 0
	newTestEmulator := func(t *testing.T) (*Emulator, any) { return newTestEmulator(t, calm(h)) }
	oneAttempt := func(t *testing.T, e *Emulator) *ec2.Client { return ec2.NewFromConfig(sdkConfig(t, e, 1)) }
	t.Run("throttle retried by the standard retryer", func(t *testing.T) {
		e, _ := newTestEmulator(t)
		e.Inject(Throttle("DescribeSubnets", 2))
		c := ec2.NewFromConfig(sdkConfig(t, e, 3))
		start := time.Now()
		if _, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
			t.Fatal(err)
		}
		var codes []string
		for _, call := range e.Calls() {
			codes = append(codes, call.Code)
		}
		if !slices.Equal(codes, []string{"RequestLimitExceeded", "RequestLimitExceeded", ""}) {
			t.Errorf("calls %v", codes)
		}
		t.Logf("two throttles cost %s of backoff", time.Since(start))
	})
	t.Run("throttle with one attempt", func(t *testing.T) {
		e, _ := newTestEmulator(t)
		e.Inject(Throttle("", 0))
		_, err := oneAttempt(t, e).DescribeImages(ctx, &ec2.DescribeImagesInput{})
		wantCode(t, err, "RequestLimitExceeded")
		e.ClearFaults()
		if _, err := oneAttempt(t, e).DescribeImages(ctx, &ec2.DescribeImagesInput{}); err != nil {
			t.Errorf("after ClearFaults: %v", err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		e, _ := newTestEmulator(t)
		id := e.Inject(ServerError("DescribeInstances", 0))
		_, err := oneAttempt(t, e).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		wantCode(t, err, "InternalError")
		e.RemoveFault(id)
		if len(e.Faults()) != 0 {
			t.Error("fault not removed")
		}
	})
	t.Run("api error", func(t *testing.T) {
		e, _ := newTestEmulator(t)
		e.Inject(APIError("TerminateInstances", "UnauthorizedOperation", 403, 1))
		_, err := oneAttempt(t, e).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
		wantCode(t, err, "UnauthorizedOperation")
	})
	t.Run("latency", func(t *testing.T) {
		e, _ := newTestEmulator(t)
		e.Inject(Latency("DescribeAvailabilityZones", 150*time.Millisecond))
		start := time.Now()
		if _, err := ec2Client(t, e).DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("answered in %s", d)
		}
	})
	t.Run("unknown action", func(t *testing.T) {
		e, _ := newTestEmulator(t)
		_, err := ec2Client(t, e).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		wantCode(t, err, "InvalidAction")
	})
}
