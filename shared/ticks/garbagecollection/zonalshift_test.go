package garbagecollection_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/ticks/garbagecollection"
)

// shiftEC2 lists one orphaned instance in us-west-2a (usw2-az1) and knows
// no instance by ID; it counts TerminateInstances.
type shiftEC2 struct {
	instance.EC2
	orphan     ec2types.Instance
	byID       []string
	terminates int
}

func (f *shiftEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if len(in.InstanceIds) > 0 {
		f.byID = append(f.byID, in.InstanceIds...)
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance IDs do not exist"}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: []ec2types.Instance{f.orphan}}}}, nil
}

func (f *shiftEC2) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.terminates++
	return &ec2.TerminateInstancesOutput{}, nil
}

// TestCollectDuringZonalShift: while usw2-az1 is shifted away from, an
// orphaned instance there is not terminated (and that is no error), and a
// registered claim whose instance there EC2 does not list is not taken
// for gone, however long; after the shift both are collected as usual.
func TestCollectDuringZonalShift(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	clk := testingclock.NewFakeClock(now)
	nc, err := e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: kubetest.Name(t), Labels: map[string]string{
			wellknown.NodePoolLabel: "default", corev1.LabelTopologyZone: "us-west-2a", wellknown.TopologyZoneIDLabel: "usw2-az1",
		}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = wellknown.ProviderID("us-west-2a", "i-claimed")
	nc.Status.NodeName = "no-such-node"
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(now))
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(now))
	if _, err := e.Clients.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := &shiftEC2{orphan: ec2types.Instance{
		InstanceId: aws.String("i-orphan"), State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
		LaunchTime: aws.Time(now.Add(-time.Hour)),
		Placement:  &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a"), AvailabilityZoneId: aws.String("usw2-az1")},
		Tags:       []ec2types.Tag{{Key: aws.String(wellknown.NodeClaimTagKey), Value: aws.String("deleted-long-ago")}},
	}}
	base := instance.NewProvider(api, "test")
	log := slog.New(slog.DiscardHandler)
	run := func(shifted zonalshift.Zones) (garbagecollection.Summary, error) {
		t.Helper()
		snap, err := snapshot.Take(ctx, e.Clients, clk)
		if err != nil {
			t.Fatal(err)
		}
		snap.NodeClaims = slices.DeleteFunc(snap.NodeClaims, func(c *karpv1.NodeClaim) bool { return !strings.HasPrefix(c.Name, nc.Name) })
		p := base.WithZonalShift(shifted, cloud.KnownInstances(snap.NodeClaims, nil))
		live, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := &garbagecollection.Collector{Kube: e.Clients, Instances: p, Cluster: "test", Clock: clk, Log: log,
			Events: record.NewRecorder(e.Clients.Core.CoreV1(), clk, log), Metrics: record.NewMetrics("Test")}
		return c.Run(ctx, snap, clk.Now(), live)
	}
	claimExists := func() bool {
		_, err := e.Clients.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
		return err == nil
	}
	shifted := zonalshift.Zones{"usw2-az1": true}
	for range 3 {
		s, err := run(shifted)
		if err != nil || len(s.Instances)+len(s.NodeClaims) != 0 {
			t.Fatalf("during the shift: %+v %v; want nothing collected and no error", s, err)
		}
		clk.Step(timing.NotFoundPatience)
	}
	if api.terminates != 0 || len(api.byID) != 0 || !claimExists() {
		t.Fatalf("during the shift: %d TerminateInstances, DescribeInstances of %v, claim kept %v", api.terminates, api.byID, claimExists())
	}
	// After the shift: the orphan goes, and the claim once EC2 has not
	// known its instance for timing.NotFoundPatience.
	for range 2 {
		if _, err := run(nil); err != nil {
			t.Fatal(err)
		}
		clk.Step(timing.NotFoundPatience + time.Second)
	}
	if api.terminates == 0 || claimExists() {
		t.Errorf("after the shift: %d TerminateInstances, claim kept %v; want the orphan terminated and the claim collected", api.terminates, claimExists())
	}
}
