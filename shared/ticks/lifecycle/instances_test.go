package lifecycle

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }

// ec2View is what EC2 answers about instances: known ones by id (state),
// everything else NotFound, as just after a launch or long after a
// termination.
type ec2View struct {
	known      map[string]string
	terminated []string
}

func (f *ec2View) ForNodeClaim(context.Context, string) ([]instance.Instance, error) { return nil, nil }

func (f *ec2View) Get(_ context.Context, id string) (*instance.Instance, error) {
	s, ok := f.known[id]
	if !ok {
		return nil, fmt.Errorf("instance %s: %w", id, instance.ErrNotFound)
	}
	return &instance.Instance{ID: id, State: s}, nil
}

func (f *ec2View) Delete(_ context.Context, _ instance.Counter, insts ...instance.Instance) error {
	for _, i := range insts {
		f.terminated = append(f.terminated, i.ID)
		f.known[i.ID] = "shutting-down"
	}
	return nil
}

// TestTerminateInstancesNeverTrustsOneNotFound: an instance EC2 does not
// know yet (seconds after its launch) is not taken as gone; it is waited
// for, terminated once it shows up, and only an instance missing for
// timing.NotFoundPatience counts as gone.
func TestTerminateInstancesNeverTrustsOneNotFound(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	nc, err := e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: kubetest.Name(t)},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = wellknown.ProviderID("us-west-2a", "i-0123456789abcdef0")
	ec2 := &ec2View{known: map[string]string{}}

	// Not listed yet: waiting, and the first NotFound is recorded.
	waiting, sent, err := TerminateInstances(ctx, e.Clients, ec2, clk, nc, cloud.Errors{})
	if err != nil || len(waiting) != 1 || sent != 0 {
		t.Fatalf("first NotFound: waiting %v sent %d err %v; want the instance waited for", waiting, sent, err)
	}
	if nc.Annotations[InstanceNotFoundSinceAnnotation] == "" {
		t.Fatal("the first NotFound was not recorded on the claim")
	}
	// Listed now: terminated, and the record is forgotten.
	clk.Step(5 * time.Second)
	ec2.known["i-0123456789abcdef0"] = "running"
	waiting, sent, err = TerminateInstances(ctx, e.Clients, ec2, clk, nc, cloud.Errors{})
	if err != nil || len(waiting) != 1 || sent != 1 || len(ec2.terminated) != 1 {
		t.Fatalf("listed: waiting %v sent %d err %v terminated %v", waiting, sent, err, ec2.terminated)
	}
	if _, ok := nc.Annotations[InstanceNotFoundSinceAnnotation]; ok {
		t.Fatal("the NotFound record survived the instance showing up")
	}
	// Gone from EC2 (purged an hour after termination): NotFound must last
	// timing.NotFoundPatience before the claim may let go.
	delete(ec2.known, "i-0123456789abcdef0")
	if waiting, _, _ = TerminateInstances(ctx, e.Clients, ec2, clk, nc, cloud.Errors{}); len(waiting) != 1 {
		t.Fatalf("a single NotFound was taken as gone: waiting %v", waiting)
	}
	clk.Step(timing.NotFoundPatience / 2)
	if waiting, _, _ = TerminateInstances(ctx, e.Clients, ec2, clk, nc, cloud.Errors{}); len(waiting) != 1 {
		t.Fatalf("gone before NotFoundPatience: waiting %v", waiting)
	}
	clk.Step(timing.NotFoundPatience/2 + time.Second)
	if waiting, _, err = TerminateInstances(ctx, e.Clients, ec2, clk, nc, cloud.Errors{}); err != nil || len(waiting) != 0 {
		t.Fatalf("still waiting after timing.NotFoundPatience of NotFound: %v %v", waiting, err)
	}
	// A terminated instance is gone at once.
	ec2.known["i-0123456789abcdef0"] = "terminated"
	if waiting, _, err = TerminateInstances(ctx, e.Clients, ec2, clk, nc, cloud.Errors{}); err != nil || len(waiting) != 0 {
		t.Fatalf("terminated: %v %v", waiting, err)
	}
}
