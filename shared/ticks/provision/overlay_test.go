package provision_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/testworld"
)

// fuse is the extended resource the capacity overlay adds: no emulated
// node advertises it.
const fuse corev1.ResourceName = "smarter-devices/fuse"

func applyOverlays(t *testing.T, w *testworld.World, overlays ...*v1alpha1.NodeOverlay) {
	t.Helper()
	ctx := context.Background()
	for _, o := range overlays {
		if _, err := w.E.Clients.NodeOverlays.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating nodeoverlay %s: %v", o.Name, err)
		}
	}
	// testworld's cleanup does not know NodeOverlays; the next test must
	// not price with these.
	t.Cleanup(func() {
		_ = w.E.Clients.NodeOverlays.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
}

func priceOverlay(name string, weight int32, price string, types ...string) *v1alpha1.NodeOverlay {
	return &v1alpha1.NodeOverlay{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []v1alpha1.NodeSelectorRequirement{{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: types}},
			Price:        &price,
			Weight:       &weight,
		},
	}
}

func overlayReady(t *testing.T, w *testworld.World, name string) *metav1.Condition {
	t.Helper()
	o, err := w.E.Clients.NodeOverlays.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionTypeReady)
}

func claimOf(w *testworld.World, skip map[string]bool) *karpv1.NodeClaim {
	for _, nc := range w.Claims() {
		if !skip[nc.Name] {
			return &nc
		}
	}
	return nil
}

// TestOverlayPricesChangeTheClaimsType: a pool that may launch m5.large or
// c5.large on demand gets c5.large, the cheaper; once a NodeOverlay prices
// c5.large at $10/h the next claim is an m5.large, and carries Karpenter's
// price-overlay-applied annotation. Two overlays of one weight that both
// price m5.xlarge conflict: the one later in the alphabet is applied, the
// other gets Ready=False, and neither changes the choice above.
func TestOverlayPricesChangeTheClaimsType(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large"), capacityReq("on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	w.Pods("before", 1, "1", nil)
	w.WaitUnschedulable(1)
	tickUntil(w, "before", 10, 5*time.Second, func() bool { return allLaunched(w) })
	first := claimOf(w, nil)
	if got := first.Labels[wellknown.InstanceTypeLabel]; got != "c5.large" {
		t.Fatalf("without overlays the claim launched as %s, want c5.large (the cheaper on demand)", got)
	}
	if _, ok := first.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey]; ok {
		t.Error("a claim no overlay priced carries the price-overlay-applied annotation")
	}

	applyOverlays(t, w,
		priceOverlay("expensive-c5", 10, "10", "c5.large"),
		priceOverlay("conflict-a", 1, "1", "m5.xlarge"),
		priceOverlay("conflict-b", 1, "2", "m5.xlarge"),
	)
	// The second pod may not join the first, so that it needs a claim of
	// its own.
	w.Pods("after", 1, "1", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "before"}},
		}}}}
	})
	w.WaitUnschedulable(1)
	tickUntil(w, "after", 10, 5*time.Second, func() bool { return len(w.Claims()) == 2 && allLaunched(w) })
	second := claimOf(w, map[string]bool{first.Name: true})
	if got := second.Labels[wellknown.InstanceTypeLabel]; got != "m5.large" {
		t.Errorf("with c5.large priced at $10/h the claim launched as %s, want m5.large", got)
	}
	if second.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("claim annotations %v lack %s", second.Annotations, v1alpha1.PriceOverlayAppliedAnnotationKey)
	}
	for name, want := range map[string]metav1.ConditionStatus{"expensive-c5": metav1.ConditionTrue, "conflict-b": metav1.ConditionTrue, "conflict-a": metav1.ConditionFalse} {
		c := overlayReady(t, w, name)
		if c == nil || c.Status != want {
			t.Errorf("nodeoverlay %s Ready = %+v, want %s", name, c, want)
		}
	}
	o, _ := w.E.Clients.NodeOverlays.Get(ctx, "conflict-a", metav1.GetOptions{})
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionTypeValidationSucceeded); c == nil || c.Reason != v1alpha1.ReasonConflict {
		t.Errorf("conflict-a ValidationSucceeded = %+v, want reason %s", c, v1alpha1.ReasonConflict)
	}
	// A later tick that finds the overlays as they were writes no status.
	before := o.ResourceVersion
	provisionOnce(w, "again")
	if o, _ := w.E.Clients.NodeOverlays.Get(ctx, "conflict-a", metav1.GetOptions{}); o.ResourceVersion != before {
		t.Errorf("an unchanged status was written again (resourceVersion %s -> %s)", before, o.ResourceVersion)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestOverlayCapacityLetsAPodBeProvisioned: a pod that requests an extended
// resource no instance type has gets no claim; once a NodeOverlay adds the
// resource to m5.large it gets an m5.large claim that records it, with
// Karpenter's capacity-overlay-applied annotation.
func TestOverlayCapacityLetsAPodBeProvisioned(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large"), capacityReq("on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	w.Pods("fuse", 1, "1", func(p *corev1.Pod) {
		for _, rl := range []corev1.ResourceList{p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Resources.Limits} {
			if rl != nil {
				rl[fuse] = resource.MustParse("1")
			}
		}
		if p.Spec.Containers[0].Resources.Limits == nil {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fuse: resource.MustParse("1")}
		}
	})
	w.WaitUnschedulable(1)
	provisionOnce(w, "no-overlay")
	if n := len(w.Claims()); n != 0 {
		t.Fatalf("%d claims for a pod that requests %s, which no type has", n, fuse)
	}
	applyOverlays(t, w, &v1alpha1.NodeOverlay{
		ObjectMeta: metav1.ObjectMeta{Name: "fuse-on-m5"},
		Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []v1alpha1.NodeSelectorRequirement{{Key: wellknown.InstanceFamilyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}}},
			Capacity:     corev1.ResourceList{fuse: resource.MustParse("2")},
		},
	})
	tickUntil(w, "overlay", 10, 5*time.Second, func() bool { return allLaunched(w) })
	claims := w.Claims()
	if len(claims) != 1 {
		t.Fatalf("%d claims, want 1", len(claims))
	}
	nc := claims[0]
	if got := nc.Labels[wellknown.InstanceTypeLabel]; got != "m5.large" {
		t.Errorf("claim launched as %s, want m5.large (the only type with %s)", got, fuse)
	}
	if q := nc.Status.Allocatable[fuse]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("claim allocatable %s = %s, want 2 (so that the in-flight claim holds its pod)", fuse, q.String())
	}
	if nc.Annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("claim annotations %v lack %s", nc.Annotations, v1alpha1.CapacityOverlayAppliedAnnotationKey)
	}
	if c := overlayReady(t, w, "fuse-on-m5"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("nodeoverlay Ready = %+v, want True", c)
	}
	// The claim's node registers without the resource (its device plugin
	// has not run): the claim stays uninitialized, and its node counts at
	// what the claim promises, so the next tick does not make another claim
	// for the same pod (Karpenter's issue #1459).
	deadline := time.Now().Add(30 * time.Second)
	for !nodeFor(t, w, nc) {
		if time.Now().After(deadline) {
			t.Fatalf("the node of %s did not register", nc.Name)
		}
		w.Skip(5 * time.Second)
		if err := w.Emu.Step(ctx); err != nil {
			t.Logf("emulator step: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	provisionOnce(w, "in-flight")
	if n := len(w.Claims()); n != 1 {
		t.Errorf("%d claims after a second tick, want 1", n)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// nodeFor says whether nc's node has registered, and checks it reports
// none of the overlay's resource.
func nodeFor(t *testing.T, w *testworld.World, nc karpv1.NodeClaim) bool {
	t.Helper()
	nodes, err := w.E.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if nc.Status.ProviderID != "" && n.Spec.ProviderID == nc.Status.ProviderID {
			if q := n.Status.Allocatable[fuse]; !q.IsZero() {
				t.Fatalf("node %s reports %s %s: the scenario needs a node without it", n.Name, fuse, q.String())
			}
			return true
		}
	}
	return false
}
