package instance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
)

// confEC2 is an EC2 of stored instances (DescribeInstances honours the
// tag filters List and ForNodeClaim send) that records CreateFleet calls.
type confEC2 struct {
	EC2
	free      map[string]int32
	instances map[string]ec2types.Instance
	fleets    []*ec2.CreateFleetInput
	out       *ec2.CreateFleetOutput
	// terminateErr fails every TerminateInstances; terminations counts them.
	terminateErr error
	terminations int
	// describes and tags count DescribeInstances and CreateTags calls.
	describes, tags int
}

func (f *confEC2) CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	f.tags++
	return &ec2.CreateTagsOutput{}, nil
}

func (f *confEC2) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.terminations++
	if f.terminateErr != nil {
		return nil, f.terminateErr
	}
	return &ec2.TerminateInstancesOutput{}, nil
}

func (f *confEC2) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, o ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return fakeEC2{free: f.free}.DescribeSubnets(ctx, in, o...)
}

func (f *confEC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	f.fleets = append(f.fleets, in)
	if f.out != nil {
		return f.out, nil
	}
	o := in.LaunchTemplateConfigs[0].Overrides[0]
	return &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{InstanceIds: []string{"i-new"}, InstanceType: o.InstanceType,
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId}}}}}, nil
}

func (f *confEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.describes++
	var found []ec2types.Instance
	for id, i := range f.instances {
		if len(in.InstanceIds) > 0 && !slices.Contains(in.InstanceIds, id) {
			continue
		}
		if matchesFilters(i, in.Filters) {
			found = append(found, i)
		}
	}
	if len(in.InstanceIds) > 0 && len(found) == 0 {
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance IDs do not exist"}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: found}}}, nil
}

func matchesFilters(i ec2types.Instance, filters []ec2types.Filter) bool {
	tags := map[string]string{}
	for _, t := range i.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, f := range filters {
		name := aws.ToString(f.Name)
		switch {
		case name == "tag-key":
			if !slices.ContainsFunc(f.Values, func(k string) bool { _, ok := tags[k]; return ok }) {
				return false
			}
		case strings.HasPrefix(name, "tag:"):
			v, ok := tags[strings.TrimPrefix(name, "tag:")]
			if !ok || !slices.Contains(f.Values, v) {
				return false
			}
		case name == "instance-state-name":
			if i.State == nil || !slices.Contains(f.Values, string(i.State.Name)) {
				return false
			}
		}
	}
	return true
}

// Karpenter v1.14.1's instance provider suite
// (aws/karpenter-provider-aws pkg/providers/instance/suite_test.go): the
// CreateFleet request, listing and reading instances (instance.go). The
// launch's capacity handling is in shared/cloud.
func TestConformanceInstanceProvider(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "aws/providers/instance", File: "pkg/providers/instance/suite_test.go", Spec: "InstanceProvider > " + spec}
	}
	ctx := context.Background()
	launch := func(t *testing.T, capacityType string, overlay bool) *ec2.CreateFleetInput {
		t.Helper()
		api := &confEC2{free: map[string]int32{"subnet-a": 100, "subnet-b": 100}}
		_, err := NewProvider(api, "demo").Create(ctx, Request{
			NodeClaimName: "default-x", NodeClaimUID: "uid", CapacityType: capacityType, Prioritized: overlay,
			Offerings:       []Offering{{InstanceType: "m5.large", Zone: "a", Price: 0.05}, {InstanceType: "m5.xlarge", Zone: "b", Price: 0.1}},
			LaunchTemplates: []LaunchTemplate{{Name: "lt", ImageID: "ami-1", InstanceTypes: []string{"m5.large", "m5.xlarge"}}},
			Subnets:         map[string][]string{"a": {"subnet-a"}, "b": {"subnet-b"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(api.fleets) != 1 {
			t.Fatalf("%d CreateFleet calls, want 1", len(api.fleets))
		}
		return api.fleets[0]
	}
	conformance.Run(t, c("should use priotiztied allocation stragaty for an on-demand nodeclaim using nodeoverlay pricing"), func(t *testing.T) {
		in := launch(t, wellknown.CapacityTypeOnDemand, true)
		if in.OnDemandOptions == nil || in.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyPrioritized {
			t.Errorf("on-demand options %+v, want prioritized", in.OnDemandOptions)
		}
		// The priorities follow the overlay's prices: cheapest first.
		ovs := in.LaunchTemplateConfigs[0].Overrides
		if aws.ToFloat64(ovs[0].Priority) >= aws.ToFloat64(ovs[1].Priority) || ovs[0].InstanceType != "m5.large" {
			t.Errorf("priorities do not follow the offerings' order: %v, %v", aws.ToFloat64(ovs[0].Priority), aws.ToFloat64(ovs[1].Priority))
		}
	})
	conformance.Run(t, c("should use lowest price allocation stragaty by default for on-demand nodeclaims"), func(t *testing.T) {
		in := launch(t, wellknown.CapacityTypeOnDemand, false)
		if in.OnDemandOptions == nil || in.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyLowestPrice {
			t.Errorf("on-demand options %+v, want lowest-price", in.OnDemandOptions)
		}
	})
	conformance.Run(t, c("should use capacity optimized prioritized allocation stragaty for an spot nodeclaim using nodeoverlay"), func(t *testing.T) {
		in := launch(t, wellknown.CapacityTypeSpot, true)
		if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized {
			t.Errorf("spot options %+v, want capacity-optimized-prioritized", in.SpotOptions)
		}
	})
	conformance.Run(t, c("should use price capacity optimized allocation stragaty by default for spot nodeclaims"), func(t *testing.T) {
		in := launch(t, wellknown.CapacityTypeSpot, false)
		if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyPriceCapacityOptimized {
			t.Errorf("spot options %+v, want price-capacity-optimized", in.SpotOptions)
		}
	})
	conformance.Run(t, c("should treat instances which launched into open ODCRs as on-demand when the ReservedCapacity gate is disabled"), func(t *testing.T) {
		// Karpless has no ReservedCapacity gate (reserved capacity is always
		// on), and an instance an open reservation took in is on-demand in
		// any case: only a targeted launch is reserved.
		api := &confEC2{instances: map[string]ec2types.Instance{"i-1": {
			InstanceId: aws.String("i-1"), InstanceType: "m5.large", State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
			Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")}, LaunchTime: aws.Time(time.Now().Add(-time.Minute)),
			CapacityReservationId: aws.String("cr-foo"),
			Tags: []ec2types.Tag{{Key: aws.String(wellknown.ClusterTagKey("demo")), Value: aws.String(wellknown.OwnedTagValue)},
				{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")}},
		}}}
		got, err := NewProvider(api, "demo").List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != "i-1" || !strings.Contains(got[0].ProviderID(), "i-1") {
			t.Fatalf("listed %+v, want i-1", got)
		}
		if got[0].CapacityType != wellknown.CapacityTypeOnDemand || got[0].CapacityReservationID != "" {
			t.Errorf("capacity type %q reservation %q, want on-demand and none", got[0].CapacityType, got[0].CapacityReservationID)
		}
	})
	conformance.Run(t, c("should return all NodePool-owned instances from List"), func(t *testing.T) {
		api := &confEC2{instances: map[string]ec2types.Instance{}}
		want := map[string]bool{}
		for i := range 40 {
			id := fmt.Sprintf("i-%02d", i)
			inst := ec2types.Instance{InstanceId: aws.String(id), InstanceType: "m5.large", State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
				Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")}, LaunchTime: aws.Time(time.Now().Add(-time.Minute))}
			if i < 20 {
				inst.Tags = []ec2types.Tag{
					{Key: aws.String(wellknown.ClusterTagKey("demo")), Value: aws.String(wellknown.OwnedTagValue)},
					{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")},
					{Key: aws.String(wellknown.EC2NodeClassTagKey), Value: aws.String("default")},
					{Key: aws.String(wellknown.EKSClusterNameTagKey), Value: aws.String("demo")},
				}
				want[id] = true
			}
			api.instances[id] = inst
		}
		got, err := NewProvider(api, "demo").List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 20 {
			t.Fatalf("listed %d instances, want 20", len(got))
		}
		for _, i := range got {
			if !want[i.ID] {
				t.Errorf("listed %s, which no NodePool owns", i.ID)
			}
		}
	})
	conformance.Run(t, c("Cache Eviction > should evict cached instances that are no longer returned by List"), func(t *testing.T) {
		// Karpless keeps no instance cache: each read asks EC2, so an
		// instance EC2 no longer has is not found at once.
		api := &confEC2{instances: map[string]ec2types.Instance{"i-1": {InstanceId: aws.String("i-1"), State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
			Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")},
			Tags: []ec2types.Tag{{Key: aws.String(wellknown.ClusterTagKey("demo")), Value: aws.String(wellknown.OwnedTagValue)},
				{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")}}}}}
		p := NewProvider(api, "demo")
		if got, err := p.Get(ctx, "i-1"); err != nil || got.ID != "i-1" {
			t.Fatalf("get: %v %v", got, err)
		}
		delete(api.instances, "i-1")
		if _, err := p.List(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Get(ctx, "i-1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get of a reclaimed instance: %v, want not found", err)
		}
	})
	// Zonal Shift: Karpenter's instance cache is, in Karpless, what the
	// pass knows from its NodeClaims (WithZonalShift's known instances);
	// "a warm cache" is a known instance, "a cold cache" an unknown one.
	shiftedEC2 := func() *confEC2 {
		return &confEC2{instances: map[string]ec2types.Instance{"i-1a": {
			InstanceId: aws.String("i-1a"), InstanceType: "m5.large", State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
			Placement: &ec2types.Placement{AvailabilityZone: aws.String("test-zone-1a"), AvailabilityZoneId: aws.String("tstz1-1a")},
			Tags: []ec2types.Tag{{Key: aws.String(wellknown.ClusterTagKey("demo")), Value: aws.String(wellknown.OwnedTagValue)},
				{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")}},
		}}}
	}
	shift := zonalshift.Zones{"tstz1-1a": true}
	known := []Instance{{ID: "i-1a", Zone: "test-zone-1a", ZoneID: "tstz1-1a", Tags: map[string]string{wellknown.NodeClaimTagKey: "default-abc"}}}
	conformance.Run(t, c("Zonal Shift > should not call DescribeInstances for instances in a zonally shifted AZ"), func(t *testing.T) {
		api := shiftedEC2()
		p := NewProvider(api, "demo").WithZonalShift(shift, known)
		inst, err := p.Get(ctx, "i-1a")
		if err != nil {
			t.Fatal(err)
		}
		if inst.ID != "i-1a" || inst.ZoneID != "tstz1-1a" {
			t.Errorf("got %+v, want i-1a in tstz1-1a", inst)
		}
		if got, err := p.ForNodeClaim(ctx, "default-abc"); err != nil || len(got) != 1 || got[0].ID != "i-1a" {
			t.Errorf("ForNodeClaim = %v %v, want the known i-1a", got, err)
		}
		if api.describes != 0 {
			t.Errorf("%d DescribeInstances calls, want 0", api.describes)
		}
	})
	conformance.Run(t, c("Zonal Shift > should not call TerminateInstances for instances in a zonally shifted AZ"), func(t *testing.T) {
		api := shiftedEC2()
		p := NewProvider(api, "demo").WithZonalShift(shift, known)
		inst, err := p.Get(ctx, "i-1a")
		if err != nil {
			t.Fatal(err)
		}
		failures := counter{}
		err = p.Delete(ctx, failures, *inst)
		if err == nil || !strings.Contains(err.Error(), "zonally shifted") || !errors.Is(err, ErrZonallyShifted) {
			t.Fatalf("delete: %v, want a zonally shifted error", err)
		}
		if want := "instance i-1a is in zonally shifted availability zone test-zone-1a (tstz1-1a), skipping termination"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("delete: %q, want Karpenter's %q", err, want)
		}
		if api.describes != 0 || api.terminations != 0 {
			t.Errorf("%d DescribeInstances and %d TerminateInstances calls, want none", api.describes, api.terminations)
		}
		// The intentional skip is not a termination failure.
		if len(failures) != 0 {
			t.Errorf("counted %v, want nothing", failures)
		}
	})
	conformance.Run(t, c("Zonal Shift > should not call CreateTags for instances in a zonally shifted AZ"), func(t *testing.T) {
		api := shiftedEC2()
		err := NewProvider(api, "demo").WithZonalShift(shift, known).Tag(ctx, "i-1a", map[string]string{"test-key": "test-value"})
		if err == nil || !strings.Contains(err.Error(), "zonally shifted") || !errors.Is(err, ErrZonallyShifted) {
			t.Fatalf("tag: %v, want a zonally shifted error", err)
		}
		if api.tags != 0 {
			t.Errorf("%d CreateTags calls, want 0", api.tags)
		}
	})
	conformance.Run(t, c("Zonal Shift > Cache Miss > should not call TerminateInstances even with a cold cache since Delete calls Get first"), func(t *testing.T) {
		api := shiftedEC2()
		p := NewProvider(api, "demo").WithZonalShift(shift, nil)
		inst, err := p.Get(ctx, "i-1a")
		if err != nil {
			t.Fatal(err)
		}
		err = p.Delete(ctx, nil, *inst)
		if err == nil || !strings.Contains(err.Error(), "zonally shifted") {
			t.Fatalf("delete: %v, want a zonally shifted error", err)
		}
		// Get asked EC2 (nothing was known), and EC2's answer named the zone.
		if api.describes != 1 || api.terminations != 0 {
			t.Errorf("%d DescribeInstances and %d TerminateInstances calls, want 1 and 0", api.describes, api.terminations)
		}
	})
	conformance.Run(t, c("Cache Eviction > should not evict cached instances in a zonally shifted AZ when not returned by List"), func(t *testing.T) {
		api := shiftedEC2()
		p := NewProvider(api, "demo").WithZonalShift(shift, known)
		delete(api.instances, "i-1a")
		listed, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 1 || listed[0].ID != "i-1a" {
			t.Errorf("listed %v, want the known i-1a EC2 did not list", listed)
		}
		inst, err := p.Get(ctx, "i-1a")
		if err != nil || inst.ID != "i-1a" {
			t.Errorf("get: %v %v, want the known i-1a", inst, err)
		}
	})
	conformance.Run(t, c("Zonal Shift > Cache Miss > should proceed with CreateTags when instance is not in the cache"), func(t *testing.T) {
		api := &tagEC2{}
		if err := NewProvider(api, "demo").Tag(ctx, "i-1", map[string]string{"test-key": "test-value"}); err != nil {
			t.Fatal(err)
		}
		if api.calls != 1 {
			t.Errorf("%d CreateTags calls, want 1", api.calls)
		}
	})
	conformance.Run(t, c("Zonal Shift > should emit a zone-dimensioned termination failure metric when TerminateInstances errors"), func(t *testing.T) {
		api := &confEC2{instances: map[string]ec2types.Instance{"i-1b": {
			InstanceId: aws.String("i-1b"), InstanceType: "m5.large", State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
			Placement: &ec2types.Placement{AvailabilityZone: aws.String("test-zone-1b"), AvailabilityZoneId: aws.String("tstz1-1b")},
		}}, terminateErr: &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}}
		p := NewProvider(api, "demo")
		inst, err := p.Get(ctx, "i-1b")
		if err != nil {
			t.Fatal(err)
		}
		failures := counter{}
		if err := p.Delete(ctx, failures, *inst); err == nil {
			t.Fatal("delete succeeded; want TerminateInstances's error")
		}
		if api.terminations == 0 {
			t.Fatal("TerminateInstances was not called")
		}
		// Once, whatever the calls: the instance's zone and zone ID.
		want := counter{TerminationFailuresMetric + " zone=test-zone-1b zone_id=tstz1-1b": 1}
		if !maps.Equal(failures, want) {
			t.Errorf("counted %v, want %v", failures, want)
		}
	})
}

// counter is a Counter that keeps its counts by name and dimensions.
type counter map[string]float64

func (c counter) Count(name string, v float64, dims map[string]string) {
	keys := slices.Sorted(maps.Keys(dims))
	for _, k := range keys {
		name += " " + k + "=" + dims[k]
	}
	c[name] += v
}

type tagEC2 struct {
	EC2
	calls int
}

func (f *tagEC2) CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	f.calls++
	return &ec2.CreateTagsOutput{}, nil
}
