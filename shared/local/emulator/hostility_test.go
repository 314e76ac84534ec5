package emulator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// only is a Config mutation with every hostile behaviour off but the one
// set: each test below isolates the behaviour it pins down.
func only(set func(*Hostility)) func(*Config) {
	h := NoHostility()
	set(&h)
	return calm(h)
}

// visible reports which of ids DescribeInstances returns by filter, and
// checks that asking by id agrees.
func visible(t *testing.T, c *ec2.Client, ids []string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			seen[aws.ToString(i.InstanceId)] = true
		}
	}
	for _, id := range ids {
		_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		_, serr := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}, IncludeAllInstances: aws.Bool(true)})
		switch {
		case seen[id] && (err != nil || serr != nil):
			t.Errorf("%s is listed by filter but not found by id: %v / %v", id, err, serr)
		case !seen[id]:
			wantCode(t, err, "InvalidInstanceID.NotFound")
			wantCode(t, serr, "InvalidInstanceID.NotFound")
		}
	}
	return seen
}

func TestHostilityConfig(t *testing.T) {
	want := Hostility{
		DescribeLagMax: 8 * time.Second, TerminatedStaleMax: 5 * time.Second, TagLagMax: 3 * time.Second,
		LaunchTemplateLagMax: 3 * time.Second, PlacementGroupLagMax: 3 * time.Second, CapacityReservationLagMax: 5 * time.Second, FleetLagMax: 5 * time.Second,
		ProfilePropagationMin: 5 * time.Second, ProfilePropagationMax: 20 * time.Second,
		NoSpotMarketFraction: 0.05, NoSpotServiceLinkedRole: false,
		FleetErrorRate: 0.03, ThrottleRate: 0.01, ServerErrorRate: 0.003, LostAnswerRate: 0.003,
		AsyncDelayMax: 200 * time.Millisecond, AsyncDuplicateRate: 0.01,
	}
	if got := DefaultHostility(); got != want {
		t.Errorf("DefaultHostility() = %+v, want %+v", got, want)
	}
	if NoHostility() != (Hostility{}) {
		t.Errorf("NoHostility() = %+v", NoHostility())
	}
	// Hostile unless told otherwise.
	e, _ := newTestEmulator(t)
	if got := e.Config().Hostility; got == nil || *got != want {
		t.Errorf("default Config.Hostility = %+v", got)
	}
	// The emulator keeps a copy: the caller's value cannot change it later,
	// nor can a caller of Config().
	h := NoHostility()
	e, _ = newTestEmulator(t, calm(h))
	h.ThrottleRate = 1
	e.Config().Hostility.ThrottleRate = 1
	if _, err := ec2.NewFromConfig(sdkConfig(t, e, 1)).DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Errorf("hostility changed behind the emulator's back: %v", err)
	}
	e.SetHostility(h)
	_, err := ec2.NewFromConfig(sdkConfig(t, e, 1)).DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
	wantCode(t, err, "RequestLimitExceeded")
	if e.Config().Hostility.ThrottleRate != 1 {
		t.Error("SetHostility not reflected in Config()")
	}
}

func TestHostileDescribeLag(t *testing.T) {
	// run launches 20 instances and reports, by launch index, which are
	// visible half-way through DescribeLagMax.
	run := func(t *testing.T, seed uint64) []int {
		e, _ := newTestEmulator(t, only(func(h *Hostility) { h.DescribeLagMax = 8 * time.Second }), func(c *Config) { c.Seed = seed })
		c := ec2Client(t, e)
		ids := launchN(t, e, c, createLT(t, c, e, "karpenter.k8s.aws/lag"), 20, "on-demand")
		if n := len(visible(t, c, ids)); n == 20 {
			t.Fatalf("all 20 new instances visible at once")
		}
		step(t, e, 4*time.Second)
		half := visible(t, c, ids)
		if len(half) == 0 || len(half) == 20 {
			t.Errorf("%d of 20 visible after 4s of a 0..8s lag", len(half))
		}
		var out []int
		for k, id := range ids {
			if half[id] {
				out = append(out, k)
			}
		}
		step(t, e, 4*time.Second)
		if n := len(visible(t, c, ids)); n != 20 {
			t.Errorf("%d of 20 visible after DescribeLagMax", n)
		}
		if e.HostileEvents()[EventDescribeLag] == 0 {
			t.Errorf("no describe-lag event: %v", e.HostileEvents())
		}
		return out
	}
	a, b, other := run(t, 42), run(t, 42), run(t, 43)
	if !slices.Equal(a, b) {
		t.Errorf("the same seed chose other lags: %v, then %v", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 42 and 43 chose the same lags: %v", a)
	}
}

func TestHostileTerminatedStale(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.TerminatedStaleMax = 5 * time.Second }))
	c := ec2Client(t, e)
	ctx := context.Background()
	ids := launchN(t, e, c, createLT(t, c, e, "karpenter.k8s.aws/stale"), 16, "on-demand")
	step(t, e, e.cfg.PendingDelay)
	out, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	// The answer itself tells the truth.
	for _, sc := range out.TerminatingInstances {
		if sc.CurrentState.Name != ec2types.InstanceStateNameShuttingDown || sc.PreviousState.Name != ec2types.InstanceStateNameRunning {
			t.Errorf("TerminateInstances answered %s -> %s", sc.PreviousState.Name, sc.CurrentState.Name)
		}
	}
	// states answers, per id, the state DescribeInstances reports when
	// filtering on it (and checks that both agree).
	states := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, s := range []string{"running", "shutting-down"} {
			out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{s}}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Reservations {
				for _, i := range r.Instances {
					if string(i.State.Name) != s {
						t.Errorf("filter %s returned %s in %s", s, aws.ToString(i.InstanceId), i.State.Name)
					}
					if s == "running" && i.StateReason != nil {
						t.Errorf("stale %s shows the new state reason %v", aws.ToString(i.InstanceId), aws.ToString(i.StateReason.Code))
					}
					got[aws.ToString(i.InstanceId)] = s
				}
			}
		}
		return got
	}
	count := func(m map[string]string, s string) int {
		n := 0
		for _, v := range m {
			if v == s {
				n++
			}
		}
		return n
	}
	if got := states(); count(got, "running") == 0 {
		t.Errorf("no instance reported running right after TerminateInstances: %v", got)
	}
	st, err := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: ids[:1]})
	if err != nil || len(st.InstanceStatuses) > 1 {
		t.Errorf("DescribeInstanceStatus: %+v %v", st, err)
	}
	for _, id := range ids {
		if i, _ := e.Instance(id); i.State != StateShuttingDown {
			t.Errorf("the emulator's own record of %s is %s", id, i.State)
		}
	}
	step(t, e, 2500*time.Millisecond)
	if got := states(); count(got, "running") == 0 || count(got, "shutting-down") == 0 {
		t.Errorf("after 2.5s of a 0..5s staleness: %d running, %d shutting down", count(got, "running"), count(got, "shutting-down"))
	}
	step(t, e, 2500*time.Millisecond)
	if got := states(); count(got, "shutting-down") != 16 {
		t.Errorf("after TerminatedStaleMax: %v", got)
	}
	desc, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	if err != nil || desc.Reservations[0].Instances[0].StateReason == nil || aws.ToString(desc.Reservations[0].Instances[0].StateReason.Code) != "Client.UserInitiatedShutdown" {
		t.Errorf("state reason once fresh: %+v %v", desc, err)
	}
	if e.HostileEvents()[EventTerminatedStale] == 0 {
		t.Errorf("no terminated-stale event: %v", e.HostileEvents())
	}
}

func TestHostileTagLag(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.TagLagMax = 3 * time.Second }))
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/tags")
	id := launchN(t, e, c, lt, 1, "on-demand")[0]
	ltID := e.LaunchTemplates()[0].ID
	sub, sg := e.Subnets()[0].ID, e.SecurityGroups()[0].ID
	byTag := func(k, v string) []ec2types.Filter {
		return []ec2types.Filter{{Name: aws.String("tag:" + k), Values: []string{v}}}
	}
	// seen counts, per kind of resource, how many Describe answers show
	// the tag (by filter).
	seen := func(k, v string) map[string]int {
		t.Helper()
		got := map[string]int{}
		inst, err1 := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: byTag(k, v)})
		lts, err2 := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: byTag(k, v)})
		subs, err3 := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: byTag(k, v)})
		sgs, err4 := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: byTag(k, v)})
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			t.Fatal(err)
		}
		got["instance"], got["launch-template"], got["subnet"], got["security-group"] = len(inst.Reservations), len(lts.LaunchTemplates), len(subs.Subnets), len(sgs.SecurityGroups)
		return got
	}
	all := map[string]int{"instance": 1, "launch-template": 1, "subnet": 1, "security-group": 1}
	none := map[string]int{"instance": 0, "launch-template": 0, "subnet": 0, "security-group": 0}
	// Tags given at creation are there at once.
	if got := seen("karpenter.sh/nodepool", "default"); got["instance"] != 1 {
		t.Errorf("creation tags not visible at once: %v", got)
	}
	tag := []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("a")}}
	resources := []string{id, ltID, sub, sg}
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: resources, Tags: tag}); err != nil {
		t.Fatal(err)
	}
	if got := seen("team", "a"); !equalCounts(got, none) {
		t.Errorf("CreateTags visible at once: %v", got)
	}
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || hasTag(out.Reservations[0].Instances[0].Tags, "team") {
		t.Errorf("the new tag shows by id at once: %v", err)
	}
	if i, _ := e.Instance(id); i.Tags["team"] != "a" {
		t.Errorf("the emulator's own record lacks the tag: %v", i.Tags)
	}
	step(t, e, 3*time.Second)
	if got := seen("team", "a"); !equalCounts(got, all) {
		t.Errorf("after TagLagMax: %v", got)
	}
	if _, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: resources, Tags: tag}); err != nil {
		t.Fatal(err)
	}
	if got := seen("team", "a"); !equalCounts(got, all) {
		t.Errorf("DeleteTags visible at once: %v", got)
	}
	step(t, e, 3*time.Second)
	if got := seen("team", "a"); !equalCounts(got, none) {
		t.Errorf("deleted tags still visible after TagLagMax: %v", got)
	}
	// Changes show in the order they were made: never v2 then v1.
	for _, v := range []string{"v1", "v2"} {
		if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String(v)}}}); err != nil {
			t.Fatal(err)
		}
	}
	var history []string
	for range 8 {
		out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		v := "-"
		for _, tg := range out.Reservations[0].Instances[0].Tags {
			if aws.ToString(tg.Key) == "k" {
				v = aws.ToString(tg.Value)
			}
		}
		if len(history) == 0 || history[len(history)-1] != v {
			history = append(history, v)
		}
		step(t, e, 500*time.Millisecond)
	}
	if history[len(history)-1] != "v2" || slices.Index(history, "v2") < slices.Index(history, "v1") || slices.Index(history, "-") > 0 {
		t.Errorf("tag k went %v, want - then v1 then v2 (some may be skipped)", history)
	}
	if e.HostileEvents()[EventTagLag] == 0 {
		t.Errorf("no tag-lag event: %v", e.HostileEvents())
	}
}

func equalCounts(a, b map[string]int) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

func hasTag(tags []ec2types.Tag, key string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return true
		}
	}
	return false
}

func TestHostileLaunchTemplateLag(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.LaunchTemplateLagMax = 3 * time.Second }))
	c := ec2Client(t, e)
	ctx := context.Background()
	name := "karpenter.k8s.aws/new"
	in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
		ImageId: aws.String(imageFor(t, e, "AL2023", "x86_64", "standard")),
	}}
	created, err := c.CreateLaunchTemplate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(created.LaunchTemplate.LaunchTemplateId)
	_, err = c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException")
	_, err = c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
	wantCode(t, err, "InvalidLaunchTemplateId.NotFound")
	list, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: []string{name}}}})
	if err != nil || len(list.LaunchTemplates) != 0 {
		t.Errorf("a new template is listed at once: %+v %v", list, err)
	}
	_, err = c.CreateFleet(ctx, fleetInput(t, e, name, "on-demand", []string{"m5.large"}, threeZones))
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException")
	_, err = c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large", LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(name)}})
	wantCode(t, err, "InvalidLaunchTemplateName.NotFoundException")
	if n := len(e.Instances(nil)); n != 0 {
		t.Errorf("%d instances launched from a template EC2 did not know", n)
	}
	// Writes are consistent: the name is taken.
	in.ClientToken = aws.String("another")
	_, err = c.CreateLaunchTemplate(ctx, in)
	wantCode(t, err, "InvalidLaunchTemplateName.AlreadyExistsException")
	if e.HostileEvents()[EventLaunchTemplateLag] == 0 {
		t.Errorf("no launch-template-lag event: %v", e.HostileEvents())
	}
	step(t, e, 3*time.Second)
	if _, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}}); err != nil {
		t.Errorf("after LaunchTemplateLagMax: %v", err)
	}
	out, err := c.CreateFleet(ctx, fleetInput(t, e, name, "on-demand", []string{"m5.large"}, threeZones))
	if err != nil || len(launched(out)) != 1 {
		t.Errorf("CreateFleet after LaunchTemplateLagMax: %v", err)
	}
}

func TestDescribeFleets(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.FleetLagMax = 5 * time.Second }))
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/fleets")
	e.Inject(ICE("on-demand", "c5.large", "us-west-2a"))
	in := fleetInput(t, e, lt, "on-demand", []string{"c5.large", "m5.large"}, []string{"us-west-2a"})
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(2)
	in.ClientToken = aws.String("nodeclaim-uid-1")
	createdAt := fakeClock(t, e).Now()
	created, err := c.CreateFleet(ctx, in)
	if err != nil || len(launched(created)) != 2 || len(created.Errors) != 1 {
		t.Fatalf("CreateFleet: %+v %v", created, err)
	}
	id := aws.ToString(created.FleetId)
	// A fleet that launched nothing is a fleet too.
	e.Inject(ICE("spot", "", ""))
	empty, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "spot", []string{"m5.large"}, []string{"us-west-2b"}))
	if err != nil || len(launched(empty)) != 0 {
		t.Fatalf("CreateFleet under ICE: %+v %v", empty, err)
	}
	emptyID := aws.ToString(empty.FleetId)

	_, err = c.DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: []string{id}})
	wantCode(t, err, "InvalidFleetId.NotFound")
	step(t, e, 5*time.Second)

	out, err := c.DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: []string{id}})
	if err != nil || len(out.Fleets) != 1 {
		t.Fatalf("DescribeFleets: %+v %v", out, err)
	}
	f := out.Fleets[0]
	if aws.ToString(f.FleetId) != id || aws.ToString(f.ClientToken) != "nodeclaim-uid-1" || f.FleetState != ec2types.FleetStateCodeActive ||
		f.Type != ec2types.FleetTypeInstant || f.ActivityStatus != ec2types.FleetActivityStatusFulfilled || f.CreateTime == nil || !f.CreateTime.Equal(createdAt) ||
		!hasTag(f.Tags, "karpenter.sh/nodepool") || aws.ToFloat64(f.FulfilledCapacity) != 2 || aws.ToFloat64(f.FulfilledOnDemandCapacity) != 2 {
		t.Errorf("fleet decoded wrong: %+v", f)
	}
	if ts := f.TargetCapacitySpecification; ts == nil || aws.ToInt32(ts.TotalTargetCapacity) != 2 || ts.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeOnDemand {
		t.Errorf("target capacity: %+v", ts)
	}
	if len(f.LaunchTemplateConfigs) != 1 || len(f.LaunchTemplateConfigs[0].Overrides) != 2 || aws.ToString(f.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName) != lt ||
		f.LaunchTemplateConfigs[0].Overrides[1].InstanceType != "m5.large" || aws.ToString(f.LaunchTemplateConfigs[0].Overrides[1].SubnetId) == "" {
		t.Errorf("launch template configs: %+v", f.LaunchTemplateConfigs)
	}
	if len(f.Instances) != 1 {
		t.Fatalf("fleetInstanceSet: %+v", f.Instances)
	}
	fi := f.Instances[0]
	o := fi.LaunchTemplateAndOverrides
	if !slices.Equal(fi.InstanceIds, launched(created)) || fi.InstanceType != "m5.large" || fi.Lifecycle != ec2types.InstanceLifecycleOnDemand ||
		o == nil || aws.ToString(o.LaunchTemplateSpecification.LaunchTemplateName) != lt || aws.ToString(o.LaunchTemplateSpecification.LaunchTemplateId) == "" ||
		o.Overrides.InstanceType != "m5.large" || aws.ToString(o.Overrides.AvailabilityZone) != "us-west-2a" || aws.ToFloat64(o.Overrides.Priority) == 0 {
		t.Errorf("fleet instances decoded wrong: %+v %+v", fi, o)
	}
	if len(f.Errors) != 1 || aws.ToString(f.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" || aws.ToString(f.Errors[0].ErrorMessage) == "" ||
		f.Errors[0].Lifecycle != ec2types.InstanceLifecycleOnDemand || f.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "c5.large" {
		t.Errorf("fleet errors decoded wrong: %+v", f.Errors)
	}
	both := []string{id, emptyID}
	filter := func(name string, values ...string) []ec2types.Filter {
		return []ec2types.Filter{{Name: aws.String(name), Values: values}}
	}
	for _, tc := range []struct {
		name string
		in   ec2.DescribeFleetsInput
		want []string
		code string
	}{
		{"both", ec2.DescribeFleetsInput{FleetIds: both}, both, ""},
		{"nothing launched", ec2.DescribeFleetsInput{FleetIds: []string{emptyID}}, []string{emptyID}, ""},
		{"tag", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("tag:karpenter.sh/nodepool", "default")}, both, ""},
		{"other tag", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("tag:karpenter.sh/nodepool", "other")}, nil, ""},
		{"tag key", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("tag-key", "eks:eks-cluster-name")}, both, ""},
		{"fleet state", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("fleet-state", "active")}, both, ""},
		{"deleted", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("fleet-state", "deleted", "deleted_terminating")}, nil, ""},
		{"type", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("type", "instant")}, both, ""},
		{"maintain", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("type", "maintain")}, nil, ""},
		{"activity", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("activity-status", "fulfilled")}, both, ""},
		// EC2 lists instant fleets only when asked for by id.
		{"no ids", ec2.DescribeFleetsInput{}, nil, ""},
		{"no ids, by tag", ec2.DescribeFleetsInput{Filters: filter("tag:karpenter.sh/nodepool", "default")}, nil, ""},
		{"bad filter", ec2.DescribeFleetsInput{FleetIds: both, Filters: filter("colour", "red")}, nil, "InvalidParameterValue"},
		{"unknown", ec2.DescribeFleetsInput{FleetIds: []string{"fleet-00000000-0000-0000-0000-000000000000"}}, nil, "InvalidFleetId.NotFound"},
		{"malformed", ec2.DescribeFleetsInput{FleetIds: []string{"fleet-1"}}, nil, "InvalidFleetId.Malformed"},
		{"dry run", ec2.DescribeFleetsInput{FleetIds: both, DryRun: aws.Bool(true)}, nil, "DryRunOperation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribeFleets(ctx, &tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range out.Fleets {
				got = append(got, aws.ToString(f.FleetId))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("fleets %v, want %v", got, tc.want)
			}
		})
	}
	pages := 0
	for p := ec2.NewDescribeFleetsPaginator(c, &ec2.DescribeFleetsInput{FleetIds: both, MaxResults: aws.Int32(1)}); p.HasMorePages(); {
		if _, err := p.NextPage(ctx); err != nil {
			t.Fatal(err)
		}
		pages++
	}
	if pages != 2 {
		t.Errorf("%d pages of one fleet for two fleets", pages)
	}
	if e.HostileEvents()[EventFleetLag] == 0 {
		t.Errorf("no fleet-lag event: %v", e.HostileEvents())
	}
}

func TestHostileProfilePropagation(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.ProfilePropagationMin, h.ProfilePropagationMax = 5*time.Second, 20*time.Second }))
	c := ec2Client(t, e)
	ic := iam.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	const profile = "karpless-local_node"
	role := NodeRoleName(e.ClusterName())
	if _, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(profile)}); err != nil {
		t.Fatal(err)
	}
	addRole := func() {
		t.Helper()
		if _, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String(role)}); err != nil {
			t.Fatal(err)
		}
	}
	step(t, e, 20*time.Second) // the profile itself has propagated; the role is new
	addRole()
	lt := createLT(t, c, e, "karpenter.k8s.aws/profile", func(d *ec2types.RequestLaunchTemplateData) {
		d.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}
	})
	wantMsg := "Value (" + profile + ") for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
	fleet := func() *ec2.CreateFleetOutput {
		t.Helper()
		out, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, []string{"us-west-2a", "us-west-2b"}))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	rejected := func(out *ec2.CreateFleetOutput) bool {
		t.Helper()
		for _, fe := range out.Errors {
			if aws.ToString(fe.ErrorCode) != "InvalidParameterValue" || aws.ToString(fe.ErrorMessage) != wantMsg {
				t.Errorf("errorSet item %s: %s", aws.ToString(fe.ErrorCode), aws.ToString(fe.ErrorMessage))
			}
		}
		return len(launched(out)) == 0 && len(out.Errors) == 2
	}
	if out := fleet(); !rejected(out) {
		t.Errorf("a profile whose role was just added launched: %+v", out)
	}
	_, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large", ImageId: aws.String(imageFor(t, e, "AL2023", "x86_64", "standard")),
		IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String(profile)},
	})
	wantCode(t, err, "InvalidParameterValue")
	if err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("RunInstances: %v", err)
	}
	step(t, e, 5*time.Second-time.Millisecond)
	if out := fleet(); !rejected(out) {
		t.Errorf("launched before ProfilePropagationMin: %+v", out)
	}
	step(t, e, 15*time.Second+time.Millisecond)
	out := fleet()
	if len(launched(out)) != 1 {
		t.Fatalf("after ProfilePropagationMax: %+v", out.Errors)
	}
	if i, _ := e.Instance(launched(out)[0]); !strings.HasSuffix(i.InstanceProfileARN, ":instance-profile/"+profile) {
		t.Errorf("instance profile %q", i.InstanceProfileARN)
	}
	// A role added again propagates again.
	if _, err := ic.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
	addRole()
	if out := fleet(); !rejected(out) {
		t.Errorf("a role added again launched at once: %+v", out)
	}
	if e.HostileEvents()[EventProfilePropagation] != 7 {
		t.Errorf("profile-propagation events: %v", e.HostileEvents())
	}
}

func TestSpotMarketGaps(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.NoSpotMarketFraction = 0.05 }))
	c := ec2Client(t, e)
	ctx := context.Background()
	// Every pair EC2 offers, and every pair with a spot price.
	offered := map[[2]string]bool{}
	for p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.InstanceTypeOfferings {
			offered[[2]string{string(o.InstanceType), aws.ToString(o.Location)}] = true
		}
	}
	priced := map[[2]string]bool{}
	for p := ec2.NewDescribeSpotPriceHistoryPaginator(c, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(fakeClock(t, e).Now()),
	}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range out.SpotPriceHistory {
			priced[[2]string{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}] = true
		}
	}
	var gaps [][2]string
	candidates := 0
	for pair := range offered {
		if od, _ := e.OnDemandPrice(pair[0]); od <= 0 {
			continue
		}
		candidates++
		if !priced[pair] {
			gaps = append(gaps, pair)
		}
	}
	slices.SortFunc(gaps, func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) })
	if f := float64(len(gaps)) / float64(candidates); f < 0.03 || f > 0.07 {
		t.Errorf("%d of %d offered pairs have no spot price (%.3f), want about 0.05", len(gaps), candidates, f)
	}
	// A pair without a market on an x86 type, to launch the template's image.
	var gap [2]string
	for _, g := range gaps {
		if it, _ := e.cfg.Catalog.Get(g[0]); it.Arch != "arm64" {
			gap = g
			break
		}
	}
	if e.SpotPrice(gap[0], gap[1]) != 0 {
		t.Errorf("SpotPrice(%s, %s) has a price", gap[0], gap[1])
	}
	lt := createLT(t, c, e, "karpenter.k8s.aws/gap")
	spot, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "spot", []string{gap[0]}, []string{gap[1]}))
	if err != nil {
		t.Fatal(err)
	}
	if len(launched(spot)) != 0 || len(spot.Errors) != 1 || aws.ToString(spot.Errors[0].ErrorCode) != "Unsupported" ||
		aws.ToString(spot.Errors[0].ErrorMessage) != "The requested configuration is currently not supported. Please check the documentation for supported configurations." {
		t.Errorf("spot in %v: %d launched, errors %+v", gap, len(launched(spot)), spot.Errors)
	}
	od, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "on-demand", []string{gap[0]}, []string{gap[1]}))
	if err != nil || len(launched(od)) != 1 {
		t.Errorf("on-demand in %v: %+v %v", gap, od, err)
	}
	if e.HostileEvents()[EventNoSpotMarket] != 1 {
		t.Errorf("no-spot-market events: %v", e.HostileEvents())
	}
	// The gaps are the seed's: the same for the same seed, others for another.
	for _, seed := range []uint64{e.cfg.Seed, e.cfg.Seed + 1} {
		other, _ := newTestEmulator(t, only(func(h *Hostility) { h.NoSpotMarketFraction = 0.05 }), func(c *Config) { c.Seed = seed })
		same := true
		for _, g := range gaps {
			same = same && other.SpotPrice(g[0], g[1]) == 0
		}
		if same != (seed == e.cfg.Seed) {
			t.Errorf("seed %d: same gaps = %v", seed, same)
		}
	}
}

func TestNoSpotServiceLinkedRole(t *testing.T) {
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.NoSpotServiceLinkedRole = true }))
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/slr")
	out, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "spot", []string{"m5.large", "c5.large"}, threeZones))
	if err != nil {
		t.Fatal(err)
	}
	if len(launched(out)) != 0 || len(out.Errors) != 6 {
		t.Fatalf("spot without the service-linked role: %d launched, %d errors", len(launched(out)), len(out.Errors))
	}
	for _, fe := range out.Errors {
		if aws.ToString(fe.ErrorCode) != "AuthFailure.ServiceLinkedRoleCreationNotPermitted" || fe.Lifecycle != ec2types.InstanceLifecycleSpot ||
			aws.ToString(fe.ErrorMessage) != "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances." {
			t.Errorf("errorSet item: %s %s %s", fe.Lifecycle, aws.ToString(fe.ErrorCode), aws.ToString(fe.ErrorMessage))
		}
	}
	od, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, threeZones))
	if err != nil || len(launched(od)) != 1 {
		t.Errorf("on-demand: %+v %v", od, err)
	}
	if n := e.HostileEvents()[EventNoSpotSLR]; n != 6 {
		t.Errorf("%d no-spot-service-linked-role events, want 6", n)
	}
}

func TestRandomFleetErrors(t *testing.T) {
	ctx := context.Background()
	twoZones := threeZones[:2]
	types := []string{"m5.large", "m5.xlarge", "m5a.large", "m6i.large", "c5.large", "c5.xlarge", "c6i.large", "r5.large", "r6i.large", "t3.large"}
	t.Run("every pool", func(t *testing.T) {
		e, _ := newTestEmulator(t, only(func(h *Hostility) { h.FleetErrorRate = 1 }))
		c := ec2Client(t, e)
		lt := createLT(t, c, e, "karpenter.k8s.aws/errors")
		codes := map[string]map[string]int{}
		// Two zones where every type is offered: 20 pools, each failing by the rate.
		for _, ct := range []string{"spot", "on-demand"} {
			out, err := c.CreateFleet(ctx, fleetInput(t, e, lt, ct, types, twoZones))
			if err != nil {
				t.Fatal(err)
			}
			if len(launched(out)) != 0 || len(out.Errors) != 20 {
				t.Fatalf("%s: %d launched, %d errors; want every pool failed", ct, len(launched(out)), len(out.Errors))
			}
			codes[ct] = map[string]int{}
			for _, fe := range out.Errors {
				code := aws.ToString(fe.ErrorCode)
				codes[ct][code]++
				if string(fe.Lifecycle) != ct || aws.ToString(fe.ErrorMessage) == "" {
					t.Errorf("%s errorSet item: %+v", ct, fe)
				}
				if code == "InsufficientFreeAddressesInSubnet" && !strings.Contains(aws.ToString(fe.ErrorMessage), aws.ToString(fe.LaunchTemplateAndOverrides.Overrides.SubnetId)) {
					t.Errorf("message does not name the subnet: %s", aws.ToString(fe.ErrorMessage))
				}
			}
		}
		for _, code := range []string{"UnfulfillableCapacity", "VcpuLimitExceeded", "InsufficientFreeAddressesInSubnet"} {
			if codes["spot"][code] == 0 || codes["on-demand"][code] == 0 {
				t.Errorf("%s never drawn: %v", code, codes)
			}
		}
		if codes["spot"]["MaxSpotInstanceCountExceeded"] == 0 || codes["on-demand"]["MaxSpotInstanceCountExceeded"] != 0 {
			t.Errorf("MaxSpotInstanceCountExceeded must hit spot pools only: %v", codes)
		}
		events := 0
		for k, n := range e.HostileEvents() {
			if strings.HasPrefix(k, "fleet-error:") {
				events += n
			}
		}
		if events != 40 {
			t.Errorf("%d fleet-error events for 40 failed pools: %v", events, e.HostileEvents())
		}
	})
	t.Run("partial fulfilment", func(t *testing.T) {
		e, _ := newTestEmulator(t, only(func(h *Hostility) { h.FleetErrorRate = 0.5 }))
		c := ec2Client(t, e)
		lt := createLT(t, c, e, "karpenter.k8s.aws/errors")
		instances, errs := 0, 0
		for range 20 {
			out, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "spot", types, twoZones))
			if err != nil {
				t.Fatal(err)
			}
			instances += len(launched(out))
			errs += len(out.Errors)
		}
		if instances != 20 || errs < 5 {
			t.Errorf("20 fleets of 20 pools at a 0.5 error rate: %d instances, %d pool errors", instances, errs)
		}
	})
}

func TestHostileThrottles(t *testing.T) {
	ctx := context.Background()
	e, _ := newTestEmulator(t, only(func(h *Hostility) { h.ThrottleRate = 1 }))
	cfg := sdkConfig(t, e, 1)
	ec2c, ssmc, iamc, sqsc := ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg), iam.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	calls := map[string]func() error{
		"ec2": func() error {
			_, err := ec2c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
			return err
		},
		"ssm": func() error {
			_, err := ssmc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id")})
			return err
		},
		"iam": func() error {
			_, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(NodeRoleName(e.ClusterName()))})
			return err
		},
		"sqs": func() error {
			_, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(e.ClusterName())})
			return err
		},
	}
	want := map[string]string{"ec2": "RequestLimitExceeded", "ssm": "ThrottlingException", "iam": "ThrottlingException", "sqs": "ThrottlingException"}
	for svc, call := range calls {
		err := call()
		wantCode(t, err, want[svc])
		if svc == "ec2" && httpStatus(err) != 503 {
			t.Errorf("EC2 throttle with HTTP %d, want 503", httpStatus(err))
		}
	}
	// EKS and STS answer: the functions' authentication is not throttled.
	if _, err := eks.NewFromConfig(cfg).ListClusters(ctx, &eks.ListClustersInput{}); err != nil {
		t.Errorf("EKS: %v", err)
	}
	if _, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err != nil {
		t.Errorf("STS: %v", err)
	}
	// Bursts: one call starts a burst of 1..4 of its service; the burst
	// runs out even with the rate set to 0, and other services answer.
	lengths := map[int]int{}
	e.SetHostility(NoHostility())
	for range 4 { // finish the bursts started above
		for _, call := range calls {
			_ = call()
		}
	}
	for range 30 {
		e.SetHostility(Hostility{ThrottleRate: 1})
		wantCode(t, calls["ec2"](), "RequestLimitExceeded")
		e.SetHostility(NoHostility())
		if err := calls["ssm"](); err != nil {
			t.Fatalf("SSM throttled by an EC2 burst: %v", err)
		}
		n := 1
		for calls["ec2"]() != nil {
			n++
			if n > 4 {
				t.Fatalf("a burst longer than 4 calls")
			}
		}
		lengths[n]++
	}
	if len(lengths) < 3 {
		t.Errorf("burst lengths %v: want 1..4 calls, varied", lengths)
	}
	// A burst lasts ThrottleBurstWindow of the clock at most: a caller
	// whose backoff waits that long finds the bucket refilled.
	for ended := false; !ended; {
		e.SetHostility(Hostility{ThrottleRate: 1})
		wantCode(t, calls["ec2"](), "RequestLimitExceeded")
		e.SetHostility(NoHostility())
		e.mu.Lock()
		left := e.hostile.burst["ec2"].left
		e.mu.Unlock()
		if left == 0 {
			continue // a burst of one call: draw again
		}
		fakeClock(t, e).Step(ThrottleBurstWindow)
		if err := calls["ec2"](); err != nil {
			t.Fatalf("a burst with %d calls left outlived its window: %v", left, err)
		}
		ended = true
	}
	throttled := 0
	for _, c := range e.Calls() {
		if c.Code == "RequestLimitExceeded" || c.Code == "ThrottlingException" {
			throttled++
		}
	}
	if got := e.HostileEvents()[EventThrottle]; got != throttled || got == 0 {
		t.Errorf("%d throttle events for %d throttled calls", got, throttled)
	}
}

// httpStatus is the HTTP status of an SDK error, 0 if none.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestHostileServerErrors(t *testing.T) {
	ctx := context.Background()
	e, _ := newTestEmulator(t)
	e.SetHostility(NoHostility())
	c := ec2Client(t, e)
	lt := createLT(t, c, e, "karpenter.k8s.aws/5xx")
	id := launchN(t, e, c, lt, 1, "on-demand")[0]
	e.SetHostility(Hostility{ServerErrorRate: 1})
	cfg := sdkConfig(t, e, 1)
	_, err := ec2.NewFromConfig(cfg).CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}})
	wantCode(t, err, "InternalError")
	if i, _ := e.Instance(id); i.Tags["a"] != "" || httpStatus(err) != 500 {
		t.Errorf("a call answered 500 (HTTP %d) was applied: %v", httpStatus(err), i.Tags)
	}
	_, err = ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/x")})
	wantCode(t, err, "InternalFailure")
	_, err = iam.NewFromConfig(cfg).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("x")})
	wantCode(t, err, "InternalFailure")
	_, err = sqs.NewFromConfig(cfg).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(e.ClusterName())})
	wantCode(t, err, "InternalFailure")
	if httpStatus(err) != 500 {
		t.Errorf("SQS server error with HTTP %d", httpStatus(err))
	}
	// A careful client retries them; here every attempt fails.
	_, err = ec2.NewFromConfig(sdkConfig(t, e, 3)).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	wantCode(t, err, "InternalError")
	if n := e.HostileEvents()[EventServerError]; n != 7 {
		t.Errorf("%d server-error events, want 7", n)
	}
}

func TestLostAnswers(t *testing.T) {
	ctx := context.Background()
	e, _ := newTestEmulator(t, calm(NoHostility()))
	c := ec2Client(t, e)
	one := ec2.NewFromConfig(sdkConfig(t, e, 1))
	lt := createLT(t, c, e, "karpenter.k8s.aws/lost")
	lose := func() { e.SetHostility(Hostility{LostAnswerRate: 1}) }
	answer := func() { e.SetHostility(NoHostility()) }
	transport := func(err error) {
		t.Helper()
		if err == nil || errorCode(err) != "" {
			t.Errorf("want a transport error, got %v", err)
		}
	}
	fleetErrors := func(out *ec2.CreateFleetOutput) []string {
		var s []string
		for _, fe := range out.Errors {
			s = append(s, fmt.Sprintf("%s:%s:%s", aws.ToString(fe.ErrorCode), fe.LaunchTemplateAndOverrides.Overrides.InstanceType, aws.ToString(fe.LaunchTemplateAndOverrides.Overrides.AvailabilityZone)))
		}
		return s
	}

	t.Run("CreateFleet replayed by its token", func(t *testing.T) {
		e.Inject(ICE("on-demand", "c5.large", "").Times(1))
		in := fleetInput(t, e, lt, "on-demand", []string{"c5.large", "m5.large"}, []string{"us-west-2a"})
		in.ClientToken = aws.String("lost-1")
		lose()
		_, err := one.CreateFleet(ctx, in)
		answer()
		transport(err)
		applied := e.Instances(WithTag("aws:ec2:fleet-id", "*"))
		if len(applied) != 1 {
			t.Fatalf("%d instances after the lost answer, want the 1 launched", len(applied))
		}
		out, err := one.CreateFleet(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(launched(out), []string{applied[0].ID}) || !slices.Equal(fleetErrors(out), []string{"InsufficientInstanceCapacity:c5.large:us-west-2a"}) {
			t.Errorf("replay: instances %v errors %v; want %s and the ICE", launched(out), fleetErrors(out), applied[0].ID)
		}
		if n := len(e.Instances(nil)); n != 1 {
			t.Errorf("%d instances after the replay", n)
		}
	})
	t.Run("a fleet that launched nothing replays its errors", func(t *testing.T) {
		before := len(e.Instances(nil))
		id := e.Inject(ICE("spot", "", ""))
		in := fleetInput(t, e, lt, "spot", []string{"m5.large"}, []string{"us-west-2a", "us-west-2b"})
		in.ClientToken = aws.String("lost-2")
		lose()
		_, err := one.CreateFleet(ctx, in)
		answer()
		transport(err)
		// Capacity is back; the token still answers what happened.
		e.RemoveFault(id)
		out, err := one.CreateFleet(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"InsufficientInstanceCapacity:m5.large:us-west-2a", "InsufficientInstanceCapacity:m5.large:us-west-2b"}
		if len(launched(out)) != 0 || !slices.Equal(fleetErrors(out), want) || len(e.Instances(nil)) != before {
			t.Errorf("replay: %v %v, %d new instances", launched(out), fleetErrors(out), len(e.Instances(nil))-before)
		}
	})
	t.Run("the SDK's own token", func(t *testing.T) {
		// Without a ClientToken the SDK makes one and keeps it across
		// retries: every retry after a lost answer is a replay.
		before := len(e.Instances(nil))
		lose()
		_, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "on-demand", []string{"m5.large"}, threeZones))
		answer()
		transport(err)
		tokens := map[string]bool{}
		applied := 0
		for _, call := range e.Calls() {
			if call.Action == "CreateFleet" && call.Dropped && call.Params.Get("ClientToken") != "lost-1" && call.Params.Get("ClientToken") != "lost-2" {
				tokens[call.Params.Get("ClientToken")] = true
				applied++
			}
		}
		if applied != carefulAttempts || len(tokens) != 1 || len(e.Instances(nil)) != before+1 {
			t.Errorf("%d lost attempts with %d tokens launched %d instances; want %d attempts, 1 token, 1 instance", applied, len(tokens), len(e.Instances(nil))-before, carefulAttempts)
		}
	})
	t.Run("other writes are applied", func(t *testing.T) {
		id := launchN(t, e, c, lt, 1, "on-demand")[0]
		ic := iam.NewFromConfig(sdkConfig(t, e, 1))
		sc := sqs.NewFromConfig(sdkConfig(t, e, 1))
		url := e.InterruptionQueueURL()
		lose()
		_, err := one.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}})
		transport(err)
		_, err = one.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		transport(err)
		_, err = ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("lost")})
		transport(err)
		_, err = sc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("lost")})
		transport(err)
		// Reads are never lost.
		if _, err := one.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
			t.Errorf("DescribeInstances: %v", err)
		}
		answer()
		if i, _ := e.Instance(id); i.Tags["a"] != "b" || i.State != StateShuttingDown {
			t.Errorf("lost CreateTags / TerminateInstances not applied: %s %v", i.State, i.Tags)
		}
		if len(e.Messages(url)) != 1 {
			t.Errorf("lost SendMessage not applied: %d messages", len(e.Messages(url)))
		}
		// The retry of a lost create finds what it made.
		_, err = ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("lost")})
		wantCode(t, err, "EntityAlreadyExists")
		recv, err := sc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
		if err != nil || len(recv.Messages) != 1 {
			t.Fatalf("ReceiveMessage: %+v %v", recv, err)
		}
		lose()
		_, err = sc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: recv.Messages[0].ReceiptHandle})
		answer()
		transport(err)
		if len(e.Messages(url)) != 0 {
			t.Error("lost DeleteMessage not applied")
		}
		// And its retry succeeds: the message is gone.
		if _, err := sc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: recv.Messages[0].ReceiptHandle}); err != nil {
			t.Errorf("retried DeleteMessage: %v", err)
		}
	})
	dropped := 0
	for _, call := range e.Calls() {
		if call.Dropped {
			dropped++
		}
	}
	if got := e.HostileEvents()[EventLostAnswer]; got != dropped || got == 0 {
		t.Errorf("%d lost-answer events for %d dropped calls", got, dropped)
	}
}

// TestHostilityReproducible runs one scenario twice on a seed and once on
// another: the same seed fails the same calls the same way.
func TestHostilityReproducible(t *testing.T) {
	run := func(seed uint64) (calls []string, events map[string]int) {
		h := DefaultHostility()
		h.ThrottleRate, h.ServerErrorRate, h.LostAnswerRate, h.FleetErrorRate = 0.1, 0.05, 0.1, 0.3
		e, _ := newTestEmulator(t, calm(h), func(c *Config) { c.Seed = seed })
		c := ec2Client(t, e)
		ctx := context.Background()
		lt := createLT(t, c, e, "karpenter.k8s.aws/again")
		for range 5 {
			if _, err := c.CreateFleet(ctx, fleetInput(t, e, lt, "spot", []string{"m5.large", "c5.large"}, threeZones)); err != nil {
				t.Fatal(err)
			}
			_, _ = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
			step(t, e, 2*time.Second)
		}
		for _, call := range e.Calls() {
			calls = append(calls, fmt.Sprintf("%s:%s:%v:%v", call.Action, call.Code, call.Dropped, call.FleetErrors))
		}
		return calls, e.HostileEvents()
	}
	a, ea := run(42)
	b, eb := run(42)
	o, eo := run(43)
	if !slices.Equal(a, b) || fmt.Sprint(ea) != fmt.Sprint(eb) {
		t.Errorf("seed 42 twice:\n%v %v\n%v %v", a, ea, b, eb)
	}
	if slices.Equal(a, o) && fmt.Sprint(ea) == fmt.Sprint(eo) {
		t.Errorf("seeds 42 and 43 behaved the same: %v", ea)
	}
}
