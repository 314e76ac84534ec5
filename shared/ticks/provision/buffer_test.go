package provision_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// chunkCPU is a buffer chunk's request in these scenarios: 900m, so that
// two chunks fill one m5.large (1930m allocatable) and a third does not.
const chunkCPU = "900m"

func podTemplate(t *testing.T, w *testworld.World, name, cpu string) *corev1.PodTemplate {
	t.Helper()
	pt, err := w.E.Clients.Core.CoreV1().PodTemplates(w.NS).Create(context.Background(), &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating podtemplate %s: %v", name, err)
	}
	return pt
}

func createBuffer(t *testing.T, w *testworld.World, name string, spec cbv1.CapacityBufferSpec) *cbv1.CapacityBuffer {
	t.Helper()
	client := w.E.Clients.CapacityBuffers(w.NS)
	b, err := client.Create(context.Background(), &cbv1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating capacitybuffer %s: %v", name, err)
	}
	// testworld's cleanup does not know buffers; the next test must not
	// provision for these.
	t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return b
}

func getBuffer(t *testing.T, w *testworld.World, name string) *cbv1.CapacityBuffer {
	t.Helper()
	b, err := w.E.Clients.CapacityBuffers(w.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantCondition checks one condition of a buffer's status.
func wantCondition(t *testing.T, b *cbv1.CapacityBuffer, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(b.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != b.Generation {
		t.Errorf("capacitybuffer %s %s = %+v, want %s %s at generation %d", b.Name, typ, c, status, reason, b.Generation)
	}
}

// onDemandCost is the $/h of the live instances, at the emulator's
// on-demand prices (the scenarios' pools launch on demand only).
func onDemandCost(t *testing.T, w *testworld.World) float64 {
	t.Helper()
	total := 0.0
	for _, i := range w.Emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateRunning
	}) {
		p, err := w.Emu.OnDemandPrice(i.InstanceType)
		if err != nil {
			t.Fatal(err)
		}
		total += p
	}
	return total
}

func initializedClaims(w *testworld.World) int {
	n := 0
	for _, nc := range w.Claims() {
		if nc.IsTrue(karpv1.ConditionTypeInitialized) {
			n++
		}
	}
	return n
}

// TestBufferProvisionsRoomAndAPodLandsOnIt: a buffer of two chunks from a
// PodTemplate gets an m5.large with no pod at all; its status says
// ReadyForProvisioning, then Provisioning once the room exists; a tick
// that finds it so writes nothing and creates nothing. A real pod of a
// chunk's size then runs on that room at once (kube-scheduler binds it;
// no NodeClaim is made for it), and the next tick refills the buffer with
// one more claim. The $/h before and after the buffer are logged.
func TestBufferProvisionsRoomAndAPodLandsOnIt(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	w.Apply(deploy.DefaultNodePool("default", typesReq("m5.large"), capacityReq("on-demand")))
	before := onDemandCost(t, w)
	pt := podTemplate(t, w, "web-chunk", chunkCPU)
	createBuffer(t, w, "web", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: pt.Name}, Replicas: new(int32(2))})

	tickUntil(w, "buffer", 10, 5*time.Second, func() bool { return allLaunched(w) })
	if n := len(w.Claims()); n != 1 {
		t.Fatalf("%d claims for two %s chunks, want 1 m5.large", n, chunkCPU)
	}
	if n := len(w.ListPods()); n != 0 {
		t.Fatalf("%d pods in the namespace: a buffer's pods are virtual", n)
	}
	b := getBuffer(t, w, "web")
	wantCondition(t, b, cbv1.ConditionReadyForProvisioning, metav1.ConditionTrue, cbv1.ReasonResolved)
	if b.Status.Replicas == nil || *b.Status.Replicas != 2 || b.Status.PodTemplateRef == nil || b.Status.PodTemplateRef.Name != pt.Name ||
		b.Status.PodTemplateGeneration == nil || b.Status.ProvisioningStrategy == nil || *b.Status.ProvisioningStrategy != cbv1.ActiveProvisioningStrategy {
		t.Errorf("status %+v", b.Status)
	}
	// Until the node is up the room is a claim in flight, which Karpenter
	// counts as existing capacity too.
	tickUntil(w, "room", 20, 5*time.Second, func() bool { return initializedClaims(w) == 1 })
	b = getBuffer(t, w, "web")
	wantCondition(t, b, cbv1.ConditionProvisioning, metav1.ConditionTrue, cbv1.ReasonFitsExistingCapacity)
	after := onDemandCost(t, w)
	price, _ := w.Emu.OnDemandPrice("m5.large")
	t.Logf("buffer of 2 x %s: $%.4f/h before, $%.4f/h after (+$%.4f/h, $%.2f a month of 730 h; m5.large on demand in %s: $%.4f/h)",
		chunkCPU, before, after, after-before, (after-before)*730, w.Emu.Region(), price)
	if after-before != price {
		t.Errorf("the buffer costs $%.4f/h, want one m5.large ($%.4f/h)", after-before, price)
	}

	// Nothing changed: no claim, no status write.
	rv := b.ResourceVersion
	provisionOnce(w, "steady")
	if n := len(w.Claims()); n != 1 {
		t.Errorf("%d claims after a tick with nothing to do, want 1", n)
	}
	if b := getBuffer(t, w, "web"); b.ResourceVersion != rv {
		t.Errorf("an unchanged status was written again (resourceVersion %s -> %s)", rv, b.ResourceVersion)
	}

	// A real pod lands on the buffer's room: kube-scheduler binds it, no
	// tick runs.
	start := time.Now()
	w.Pods("burst", 1, chunkCPU, nil)
	var bound time.Duration
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, p := range w.ListPods() {
			if p.Spec.NodeName != "" {
				bound = time.Since(start)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the pod did not land on the buffer's room: %v", err)
	}
	t.Logf("a pod of a chunk's size was bound %s after it was created, on room the buffer kept (no NodeClaim made for it)", bound.Round(time.Millisecond))
	if n := len(w.Claims()); n != 1 {
		t.Errorf("%d claims once the pod landed, want 1", n)
	}
	// The buffer refills: one chunk still fits beside the pod, the other
	// needs a claim.
	provisionOnce(w, "refill")
	if n := len(w.Claims()); n != 2 {
		t.Errorf("%d claims after the refill, want 2", n)
	}
	b = getBuffer(t, w, "web")
	wantCondition(t, b, cbv1.ConditionProvisioning, metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity)
	// Again: the refill's claim is in flight, nothing more is made.
	provisionOnce(w, "refill-again")
	if n := len(w.Claims()); n != 2 {
		t.Errorf("%d claims after a second refill tick, want 2", n)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestBufferFollowsTheDeployment: a buffer of 50% of a Deployment of 4
// (whose pods need not exist: no controller runs here) keeps 2 chunks of
// the Deployment's pod; scaled to 6, 3. Each chunk of 1500m needs its own
// m5.large.
func TestBufferFollowsTheDeployment(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	w.Apply(deploy.DefaultNodePool("default", typesReq("m5.large"), capacityReq("on-demand")))
	w.Deployment("api", 4, "1500m", nil)
	createBuffer(t, w, "api", cbv1.CapacityBufferSpec{ScalableRef: &cbv1.ScalableRef{APIGroup: "apps", Kind: cbv1.KindDeployment, Name: "api"}, Percentage: new(int32(50))})
	tickUntil(w, "half-of-4", 10, 5*time.Second, func() bool { return len(w.Claims()) == 2 && allLaunched(w) })
	b := getBuffer(t, w, "api")
	if b.Status.Replicas == nil || *b.Status.Replicas != 2 || b.Status.PodTemplateRef != nil {
		t.Errorf("status %+v, want 2 replicas and no podTemplateRef", b.Status)
	}
	wantCondition(t, b, cbv1.ConditionReadyForProvisioning, metav1.ConditionTrue, cbv1.ReasonResolved)

	d, err := w.E.Clients.Core.AppsV1().Deployments(w.NS).Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = new(int32(6))
	if _, err := w.E.Clients.Core.AppsV1().Deployments(w.NS).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tickUntil(w, "half-of-6", 10, 5*time.Second, func() bool { return len(w.Claims()) == 3 && allLaunched(w) })
	b = getBuffer(t, w, "api")
	if b.Status.Replicas == nil || *b.Status.Replicas != 3 {
		t.Errorf("status.replicas %v, want 3", b.Status.Replicas)
	}
	provisionOnce(w, "again")
	if n := len(w.Claims()); n != 3 {
		t.Errorf("%d claims after another tick, want 3", n)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestBufferLimits: a buffer's limits cap its chunks (5 asked, 3 cpu
// allowed: 2 of 1500m), and a NodePool's limits cap what is launched for
// them (2 cpu: one m5.large): the chunk left out makes Provisioning False
// with the reason. A buffer whose PodTemplate is missing is not ready,
// with Karpenter's reason, and gets nothing.
func TestBufferLimits(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	pool := deploy.DefaultNodePool("default", typesReq("m5.large"), capacityReq("on-demand"))
	pool.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("2")}
	w.Apply(pool)
	pt := podTemplate(t, w, "big-chunk", "1500m")
	createBuffer(t, w, "capped", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: pt.Name}, Replicas: new(int32(5)),
		Limits: cbv1.Limits{corev1.ResourceCPU: resource.MustParse("3")}})
	createBuffer(t, w, "orphan", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "no-such-template"}, Replicas: new(int32(1))})
	tickUntil(w, "limits", 10, 5*time.Second, func() bool { return allLaunched(w) })
	provisionOnce(w, "limits-again")
	if n := len(w.Claims()); n != 1 {
		t.Errorf("%d claims, want 1 (the NodePool allows 2 cpu: one m5.large)", n)
	}
	b := getBuffer(t, w, "capped")
	if b.Status.Replicas == nil || *b.Status.Replicas != 2 {
		t.Errorf("status.replicas %v, want 2 (3 cpu of limits / 1500m)", b.Status.Replicas)
	}
	wantCondition(t, b, cbv1.ConditionProvisioning, metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity)
	if c := meta.FindStatusCondition(b.Status.Conditions, cbv1.ConditionProvisioning); c != nil {
		t.Logf("capped: Provisioning %s: %s", c.Reason, c.Message)
	}
	o := getBuffer(t, w, "orphan")
	wantCondition(t, o, cbv1.ConditionReadyForProvisioning, metav1.ConditionFalse, cbv1.ReasonPodTemplateNotFound)
	wantCondition(t, o, cbv1.ConditionProvisioning, metav1.ConditionFalse, cbv1.ReasonNotReadyForProvisioning)
	if fmt.Sprint(o.Status.Replicas) != "<nil>" {
		t.Errorf("orphan status.replicas %v, want none", *o.Status.Replicas)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestBufferKilledTickThenFreshTick kills the provisioner tick before and
// after each Kubernetes write and each CreateFleet an undisturbed tick
// makes for a buffer of four 900m chunks (two m5.large), in the hostile
// world; fresh ticks must then end with exactly two launched claims: the
// in-flight claims of a killed tick hold the virtual pods, so no second
// claim is made for them, and nothing is launched twice or leaked.
func TestBufferKilledTickThenFreshTick(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	w.Apply(deploy.DefaultNodePool("default", typesReq("m5.large"), capacityReq("on-demand")))
	pt := podTemplate(t, w, "chunk", chunkCPU)
	createBuffer(t, w, "headroom", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: pt.Name}, Replicas: new(int32(4))})
	c := newCrashWorld(t, w)
	if n := freshTicks(t, w, c, "warm-up", 2, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	c.reset(t, w)
	counter := &testworld.KillSwitch{}
	if _, err := killableEnv(t, w, c, counter).Provisioner().Run(ctx, "baseline"); err != nil {
		t.Logf("undisturbed tick: %v", err)
	}
	calls := counter.Calls()
	cases := 0
	for at := 1; at <= len(calls); at++ {
		if !strings.HasPrefix(calls[at-1], "kube ") && !strings.Contains(calls[at-1], "CreateFleet") {
			continue
		}
		for _, after := range []bool{false, true} {
			cases++
			c.reset(t, w)
			k := &testworld.KillSwitch{At: at, After: after}
			_, _ = killableEnv(t, w, c, k).Provisioner().Run(ctx, fmt.Sprintf("killed-%d-%v", at, after))
			// The dead tick's lease would expire before the next scheduled
			// tick; remove it rather than skip its 30 s (as killEachCall).
			_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
			// Ticks a few seconds apart (an instance EC2 lists late), then
			// half a minute apart (a token waiting for evidence of its launch).
			n := freshTicks(t, w, c, fmt.Sprintf("fresh-%d-%v", at, after), 2, 3, 4*time.Second)
			if n > 3 {
				n = 3 + freshTicks(t, w, c, fmt.Sprintf("fresh-%d-%v-late", at, after), 2, 3, 30*time.Second)
			}
			if n > 6 {
				t.Errorf("killed %v call %d (%s): fresh ticks do not converge: %+v", map[bool]string{false: "before", true: "after"}[after], at, calls[at-1], inspect(w, c.emu))
				continue
			}
			if o := inspect(w, c.emu); o.live != 2 || len(o.problems) > 0 {
				t.Errorf("killed %v call %d (%s): %d live claims (want 2), problems %v", map[bool]string{false: "before", true: "after"}[after], at, calls[at-1], o.live, o.problems)
			}
		}
	}
	t.Logf("%d kills around the %d calls of an undisturbed tick: %v", cases, len(calls), calls)
}
