// Package testworld gives scenario tests a world: the package's local API
// server, a fresh AWS emulator whose instances join it, and the engines.
package testworld

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane/kubechaos"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// Cluster is the emulated cluster's name.
const Cluster = "karpless-test"

// World is one scenario: an emulator, the engines and a namespace.
type World struct {
	T   testing.TB
	E   *kubetest.Env
	Emu *emulator.Emulator
	App *app.Env
	NS  string
	// Clock is what the engines and the emulator run on: the real time plus
	// what the test skipped (Advance), so that waits of the hostile world
	// (IAM propagation, eventual consistency) take no real time.
	Clock *SkewClock
	// Chaos is the Kubernetes API's hostility the engines' clients meet;
	// its Stats say how often it answered in their place.
	Chaos *kubechaos.Chaos
	// Warm is the memory of the warm container App's invocations run in;
	// envs a test builds for invocations that are not killed share it.
	Warm *app.Warm

	logs *logTail
}

// SkewClock is the wall clock plus an offset the test moves forward, so
// that waits measured in seconds or minutes take no real time while
// everything else runs for real. Kubernetes stamps objects with the real
// time, so a test keeps the offset to a few minutes (MaxSkew): beyond,
// new NodeClaims would look older than the registration timeout.
type SkewClock struct {
	clock.RealClock
	mu  sync.Mutex
	off time.Duration
}

// MaxSkew is the most a SkewClock runs ahead of the API server's clock.
const MaxSkew = 5 * time.Minute

func (c *SkewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *SkewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Advance moves the clock on by d.
func (c *SkewClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// Skew is how far the clock runs ahead of the real one.
func (c *SkewClock) Skew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

// Option adjusts a world's emulator.
type Option func(*emulator.Config)

// WithHostility replaces the emulator's hostility. A test does so only to
// reach one specific state, and says why next to the call.
func WithHostility(h emulator.Hostility) Option {
	return func(c *emulator.Config) { c.Hostility = &h }
}

// New starts a world on env's API server, with short instance delays and
// the emulator's default hostility, and registers a cleanup that leaves the
// API server empty for the next test.
func New(t testing.TB, env *kubetest.Env, identity string, opts ...Option) *World {
	t.Helper()
	e := kubetest.Need(t, env)
	clk := &SkewClock{}
	cfg := emulator.Config{
		ClusterName: Cluster, Clock: clk,
		PendingDelay: 300 * time.Millisecond, JoinDelay: 300 * time.Millisecond, ReadyDelay: 300 * time.Millisecond,
		TerminateDelay: time.Second, PodGracePeriodCap: time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	emu, err := emulator.New(cfg)
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
	// The engines' Kubernetes clients meet the API's hostility too
	// (conflicts, 429s, watches ended with 410, expired continue tokens);
	// the test's own clients (w.E.Clients) do not.
	restCfg := rest.CopyConfig(e.Cluster.RESTConfig)
	chaos := kubechaos.New(kubechaos.Defaults(emu.Config().Seed))
	restCfg.Wrap(chaos.Wrap)
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	warm := &app.Warm{}
	w := &World{T: t, E: e, Emu: emu, NS: e.Namespace(t), Clock: clk, Chaos: chaos, Warm: warm, logs: &logTail{}}
	// Runs after the world's cleanup (registered below): what the
	// functions logged, when anything failed, that cleanup included.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the functions' last log lines (at most %d):\n%s", logTailLines, w.logs)
		}
	})
	a, err := deploy.NewEnv(emu, kc, deploy.Options{Identity: identity, Clock: clk, Warm: warm, Log: w.Logger(identity)})
	if err != nil {
		t.Fatal(err)
	}
	w.App = a
	t.Cleanup(w.cleanup)
	return w
}

// Apply creates the default node class and the pools.
func (w *World) Apply(pools ...*karpv1.NodePool) {
	w.T.Helper()
	if err := deploy.Apply(context.Background(), w.E.Clients, deploy.DefaultNodeClass(Cluster, ""), pools...); err != nil {
		w.T.Fatal(err)
	}
}

// Pods creates n pods requesting cpu (and 512Mi), named prefix-i.
func (w *World) Pods(prefix string, n int, cpu string, mutate func(*corev1.Pod)) []*corev1.Pod {
	w.T.Helper()
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: w.NS, Labels: map[string]string{"app": prefix}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
		}
		if mutate != nil {
			mutate(p)
		}
		created, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			w.T.Fatal(err)
		}
		out = append(out, created)
	}
	return out
}

// ListPods returns the namespace's pods.
func (w *World) ListPods() []corev1.Pod {
	w.T.Helper()
	l, err := w.E.Clients.Core.CoreV1().Pods(w.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	return l.Items
}

// WaitUnschedulable waits until kube-scheduler marked n pods unschedulable.
func (w *World) WaitUnschedulable(n int) {
	w.T.Helper()
	// kube-scheduler marks them; on a loaded machine it can take a while.
	// The timeout only bounds a world that is stuck.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		c := 0
		for _, p := range w.ListPods() {
			if podutil.IsUnschedulable(&p) {
				c++
			}
		}
		return c >= n, nil
	})
	if err != nil {
		w.T.Fatalf("pods not marked unschedulable: %v", err)
	}
}

// Converge runs provisioner passes (and every between, if set) until every
// pod of the namespace runs.
func (w *World) Converge(timeout time.Duration, every func()) {
	w.T.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	// Rounds back off from 300 ms to a second while the world waits on
	// its real-time actors (kube-scheduler, the emulator's kubelets):
	// every pass lists the whole cluster.
	rounds := RoundsBackoff(300 * time.Millisecond)
	for {
		if _, err := w.App.Provisioner().Pass(ctx); err != nil {
			w.T.Logf("pass: %v", err)
		}
		if every != nil {
			every()
		}
		running, all := 0, w.ListPods()
		for _, p := range all {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running == len(all) {
			// The claims whose nodes run the pods are initialized, and
			// their instances tagged, by the passes that follow.
			for range 2 {
				if _, err := w.App.Provisioner().Pass(ctx); err != nil {
					w.T.Logf("pass: %v", err)
				}
			}
			return
		}
		// The hostile world's waits (an instance profile IAM has not
		// propagated, an instance EC2 does not list yet) pass faster.
		w.Skip(2 * time.Second)
		if time.Now().After(deadline) {
			var why []string
			for _, p := range all {
				if p.Status.Phase == corev1.PodRunning {
					continue
				}
				reason := "not scheduled yet"
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						reason = c.Message
					}
				}
				if p.Spec.NodeName != "" {
					reason = "bound to " + p.Spec.NodeName + ", not started (" + w.nodeOwner(p.Spec.NodeName) + ")"
				}
				why = append(why, p.Name+": "+reason)
			}
			w.T.Fatalf("%d of %d pods running after %s: %v", running, len(all), timeout, why)
		}
		time.Sleep(rounds.Step())
	}
}

// RoundsBackoff paces a loop of passes that waits on the real-time actors:
// first, then twice as long each round, up to a second. Nothing a test
// asserts is measured in these pauses (what is measured on the clock is
// moved on instead).
func RoundsBackoff(first time.Duration) *wait.Backoff {
	return &wait.Backoff{Duration: first, Factor: 2, Cap: time.Second, Steps: math.MaxInt32}
}

// Skip moves the world's clock on by d, up to MaxSkew in all.
func (w *World) Skip(d time.Duration) {
	if w.Clock.Skew()+d <= MaxSkew {
		w.Clock.Advance(d)
	}
}

// nodeOwner says which of this world's instances has a node name, if any.
func (w *World) nodeOwner(node string) string {
	var owners []string
	for _, i := range w.Emu.Instances(nil) {
		if i.PrivateDNSName == node || i.NodeName == node {
			owners = append(owners, i.ID+" "+i.State)
		}
	}
	if len(owners) == 0 {
		return "no instance of this test's emulator"
	}
	return "instance " + strings.Join(owners, ", ")
}

// Deployment creates a Deployment of replicas pods requesting cpu; pods
// evicted from a node come back through it (needs kube-controller-manager).
func (w *World) Deployment(name string, replicas int32, cpu string, mutate func(*appsv1.Deployment)) {
	w.T.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(1)), Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
			},
		},
	}
	if mutate != nil {
		mutate(d)
	}
	if _, err := w.E.Clients.Core.AppsV1().Deployments(w.NS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		w.T.Fatal(err)
	}
}

// Claims lists the NodeClaims.
func (w *World) Claims() []karpv1.NodeClaim {
	w.T.Helper()
	l, err := w.E.Clients.NodeClaims.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	return l.Items
}

// Instance is EC2's own answer for one instance, asked as an operator
// would. EC2 lists a new instance late (Config.DescribeLag plus up to
// Hostility.DescribeLagMax on the clock), so one InvalidInstanceID.NotFound
// is no answer: the clock moves on and the question is asked again, for as
// long as the lag can last and a little more in real time.
func (w *World) Instance(id string) ec2types.Instance {
	w.T.Helper()
	cfg, err := w.Emu.AWSConfig("operator", 10)
	if err != nil {
		w.T.Fatal(err)
	}
	api := ec2.NewFromConfig(cfg)
	lag := w.Emu.Config().DescribeLag + w.Emu.Config().Hostility.DescribeLagMax
	deadline := time.Now().Add(lag + 30*time.Second)
	for {
		out, err := api.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		switch {
		case err == nil && len(out.Reservations) == 1 && len(out.Reservations[0].Instances) == 1:
			return out.Reservations[0].Instances[0]
		case err != nil && awserr.Code(err) != "InvalidInstanceID.NotFound":
			w.T.Fatalf("describe instance %s: %v", id, err)
		case time.Now().After(deadline):
			w.T.Fatalf("instance %s: EC2 still does not list it after %s on the clock: %v", id, lag, err)
		}
		w.Skip(time.Second)
		time.Sleep(50 * time.Millisecond)
	}
}

// AssertNoLeaks checks that every live instance belongs to exactly one
// NodeClaim and each launched NodeClaim's instance is alive.
func (w *World) AssertNoLeaks() {
	w.T.Helper()
	byID := map[string]string{}
	for _, nc := range w.Claims() {
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			if other, dup := byID[id]; dup {
				w.T.Errorf("instance %s claimed by %s and %s", id, other, nc.Name)
			}
			byID[id] = nc.Name
		}
	}
	live := w.Emu.Instances(func(i emulator.Instance) bool { return i.State == "pending" || i.State == "running" })
	for _, i := range live {
		if _, ok := byID[i.ID]; !ok {
			w.T.Errorf("leaked instance %s (%s, tags %v)", i.ID, i.InstanceType, i.Tags)
		}
	}
}

// cleanup leaves the API server as the next test expects it: no pods, no
// Karpenter objects, no Karpless state. No kube-controller-manager runs in
// these tests, so nothing else would remove them.
func (w *World) cleanup() {
	// The emulator stops first: its kubelets would otherwise register again
	// the nodes deleted below, and the next test's scheduler would bind pods
	// to nodes that no emulator runs.
	_ = w.Emu.Close()
	ctx := context.Background()
	c := w.E.Clients
	// Controllers first (when kube-controller-manager runs), or they would
	// recreate the pods deleted below.
	_ = c.Core.AppsV1().Deployments(w.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = c.Core.AppsV1().ReplicaSets(w.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = c.Core.CoreV1().Pods(w.NS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{})
	// Finalizers go by patch, which cannot conflict with a controller's
	// update, and the loop waits until the objects are gone: a node left
	// behind would take the next test's pods and never run them.
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	var left []string
	for range 50 {
		left = left[:0]
		claims, _ := c.NodeClaims.List(ctx, metav1.ListOptions{})
		for _, nc := range claims.Items {
			left = append(left, "nodeclaim/"+nc.Name)
			_, _ = c.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
			_ = c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
		}
		nodes, _ := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			left = append(left, "node/"+n.Name)
			_, _ = c.Core.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
			_ = c.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
		if len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		w.T.Errorf("cleanup: still present after 5s: %v", left)
	}
	_ = c.NodePools.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err := RemoveNodeClasses(ctx, c); err != nil {
		w.T.Errorf("cleanup: %v", err)
	}
	cms := c.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
	_ = cms.Delete(ctx, unavailable.ConfigMapName, metav1.DeleteOptions{})
	_ = cms.Delete(ctx, pricing.ConfigMapName, metav1.DeleteOptions{})
	_ = c.Core.CoordinationV1().Leases(config.DefaultNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// AWSBackoff is the time the SDK's backoff took in calls: from each
// throttled (429, RequestLimitExceeded, ThrottlingException) or failed
// (5xx) answer to the next call of the same action. Reaction tests take it
// off their figures as a wait the world imposed.
func AWSBackoff(calls []emulator.Call) time.Duration {
	var d time.Duration
	for i, c := range calls {
		if c.Status < 500 && c.Status != 429 && c.Code != "RequestLimitExceeded" && c.Code != "ThrottlingException" {
			continue
		}
		for _, next := range calls[i+1:] {
			if next.Service == c.Service && next.Action == c.Action {
				d += next.At.Sub(c.At)
				break
			}
		}
	}
	return d
}
