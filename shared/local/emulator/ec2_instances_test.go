package emulator

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// launchN launches n m5.large instances of a capacity type with
// CreateFleet and returns their ids. Like any launcher it asks again for
// what a fleet did not launch: random fleet errors and missing spot
// markets fail pools now and then.
func launchN(t testing.TB, e *Emulator, c *ec2.Client, lt string, n int, capacityType string) []string {
	t.Helper()
	var ids []string
	var errs []ec2types.CreateFleetError
	for range 5 {
		if len(ids) == n {
			return ids
		}
		in := fleetInput(t, e, lt, capacityType, []string{"m5.large"}, threeZones)
		in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(int32(n - len(ids)))
		out, err := c.CreateFleet(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, launched(out)...)
		errs = append(errs, out.Errors...)
	}
	if len(ids) != n {
		t.Fatalf("launched %d of %d: %+v", len(ids), n, errs)
	}
	return ids
}

func TestDescribeInstances(t *testing.T) {
	e, clk := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/di")
	launchedAt := clk.Now()
	od := launchN(t, e, c, lt, 8, "on-demand")
	spot := launchN(t, e, c, lt, 4, "spot")
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: od[:2], Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("default-abc")}}}); err != nil {
		t.Fatal(err)
	}
	// Wait until DescribeInstances knows the instances and their tags
	// (they are running by then), terminate one, and wait until
	// DescribeInstances reports it shutting down.
	settle(t, e)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: od[7:]}); err != nil {
		t.Fatal(err)
	}
	settle(t, e)

	// Contract: every field Karpless reads decodes.
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{spot[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 || aws.ToString(out.Reservations[0].ReservationId) == "" || aws.ToString(out.Reservations[0].OwnerId) != DefaultAccountID {
		t.Fatalf("reservations: %+v", out.Reservations)
	}
	i := out.Reservations[0].Instances[0]
	if aws.ToString(i.InstanceId) != spot[0] || i.InstanceType != "m5.large" || aws.ToString(i.ImageId) == "" || i.State == nil ||
		i.State.Name != ec2types.InstanceStateNameRunning || aws.ToInt32(i.State.Code) != 16 || i.Placement == nil ||
		aws.ToString(i.Placement.AvailabilityZone) == "" || aws.ToString(i.Placement.AvailabilityZoneId) == "" || aws.ToString(i.PrivateDnsName) == "" ||
		aws.ToString(i.PrivateIpAddress) == "" || i.LaunchTime == nil || !i.LaunchTime.Equal(launchedAt) || i.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot ||
		aws.ToString(i.SpotInstanceRequestId) == "" || aws.ToString(i.SubnetId) == "" || aws.ToString(i.VpcId) == "" || len(i.Tags) < 5 ||
		len(i.SecurityGroups) != 1 || aws.ToString(i.SecurityGroups[0].GroupId) == "" || i.Architecture != "x86_64" {
		t.Errorf("instance decoded wrong: %+v", i)
	}

	count := func(out *ec2.DescribeInstancesOutput) int {
		n := 0
		for _, r := range out.Reservations {
			n += len(r.Instances)
		}
		return n
	}
	cluster := ec2types.Filter{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{e.ClusterName()}}
	for _, tc := range []struct {
		name  string
		in    ec2.DescribeInstancesInput
		count int
		code  string
	}{
		{"all", ec2.DescribeInstancesInput{}, 12, ""},
		// Karpenter's List: tag keys, cluster tag, the live states.
		{"karpenter list", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodepool"}}, cluster,
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
		}}, 12, ""},
		{"running only", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"running"}}}}, 11, ""},
		{"by nodeclaim tag", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodeclaim"), Values: []string{"default-*"}}}}, 2, ""},
		{"spot lifecycle", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-lifecycle"), Values: []string{"spot"}}}}, 4, ""},
		{"zone and type", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: threeZones}, {Name: aws.String("instance-type"), Values: []string{"m5.large"}}}}, 12, ""},
		{"other cluster", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{"other"}}}}, 0, ""},
		{"ids", ec2.DescribeInstancesInput{InstanceIds: od[:3]}, 3, ""},
		{"unknown id", ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}}, 0, "InvalidInstanceID.NotFound"},
		{"malformed id", ec2.DescribeInstancesInput{InstanceIds: []string{"i-xyz"}}, 0, "InvalidInstanceID.Malformed"},
		{"ids with max results", ec2.DescribeInstancesInput{InstanceIds: od[:1], MaxResults: aws.Int32(5)}, 0, "InvalidParameterCombination"},
		{"max results too small", ec2.DescribeInstancesInput{MaxResults: aws.Int32(2)}, 0, "InvalidParameterValue"},
		{"bad filter", ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("flavour"), Values: []string{"x"}}}}, 0, "InvalidParameterValue"},
		{"bad token", ec2.DescribeInstancesInput{NextToken: aws.String("garbage")}, 0, "InvalidNextToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribeInstances(ctx, &tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := count(out); got != tc.count {
				t.Errorf("got %d instances, want %d", got, tc.count)
			}
		})
	}
	// Pagination with the SDK paginator.
	seen := map[string]bool{}
	pages := 0
	for p := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)}); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				seen[aws.ToString(i.InstanceId)] = true
			}
		}
	}
	if len(seen) != 12 || pages != 3 {
		t.Errorf("paginated %d instances in %d pages", len(seen), pages)
	}
}

func TestInstanceLifecycle(t *testing.T) {
	e, clk := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/life")
	ids := launchN(t, e, c, lt, 2, "on-demand")
	state := func(id string) string { i, _ := e.Instance(id); return i.State }
	step := func(d time.Duration) {
		clk.Step(d)
		if err := e.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if state(ids[0]) != StatePending {
		t.Fatalf("new instance is %s", state(ids[0]))
	}
	step(e.cfg.PendingDelay - time.Second)
	if state(ids[0]) != StatePending {
		t.Fatalf("running too early")
	}
	step(time.Second)
	if state(ids[0]) != StateRunning {
		t.Fatalf("not running after PendingDelay: %s", state(ids[0]))
	}
	free := func() int {
		i, _ := e.Instance(ids[0])
		for _, s := range e.Subnets() {
			if s.ID == i.SubnetID {
				return s.AvailableIPs
			}
		}
		return -1
	}
	before := free()
	// EC2 may not know a new instance yet: retry until it does.
	var out *ec2.TerminateInstancesOutput
	err := eventually(t, e, func() (err error) {
		out, err = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := out.TerminatingInstances[0]
	if aws.ToString(sc.InstanceId) != ids[0] || sc.PreviousState.Name != "running" || sc.CurrentState.Name != "shutting-down" || aws.ToInt32(sc.CurrentState.Code) != 32 {
		t.Errorf("state change decoded wrong: %+v %+v", sc.PreviousState, sc.CurrentState)
	}
	// Idempotent: a second call reports the current state again.
	again, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	if err != nil || again.TerminatingInstances[0].CurrentState.Name != "shutting-down" || again.TerminatingInstances[0].PreviousState.Name != "shutting-down" {
		t.Errorf("second terminate: %+v %v", again, err)
	}
	step(e.cfg.TerminateDelay)
	if state(ids[0]) != StateTerminated || free() != before+1 {
		t.Errorf("state %s, free addresses %d (before %d)", state(ids[0]), free(), before)
	}
	done, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	if err != nil || done.TerminatingInstances[0].CurrentState.Name != "terminated" {
		t.Errorf("terminate a terminated instance: %+v %v", done, err)
	}
	desc, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	if err != nil || desc.Reservations[0].Instances[0].StateReason == nil || aws.ToString(desc.Reservations[0].Instances[0].StateReason.Code) != "Client.UserInitiatedShutdown" {
		t.Errorf("terminated instance: %+v %v", desc, err)
	}
	// Terminated instances vanish from DescribeInstances after an hour,
	// but stay in Instances() for leak checks.
	step(e.cfg.TerminatedRetention)
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	if len(e.Instances(nil)) != 2 || len(e.Instances(NotTerminated)) != 1 {
		t.Errorf("Instances: %d, not terminated %d", len(e.Instances(nil)), len(e.Instances(NotTerminated)))
	}
	_, err = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{ids[1], "i-0123456789abcdef0"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	if state(ids[1]) != StateRunning {
		t.Error("a failed TerminateInstances changed an instance")
	}

	// Spot interruption with the two-minute warning terminates the instance.
	spot := launchN(t, e, c, lt, 1, "spot")[0]
	step(e.cfg.PendingDelay)
	if _, err := e.InjectEvent(Event{Kind: EventSpotInterruption, InstanceIDs: []string{spot}, TerminateAfter: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	step(time.Minute)
	if state(spot) != StateRunning {
		t.Errorf("interrupted before the warning ran out")
	}
	step(time.Minute)
	if i, _ := e.Instance(spot); i.State != StateShuttingDown || i.StateReason != "Server.SpotInstanceTermination: Spot instance termination" {
		t.Errorf("after the warning: %s %q", i.State, i.StateReason)
	}
}

func TestCreateTags(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/tags")
	id := launchN(t, e, c, lt, 1, "on-demand")[0]
	tag := func(k, v string) []ec2types.Tag { return []ec2types.Tag{{Key: aws.String(k), Value: aws.String(v)}} }
	for _, tc := range []struct {
		name      string
		resources []string
		tags      []ec2types.Tag
		code      string
	}{
		{"instance", []string{id}, tag("Name", "ip-10-0-0-1.us-west-2.compute.internal"), ""},
		{"launch template and subnet", []string{e.LaunchTemplates()[0].ID, e.Subnets()[0].ID}, tag("team", "a"), ""},
		{"reserved key", []string{id}, tag("aws:cloudformation:stack", "x"), "InvalidParameterValue"},
		{"unknown instance", []string{"i-0123456789abcdef0"}, tag("a", "b"), "InvalidInstanceID.NotFound"},
		{"unknown kind", []string{"vol-0123"}, tag("a", "b"), "InvalidID"},
		{"dry run", []string{id}, tag("a", "b"), "DryRunOperation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: tc.resources, Tags: tc.tags, DryRun: aws.Bool(tc.code == "DryRunOperation")})
			wantCode(t, err, tc.code)
		})
	}
	i, _ := e.Instance(id)
	if i.Tags["Name"] != "ip-10-0-0-1.us-west-2.compute.internal" || i.Tags["a"] != "" {
		t.Errorf("tags %v", i.Tags)
	}
	if e.Subnets()[0].Tags["team"] != "a" {
		t.Error("subnet not tagged")
	}
	many := make([]ec2types.Tag, 0, 50)
	for k := range 50 {
		many = append(many, tag("k"+string(rune('a'+k%26))+string(rune('a'+k/26)), "v")[0])
	}
	_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: many})
	wantCode(t, err, "TagLimitExceeded")
	if _, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id}, Tags: tag("Name", "")}); err != nil {
		t.Fatal(err)
	}
	if i, _ := e.Instance(id); i.Tags["Name"] != "" {
		t.Errorf("Name tag not deleted: %v", i.Tags)
	}
}

func TestRunInstancesAndStatus(t *testing.T) {
	e, clk := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/run")
	in := &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(2), InstanceType: "c6g.large",
		ImageId:        aws.String(imageFor(t, e, "AL2023", "arm64", "standard")),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt)},
		SubnetId:       aws.String(subnetIn(t, e, "us-west-2b")),
		DryRun:         aws.Bool(true),
	}
	// Karpenter validates its permissions with dry runs.
	_, err := c.RunInstances(ctx, in)
	wantCode(t, err, "DryRunOperation")
	in.DryRun = nil
	in.ClientToken = aws.String("run-1")
	out, err := c.RunInstances(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 2 || aws.ToString(out.ReservationId) == "" || out.Instances[1].Architecture != "arm64" || aws.ToInt32(out.Instances[1].AmiLaunchIndex) != 1 || out.Instances[0].Placement.AvailabilityZone == nil {
		t.Fatalf("RunInstances: %+v", out)
	}
	replay, err := c.RunInstances(ctx, in)
	if err != nil || aws.ToString(replay.ReservationId) != aws.ToString(out.ReservationId) || len(e.Instances(nil)) != 2 {
		t.Errorf("replay: %v, %d instances", err, len(e.Instances(nil)))
	}
	in.ImageId = aws.String("ami-0000000000000000f")
	in.ClientToken = nil
	_, err = c.RunInstances(ctx, in)
	wantCode(t, err, "InvalidAMIID.NotFound")

	// Running, and known to DescribeInstanceStatus.
	settle(t, e)
	id := aws.ToString(out.Instances[0].InstanceId)
	if err := e.SetInstanceHealth(id, InstanceHealth{InstanceImpaired: true}); err != nil {
		t.Fatal(err)
	}
	impairedAt := e.now()
	st, err := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("instance-status.status"), Values: []string{"impaired"}}}})
	if err != nil || len(st.InstanceStatuses) != 1 || aws.ToString(st.InstanceStatuses[0].InstanceId) != id ||
		st.InstanceStatuses[0].InstanceStatus.Status != "impaired" || st.InstanceStatuses[0].SystemStatus.Status != "ok" || st.InstanceStatuses[0].InstanceState.Name != "running" {
		t.Fatalf("DescribeInstanceStatus: %+v %v", st, err)
	}
	d := st.InstanceStatuses[0].InstanceStatus.Details
	if len(d) != 1 || d[0].Status != ec2types.StatusTypeFailed || !aws.ToTime(d[0].ImpairedSince).Equal(impairedAt) {
		t.Errorf("instance status details: %+v, want reachability failed since %s", d, impairedAt)
	}
	// The system check fails later; the instance check keeps its time; a
	// retirement is scheduled.
	clk.Step(time.Minute)
	notBefore := e.now().Add(72 * time.Hour)
	if err := e.SetInstanceHealth(id, InstanceHealth{InstanceImpaired: true, SystemImpaired: true, Events: []ScheduledEvent{{Code: "instance-retirement", NotBefore: notBefore}}}); err != nil {
		t.Fatal(err)
	}
	st, err = c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("event.code"), Values: []string{"instance-retirement", "system-reboot"}}}})
	if err != nil || len(st.InstanceStatuses) != 1 {
		t.Fatalf("DescribeInstanceStatus by event.code: %+v %v", st, err)
	}
	s := st.InstanceStatuses[0]
	if !aws.ToTime(s.InstanceStatus.Details[0].ImpairedSince).Equal(impairedAt) || !aws.ToTime(s.SystemStatus.Details[0].ImpairedSince).Equal(e.now()) || s.SystemStatus.Status != "impaired" {
		t.Errorf("after the system check failed: %+v", s)
	}
	if len(s.Events) != 1 || s.Events[0].Code != ec2types.EventCodeInstanceRetirement || !aws.ToTime(s.Events[0].NotBefore).Equal(notBefore) || aws.ToString(s.Events[0].InstanceEventId) == "" {
		t.Errorf("events: %+v", s.Events)
	}
	st, err = c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("event.code"), Values: []string{"system-maintenance"}}}})
	if err != nil || len(st.InstanceStatuses) != 0 {
		t.Errorf("another event code matched: %+v %v", st, err)
	}
	// Healthy again: no filter matches.
	if err := e.SetInstanceHealth(id, InstanceHealth{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"instance-status.status", "system-status.status"} {
		st, err = c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String(f), Values: []string{"impaired"}}}})
		if err != nil || len(st.InstanceStatuses) != 0 {
			t.Errorf("%s impaired after recovery: %+v %v", f, st, err)
		}
	}
}

func TestDescribeLag(t *testing.T) {
	h := DefaultHostility()
	// The fixed minimum alone: TestHostileDescribeLag covers the random part.
	h.DescribeLagMax = 0
	e, clk := newTestEmulator(t, calm(h), func(c *Config) { c.DescribeLag = 2 * time.Second })
	c := ec2Client(t, e)
	ctx := context.Background()
	id := launchN(t, e, c, createLT(t, c, e, "karpenter.k8s.aws/lag"), 1, "on-demand")[0]
	_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	clk.Step(2*time.Second - time.Millisecond)
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	clk.Step(time.Millisecond)
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Errorf("after the lag: %v", err)
	}
}
