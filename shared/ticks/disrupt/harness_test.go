package disrupt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane/kubechaos"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/disrupt"
	"github.com/karpless/karpless/shared/ticks/provision"
)

var env *kubetest.Env

// The scenarios need kube-scheduler (pods bind to the emulator's nodes) and
// kube-controller-manager (Deployments recreate evicted pods, PDB status).
func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true, ControllerManager: true}))
}

const clusterName = "karpless-test"

// world is one scenario: a fresh emulator on the package's API server, a
// namespace, and the functions' engines.
type world struct {
	t   *testing.T
	e   *kubetest.Env
	emu *emulator.Emulator
	clk *testworld.SkewClock
	ns  string
	// killer, when set, sits in front of both edges of the disruption
	// passes' engines.
	killer *testworld.KillSwitch
	// evictions counts eviction requests per pod UID that reached the
	// API server.
	evMu      sync.Mutex
	evictions map[string]int
	// terminations record, per TerminateInstances, pods still running on
	// the instance's node (must be none).
	violations []string
	// hook, when set, sees every call the edges send (kube writes and AWS
	// calls): before it is sent and once its answer is in. A test uses it
	// to change the world at one precise point of a pass.
	hook func(desc string, answered bool)
	// tolerateNotReady gives the Deployments' pods a toleration of the
	// node.kubernetes.io/not-ready taint a new node registers with, so that
	// kube-scheduler binds them when the node appears: otherwise a pod it
	// tried on the not-ready node waits out a back-off of real seconds.
	tolerateNotReady bool
	// kubeChaos is the Kubernetes API's hostility the engines meet
	// (kubechaos.Defaults unless a test says otherwise, and why).
	kubeChaos kubechaos.Config
	chaosOnce sync.Once
	kchaos    *kubechaos.Chaos
	// warm is the memory of the warm container the passes run in; a
	// killed pass's container is a new one.
	warm app.Warm
}

// newWorld starts a scenario on the emulator's default hostility (opts
// may change it, saying why).
func newWorld(t *testing.T, opts ...testworld.Option) *world {
	t.Helper()
	e := kubetest.Need(t, env)
	w := &world{t: t, e: e, clk: &testworld.SkewClock{}, evictions: map[string]int{}}
	resetCluster(t, e)
	seed := worldSeed.Add(1) + 100
	w.kubeChaos = kubechaos.Defaults(seed)
	cfg := emulator.Config{
		ClusterName: clusterName, Clock: w.clk, Seed: seed,
		PendingDelay: 200 * time.Millisecond, JoinDelay: 200 * time.Millisecond, ReadyDelay: 200 * time.Millisecond,
		TerminateDelay: 500 * time.Millisecond, PodGracePeriodCap: 200 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	emu, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.emu = emu
	w.ns = e.Namespace(t)
	t.Cleanup(func() {
		// The emulator goes first: its kubelets would run the next
		// scenario's pods on nodes of this one. Then the pods, which
		// outlive their namespace for a while: bound to a node name a later
		// scenario's node may reuse, they would haunt it.
		cancel()
		emu.Close()
		ctx := context.Background()
		_ = e.Clients.Core.AppsV1().Deployments(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = e.Clients.Core.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		resetCluster(t, e)
	})
	if err := emu.ConnectCluster(e.Clients, "", nil); err != nil {
		t.Fatal(err)
	}
	emu.Start(ctx)
	return w
}

// chaos is the world's one fault injector, made from kubeChaos when the
// first pass builds its clients. Every client after it continues its
// draws: one made per client started each pass's draws over, so a pass met
// the faults of the last at the same requests (in one scenario, a 429 and
// its second of Retry-After on every save of the disruption state).
func (w *world) chaos() *kubechaos.Chaos {
	w.chaosOnce.Do(func() { w.kchaos = kubechaos.New(w.kubeChaos) })
	return w.kchaos
}

// worldSeed gives each scenario's emulator its own ids and addresses.
var worldSeed atomic.Uint64

// resetCluster removes every cluster-scoped Karpless object and the
// functions' bookkeeping, so scenarios do not see each other.
func resetCluster(t *testing.T, e *kubetest.Env) {
	t.Helper()
	ctx := context.Background()
	c := e.Clients
	// Finalizers go by patch (an update could conflict with a controller),
	// and the loop waits until the objects are gone: a node left behind
	// would take the next scenario's pods.
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	var left []string
	for range 100 {
		left = left[:0]
		if l, err := c.NodeClaims.List(ctx, metav1.ListOptions{}); err == nil {
			for _, nc := range l.Items {
				left = append(left, "nodeclaim/"+nc.Name)
				_, _ = c.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				_ = c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
			}
		}
		if l, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			for _, n := range l.Items {
				left = append(left, "node/"+n.Name)
				_, _ = c.Core.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				_ = c.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
		if len(left) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("reset: still present after 5s: %v", left)
	}
	_ = c.NodePools.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err := testworld.RemoveNodeClasses(ctx, c); err != nil {
		t.Fatalf("reset: %v", err)
	}
	cms := c.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
	for _, name := range []string{unavailable.ConfigMapName, pricing.ConfigMapName, disrupt.StateConfigMap} {
		_ = cms.Delete(ctx, name, metav1.DeleteOptions{})
	}
	leases := c.Core.CoordinationV1().Leases(config.DefaultNamespace)
	_ = leases.Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
	_ = leases.Delete(ctx, disrupt.LeaseName, metav1.DeleteOptions{})
}

// env builds the functions' environment, with the kill switch (if any) in
// front of the Kubernetes writes and AWS calls, and eviction accounting.
func (w *world) env(k *testworld.KillSwitch) *app.Env {
	w.t.Helper()
	restCfg := rest.CopyConfig(w.e.Cluster.RESTConfig)
	// The API's hostility sits behind the kill switch and the recorders,
	// as the network does.
	restCfg.Wrap(w.chaos().Wrap)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &watchRT{next: rt, w: w, k: k} })
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		w.t.Fatal(err)
	}
	o := deploy.Options{Identity: "disruption", MaxAttempts: 1, Clock: w.clk, Configure: func(c *config.Config) { c.WatchWindow = 0 }}
	if k == nil {
		o.Warm = &w.warm
	}
	a, err := deploy.NewEnv(w.emu, kc, o)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := a.AWS.Config.Copy()
	cfg.HTTPClient = &watchHTTP{next: cfg.HTTPClient, w: w, k: k}
	a.AWS = awsconfig.NewClients(cfg)
	return a
}

func (w *world) disrupter(a *app.Env) *disrupt.Disrupter {
	return &disrupt.Disrupter{
		Config: a.Config, Kube: a.Kube, Provisioning: app.Lend(a.Provisioner()),
		Instances: instance.NewProvider(a.AWS.EC2, a.Config.ClusterName), EC2: a.AWS.EC2,
		Templates: &launchtemplate.Provider{EC2: a.AWS.EC2, Now: a.Clock.Now},
		Clock:     a.Clock, Log: a.Log,
	}
}

// disrupt runs one disruption pass (no lease, as a tick's pass).
func (w *world) disrupt() disrupt.Summary {
	w.t.Helper()
	a := w.env(w.killer)
	s, _, err := w.disrupter(a).Pass(context.Background())
	if err != nil && !errors.Is(err, testworld.ErrKilled) {
		w.t.Logf("disruption pass: %v", err)
	}
	if testing.Verbose() {
		for _, c := range s.Commands {
			w.t.Logf("  %s %s %s %v -> %v ($%.4f/h -> $%.4f/h) %s", c.Action, c.Method, c.Decision, c.Candidates, c.Replacements, c.PriceBefore, c.PriceAfter, c.Why)
		}
		if len(s.Blocked)+len(s.Unconsolidatable) > 0 {
			w.t.Logf("  blocked %v unconsolidatable %v", s.Blocked, s.Unconsolidatable)
		}
		if len(s.Expired)+len(s.Untainted)+len(s.Garbage.Instances)+len(s.Garbage.NodeClaims)+len(s.Garbage.Nodes) > 0 {
			w.t.Logf("  expired %v untainted %v garbage %+v", s.Expired, s.Untainted, s.Garbage)
		}
	}
	return s
}

// provision runs one provisioner pass.
func (w *world) provision() {
	w.t.Helper()
	if _, err := w.env(nil).Provisioner().Pass(context.Background()); err != nil && !errors.Is(err, testworld.ErrKilled) {
		w.t.Logf("provisioner pass: %v", err)
	}
}

// apply creates the default node class and a NodePool (mutated).
func (w *world) apply(mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	w.t.Helper()
	np := deploy.DefaultNodePool("default", karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand},
	}, karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.InstanceFamilyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "c5", "m6i", "c6i", "r5"},
	}, karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"},
	})
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("30s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	if mutate != nil {
		mutate(np)
	}
	if err := deploy.Apply(context.Background(), w.e.Clients, deploy.DefaultNodeClass(clusterName, ""), np); err != nil {
		w.t.Fatal(err)
	}
	return np
}

// deployment creates a Deployment of n pods requesting cpu each.
func (w *world) deployment(name string, n int32, cpu string, mutate func(*corev1.PodSpec, map[string]string)) {
	w.t.Helper()
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: new(int64(1)),
		Containers: []corev1.Container{{Name: "app", Image: "registry.local/" + name + ":1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
	}
	if w.tolerateNotReady {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	if mutate != nil {
		mutate(&spec, labels)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) scale(name string, n int32) {
	w.t.Helper()
	ctx := context.Background()
	d, err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	d.Spec.Replicas = &n
	if _, err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) pods() []corev1.Pod {
	l, err := w.e.Clients.Core.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

func (w *world) claims() []karpv1.NodeClaim {
	l, err := w.e.Clients.NodeClaims.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// running reports whether every pod of the namespace (want of them) runs
// on a node and nothing is being deleted.
func (w *world) running(want int) bool {
	ps := w.pods()
	n := 0
	for _, p := range ps {
		if p.DeletionTimestamp != nil {
			return false
		}
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			n++
		}
	}
	return n == want && len(ps) == want
}

// converge runs provisioner passes until want pods run. It first waits
// for kube-scheduler to mark every pending pod unschedulable, so that the
// first pass sees them all in one batch (the layout is then the same every
// run).
func (w *world) converge(want int, timeout time.Duration) {
	w.t.Helper()
	settled := time.Now().Add(10 * time.Second)
	for time.Now().Before(settled) {
		n, pending := 0, 0
		for _, p := range w.pods() {
			if p.Spec.NodeName == "" {
				pending++
				if podutil.IsUnschedulable(&p) {
					n++
				}
			}
		}
		if len(w.pods()) >= want && n == pending {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	deadline := time.Now().Add(timeout)
	var moved time.Duration
	rounds := testworld.RoundsBackoff(settleSleep)
	for !w.running(want) {
		if time.Now().After(deadline) {
			w.t.Fatalf("pods not running after %s: %s", timeout, w.describe())
		}
		w.provision()
		w.unstick()
		// The hostile world's waits (IAM propagating a new instance
		// profile, EC2 listing a new instance late) pass on the clock.
		if moved < maxConvergeSkew {
			w.clk.Advance(10 * time.Second)
			w.step(time.Second)
			moved += 11 * time.Second
		} else {
			w.step(0)
		}
		time.Sleep(rounds.Step())
	}
	// Let the claims become Initialized (lifecycle runs in the pass).
	for range 3 {
		if w.initialized() {
			return
		}
		w.provision()
	}
}

// initialized reports whether every NodeClaim is Initialized.
func (w *world) initialized() bool {
	for _, nc := range w.claims() {
		if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
			return false
		}
	}
	return true
}

// unstick deletes the pending pods kube-scheduler tried while there was no
// node at all, once every node is Ready, so that their controllers make new
// ones: the scheduler keeps such a pod aside for seconds of real time after
// a node appears, and tries a new pod at once.
func (w *world) unstick() {
	w.t.Helper()
	ctx := context.Background()
	nodes, err := w.e.Clients.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		return
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			return
		}
	}
	for _, p := range w.pods() {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || len(p.OwnerReferences) == 0 {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.HasPrefix(c.Message, "no nodes available") {
				_ = w.e.Clients.Core.CoreV1().Pods(w.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID}})
			}
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// maxConvergeSkew bounds how far one converge moves the clock.
const maxConvergeSkew = time.Minute

// settleSleep is the real time between two rounds of passes: kube-scheduler,
// kube-controller-manager and the emulator's kubelets (every 200 ms) act
// in it; everything measured on the clock is moved on instead.
const settleSleep = 100 * time.Millisecond

// maxSettleSkew bounds how far one settle moves the clock: NodeClaims
// carry creation timestamps of the real API server, so a clock far ahead
// would make new claims look older than the registration TTL (15 min).
const maxSettleSkew = 5 * time.Minute

// settle alternates disruption and provisioner passes, moving the clock on
// by step each time (5 minutes at most in all), until until() holds.
func (w *world) settle(step time.Duration, timeout time.Duration, until func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	var moved time.Duration
	rounds := testworld.RoundsBackoff(settleSleep)
	for !until() {
		if time.Now().After(deadline) {
			w.t.Fatalf("did not settle in %s: %s", timeout, w.describe())
		}
		if moved+step+time.Second <= maxSettleSkew {
			w.clk.Advance(step)
			w.step(time.Second)
			moved += step + time.Second
		} else {
			w.step(0)
		}
		w.disrupt()
		w.provision()
		time.Sleep(rounds.Step())
	}
}

// step lets the emulator act on the clock now (it also does every 200 ms
// of real time): instances change state, nodes register, the kubelets run
// and remove pods; with tick, a second step that much of the clock later
// (a node registered by the first is Ready in the second).
func (w *world) step(tick time.Duration) {
	w.t.Helper()
	if err := w.emu.Step(context.Background()); err != nil {
		w.t.Logf("emulator step: %v", err)
	}
	if tick <= 0 {
		return
	}
	w.clk.Advance(tick)
	if err := w.emu.Step(context.Background()); err != nil {
		w.t.Logf("emulator step: %v", err)
	}
}

// cost is the $/h of the instances that are running or starting.
func (w *world) cost() float64 {
	total := 0.0
	for _, i := range w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateRunning
	}) {
		if i.CapacityType == "spot" {
			total += w.emu.SpotPrice(i.InstanceType, i.Zone)
		} else if p, err := w.emu.OnDemandPrice(i.InstanceType); err == nil {
			total += p
		}
	}
	return total
}

func (w *world) live() []emulator.Instance {
	return w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateRunning
	})
}

// describe is the cluster in one line per object, for failures.
func (w *world) describe() string {
	var b strings.Builder
	for _, nc := range w.claims() {
		fmt.Fprintf(&b, "\n  claim %s type=%s init=%v deleting=%v cmd=%q repl=%q conds=%s", nc.Name, nc.Labels[wellknown.InstanceTypeLabel],
			nc.IsTrue(karpv1.ConditionTypeInitialized), nc.DeletionTimestamp != nil,
			nc.Annotations[disruption.CommandAnnotation], nc.Annotations[disruption.ReplacementAnnotation], conds(&nc))
	}
	if l, err := w.e.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			fmt.Fprintf(&b, "\n  node %s provider=%s deleting=%v taints=%v", n.Name, n.Spec.ProviderID, n.DeletionTimestamp != nil, n.Spec.Taints)
		}
	}
	for _, p := range w.pods() {
		fmt.Fprintf(&b, "\n  pod %s node=%s phase=%s deleting=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	}
	for _, i := range w.emu.Instances(nil) {
		fmt.Fprintf(&b, "\n  instance %s %s %s %s", i.ID, i.InstanceType, i.State, i.Tags[wellknown.NodeClaimTagKey])
	}
	return b.String()
}

func conds(nc *karpv1.NodeClaim) string {
	var out []string
	for _, c := range nc.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			out = append(out, c.Type)
		}
	}
	return strings.Join(out, ",")
}

// assertInvariants checks the crash-safety promises over the whole run: no
// pod evicted twice, no instance terminated while its node still had pods
// to drain, no leaked instance.
func (w *world) assertInvariants() {
	w.t.Helper()
	w.evMu.Lock()
	for uid, n := range w.evictions {
		if n > 1 {
			w.t.Errorf("pod %s evicted %d times", uid, n)
		}
	}
	for _, v := range w.violations {
		w.t.Error(v)
	}
	w.evMu.Unlock()
	leaks, err := w.emu.Leaks(context.Background(), w.e.Clients)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, i := range leaks {
		w.t.Errorf("leaked instance %s (%s) tags %v", i.ID, i.InstanceType, i.Tags)
	}
}

// watchRT is the Kubernetes edge: it counts evictions and applies the kill
// switch to writes (reads change nothing).
type watchRT struct {
	next http.RoundTripper
	w    *world
	k    *testworld.KillSwitch
}

func (r *watchRT) RoundTrip(req *http.Request) (*http.Response, error) {
	desc := "kube " + req.Method + " " + req.URL.Path
	if req.Method == http.MethodGet {
		// Reads are no kill points, but a test may change the world
		// before one.
		if hook := r.w.hook; hook != nil {
			hook(desc, false)
		}
		return r.next.RoundTrip(req)
	}
	return r.w.send(r.k, desc, func() (*http.Response, error) {
		resp, err := r.next.RoundTrip(req)
		// Counted as applied, even when the pass dies before it sees the
		// answer (a kill after the call).
		if err == nil && resp != nil && resp.StatusCode < 300 && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction") {
			parts := strings.Split(req.URL.Path, "/")
			key := parts[len(parts)-4] + "/" + parts[len(parts)-2]
			r.w.evMu.Lock()
			r.w.evictions[key]++
			r.w.evMu.Unlock()
		}
		return resp, err
	})
}

// watchHTTP is the AWS edge: kill switch, and before every
// TerminateInstances a check that the instances' nodes have no pods left
// to drain.
type watchHTTP struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	w *world
	k *testworld.KillSwitch
}

func (c *watchHTTP) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	if action == "TerminateInstances" {
		for k, v := range form {
			if strings.HasPrefix(k, "InstanceId.") {
				c.w.checkDrained(v[0])
			}
		}
	}
	return c.w.send(c.k, "aws "+action, func() (*http.Response, error) { return retrying(c.next, req, body) })
}

// send passes one call through the kill switch and the hook.
func (w *world) send(k *testworld.KillSwitch, desc string, do func() (*http.Response, error)) (*http.Response, error) {
	return k.Do(desc, func() (*http.Response, error) {
		hook := w.hook
		if hook != nil {
			hook(desc, false)
		}
		resp, err := do()
		if hook != nil {
			hook(desc, true)
		}
		return resp, err
	})
}

// retrying sends one AWS call as the functions' SDK retryer does (up to
// awsconfig.MaxAttempts attempts on throttles, server errors and lost
// answers), at once instead of after a backoff. The engines run with the
// SDK's own retries off (MaxAttempts 1), so that every kill point is one
// call of the engine, whatever the hostile emulator did to its attempts.
func retrying(next interface {
	Do(*http.Request) (*http.Response, error)
}, req *http.Request, body []byte) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		r := req.Clone(req.Context())
		if req.Body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		resp, err := next.Do(r)
		if attempt >= awsconfig.MaxAttempts || req.Context().Err() != nil {
			return resp, err
		}
		if err != nil {
			continue // a lost answer (connection reset): the SDK retries it
		}
		if resp.StatusCode < 400 {
			return resp, nil
		}
		answer, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			continue
		}
		if resp.StatusCode >= 500 || bytes.Contains(answer, []byte("Throttling")) || bytes.Contains(answer, []byte("RequestLimitExceeded")) {
			continue
		}
		resp.Body = io.NopCloser(bytes.NewReader(answer))
		return resp, nil
	}
}

// checkDrained records a violation if the instance's node still hosts a
// pod that the drain should have moved (not a DaemonSet pod, not
// terminating, not finished).
func (w *world) checkDrained(id string) {
	i, ok := w.emu.Instance(id)
	if !ok || i.NodeName == "" || i.State != emulator.StateRunning {
		return
	}
	l, err := w.e.Clients.Core.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + i.NodeName})
	if err != nil {
		return
	}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			w.evMu.Lock()
			w.violations = append(w.violations, fmt.Sprintf("instance %s terminated while pod %s/%s still ran on node %s", id, p.Namespace, p.Name, i.NodeName))
			w.evMu.Unlock()
		}
	}
}
