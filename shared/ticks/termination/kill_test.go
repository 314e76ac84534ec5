package termination_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/termination"
)

var env *kubetest.Env

// kube-scheduler places the pods the drain moves, kube-controller-manager
// recreates them (Deployment) and keeps the PodDisruptionBudget's status.
func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true, ControllerManager: true}))
}

const (
	clusterName = "karpless-term"
	claimA      = "term-a" // being deleted: its node is drained, its instance terminated
	claimB      = "term-b" // healthy: the pods the drain moves land on its node
	// afterDeletion is how long after the deletion of claim A its
	// terminationGracePeriod runs out, on the clock. The passes run on a
	// schedule of the clock (firstPass after the deletion, then every
	// tick), so the fourth is 10 s before the deadline and the fifth 10 s
	// past it, whatever the load makes of the real time in between: a pass
	// and its waits may take up to 10 s of real time before the next one
	// sees a later world than the undisturbed run did (5 s, with passes
	// 10 s apart, was overrun by a loaded make test).
	afterDeletion = 74 * time.Second
	firstPass     = 4 * time.Second
	tick          = 20 * time.Second
	// dndGrace is the do-not-disrupt pod's terminationGracePeriodSeconds.
	dndGrace = 40
)

// world is one termination scenario: a hostile emulator (stepped by the
// test only, so that every case sees the same sequence of passes) on a
// skew clock, two nodes, and on node A two pods of a Deployment guarded by
// a PodDisruptionBudget (minAvailable 1) and a do-not-disrupt pod; claim A
// has a terminationGracePeriod and is deleted.
type world struct {
	t   *testing.T
	e   *kubetest.Env
	emu *emulator.Emulator
	clk *testworld.SkewClock
	ec2 *ec2.Client
	ns  string

	idA, idB, nodeA, nodeB string
	// deadline is when claim A's terminationGracePeriod runs out; passAt
	// is when on the clock the next pass is due (see next).
	deadline, passAt time.Time

	mu sync.Mutex
	// evictions counts the evictions the API server accepted, per pod;
	// deleted is when (on the clock) the terminator deleted a pod; onA are
	// the pods ever seen bound to node A.
	evictions  map[string]int
	deleted    map[string]time.Time
	onA        map[string]bool
	violations []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	e := kubetest.Need(t, env)
	resetCluster(t, e)
	w := &world{t: t, e: e, clk: &testworld.SkewClock{}, evictions: map[string]int{}, deleted: map[string]time.Time{}, onA: map[string]bool{}}
	w.ns = e.Namespace(t)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.Clients.Core.AppsV1().Deployments(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = e.Clients.Core.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		resetCluster(t, e)
	})
	// Registered after the reset: runs before it (the emulator's kubelets
	// would otherwise register again the nodes the reset deletes).
	w.emu = emulatortest.New(t, e.Clients, w.clk, func(c *emulator.Config) {
		c.ClusterName = clusterName
		c.PendingDelay, c.JoinDelay, c.ReadyDelay, c.TerminateDelay = time.Second, time.Second, time.Second, time.Second
	})
	w.ec2 = ec2.NewFromConfig(emulatortest.CarefulAWSConfig(t, w.emu, ""))
	w.idA, w.idB = w.launch(claimA), w.launch(claimB)
	w.advance(10 * time.Second)
	a, _ := w.emu.Instance(w.idA)
	b, _ := w.emu.Instance(w.idB)
	if a.NodeName == "" || b.NodeName == "" {
		t.Fatalf("nodes did not join: %+v %+v", a, b)
	}
	w.nodeA, w.nodeB = a.NodeName, b.NodeName
	ctx := context.Background()
	// Karpenter's nodes carry the termination finalizer.
	fin := []byte(`{"metadata":{"finalizers":["` + wellknown.TerminationFinalizer + `"]}}`)
	for _, n := range []string{w.nodeA, w.nodeB} {
		if _, err := e.Clients.Core.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, fin, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The grace period is counted from the deletion timestamp, which the
	// API server sets on the real clock; the skew clock runs ahead of it.
	grace := (w.clk.Skew() + afterDeletion).Round(time.Second)
	w.claim(claimA, a, &grace)
	w.claim(claimB, b, nil)
	w.deployment()
	// The do-not-disrupt pod's 40 s of grace make it due for deletion 34 s
	// after claim A's (40 s before the deadline): 10 s after the second
	// pass is due and 10 s before the third.
	w.pod("dnd", w.nodeA, map[string]string{wellknown.DoNotDisruptAnnotation: "true"}, dndGrace)
	if _, err := e.Clients.Core.PolicyV1().PodDisruptionBudgets(w.ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.quiesce()
	for _, p := range w.pods() {
		if p.Spec.NodeName != w.nodeA {
			t.Fatalf("pod %s runs on %s, want every pod on node A %s", p.Name, p.Spec.NodeName, w.nodeA)
		}
	}
	if err := e.Clients.NodeClaims.Delete(ctx, claimA, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nc, err := e.Clients.NodeClaims.Get(ctx, claimA, metav1.GetOptions{})
	if err != nil || nc.DeletionTimestamp == nil {
		t.Fatalf("claim A not deleting: %v", err)
	}
	w.deadline = nc.DeletionTimestamp.Add(grace)
	w.passAt = w.deadline.Add(firstPass - afterDeletion)
	w.advanceTo(w.passAt)
	return w
}

// advanceTo moves the clock on to t, unless the real time has already
// taken it there (the clock never goes back).
func (w *world) advanceTo(t time.Time) {
	if d := t.Sub(w.clk.Now()); d > 0 {
		w.clk.Advance(d)
	}
}

func resetCluster(t *testing.T, e *kubetest.Env) {
	t.Helper()
	ctx := context.Background()
	c := e.Clients
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	for range 100 {
		left := 0
		if l, err := c.NodeClaims.List(ctx, metav1.ListOptions{}); err == nil {
			for _, nc := range l.Items {
				left++
				_, _ = c.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				_ = c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
			}
		}
		if l, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			for _, n := range l.Items {
				left++
				_, _ = c.Core.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				_ = c.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("reset: nodeclaims or nodes still present after 5s")
}

// advance moves the clock on by d in five steps, letting the emulator act
// after each.
func (w *world) advance(d time.Duration) {
	w.t.Helper()
	for range 5 {
		w.clk.Advance(d / 5)
		w.step()
	}
}

func (w *world) step() {
	w.t.Helper()
	if err := w.emu.Step(context.Background()); err != nil {
		w.t.Logf("emulator step: %v", err)
	}
}

func (w *world) launch(claim string) string {
	w.t.Helper()
	var image string
	for _, im := range w.emu.Images() {
		if im.Arch == "x86_64" && im.Family == "AL2023" {
			image = im.ID
			break
		}
	}
	out, err := w.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(w.emu.Subnets()[0].ID),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(wellknown.ClusterTagKey(clusterName)), Value: aws.String(wellknown.OwnedTagValue)},
			{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")},
			{Key: aws.String(wellknown.NodeClaimTagKey), Value: aws.String(claim)},
		}}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

// claim creates a registered, initialized NodeClaim for instance i, with
// the termination finalizer.
func (w *world) claim(name string, i emulator.Instance, grace *time.Duration) {
	w.t.Helper()
	ctx := context.Background()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: "default"}, Finalizers: []string{wellknown.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}
	if grace != nil {
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: *grace}
	}
	nc, err := w.e.Clients.NodeClaims.Create(ctx, nc, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	now := metav1.NewTime(w.clk.Now())
	nc.Status.ProviderID = wellknown.ProviderID(i.Zone, i.ID)
	nc.Status.NodeName = i.NodeName
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		nc.SetCondition(c, metav1.ConditionTrue, c, "", now)
	}
	if _, err := w.e.Clients.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func podSpec(cpu string, grace int64) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
	}
}

// deployment creates "web", two pods that prefer node A (kube-scheduler
// puts them there while it is not tainted, and their successors on B).
func (w *world) deployment() {
	w.t.Helper()
	spec := podSpec("100m", 1)
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: wellknown.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{w.nodeA},
		}}},
	}}}}
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// pod binds a bare pod to node (no scheduler: as a pod kube-scheduler
// placed before it saw the node's taint).
func (w *world) pod(name, node string, annotations map[string]string, grace int64) {
	w.t.Helper()
	spec := podSpec("100m", grace)
	spec.NodeName = node
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Annotations: annotations, Labels: map[string]string{"app": name}}, Spec: spec}
	if _, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) pods() []corev1.Pod {
	w.t.Helper()
	l, err := w.e.Clients.Core.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// quiesce waits (real time) until the controllers have caught up with the
// world: the Deployment's two pods exist, every pod is bound and running
// (the emulator's kubelets are stepped without moving the clock), and the
// PodDisruptionBudget's status counts the pods as they are. Every case thus
// meets the same world at each pass.
func (w *world) quiesce() {
	w.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, step := true, false
		web, healthy := 0, 0
		var why string
		for _, p := range w.pods() {
			if p.Spec.NodeName == w.nodeA {
				w.mu.Lock()
				w.onA[p.Name] = true
				w.mu.Unlock()
			}
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Labels["app"] == "web" {
				web++
			}
			switch {
			case p.Spec.NodeName == "":
				ok, why = false, "pod "+p.Name+" not bound"
			case p.Status.Phase != corev1.PodRunning:
				if w.kubeletRuns(p.Spec.NodeName) {
					ok, step, why = false, true, "pod "+p.Name+" not running"
				}
			case p.Labels["app"] == "web":
				healthy++
			}
		}
		if web != 2 {
			ok, why = false, fmt.Sprintf("%d web pods", web)
		}
		if pdb, err := w.e.Clients.Core.PolicyV1().PodDisruptionBudgets(w.ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
			want := max(0, int32(healthy)-1)
			if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != int32(healthy) || pdb.Status.DisruptionsAllowed != want || len(pdb.Status.DisruptedPods) > 0 {
				ok, why = false, fmt.Sprintf("pdb status %+v, %d healthy", pdb.Status, healthy)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the world did not settle: %s", why)
		}
		if step {
			w.step()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kubeletRuns says whether node's instance runs (its kubelet starts pods).
func (w *world) kubeletRuns(node string) bool {
	for _, i := range w.emu.Instances(nil) {
		if i.NodeName == node {
			return i.State == emulator.StateRunning
		}
	}
	return false
}

// pass runs one termination pass as the disruption tick does (the cluster
// read, Reconcile, the Events flushed), with k in front of its Kubernetes
// writes and AWS calls.
func (w *world) pass(k *deploy.KillSwitch) {
	w.t.Helper()
	ctx := context.Background()
	restCfg := rest.CopyConfig(w.e.Cluster.RESTConfig)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &kubeEdge{next: rt, w: w, k: k} })
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg, err := w.emu.AWSConfig("disruption", 1)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg.HTTPClient = &awsEdge{next: cfg.HTTPClient, w: w, k: k}
	log := slog.New(slog.DiscardHandler)
	events := record.NewRecorder(kc.Core.CoreV1(), w.clk, log)
	term := &termination.Terminator{Kube: kc, Instances: instance.NewProvider(ec2.NewFromConfig(cfg), clusterName), Clock: w.clk, Log: log, Events: events, Metrics: record.NewMetrics("Test")}
	defer events.Flush(ctx)
	snap, err := snapshot.Take(ctx, kc, w.clk)
	if err != nil {
		w.t.Logf("snapshot: %v", err)
		return
	}
	if _, err := term.Reconcile(ctx, snap); err != nil && !strings.Contains(err.Error(), deploy.ErrKilled.Error()) {
		w.t.Logf("termination pass: %v", err)
	}
}

// next lets the world move on between two passes: the clock goes to the
// next pass's time, a tick after the last one's (in two steps of the
// emulator: evicted pods go, instances change state), then the
// controllers catch up. The real time a pass and the waits take under
// load is absorbed, not added: every case meets the deadline and the
// do-not-disrupt pod's due time at the same pass as the baseline.
func (w *world) next() {
	w.t.Helper()
	w.passAt = w.passAt.Add(tick)
	w.advanceTo(w.passAt.Add(-tick / 2))
	w.step()
	w.advanceTo(w.passAt)
	w.step()
	w.quiesce()
}

func (w *world) done() bool {
	_, err := w.e.Clients.NodeClaims.Get(context.Background(), claimA, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// finish runs fresh passes until claim A is gone.
func (w *world) finish() {
	w.t.Helper()
	for i := 0; !w.done(); i++ {
		if i == 30 {
			w.t.Fatalf("claim %s not finalized after %d passes: %s", claimA, i, w.describe())
		}
		w.pass(nil)
		w.next()
	}
}

// assertPromises checks the end state and what happened on the way: the
// instance terminated, claim and node released, no pod evicted twice, no
// pod on node A left it but by an eviction (or, past the grace period, a
// deletion), nothing running on node A when its instance was terminated,
// the healthy claim untouched, no leaked instance.
func (w *world) assertPromises() {
	w.t.Helper()
	ctx := context.Background()
	if i, _ := w.emu.Instance(w.idA); i.State != emulator.StateShuttingDown && i.State != emulator.StateTerminated {
		w.t.Errorf("instance %s of claim A is %s", w.idA, i.State)
	}
	if _, err := w.e.Clients.Core.CoreV1().Nodes().Get(ctx, w.nodeA, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		w.t.Errorf("node A %s still there (%v)", w.nodeA, err)
	}
	if nc, err := w.e.Clients.NodeClaims.Get(ctx, claimB, metav1.GetOptions{}); err != nil || nc.DeletionTimestamp != nil {
		w.t.Errorf("claim B touched (%v)", err)
	}
	if i, _ := w.emu.Instance(w.idB); i.State != emulator.StateRunning {
		w.t.Errorf("instance %s of claim B is %s", w.idB, i.State)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		w.t.Error(v)
	}
	for name, n := range w.evictions {
		if n > 1 {
			w.t.Errorf("pod %s evicted %d times", name, n)
		}
	}
	for name := range w.onA {
		at, deleted := w.deleted[name]
		// A pod is deleted (not evicted) only once less than its own
		// terminationGracePeriodSeconds is left before the claim's
		// deadline: the web pods have 1 s, the do-not-disrupt pod 30 s.
		grace := time.Second
		if name == "dnd" {
			grace = dndGrace * time.Second
		}
		switch {
		case w.evictions[name] == 1 && !deleted:
		case w.evictions[name] == 0 && deleted && !at.Before(w.deadline.Add(-grace)):
		default:
			w.t.Errorf("pod %s left node A with %d evictions, deleted %v at %s (grace period ends %s, the pod's own is %s)", name, w.evictions[name], deleted, at.Format(time.TimeOnly), w.deadline.Format(time.TimeOnly), grace)
		}
	}
	if w.evictions["dnd"] > 0 {
		w.t.Errorf("the do-not-disrupt pod was evicted")
	}
	emulatortest.AssertNoLeaks(w.t, w.emu, w.e.Clients)
}

func (w *world) describe() string {
	var b strings.Builder
	if l, err := w.e.Clients.NodeClaims.List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, nc := range l.Items {
			fmt.Fprintf(&b, "\n  claim %s deleting=%v finalizers=%v conditions=%v", nc.Name, nc.DeletionTimestamp != nil, nc.Finalizers, nc.Status.Conditions)
		}
	}
	for _, p := range w.pods() {
		fmt.Fprintf(&b, "\n  pod %s node=%s phase=%s deleting=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	}
	for _, i := range w.emu.Instances(nil) {
		fmt.Fprintf(&b, "\n  instance %s %s node=%s", i.ID, i.State, i.NodeName)
	}
	return b.String()
}

// kubeEdge passes the terminator's writes through the kill switch and
// records the evictions the API server accepted and the pods it deleted
// (as applied, even when the pass dies before it sees the answer).
type kubeEdge struct {
	next http.RoundTripper
	w    *world
	k    *deploy.KillSwitch
}

func (r *kubeEdge) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return r.next.RoundTrip(req)
	}
	return r.k.Do("kube "+req.Method+" "+req.URL.Path, func() (*http.Response, error) {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode >= 300 {
			return resp, err
		}
		parts := strings.Split(req.URL.Path, "/")
		w := r.w
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction"):
			w.evictions[parts[len(parts)-2]]++
		case req.Method == http.MethodDelete && len(parts) == 7 && parts[5] == "pods":
			w.deleted[parts[6]] = w.clk.Now()
		}
		return resp, err
	})
}

// awsEdge passes the terminator's AWS calls through the kill switch, checks
// before every TerminateInstances that nothing runs on the node any more,
// and retries each call as the functions' SDK retryer does (one call is
// one kill point, whatever the hostile emulator does to its attempts).
type awsEdge struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	w *world
	k *deploy.KillSwitch
}

func (c *awsEdge) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	return c.k.Do("aws "+action, func() (*http.Response, error) {
		if action == "TerminateInstances" {
			for key, v := range form {
				if strings.HasPrefix(key, "InstanceId.") && v[0] == c.w.idA {
					c.w.checkDrained()
				}
			}
		}
		for attempt := 1; ; attempt++ {
			r := req.Clone(req.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			resp, err := c.next.Do(r)
			if attempt >= awsconfig.MaxAttempts || req.Context().Err() != nil {
				return resp, err
			}
			if err != nil {
				continue
			}
			if resp.StatusCode < 400 {
				return resp, nil
			}
			answer, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr != nil || resp.StatusCode >= 500 || bytes.Contains(answer, []byte("Throttling")) || bytes.Contains(answer, []byte("RequestLimitExceeded")) {
				continue
			}
			resp.Body = io.NopCloser(bytes.NewReader(answer))
			return resp, nil
		}
	})
}

// checkDrained records a violation for every pod that still runs on node A
// (not leaving, not finished) when its instance is terminated: the
// instance would kill it without an eviction.
func (w *world) checkDrained() {
	l, err := w.e.Clients.Core.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + w.nodeA})
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			w.violations = append(w.violations, fmt.Sprintf("instance %s terminated while pod %s/%s still ran on node A", w.idA, p.Namespace, p.Name))
		}
	}
}

var (
	instanceRE = regexp.MustCompile(`i-[0-9a-f]{8,17}`)
	webPodRE   = regexp.MustCompile(`web-[a-z0-9]+-[a-z0-9]+`)
	nodeRE     = regexp.MustCompile(`ip-[0-9-]+\.[a-z0-9-]+\.compute\.internal`)
)

// normalize names a call without this world's names.
func (w *world) normalize(call string) string {
	call = strings.ReplaceAll(call, w.ns, "<ns>")
	call = strings.ReplaceAll(call, w.nodeA, "<node A>")
	call = strings.ReplaceAll(call, w.nodeB, "<node B>")
	return nodeRE.ReplaceAllString(webPodRE.ReplaceAllString(instanceRE.ReplaceAllString(call, "<id>"), "web-<pod>"), "<node>")
}

// change is what happens between the killed pass and the next: a pod is
// bound to node A (as kube-scheduler may do from a cache that has not seen
// the taint yet) while its kubelet runs; after that, a pod of the
// Deployment is deleted instead.
func (w *world) change() string {
	w.t.Helper()
	ctx := context.Background()
	if _, err := w.e.Clients.Core.CoreV1().Nodes().Get(ctx, w.nodeA, metav1.GetOptions{}); err == nil && w.kubeletRuns(w.nodeA) {
		w.pod("late", w.nodeA, nil, 1)
		w.quiesce()
		return "a pod is bound to node A"
	}
	for _, p := range w.pods() {
		if p.Labels["app"] == "web" && p.DeletionTimestamp == nil {
			if err := w.e.Clients.Core.CoreV1().Pods(w.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				w.t.Fatal(err)
			}
			w.quiesce()
			return "a pod of the Deployment is deleted"
		}
	}
	return "nothing"
}

// TestTerminationKilledAtEveryCall retires claim A pass by pass (taint,
// evictions the PodDisruptionBudget allows one at a time, the
// do-not-disrupt pod left until less than its own grace is left before
// the claim's terminationGracePeriod ends, then deleted, instance terminated, node and claim released) and kills, in turn, every
// pass before and after each of its external calls; between the kill and
// the next pass a pod is bound to node A (once node A is gone, a pod of
// the Deployment is deleted instead). Fresh passes then finish the job:
// the instance ends terminated, the finalizers released, no pod evicted
// twice, no pod killed by TerminateInstances without an eviction (or a
// deletion once its grace no longer fits before the deadline), nothing leaked.
func TestTerminationKilledAtEveryCall(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the calls of a real control plane's world")
	}
	var baseline [][]string
	t.Run("undisturbed", func(t *testing.T) {
		w := newWorld(t)
		var granted *int64
		for i := 0; !w.done(); i++ {
			if i == 30 {
				t.Fatalf("claim %s not finalized after %d passes: %s", claimA, i, w.describe())
			}
			k := &deploy.KillSwitch{}
			w.pass(k)
			if p, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Get(context.Background(), "dnd", metav1.GetOptions{}); err == nil && granted == nil && p.DeletionGracePeriodSeconds != nil {
				granted = p.DeletionGracePeriodSeconds
				left := w.deadline.Sub(w.clk.Now())
				// Deleted once less than its own grace was left, granted what was.
				if *granted >= dndGrace || *granted < 1 || time.Duration(*granted)*time.Second > left+time.Second {
					t.Errorf("the do-not-disrupt pod was deleted with %d s of grace, %s before the deadline; want less than its %d s, what is left", *granted, left.Round(time.Second), dndGrace)
				}
			}
			if inst, _ := w.emu.Instance(w.idA); inst.State == emulator.StateRunning && w.clk.Now().After(w.deadline.Add(tick)) {
				t.Errorf("instance %s of claim A still runs a pass after the terminationGracePeriod ended", w.idA)
			}
			var calls []string
			for _, c := range k.Calls() {
				calls = append(calls, w.normalize(c))
			}
			baseline = append(baseline, calls)
			t.Logf("pass %d: %v", i+1, calls)
			w.next()
		}
		w.assertPromises()
		if granted == nil {
			t.Error("the do-not-disrupt pod was never deleted for the terminationGracePeriod")
		}
	})
	if len(baseline) == 0 {
		t.FailNow()
	}
	// Each gap is named by its call and that call's place among all the
	// passes' calls (deploy.Landmark), so the kill lands at the same step
	// of the retirement when a busy world takes an extra pass or read on
	// the way (pods terminate, PDB status catches up, in real time).
	var all []string
	for _, calls := range baseline {
		all = append(all, calls...)
	}
	// make test kills at the first gap of each kind of write (deploy.Sample);
	// make test-kills at every one.
	var keys []string
	for _, calls := range baseline {
		for _, gap := range deploy.Gaps(calls) {
			keys = append(keys, gap.Side()+" "+deploy.CallKind(calls[gap.At-1]))
		}
	}
	sample := deploy.Sample(keys)
	offset, point := 0, -1
	for pass, calls := range baseline {
		for _, gap := range deploy.Gaps(calls) {
			if point++; !sample[point] {
				continue
			}
			at, when := gap.At, gap.Side()
			name := fmt.Sprintf("pass %d %s call %d (%s)", pass+1, when, at, calls[at-1])
			l := deploy.LandmarkOf(all, deploy.Gap{At: offset + at, After: gap.After}, nil) // the baseline is normalized already
			testworld.KillCase(t, name, 3, func(t *testing.T, diverged func(string, ...any)) {
				w := newWorld(t)
				seen := 0
				for i := 0; ; i++ {
					if i == 30 || w.done() {
						diverged("no pass made call %d of %s", l.Nth, l.Call)
					}
					k := l.Switch(w.normalize, seen)
					w.pass(k)
					seen += k.Matched()
					if k.Dead() {
						break
					}
					w.next()
				}
				t.Logf("killed %s; then %s", name, w.change())
				w.next()
				w.finish()
				w.assertPromises()
			})
		}
		offset += len(calls)
	}
}
