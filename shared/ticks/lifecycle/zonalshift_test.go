package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// countingEC2 answers DescribeInstances with one running instance in
// us-west-2a (usw2-az1) and counts every instance call.
type countingEC2 struct {
	instance.EC2
	describes, terminates, tags int
}

func (f *countingEC2) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.describes++
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: []ec2types.Instance{{
		InstanceId: aws.String("i-0123456789abcdef0"), State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
		Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a"), AvailabilityZoneId: aws.String("usw2-az1")},
	}}}}}, nil
}

func (f *countingEC2) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.terminates++
	return &ec2.TerminateInstancesOutput{}, nil
}

func (f *countingEC2) CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	f.tags++
	return &ec2.CreateTagsOutput{}, nil
}

// TestTerminateInstancesDuringZonalShift: the instance of a claim whose
// zone is shifted away from is waited for, with no EC2 call and no error
// (nor any "not found" record); once the shift ends it is terminated.
func TestTerminateInstancesDuringZonalShift(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	nc, err := e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: kubetest.Name(t), Labels: map[string]string{
			corev1.LabelTopologyZone: "us-west-2a", wellknown.TopologyZoneIDLabel: "usw2-az1", wellknown.NodePoolLabel: "default",
		}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = wellknown.ProviderID("us-west-2a", "i-0123456789abcdef0")
	api := &countingEC2{}
	base := instance.NewProvider(api, "demo")
	shifted := base.WithZonalShift(zonalshift.Zones{"usw2-az1": true}, cloud.KnownInstances([]*karpv1.NodeClaim{nc}, nil))
	for range 3 {
		clk.Step(time.Hour)
		waiting, sent, err := TerminateInstances(ctx, e.Clients, shifted, clk, nc, cloud.Errors{})
		if err != nil || len(waiting) != 1 || sent != 0 {
			t.Fatalf("during the shift: waiting %v sent %d err %v; want the instance waited for", waiting, sent, err)
		}
	}
	if api.describes+api.terminates != 0 {
		t.Errorf("%d DescribeInstances and %d TerminateInstances during the shift, want none", api.describes, api.terminates)
	}
	if _, ok := nc.Annotations[InstanceNotFoundSinceAnnotation]; ok {
		t.Error("the instance was recorded missing during the shift")
	}
	waiting, sent, err := TerminateInstances(ctx, e.Clients, base.WithZonalShift(nil, nil), clk, nc, cloud.Errors{})
	if err != nil || len(waiting) != 1 || sent != 1 || api.terminates != 1 {
		t.Fatalf("after the shift: waiting %v sent %d err %v terminations %d; want one termination", waiting, sent, err, api.terminates)
	}
}
