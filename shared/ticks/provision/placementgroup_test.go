package provision_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// TestPlacementGroupLaunch: an EC2NodeClass whose placementGroupSelector
// names the account's cluster placement group resolves it into its status,
// and a pending pod's instance is launched into the group (as EC2 reports
// it in DescribeInstances); the NodeClaim and its Node carry
// karpenter.k8s.aws/placement-group-id. A class whose selector matches no
// group is not ready, with the reason, and launches nothing.
func TestPlacementGroupLaunch(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	var group emulator.PlacementGroup
	for _, g := range w.Emu.PlacementGroups() {
		if g.Strategy == emulator.PlacementCluster {
			group = g
		}
	}
	class := deploy.DefaultNodeClass(testworld.Cluster, "")
	class.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: aws.String(group.Name)}
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large", "t3.large"), capacityReq("on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, class, pool); err != nil {
		t.Fatal(err)
	}
	// The pod asks for the group by its label, as Karpenter's docs advise
	// for workloads that need it.
	w.Pods("app", 1, "1", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{wellknown.PlacementGroupIDLabel: group.ID}
	})
	w.WaitUnschedulable(1)
	w.Converge(2*time.Minute, nil)

	nc, err := w.E.Clients.EC2NodeClasses.Get(ctx, class.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nc.Status.PlacementGroups; len(got) != 1 || got[0].ID != group.ID || got[0].Strategy != "cluster" {
		t.Errorf("status.placementGroups = %+v, want %s", got, group.ID)
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypePlacementGroupReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PlacementGroupReady = %+v", c)
	}
	// The first launches may fail while the instance profile propagates;
	// the claim that runs the pod is the one to look at.
	var claim karpv1.NodeClaim
	for _, cl := range w.Claims() {
		if cl.DeletionTimestamp == nil && cl.Status.NodeName != "" {
			claim = cl
		}
	}
	if claim.Name == "" {
		t.Fatalf("no claim has a node: %d claims", len(w.Claims()))
	}
	if got := claim.Labels[wellknown.PlacementGroupIDLabel]; got != group.ID {
		t.Errorf("nodeclaim label %s = %q, want %q", wellknown.PlacementGroupIDLabel, got, group.ID)
	}
	if it := claim.Labels[wellknown.InstanceTypeLabel]; it == "t3.large" {
		t.Errorf("a burstable type was launched into a cluster group")
	}
	node, err := w.E.Clients.Core.CoreV1().Nodes().Get(ctx, claim.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Labels[wellknown.PlacementGroupIDLabel]; got != group.ID {
		t.Errorf("node label %s = %q, want %q", wellknown.PlacementGroupIDLabel, got, group.ID)
	}
	// EC2's own word: the instance is in the group.
	id := wellknown.InstanceIDFromProviderID(claim.Status.ProviderID)
	pl := w.Instance(id).Placement
	if aws.ToString(pl.GroupName) != group.Name || aws.ToString(pl.GroupId) != group.ID {
		t.Errorf("instance %s placement = %+v, want group %s", id, pl, group.Name)
	}

	// A selector that matches no group: the class is not ready, and says why.
	missing := deploy.DefaultNodeClass(testworld.Cluster, "")
	missing.Name = "missing"
	missing.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: aws.String("no-such-group")}
	other := deploy.DefaultNodePool("other", typesReq("m5.large"), capacityReq("on-demand"))
	other.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: missing.Name}
	if err := deploy.Apply(ctx, w.E.Clients, missing, other); err != nil {
		t.Fatal(err)
	}
	w.Pods("other", 1, "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{wellknown.NodePoolLabel: "other"} })
	w.WaitUnschedulable(1)
	var got *awsv1.EC2NodeClass
	for i := range 5 {
		provisionOnce(w, "missing-"+string(rune('0'+i)))
		if got, err = w.E.Clients.EC2NodeClasses.Get(ctx, missing.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, awsv1.ConditionTypePlacementGroupReady); c != nil && c.ObservedGeneration == got.Generation {
			break
		}
		w.Skip(2 * time.Second) // a throttled Describe keeps the condition for the next tick
	}
	c := meta.FindStatusCondition(got.Status.Conditions, awsv1.ConditionTypePlacementGroupReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != nodeclass.ReasonPlacementGroupNotFound {
		t.Fatalf("PlacementGroupReady of a selector matching nothing = %+v", c)
	}
	if nodeclass.IsReady(got) {
		t.Error("a class whose placement group is not found is ready")
	}
	t.Logf("not ready: %s", c.Message)
	for _, cl := range w.Claims() {
		if cl.Spec.NodeClassRef.Name == missing.Name && cl.IsTrue(karpv1.ConditionTypeLaunched) {
			t.Errorf("claim %s of the class without its group launched", cl.Name)
		}
	}
	w.AssertNoLeaks()
}
