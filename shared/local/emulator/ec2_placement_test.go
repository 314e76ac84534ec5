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

func pgNames(out *ec2.DescribePlacementGroupsOutput) []string {
	var names []string
	for _, g := range out.PlacementGroups {
		names = append(names, aws.ToString(g.GroupName))
	}
	slices.Sort(names)
	return names
}

func TestDescribePlacementGroupsContract(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	cl := e.ClusterName()
	seeded := map[string]PlacementGroup{}
	for _, g := range e.PlacementGroups() {
		seeded[g.Strategy] = g
	}
	if len(seeded) != 3 || seeded[PlacementPartition].PartitionCount != 3 || seeded[PlacementSpread].SpreadLevel != "rack" {
		t.Fatalf("seeded groups = %+v", seeded)
	}
	// Made with tags (and then settled past its lag) for the tag filters.
	if _, err := e.CreatePlacementGroup("tagged", PlacementCluster, 0, map[string]string{"team": "ml"}); err != nil {
		t.Fatal(err)
	}
	step(t, e, e.Config().Hostility.PlacementGroupLagMax)

	for _, tc := range []struct {
		name string
		in   *ec2.DescribePlacementGroupsInput
		want []string
		code string
	}{
		{name: "all", in: &ec2.DescribePlacementGroupsInput{}, want: []string{cl + "-cluster", cl + "-partition", cl + "-spread", "tagged"}},
		{name: "by name", in: &ec2.DescribePlacementGroupsInput{GroupNames: []string{cl + "-partition"}}, want: []string{cl + "-partition"}},
		{name: "by id", in: &ec2.DescribePlacementGroupsInput{GroupIds: []string{seeded[PlacementSpread].ID}}, want: []string{cl + "-spread"}},
		{name: "strategy filter", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("strategy"), Values: []string{"cluster"}}}}, want: []string{cl + "-cluster", "tagged"}},
		{name: "state filter, as Karpenter asks", in: &ec2.DescribePlacementGroupsInput{GroupNames: []string{cl + "-cluster"}, Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{"available"}}}}, want: []string{cl + "-cluster"}},
		{name: "state filter excludes", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{"deleting"}}}}},
		{name: "group-name wildcard", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"*-sp?ead"}}}}, want: []string{cl + "-spread"}},
		{name: "group-id filter", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-id"), Values: []string{seeded[PlacementCluster].ID}}}}, want: []string{cl + "-cluster"}},
		{name: "tag filter", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:team"), Values: []string{"ml"}}}}, want: []string{"tagged"}},
		{name: "tag-key filter", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"team"}}}}, want: []string{"tagged"}},
		{name: "unknown name", in: &ec2.DescribePlacementGroupsInput{GroupNames: []string{"nope"}}, code: "InvalidPlacementGroup.Unknown"},
		{name: "unknown id", in: &ec2.DescribePlacementGroupsInput{GroupIds: []string{"pg-0123456789abcdef0"}}, code: "InvalidPlacementGroup.Unknown"},
		{name: "unknown filter", in: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"x"}}}}, code: "InvalidParameterValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribePlacementGroups(ctx, tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pgNames(out); !slices.Equal(got, tc.want) {
				t.Errorf("groups = %v, want %v", got, tc.want)
			}
		})
	}
	// Every field the SDK reads arrives (a misnamed element is dropped silently).
	out, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{cl + "-partition", "tagged"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range out.PlacementGroups {
		if aws.ToString(g.GroupId) == "" || g.State != ec2types.PlacementGroupStateAvailable || !strings.HasPrefix(aws.ToString(g.GroupArn), "arn:aws:ec2:") {
			t.Errorf("group %+v", g)
		}
		switch aws.ToString(g.GroupName) {
		case "tagged":
			if g.Strategy != ec2types.PlacementStrategyCluster || len(g.Tags) != 1 || aws.ToString(g.Tags[0].Key) != "team" {
				t.Errorf("tagged = %+v", g)
			}
		default:
			if g.Strategy != ec2types.PlacementStrategyPartition || aws.ToInt32(g.PartitionCount) != 3 {
				t.Errorf("partition group = %+v", g)
			}
		}
	}
}

// TestPlacementGroupLag: a new group is unknown for a moment, as EC2's
// are, to Describe and to launches; then found.
func TestPlacementGroupLag(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "pg-lag")
	missed := 0
	for i := range 5 {
		name := fmt.Sprintf("new-%d", i)
		if _, err := e.CreatePlacementGroup(name, PlacementCluster, 0, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{name}}); err != nil {
			wantCode(t, err, "InvalidPlacementGroup.Unknown")
			missed++
		}
	}
	if missed == 0 {
		t.Fatal("no new group was missing from DescribePlacementGroups")
	}
	if _, err := e.CreatePlacementGroup("new-0", PlacementCluster, 0, nil); err == nil || !strings.Contains(err.Error(), "InvalidPlacementGroup.Duplicate") {
		t.Fatalf("duplicate name: %v", err)
	}
	// A launch naming a group EC2 does not show yet fails like an unknown one.
	if _, err := e.CreatePlacementGroup("fresh", PlacementCluster, 0, nil); err != nil {
		t.Fatal(err)
	}
	in := fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a"})
	in.LaunchTemplateConfigs[0].Overrides[0].Placement = &ec2types.Placement{GroupName: aws.String("fresh")}
	step(t, e, e.Config().Hostility.PlacementGroupLagMax)
	out, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(out.PlacementGroups); got != 3+5+1 {
		t.Fatalf("after the lag %d groups are listed, want 9", got)
	}
	fo, err := c.CreateFleet(ctx, in)
	if err != nil || len(launched(fo)) != 1 {
		t.Fatalf("launch into a settled new group: %v %+v", err, fo)
	}
}

// placedFleet launches n instances of m5.large from lt into zones, the
// override naming pg (nil: the template's placement only).
func placedFleet(t *testing.T, c *ec2.Client, e *Emulator, lt string, n int32, pg *ec2types.Placement, zones ...string) *ec2.CreateFleetOutput {
	t.Helper()
	in := fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, zones)
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(n)
	for i := range in.LaunchTemplateConfigs[0].Overrides {
		in.LaunchTemplateConfigs[0].Overrides[i].Placement = pg
	}
	out, err := c.CreateFleet(context.Background(), in)
	if err != nil {
		t.Fatalf("CreateFleet: %v", err)
	}
	return out
}

func fleetErrs(out *ec2.CreateFleetOutput) []string {
	var errs []string
	for _, fe := range out.Errors {
		errs = append(errs, aws.ToString(fe.ErrorCode)+":"+aws.ToString(fe.LaunchTemplateAndOverrides.Overrides.AvailabilityZone))
	}
	return errs
}

// describedPlacement is the placement DescribeInstances reports, once the
// instance is visible.
func describedPlacement(t *testing.T, c *ec2.Client, e *Emulator, id string) ec2types.Placement {
	t.Helper()
	var pl ec2types.Placement
	err := eventually(t, e, func() error {
		out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return err
		}
		pl = *out.Reservations[0].Instances[0].Placement
		return nil
	})
	if err != nil {
		t.Fatalf("DescribeInstances %s: %v", id, err)
	}
	return pl
}

func TestLaunchIntoPlacementGroups(t *testing.T) {
	h := DefaultHostility()
	// Each case counts which override a launch takes; random fleet errors
	// would move launches to other pools (TestCreateFleet covers them).
	h.FleetErrorRate = 0
	e, _ := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	cl := e.ClusterName()
	byStrategy := map[string]PlacementGroup{}
	for _, g := range e.PlacementGroups() {
		byStrategy[g.Strategy] = g
	}
	cluster, partition, spread := byStrategy[PlacementCluster], byStrategy[PlacementPartition], byStrategy[PlacementSpread]

	t.Run("cluster group from the template: one zone", func(t *testing.T) {
		lt := createLT(t, c, e, "pg-cluster", func(d *ec2types.RequestLaunchTemplateData) {
			d.Placement = &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String(cluster.ID)}
		})
		first := placedFleet(t, c, e, lt, 1, nil, threeZones...)
		ids := launched(first)
		if len(ids) != 1 {
			t.Fatalf("first launch: %+v", first)
		}
		pl := describedPlacement(t, c, e, ids[0])
		if aws.ToString(pl.GroupName) != cl+"-cluster" || aws.ToString(pl.GroupId) != cluster.ID || aws.ToInt32(pl.PartitionNumber) != 0 {
			t.Fatalf("placement = %+v", pl)
		}
		zone := aws.ToString(pl.AvailabilityZone)
		var others []string
		for _, z := range threeZones {
			if z != zone {
				others = append(others, z)
			}
		}
		// Other zones: EC2 answers insufficient capacity for each.
		out := placedFleet(t, c, e, lt, 1, nil, others...)
		if len(launched(out)) != 0 || !slices.Equal(fleetErrs(out), []string{"InsufficientInstanceCapacity:" + others[0], "InsufficientInstanceCapacity:" + others[1]}) {
			t.Fatalf("launch outside the group's zone: instances %v errors %v", launched(out), fleetErrs(out))
		}
		// Every zone offered: the group's zone is the one that launches.
		out = placedFleet(t, c, e, lt, 2, nil, threeZones...)
		if n := len(launched(out)); n != 2 {
			t.Fatalf("launch with the group's zone offered: %d instances, errors %v", n, fleetErrs(out))
		}
		for _, id := range launched(out) {
			if g, _, ok := e.PlacementOf(id); !ok || g.ID != cluster.ID || e.instanceZone(id) != zone {
				t.Errorf("%s: group %+v in %s, want %s in %s", id, g, e.instanceZone(id), cluster.ID, zone)
			}
		}
		// RunInstances meets the same rule, at the top level.
		_, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt)},
			InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnetIn(t, e, others[0])),
		})
		wantCode(t, err, "InsufficientInstanceCapacity")
	})

	t.Run("partition group: EC2 spreads, or the asked partition", func(t *testing.T) {
		lt := createLT(t, c, e, "pg-partition")
		pg := &ec2types.Placement{GroupName: aws.String(partition.Name)}
		var got []int32
		for range 4 {
			out := placedFleet(t, c, e, lt, 1, pg, "us-west-2a", "us-west-2b")
			ids := launched(out)
			if len(ids) != 1 {
				t.Fatalf("launch: errors %v", fleetErrs(out))
			}
			got = append(got, aws.ToInt32(describedPlacement(t, c, e, ids[0]).PartitionNumber))
		}
		if !slices.Equal(got, []int32{1, 2, 3, 1}) {
			t.Errorf("partitions %v, want 1 2 3 1 (emptiest first)", got)
		}
		out := placedFleet(t, c, e, lt, 1, &ec2types.Placement{GroupName: aws.String(partition.Name), PartitionNumber: aws.Int32(3)}, "us-west-2a")
		if ids := launched(out); len(ids) != 1 || aws.ToInt32(describedPlacement(t, c, e, ids[0]).PartitionNumber) != 3 {
			t.Fatalf("asked partition 3: %v %v", launched(out), fleetErrs(out))
		}
		out = placedFleet(t, c, e, lt, 1, &ec2types.Placement{GroupName: aws.String(partition.Name), PartitionNumber: aws.Int32(4)}, "us-west-2a")
		if len(launched(out)) != 0 || !slices.Equal(fleetErrs(out), []string{"InvalidParameterValue:us-west-2a"}) {
			t.Fatalf("partition 4 of 3: %v %v", launched(out), fleetErrs(out))
		}
		// DescribeInstances filters on the placement.
		d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("placement-group-name"), Values: []string{partition.Name}},
			{Name: aws.String("placement-partition-number"), Values: []string{"1"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range d.Reservations {
			n += len(r.Instances)
		}
		if n != 2 {
			t.Errorf("%d instances in partition 1, want 2", n)
		}
	})

	t.Run("spread group: seven per zone", func(t *testing.T) {
		lt := createLT(t, c, e, "pg-spread")
		pg := &ec2types.Placement{GroupId: aws.String(spread.ID)}
		out := placedFleet(t, c, e, lt, 8, pg, "us-west-2a")
		if n := len(launched(out)); n != 7 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorMessage) != spreadLimitMessage {
			t.Fatalf("8 into one zone: %d launched, errors %+v", n, out.Errors)
		}
		out = placedFleet(t, c, e, lt, 1, pg, "us-west-2b")
		if len(launched(out)) != 1 {
			t.Fatalf("another zone: %v", fleetErrs(out))
		}
	})

	t.Run("unknown group", func(t *testing.T) {
		lt := createLT(t, c, e, "pg-unknown", func(d *ec2types.RequestLaunchTemplateData) {
			d.Placement = &ec2types.LaunchTemplatePlacementRequest{GroupName: aws.String("nope")}
		})
		out := placedFleet(t, c, e, lt, 1, nil, "us-west-2a")
		if len(launched(out)) != 0 || !slices.Equal(fleetErrs(out), []string{"InvalidPlacementGroup.Unknown:us-west-2a"}) {
			t.Fatalf("fleet: %v %v", launched(out), fleetErrs(out))
		}
		_, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt)},
			InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnetIn(t, e, "us-west-2a")),
		})
		wantCode(t, err, "InvalidPlacementGroup.Unknown")
		// The request's own placement wins over the template's.
		ri, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt)},
			InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnetIn(t, e, "us-west-2c")),
			Placement: &ec2types.Placement{GroupName: aws.String(spread.Name)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if pl := ri.Instances[0].Placement; aws.ToString(pl.GroupName) != spread.Name || aws.ToString(pl.GroupId) != spread.ID {
			t.Errorf("RunInstances answer placement = %+v", pl)
		}
	})

	// A terminated instance leaves its cluster group: the group may move.
	t.Run("an emptied cluster group takes any zone", func(t *testing.T) {
		var live []string
		for _, i := range e.Instances(NotTerminated) {
			if g, _, ok := e.PlacementOf(i.ID); ok && g.ID == cluster.ID {
				live = append(live, i.ID)
			}
		}
		if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: live}); err != nil {
			t.Fatal(err)
		}
		step(t, e, time.Minute)
		zone := e.instanceZone(live[0])
		var other string
		for _, z := range threeZones {
			if z != zone {
				other = z
			}
		}
		lt := createLT(t, c, e, "pg-cluster-2")
		out := placedFleet(t, c, e, lt, 1, &ec2types.Placement{GroupName: aws.String(cluster.Name)}, other)
		if len(launched(out)) != 1 {
			t.Fatalf("launch into the emptied group in %s: %v", other, fleetErrs(out))
		}
	})
}

// instanceZone is an instance's zone (no hostility), for the tests.
func (e *Emulator) instanceZone(id string) string {
	for _, i := range e.Instances(nil) {
		if i.ID == id {
			return i.Zone
		}
	}
	return ""
}
