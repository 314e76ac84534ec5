package provision_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// TestTypeReleasedAfterTheBuildLaunches: EC2 in eu-central-1 sells r9g, a
// family the build's catalog does not know. A NodePool asking for it gets
// nothing while DescribeInstanceTypes cannot be read (the build stands
// in); once it is read, the pods run on r9g nodes whose allocatable comes
// from EC2's network facts.
func TestTypeReleasedAfterTheBuildLaunches(t *testing.T) {
	ctx := context.Background()
	build, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := build.Get("r9g.large"); ok {
		t.Fatal("the build knows r9g: pick a family it does not")
	}
	w := testworld.New(t, env, "provisioner", func(c *emulator.Config) { c.Region = "eu-central-1" })
	noTypes := w.Emu.Inject(emulator.APIError("DescribeInstanceTypes", "UnauthorizedOperation", 403, 0))
	w.Apply(deploy.DefaultNodePool("graviton5",
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceFamilyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"r9g"}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	))
	w.Pods("mem", 3, "1", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("10Gi")
	})
	w.WaitUnschedulable(3)
	for range 2 {
		if _, err := w.App.Provisioner().Pass(ctx); err != nil {
			t.Logf("pass: %v", err)
		}
	}
	if claims := w.Claims(); len(claims) != 0 {
		t.Fatalf("%d NodeClaims for a family only the unread type list has", len(claims))
	}

	// EC2 answers again. The book is a cache: without it the next tick
	// reads EC2 afresh (a failed read is otherwise retried after a backoff that
	// grows with each failure in a row).
	w.Emu.RemoveFault(noTypes)
	if err := w.E.Clients.Core.CoreV1().ConfigMaps(w.App.Config.Namespace).Delete(ctx, pricing.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Converge(90*time.Second, nil)
	claims := w.Claims()
	if len(claims) == 0 {
		t.Fatal("no NodeClaims")
	}
	// Allocatable pods from EC2's ENI limits of the default card:
	// interfaces x (addresses - 1) + 2.
	pods := map[string]int64{"r9g.medium": 2*(4-1) + 2, "r9g.large": 3*(10-1) + 2, "r9g.xlarge": 4*(15-1) + 2, "r9g.2xlarge": 4*(15-1) + 2}
	for _, nc := range claims {
		it := nc.Labels[wellknown.InstanceTypeLabel]
		if got := nc.Status.Allocatable.Pods().Value(); got != pods[it] {
			t.Errorf("nodeclaim %s (%s): %d pods allocatable, want %d", nc.Name, it, got, pods[it])
		}
		if !strings.HasPrefix(it, "r9g.") {
			t.Errorf("nodeclaim %s is a %s", nc.Name, it)
		}
		price, _ := w.Emu.OnDemandPrice(it)
		t.Logf("nodeclaim %s: %s at $%.5f/h (eu-central-1), allocatable pods %s", nc.Name, it, price, nc.Status.Allocatable.Pods())
	}
	w.AssertNoLeaks()
}
