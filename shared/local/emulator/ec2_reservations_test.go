package emulator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/events"
)

func seededReservations(t *testing.T, e *Emulator) map[string]CapacityReservation {
	t.Helper()
	out := map[string]CapacityReservation{}
	for _, r := range e.CapacityReservations() {
		out[strings.TrimPrefix(r.Tags["Name"], e.ClusterName()+"-")] = r
	}
	if len(out) != 3 {
		t.Fatalf("seeded reservations = %+v", out)
	}
	return out
}

func crIDs(out *ec2.DescribeCapacityReservationsOutput) []string {
	var ids []string
	for _, r := range out.CapacityReservations {
		ids = append(ids, aws.ToString(r.CapacityReservationId))
	}
	slices.Sort(ids)
	return ids
}

// TestDescribeCapacityReservationsContract: the queries Karpenter v1.14.1
// sends (by id; by owner, tags and match criteria, always state active;
// MaxResults 1000) and every field it reads, through the SDK.
func TestDescribeCapacityReservationsContract(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	seeded := seededReservations(t, e)
	tg, op, cb := seeded["targeted"], seeded["open"], seeded["capacity-block"]
	active := ec2types.Filter{Name: aws.String("state"), Values: []string{"active"}}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	for _, tc := range []struct {
		name string
		in   *ec2.DescribeCapacityReservationsInput
		want []string
		code string
	}{
		{name: "all", in: &ec2.DescribeCapacityReservationsInput{}, want: sorted(tg.ID, op.ID, cb.ID)},
		{name: "by id, as Karpenter asks", in: &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{tg.ID}, Filters: []ec2types.Filter{active}}, want: []string{tg.ID}},
		{name: "by tag, owner and criteria", in: &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1000), Filters: []ec2types.Filter{active,
			{Name: aws.String("owner-id"), Values: []string{e.Config().AccountID}},
			{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{e.ClusterName()}},
			{Name: aws.String("instance-match-criteria"), Values: []string{"targeted"}}}}, want: sorted(tg.ID, cb.ID)},
		{name: "tag-key", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"Name"}}}}, want: sorted(tg.ID, op.ID, cb.ID)},
		{name: "instance-type", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"c6i.*"}}}}, want: []string{op.ID}},
		{name: "end-date-type", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("end-date-type"), Values: []string{"limited"}}}}, want: []string{cb.ID}},
		{name: "expired excluded by state", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{"expired"}}}}},
		{name: "unknown id", in: &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0123456789abcdef0"}}, code: "InvalidCapacityReservationId.NotFound"},
		{name: "malformed id", in: &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"res-1"}}, code: "InvalidCapacityReservationId.Malformed"},
		{name: "ids with MaxResults", in: &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{tg.ID}, MaxResults: aws.Int32(10)}, code: "InvalidParameterCombination"},
		{name: "unknown filter", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"x"}}}}, code: "InvalidParameterValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribeCapacityReservations(ctx, tc.in)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := crIDs(out); !slices.Equal(got, tc.want) {
				t.Errorf("reservations = %v, want %v", got, tc.want)
			}
		})
	}
	// Pages of MaxResults with NextToken.
	p := ec2.NewDescribeCapacityReservationsPaginator(c, &ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1)})
	pages, n := 0, 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n += len(out.CapacityReservations)
	}
	if pages != 3 || n != 3 {
		t.Errorf("pages %d, reservations %d", pages, n)
	}
	// Every field Karpenter reads arrives (a misnamed element is dropped silently).
	out, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{cb.ID}})
	if err != nil {
		t.Fatal(err)
	}
	r := out.CapacityReservations[0]
	if aws.ToString(r.InstanceType) != "p5.48xlarge" || aws.ToString(r.AvailabilityZone) != cb.Zone || aws.ToString(r.OwnerId) != e.Config().AccountID ||
		r.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaTargeted || r.ReservationType != ec2types.CapacityReservationTypeCapacityBlock ||
		r.State != ec2types.CapacityReservationStateActive || aws.ToInt32(r.TotalInstanceCount) != 1 || aws.ToInt32(r.AvailableInstanceCount) != 1 ||
		r.EndDate == nil || !r.EndDate.Equal(cb.End) || r.EndDateType != ec2types.EndDateTypeLimited || aws.ToString(r.AvailabilityZoneId) == "" ||
		!strings.HasPrefix(aws.ToString(r.CapacityReservationArn), "arn:aws:ec2:") || len(r.Tags) != 2 || aws.ToBool(r.Interruptible) {
		t.Errorf("capacity block = %+v", r)
	}
}

// reservedLT is a launch template targeting a reservation, as Karpenter
// v1.14.1 writes one for a reserved launch.
func reservedLT(t *testing.T, c *ec2.Client, e *Emulator, name, id string, block bool) string {
	return createLT(t, c, e, name, func(d *ec2types.RequestLaunchTemplateData) {
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(id)},
		}
		if block {
			d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		}
	})
}

func reservedFleet(lt, instanceType, zone, subnet, token string, ct ec2types.DefaultTargetCapacityType) *ec2.CreateFleetInput {
	return &ec2.CreateFleetInput{
		Type:        ec2types.FleetTypeInstant,
		ClientToken: aws.String(token),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceType(instanceType), AvailabilityZone: aws.String(zone), SubnetId: aws.String(subnet)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ct},
	}
}

// TestReservedLaunchContract: CreateFleet into a targeted reservation fills
// it exactly, then answers ReservationCapacityExceeded in errorSet; the
// count DescribeCapacityReservations reports follows late, and comes back
// after a termination; DescribeInstances shows the reservation and the
// preference; a mismatched type or a spot launch is refused.
func TestReservedLaunchContract(t *testing.T) {
	// Random fleet errors would make a launch into a free reservation fail
	// at random; the full-reservation error is the point here.
	h := DefaultHostility()
	h.FleetErrorRate = 0
	e, _ := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	tg := seededReservations(t, e)["targeted"]
	lt := reservedLT(t, c, e, "reserved", tg.ID, false)
	sub := subnetIn(t, e, tg.Zone)
	var ids []string
	for i, tok := range []string{"a", "b", "c"} {
		out, err := c.CreateFleet(ctx, reservedFleet(lt, tg.InstanceType, tg.Zone, sub, tok, ec2types.DefaultTargetCapacityTypeOnDemand))
		if err != nil {
			t.Fatal(err)
		}
		if i < tg.Total {
			if len(out.Instances) != 1 || len(out.Errors) != 0 {
				t.Fatalf("launch %d: instances %+v errors %+v", i, out.Instances, out.Errors)
			}
			ids = append(ids, out.Instances[0].InstanceIds[0])
			continue
		}
		if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
			t.Fatalf("launch %d into a full reservation: instances %+v errors %+v", i, out.Instances, out.Errors)
		}
	}
	if n := e.ReservationInstances(tg.ID); n != 2 {
		t.Fatalf("instances in the reservation = %d", n)
	}
	avail := func() int32 {
		out, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{tg.ID}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToInt32(out.CapacityReservations[0].AvailableInstanceCount)
	}
	step(t, e, h.CapacityReservationLagMax)
	if a := avail(); a != 0 {
		t.Fatalf("available after filling = %d", a)
	}
	settle(t, e)
	di, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	if err != nil {
		t.Fatal(err)
	}
	inst := di.Reservations[0].Instances[0]
	if aws.ToString(inst.CapacityReservationId) != tg.ID || inst.CapacityReservationSpecification == nil ||
		inst.CapacityReservationSpecification.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly ||
		aws.ToString(inst.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId) != tg.ID || inst.InstanceLifecycle != "" {
		t.Fatalf("instance = %+v %+v", inst.CapacityReservationId, inst.CapacityReservationSpecification)
	}
	// A termination gives the slot back: at once to launches, late to Describe.
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	step(t, e, e.cfg.TerminateDelay)
	step(t, e, h.CapacityReservationLagMax)
	if a := avail(); a != 1 {
		t.Fatalf("available after a termination = %d", a)
	}
	out, err := c.CreateFleet(ctx, reservedFleet(lt, tg.InstanceType, tg.Zone, sub, "d", ec2types.DefaultTargetCapacityTypeOnDemand))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("relaunch: %+v %v", out, err)
	}
	for _, tc := range []struct {
		name, itype, token, code string
		ct                       ec2types.DefaultTargetCapacityType
	}{
		{"other type", "m5.xlarge", "e", "InvalidParameterValue", ec2types.DefaultTargetCapacityTypeOnDemand},
		{"spot", tg.InstanceType, "f", "InvalidParameterCombination", ec2types.DefaultTargetCapacityTypeSpot},
	} {
		out, err := c.CreateFleet(ctx, reservedFleet(lt, tc.itype, tg.Zone, sub, tc.token, tc.ct))
		if err != nil || len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != tc.code {
			t.Errorf("%s: %+v %v", tc.name, out, err)
		}
	}
}

// TestOpenReservationContract: an open reservation takes matching on-demand
// launches that do not opt out (EC2's default preference is open), not
// those with preference none nor spot ones.
func TestOpenReservationContract(t *testing.T) {
	h := DefaultHostility()
	h.FleetErrorRate = 0 // a random fleet error would leave a launch out of the count
	e, _ := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	op := seededReservations(t, e)["open"]
	sub := subnetIn(t, e, op.Zone)
	plain := createLT(t, c, e, "plain")
	none := createLT(t, c, e, "none", func(d *ec2types.RequestLaunchTemplateData) {
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}
	})
	launch := func(lt, tok string) string {
		out, err := c.CreateFleet(ctx, reservedFleet(lt, op.InstanceType, op.Zone, sub, tok, ec2types.DefaultTargetCapacityTypeOnDemand))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("launch %s: %+v %v", tok, out, err)
		}
		return out.Instances[0].InstanceIds[0]
	}
	opted := launch(none, "none")
	if r := e.ReservationOf(opted); r != "" {
		t.Fatalf("preference none ran in %s", r)
	}
	a, b, third := launch(plain, "a"), launch(plain, "b"), launch(plain, "c")
	if e.ReservationOf(a) != op.ID || e.ReservationOf(b) != op.ID || e.ReservationOf(third) != "" {
		t.Fatalf("open reservation holds %q %q %q", e.ReservationOf(a), e.ReservationOf(b), e.ReservationOf(third))
	}
}

// TestCapacityBlockContract: a Capacity Block takes only capacity-block
// launches (DefaultTargetCapacityType capacity-block, market type
// capacity-block), shows them as instanceLifecycle capacity-block; 40
// minutes before its end the expiration warning reaches the interruption
// queue, 30 minutes before its instances are terminated, at the end it
// expires.
func TestCapacityBlockContract(t *testing.T) {
	h := DefaultHostility()
	h.FleetErrorRate = 0 // the block has one slot; a random error would be a second failure to tell apart
	e, _ := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	now := fakeClock(t, e).Now()
	cb, err := e.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large", Zone: e.Config().Zones[1].Name, Total: 1,
		MatchCriteria: MatchTargeted, ReservationType: ReservationTypeCapacityBlock, End: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	step(t, e, h.CapacityReservationLagMax)
	sub := subnetIn(t, e, cb.Zone)
	plainTarget := reservedLT(t, c, e, "block-without-market", cb.ID, false)
	out, err := c.CreateFleet(ctx, reservedFleet(plainTarget, cb.InstanceType, cb.Zone, sub, "x", ec2types.DefaultTargetCapacityTypeOnDemand))
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterValue" {
		t.Fatalf("launch into a block without the market type: %+v %v", out, err)
	}
	lt := reservedLT(t, c, e, "block", cb.ID, true)
	out, err = c.CreateFleet(ctx, reservedFleet(lt, cb.InstanceType, cb.Zone, sub, "y", ec2types.DefaultTargetCapacityTypeCapacityBlock))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("capacity-block launch: %+v %v", out, err)
	}
	id := out.Instances[0].InstanceIds[0]
	settle(t, e)
	di, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if inst := di.Reservations[0].Instances[0]; inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeCapacityBlock || aws.ToString(inst.CapacityReservationId) != cb.ID {
		t.Fatalf("block instance lifecycle %q reservation %q", inst.InstanceLifecycle, aws.ToString(inst.CapacityReservationId))
	}
	// 40 minutes before the end: the warning, naming the reservation.
	step(t, e, cb.End.Sub(fakeClock(t, e).Now())-40*time.Minute)
	msgs := e.Messages(e.ClusterName())
	var warned bool
	for _, m := range msgs {
		if ev, err := events.Parse([]byte(m.Body)); err == nil && ev.Kind == events.KindCapacityBlockExpiration && ev.CapacityReservationID == cb.ID {
			warned = true
			if !ev.Deadline.Equal(cb.End.Add(-30 * time.Minute).Truncate(time.Second)) {
				t.Errorf("deadline %v, want %v", ev.Deadline, cb.End.Add(-30*time.Minute))
			}
		}
	}
	if !warned {
		t.Fatalf("no expiration warning in %d messages", len(msgs))
	}
	if ids := e.ReservationInstanceIDs(cb.ID); len(ids) != 1 || ids[0] != id {
		t.Fatal("the block's instance went before its time")
	}
	// 30 minutes before: terminated.
	step(t, e, 10*time.Minute)
	step(t, e, e.cfg.TerminateDelay)
	if ids := e.ReservationInstanceIDs(cb.ID); len(ids) != 0 {
		t.Fatalf("instances still in the block: %v", ids)
	}
	step(t, e, 30*time.Minute)
	for _, r := range e.CapacityReservations() {
		if r.ID == cb.ID && r.State != ReservationExpired {
			t.Fatalf("block state %s after its end", r.State)
		}
	}
}

// TestCancelledReservationContract: a cancelled reservation leaves its
// instances running, no longer in it (DescribeInstances shows no
// reservation), and takes no launch.
func TestCancelledReservationContract(t *testing.T) {
	h := DefaultHostility()
	h.FleetErrorRate = 0 // one launch into the reservation is the point
	e, _ := newTestEmulator(t, calm(h))
	c := ec2Client(t, e)
	ctx := context.Background()
	tg := seededReservations(t, e)["targeted"]
	lt := reservedLT(t, c, e, "reserved", tg.ID, false)
	sub := subnetIn(t, e, tg.Zone)
	out, err := c.CreateFleet(ctx, reservedFleet(lt, tg.InstanceType, tg.Zone, sub, "a", ec2types.DefaultTargetCapacityTypeOnDemand))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("launch: %+v %v", out, err)
	}
	id := out.Instances[0].InstanceIds[0]
	if err := e.CancelCapacityReservation(tg.ID); err != nil {
		t.Fatal(err)
	}
	settle(t, e)
	di, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if inst := di.Reservations[0].Instances[0]; inst.State.Name != ec2types.InstanceStateNameRunning || inst.CapacityReservationId != nil {
		t.Fatalf("instance after the cancel: %s, reservation %v", inst.State.Name, aws.ToString(inst.CapacityReservationId))
	}
	out, err = c.CreateFleet(ctx, reservedFleet(lt, tg.InstanceType, tg.Zone, sub, "b", ec2types.DefaultTargetCapacityTypeOnDemand))
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" {
		t.Fatalf("launch into a cancelled reservation: %+v %v", out, err)
	}
}
