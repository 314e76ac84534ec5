package orchestrate_test

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
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/awsconfig"
	"github.com/karpless/karpless/shared/config"
	"github.com/karpless/karpless/shared/disruption"
	"github.com/karpless/karpless/shared/disruption/orchestrate"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/instance"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/kubetest"
	"github.com/karpless/karpless/shared/launchtemplate"
	"github.com/karpless/karpless/shared/lifecycle"
	"github.com/karpless/karpless/shared/localaws"
	"github.com/karpless/karpless/shared/localrun"
	"github.com/karpless/karpless/shared/localrun/localruntest"
	"github.com/karpless/karpless/shared/podutil"
	"github.com/karpless/karpless/shared/pricing"
	"github.com/karpless/karpless/shared/provisioning"
	"github.com/karpless/karpless/shared/wellknown"
)

var env *kubetest.Env

// The scenarios need kube-scheduler (pods bind to the emulator's nodes) and
// kube-controller-manager (Deployments recreate evicted pods, PDB status).
func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true, ControllerManager: true}))
}

// skewClock is the wall clock plus an offset the test moves forward, so
// that waits measured in minutes (consolidateAfter, validation delays,
// timeouts) take no real time while everything else runs for real.
type skewClock struct {
	clock.RealClock
	mu  sync.Mutex
	off time.Duration
}

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *skewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *skewClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

const clusterName = "karpless-test"

// world is one scenario: a fresh emulator on the package's API server, a
// namespace, and the functions' engines.
type world struct {
	t   *testing.T
	e   *kubetest.Env
	emu *localaws.Emulator
	clk *skewClock
	ns  string
	// killer, when set, sits in front of both edges of the disruption
	// passes' engines.
	killer *localruntest.KillSwitch
	// evictions counts eviction requests per pod UID that reached the
	// API server.
	evMu      sync.Mutex
	evictions map[string]int
	// terminations record, per TerminateInstances, pods still running on
	// the instance's node (must be none).
	violations []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	e := kubetest.Need(t, env)
	w := &world{t: t, e: e, clk: &skewClock{}, evictions: map[string]int{}}
	resetCluster(t, e)
	seed := worldSeed.Add(1) + 100
	emu, err := localaws.New(localaws.Config{
		ClusterName: clusterName, Clock: w.clk, Seed: seed,
		PendingDelay: 200 * time.Millisecond, JoinDelay: 200 * time.Millisecond, ReadyDelay: 200 * time.Millisecond,
		TerminateDelay: 500 * time.Millisecond, PodGracePeriodCap: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	if err := emu.ConnectCluster(e.Clients, "", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	emu.Start(ctx)
	w.emu = emu
	w.ns = e.Namespace(t)
	t.Cleanup(func() {
		// Pods outlive their namespace for a while; bound to a node name
		// a later scenario's node may reuse, they would haunt it.
		ctx := context.Background()
		_ = e.Clients.Core.AppsV1().Deployments(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = e.Clients.Core.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		resetCluster(t, e)
	})
	return w
}

// worldSeed gives each scenario's emulator its own ids and addresses.
var worldSeed atomic.Uint64

// resetCluster removes every cluster-scoped Karpless object and the
// functions' bookkeeping, so scenarios do not see each other.
func resetCluster(t *testing.T, e *kubetest.Env) {
	ctx := context.Background()
	c := e.Clients
	if l, err := c.NodeClaims.List(ctx, metav1.ListOptions{}); err == nil {
		for _, nc := range l.Items {
			nc.Finalizers = nil
			_, _ = c.NodeClaims.Update(ctx, &nc, metav1.UpdateOptions{})
			_ = c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
		}
	}
	if l, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			n.Finalizers = nil
			_, _ = c.Core.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
			_ = c.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}
	_ = c.NodePools.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = c.EC2NodeClasses.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	cms := c.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
	for _, name := range []string{ice.ConfigMapName, pricing.ConfigMapName, orchestrate.StateConfigMap} {
		_ = cms.Delete(ctx, name, metav1.DeleteOptions{})
	}
	leases := c.Core.CoordinationV1().Leases(config.DefaultNamespace)
	_ = leases.Delete(ctx, provisioning.LeaseName, metav1.DeleteOptions{})
	_ = leases.Delete(ctx, orchestrate.LeaseName, metav1.DeleteOptions{})
}

// env builds the functions' environment, with the kill switch (if any) in
// front of the Kubernetes writes and AWS calls, and eviction accounting.
func (w *world) env(k *localruntest.KillSwitch) *app.Env {
	w.t.Helper()
	restCfg := rest.CopyConfig(w.e.Cluster.RESTConfig)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &watchRT{next: rt, w: w, k: k} })
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		w.t.Fatal(err)
	}
	a, err := localrun.NewEnv(w.emu, kc, localrun.Options{Identity: "disruption", MaxAttempts: 1, Clock: w.clk, Configure: func(c *config.Config) { c.WatchWindow = 0 }})
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := a.AWS.Config.Copy()
	cfg.HTTPClient = &watchHTTP{next: cfg.HTTPClient, w: w, k: k}
	a.AWS = awsconfig.NewClients(cfg)
	return a
}

func (w *world) disrupter(a *app.Env) *orchestrate.Disrupter {
	return &orchestrate.Disrupter{
		Config: a.Config, Kube: a.Kube, Provisioner: a.Provisioner(),
		Instances: instance.NewProvider(a.AWS.EC2, a.Config.ClusterName), EC2: a.AWS.EC2,
		Templates: &launchtemplate.Provider{EC2: a.AWS.EC2, Now: a.Clock.Now},
		Clock:     a.Clock, Log: a.Log,
	}
}

// disrupt runs one disruption pass (no lease, as a tick's pass).
func (w *world) disrupt() orchestrate.Summary {
	w.t.Helper()
	a := w.env(w.killer)
	s, _, err := w.disrupter(a).Pass(context.Background())
	if err != nil && !errors.Is(err, localruntest.ErrKilled) {
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
	if _, err := w.env(nil).Provisioner().Pass(context.Background()); err != nil && !errors.Is(err, localruntest.ErrKilled) {
		w.t.Logf("provisioner pass: %v", err)
	}
}

// apply creates the default node class and a NodePool (mutated).
func (w *world) apply(mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	w.t.Helper()
	np := localrun.DefaultNodePool("default", karpv1.NodeSelectorRequirementWithMinValues{
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
	if err := localrun.Apply(context.Background(), w.e.Clients, localrun.DefaultNodeClass(clusterName, ""), np); err != nil {
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
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(timeout)
	for !w.running(want) {
		if time.Now().After(deadline) {
			w.t.Fatalf("pods not running after %s: %s", timeout, w.describe())
		}
		w.provision()
		time.Sleep(300 * time.Millisecond)
	}
	// Let the claims become Initialized (lifecycle runs in the pass).
	for range 3 {
		w.provision()
	}
}

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
	for !until() {
		if time.Now().After(deadline) {
			w.t.Fatalf("did not settle in %s: %s", timeout, w.describe())
		}
		if moved+step <= maxSettleSkew {
			w.clk.Advance(step)
			moved += step
		}
		w.disrupt()
		w.provision()
		time.Sleep(250 * time.Millisecond)
	}
}

// cost is the $/h of the instances that are running or starting.
func (w *world) cost() float64 {
	total := 0.0
	for _, i := range w.emu.Instances(func(i localaws.Instance) bool {
		return i.State == localaws.StatePending || i.State == localaws.StateRunning
	}) {
		if i.CapacityType == "spot" {
			total += w.emu.SpotPrice(i.InstanceType, i.Zone)
		} else if p, err := w.emu.OnDemandPrice(i.InstanceType); err == nil {
			total += p
		}
	}
	return total
}

func (w *world) live() []localaws.Instance {
	return w.emu.Instances(func(i localaws.Instance) bool {
		return i.State == localaws.StatePending || i.State == localaws.StateRunning
	})
}

// describe is the cluster in one line per object, for failures.
func (w *world) describe() string {
	var b strings.Builder
	for _, nc := range w.claims() {
		fmt.Fprintf(&b, "\n  claim %s type=%s init=%v deleting=%v cmd=%q repl=%q conds=%s", nc.Name, nc.Labels[wellknown.InstanceTypeLabel],
			lifecycle.IsTrue(&nc, karpv1.ConditionTypeInitialized), nc.DeletionTimestamp != nil,
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
	k    *localruntest.KillSwitch
}

func (r *watchRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return r.next.RoundTrip(req)
	}
	desc := "kube " + req.Method + " " + req.URL.Path
	resp, err := r.k.Do(desc, func() (*http.Response, error) { return r.next.RoundTrip(req) })
	if err == nil && resp != nil && resp.StatusCode < 300 && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction") {
		parts := strings.Split(req.URL.Path, "/")
		key := parts[len(parts)-4] + "/" + parts[len(parts)-2]
		r.w.evMu.Lock()
		r.w.evictions[key]++
		r.w.evMu.Unlock()
	}
	return resp, err
}

// watchHTTP is the AWS edge: kill switch, and before every
// TerminateInstances a check that the instances' nodes have no pods left
// to drain.
type watchHTTP struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	w *world
	k *localruntest.KillSwitch
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
	return c.k.Do("aws "+action, func() (*http.Response, error) { return c.next.Do(req) })
}

// checkDrained records a violation if the instance's node still hosts a
// pod that the drain should have moved (not a DaemonSet pod, not
// terminating, not finished).
func (w *world) checkDrained(id string) {
	i, ok := w.emu.Instance(id)
	if !ok || i.NodeName == "" || i.State != localaws.StateRunning {
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
