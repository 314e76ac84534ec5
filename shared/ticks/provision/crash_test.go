package provision_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// killer stands for the Lambda runtime stopping an invocation at a call
// (testworld.KillSwitch, or armedKill).
type killer interface {
	Do(desc string, send func() (*http.Response, error)) (*http.Response, error)
}

type killRT struct {
	next http.RoundTripper
	k    killer
}

func (r killRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return r.next.RoundTrip(req) // Kubernetes reads change nothing
	}
	return r.k.Do("kube "+req.Method+" "+req.URL.Path, func() (*http.Response, error) { return r.next.RoundTrip(req) })
}

type killHTTP struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	k killer
}

func (c killHTTP) Do(req *http.Request) (*http.Response, error) {
	return c.k.Do(awsCallName(req), func() (*http.Response, error) { return c.next.Do(req) })
}

// awsCallName names an SDK request by its action: the X-Amz-Target of JSON
// services, the form's Action of query ones (EC2, IAM), else the path.
func awsCallName(req *http.Request) string {
	if t := req.Header.Get("X-Amz-Target"); t != "" {
		return "aws " + t
	}
	if req.Body != nil && req.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		if q, qerr := url.ParseQuery(string(body)); err == nil && qerr == nil && q.Get("Action") != "" {
			return "aws " + q.Get("Action")
		}
	}
	return "aws " + req.URL.Path
}

// killableEnv is the provisioner's environment with both edges behind k
// (nil: nothing killed), on clk. AWS calls are retried as in production
// (awsconfig.MaxAttempts), with backoffs of milliseconds: the emulator's
// throttling bursts count calls, not time. Each retry is a call of its own
// for the switch.
func killableEnv(t *testing.T, w *testworld.World, c crashWorld, k *testworld.KillSwitch) *app.Env {
	t.Helper()
	if k == nil {
		return killableEnvWith(t, w, c, nil, nil)
	}
	return killableEnvWith(t, w, c, k, nil)
}

// killableEnvWith is killableEnv with any killer and settings adjusted by
// configure (no watch window unless it sets one). Ticks no switch can
// kill run in the world's one warm container, the others each in a new one.
func killableEnvWith(t *testing.T, w *testworld.World, c crashWorld, k killer, configure func(*config.Config)) *app.Env {
	t.Helper()
	restCfg := rest.CopyConfig(w.E.Cluster.RESTConfig)
	if k != nil {
		restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return killRT{next: rt, k: k} })
	}
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	o := deploy.Options{Clock: c.clk, Configure: func(cfg *config.Config) {
		cfg.WatchWindow = 0
		// No node ever joins the crash worlds, and their clock runs ahead
		// of the API server's creation stamps by every tick step the cases
		// so far have taken (over 15 minutes in the longer suites): the
		// registration timeout would retire claims a case is watching.
		cfg.RegistrationTTL = 24 * time.Hour
		if configure != nil {
			configure(cfg)
		}
	}}
	if k == nil {
		o.Warm = c.warm
	}
	a, err := deploy.NewEnv(c.emu, kc, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg := a.AWS.Config.Copy()
	cfg.Retryer = fastRetryer
	if k != nil {
		cfg.HTTPClient = killHTTP{next: cfg.HTTPClient, k: k}
	}
	a.AWS = awsconfig.NewClients(cfg)
	return a
}

// fastRetryer is production's retry policy without the waiting.
func fastRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = awsconfig.MaxAttempts
		o.MaxBackoff = 5 * time.Millisecond
		o.RateLimiter = ratelimit.None
	})
}

// crashWorld is the account every kill case runs in, and its clock.
type crashWorld struct {
	emu  *emulator.Emulator
	clk  *testworld.SkewClock
	warm *app.Warm
}

// newCrashWorld starts an account of default hostility whose instances
// never join the cluster: pods stay pending and each case stays fast;
// "done" is every pod's claim launched.
func newCrashWorld(t *testing.T, w *testworld.World, opts ...testworld.Option) crashWorld {
	t.Helper()
	clk := &testworld.SkewClock{}
	cfg := emulator.Config{ClusterName: testworld.Cluster, Seed: 7, Clock: clk}
	for _, o := range opts {
		o(&cfg)
	}
	emu, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	// DescribeCluster answers with the API server, but no instance joins.
	ca, err := os.ReadFile(w.E.Cluster.RESTConfig.TLSClientConfig.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.ConnectCluster(nil, w.E.Cluster.RESTConfig.Host, ca); err != nil {
		t.Fatal(err)
	}
	return crashWorld{emu: emu, clk: clk, warm: &app.Warm{}}
}

// reset starts a case: no NodeClaims (their instances terminated), no
// capacity marks, no lease, no injected fault. The account keeps what a
// cluster that has launched before has: the node class's instance profile
// (propagated long ago), its launch templates, the pricing book.
func (c crashWorld) reset(t *testing.T, w *testworld.World) {
	t.Helper()
	ctx := context.Background()
	for _, nc := range w.Claims() {
		nc.Finalizers = nil
		_, _ = w.E.Clients.NodeClaims.Update(ctx, &nc, metav1.UpdateOptions{})
		_ = w.E.Clients.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
	}
	for _, i := range c.emu.Instances(func(i emulator.Instance) bool { return i.State == "pending" || i.State == "running" }) {
		if err := c.emu.TerminateInstance(i.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	c.emu.ClearFaults()
	_ = w.E.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace).Delete(ctx, unavailable.ConfigMapName, metav1.DeleteOptions{})
	_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
}

type outcome struct {
	claims, live, launched, liveInstances int
	problems                              []string
}

// inspect checks what must hold whatever happened: no instance claimed by
// two NodeClaims, none launched twice for one NodeClaim (terminated ones
// count: a second launch is a second bill), and no live instance without a
// NodeClaim.
func inspect(w *testworld.World, emu *emulator.Emulator) outcome {
	var o outcome
	byID := map[string]string{}
	for _, nc := range w.Claims() {
		o.claims++
		if nc.DeletionTimestamp == nil {
			o.live++
			if nc.IsTrue(karpv1.ConditionTypeLaunched) {
				o.launched++
			}
		}
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			if other, dup := byID[id]; dup {
				o.problems = append(o.problems, fmt.Sprintf("instance %s claimed by %s and %s", id, other, nc.Name))
			}
			byID[id] = nc.Name
		}
	}
	for _, i := range emu.Instances(func(i emulator.Instance) bool { return i.State == "pending" || i.State == "running" }) {
		o.liveInstances++
		if _, ok := byID[i.ID]; !ok {
			o.problems = append(o.problems, fmt.Sprintf("leaked instance %s tagged %s", i.ID, i.Tags[wellknown.NodeClaimTagKey]))
		}
	}
	// Only this case's claims: instances of earlier cases stay listed.
	names := map[string]bool{}
	for _, nc := range w.Claims() {
		names[nc.Name] = true
	}
	for claim, is := range instancesByClaim(emu) {
		if names[claim] && len(is) > 1 {
			var ids []string
			for _, i := range is {
				ids = append(ids, i.ID+" "+i.State)
			}
			o.problems = append(o.problems, fmt.Sprintf("nodeclaim %q has %d instances (%s)", claim, len(is), strings.Join(ids, ", ")))
		}
	}
	return o
}

// antiAffine keeps the web pods on nodes of their own: one NodeClaim per
// pod, so that "every pending pod has a launched claim" is a count.
func antiAffine(p *corev1.Pod) {
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}}}
}

// worldChange is what happens between the killed tick and the next one.
type worldChange struct {
	name string
	// apply changes the world; it returns how many web pods are pending now.
	apply func(t *testing.T, w *testworld.World, c crashWorld) int
	// undo restores two pending web pods for the next case.
	undo func(t *testing.T, w *testworld.World)
}

func crashChanges(baseType string) []worldChange {
	return []worldChange{{
		name: "a third pod arrives",
		apply: func(t *testing.T, w *testworld.World, _ crashWorld) int {
			w.Pods("web-late", 1, "1", func(p *corev1.Pod) { p.Labels["app"] = "web"; antiAffine(p) })
			w.WaitUnschedulable(3)
			return 3
		},
		undo: func(t *testing.T, w *testworld.World) {
			if err := w.E.Clients.Core.CoreV1().Pods(w.NS).Delete(context.Background(), "web-late-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "a pending pod is deleted",
		apply: func(t *testing.T, w *testworld.World, _ crashWorld) int {
			if err := w.E.Clients.Core.CoreV1().Pods(w.NS).Delete(context.Background(), "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
				t.Fatal(err)
			}
			return 1
		},
		undo: func(t *testing.T, w *testworld.World) {
			_, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(context.Background(), webPod(w.NS, "web-1"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w.WaitUnschedulable(2)
		},
	}, {
		// The offerings the next tick computes differ from the killed
		// tick's: a CreateFleet it sent (and may have had applied) is
		// answered IdempotentParameterMismatch if its token is used again.
		// EC2 runs out of the type, and the unavailable offerings say so
		// (as the interruption function marks an interrupted offering).
		name: "the type the undisturbed tick launched runs out of capacity",
		apply: func(t *testing.T, w *testworld.World, c crashWorld) int {
			c.emu.Inject(emulator.ICE("", baseType, ""))
			ctx := context.Background()
			cache, err := unavailable.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, c.clk)
			if err != nil {
				t.Fatal(err)
			}
			for _, z := range c.emu.Config().Zones {
				for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
					cache.Mark(ct, baseType, z.Name, "test: out of capacity")
				}
			}
			if err := cache.Save(ctx); err != nil {
				t.Fatal(err)
			}
			return 2
		},
		undo: func(*testing.T, *testworld.World) {},
	}, {
		// The next tick's first CreateFleet is applied and its answer lost.
		name: "the next launch's answer is lost",
		apply: func(t *testing.T, w *testworld.World, c crashWorld) int {
			c.emu.Inject(emulator.DropAfterApply("CreateFleet", 1))
			return 2
		},
		undo: func(*testing.T, *testworld.World) {},
	}}
}

func webPod(ns, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
	}
	antiAffine(p)
	return p
}

// freshTicks runs ticks, as the schedule would, until every pending web
// pod has a launched claim and no claim waits to launch; it returns how
// many ran, or max+1 if they did not converge. Between ticks the case's
// clock moves on (an instance EC2 lists late, a launch token waiting for
// its evidence).
func freshTicks(t *testing.T, w *testworld.World, c crashWorld, holder string, pods, max int, step time.Duration) int {
	for i := 1; i <= max; i++ {
		if _, err := killableEnv(t, w, c, nil).Provisioner().Run(context.Background(), fmt.Sprintf("%s-%d", holder, i)); err != nil && testing.Verbose() {
			t.Logf("%s tick %d: %v", holder, i, err)
		}
		if o := inspect(w, c.emu); o.launched >= pods && o.launched == o.live {
			return i
		}
		c.clk.Advance(step)
	}
	return max + 1
}

// TestKilledTickThenFreshTick kills the provisioner tick before and after
// each external call of an undisturbed tick in turn, in the hostile world
// (one account, as a cluster that has launched before: its instance
// profile propagated, its launch templates and pricing book made). Between
// the kill and the next tick the world changes (a pod arrives or goes, an
// offering runs out, the next launch's answer is lost). Ticks then run as
// the schedule would until every pending pod has a launched claim, and no
// NodeClaim may ever have got two instances, no instance may leak and no
// two claims may have been made for the same pods.
func TestKilledTickThenFreshTick(t *testing.T) {
	w, c := twoPodWorld(t)
	r := killEachCall(t, w, c, nil, "")
	if r.unreached > r.cases/4 {
		t.Errorf("%d of %d killed ticks ended before their kill point: the enumeration no longer follows the undisturbed tick", r.unreached, r.cases)
	}
}

// TestKilledBetweenFleetCalls is TestKilledTickThenFreshTick in a world
// where every spot offering is out of capacity: each launch makes a
// CreateFleet that launches nothing, records the next attempt on its
// claim, and makes another for on-demand. A kill before or after any of
// those, the world changing before the next tick, must still end with one
// instance per claim and nothing leaked.
func TestKilledBetweenFleetCalls(t *testing.T) {
	w, c := twoPodWorld(t)
	spotOut := func() { c.emu.Inject(emulator.ICE(wellknown.CapacityTypeSpot, "", "")) }
	// The calls before the first CreateFleet are the same as in
	// TestKilledTickThenFreshTick's world, which kills them already.
	r := killEachCall(t, w, c, spotOut, "aws CreateFleet")
	// The two launches run side by side and wait for templates EC2 lists
	// late, so the calls of a killed tick do not follow the undisturbed
	// one's order: what matters is that kills land around the fleet calls
	// and the attempt writes between them.
	fleets, attempts := r.landed["aws CreateFleet"], 0
	for call, n := range r.landed {
		if strings.HasPrefix(call, "kube PATCH /apis/karpenter.sh/v1/nodeclaims/") {
			attempts += n
		}
	}
	t.Logf("kills landed at %d CreateFleet calls and %d NodeClaim patches", fleets, attempts)
	// make test kills at the first write of each kind (deploy.Sample):
	// there, one kill at a CreateFleet and one at a NodeClaim patch.
	wantFleets, wantAttempts := 1, 1
	if deploy.AllKills() {
		wantFleets, wantAttempts = 8, 4
	}
	if fleets < wantFleets || attempts < wantAttempts {
		t.Errorf("kills landed at %d CreateFleet calls and %d NodeClaim patches (want at least %d and %d): the test no longer kills between fleet calls", fleets, attempts, wantFleets, wantAttempts)
	}
}

// twoPodWorld is the crash tests' world: a pool of a few amd64 types (one
// launch template per launch), two pending pods that must not share a node
// (two NodeClaims per tick), and an account that has launched before (its
// instance profile propagated, its templates known).
func twoPodWorld(t *testing.T) (*testworld.World, crashWorld) {
	t.Helper()
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large", "m6i.large", "c6i.large", "r5.large"), capacityReq("spot", "on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-0", "web-1"} {
		if _, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(ctx, webPod(w.NS, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.WaitUnschedulable(2)
	c := newCrashWorld(t, w)
	// The first launches wait for the new instance profile to propagate
	// (up to 20 s) and the new templates to be known.
	if n := freshTicks(t, w, c, "warm-up", 2, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	return w, c
}

// killed is what killEachCall did: how many cases, how many ended before
// their kill point, and how many kills landed at each call.
type killed struct {
	cases, unreached int
	landed           map[string]int
}

// killEachCall kills, in turn, the provisioner tick before and after each
// external call an undisturbed tick makes (fault, if set, is applied at the
// start of every case), changes the world, and checks that fresh ticks
// converge with one instance per claim, nothing leaked, no claim made twice.
// With from set, the kills start at the first call of that name.
func killEachCall(t *testing.T, w *testworld.World, c crashWorld, fault func(), from string) killed {
	t.Helper()
	ctx := context.Background()
	reset := func() {
		c.reset(t, w)
		if fault != nil {
			fault()
		}
	}
	// The undisturbed tick: which calls it makes, and what it achieves.
	reset()
	counter := &testworld.KillSwitch{}
	if _, err := killableEnv(t, w, c, counter).Provisioner().Run(ctx, "baseline"); err != nil {
		t.Logf("undisturbed tick: %v", err)
	}
	calls := counter.Calls()
	if n := freshTicks(t, w, c, "baseline-fresh", 2, 6, 5*time.Second); n > 6 {
		t.Fatalf("the undisturbed world does not converge: %+v", inspect(w, c.emu))
	}
	if o := inspect(w, c.emu); o.live != 2 || len(o.problems) > 0 {
		t.Fatalf("undisturbed: %+v", o)
	}
	baseType := w.Claims()[0].Labels[wellknown.InstanceTypeLabel]
	t.Logf("an undisturbed tick makes %d external calls (Kubernetes writes and AWS calls); it launched %s: %v", len(calls), baseType, calls)

	changes := crashChanges(baseType)
	unreached, slowest, n := 0, 0, 0
	landed := map[string]int{}
	first := 1
	if from != "" {
		first = slices.Index(calls, from) + 1
		if first == 0 {
			t.Fatalf("the undisturbed tick made no %s call", from)
		}
	}
	// make test kills before and after the first write of each kind
	// (deploy.Sample); make test-kills before and after every call.
	var keys []string
	for at := first; at <= len(calls); at++ {
		keys = append(keys, "before "+deploy.CallKind(calls[at-1]), "after "+deploy.CallKind(calls[at-1]))
	}
	sample := deploy.Sample(keys)
	for at := first; at <= len(calls); at++ {
		for side, after := range []bool{false, true} {
			if !sample[2*(at-first)+side] {
				continue
			}
			when := "before"
			if after {
				when = "after"
			}
			// Each of before and after meets every change in turn; after a
			// CreateFleet (an instance may run that the dead tick never
			// heard of), every change. Two launches run side by side, so
			// dying after call i is not dying before call i+1 here: the
			// other launch's calls in flight still land.
			shift := 0
			if after {
				shift = 2
			}
			cases := []worldChange{changes[(at-1+shift)%len(changes)]}
			if after && strings.Contains(calls[at-1], "CreateFleet") {
				cases = changes
			}
			for _, change := range cases {
				n++
				reset()
				// The kill point is named by its call's kind and occurrence,
				// not its position: under a hostile world or a busy machine
				// the two launches' calls interleave differently, and a kill
				// by position would land at some other call.
				mark := deploy.LandmarkOf(calls, deploy.Gap{At: at, After: after}, deploy.CallKind)
				k := mark.Switch(deploy.CallKind, 0)
				start := time.Now()
				_, _ = killableEnv(t, w, c, k).Provisioner().Run(ctx, fmt.Sprintf("killed-%d-%s", at, when))
				name := fmt.Sprintf("%s %s #%d (undisturbed call %d: %s)", when, mark.Call, mark.Nth, at, calls[at-1])
				name += ", then " + change.name
				if got := k.Calls(); !k.Dead() || k.At < 1 || len(got) < k.At {
					// A hostile answer ended the tick before this call: still a
					// tick that stopped half-way, checked the same.
					unreached++
				} else {
					landed[got[k.At-1]]++
				}
				before := inspect(w, c.emu)
				pods := change.apply(t, w, c)
				// The dead tick's lease would expire before the next scheduled
				// tick; remove it rather than skip its 30 s.
				_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
				// Ticks a few seconds apart (an instance EC2 lists late), then
				// half a minute apart: a launch whose answer was lost waits
				// timing.TokenPatience (a minute) for its instance to be
				// listed, and the tick that then launches again may meet a
				// throttle or a template EC2 lists late.
				ticks := freshTicks(t, w, c, fmt.Sprintf("fresh-%d-%s", at, when), pods, 3, 4*time.Second)
				if ticks > 3 {
					ticks = 3 + freshTicks(t, w, c, fmt.Sprintf("fresh-%d-%s-late", at, when), pods, 4, 30*time.Second)
				}
				got := inspect(w, c.emu)
				switch {
				case ticks > 7:
					t.Errorf("%s: not converged after 7 ticks: %d pending pods, %d live claims (%d launched); killed tick left %+v", name, pods, got.live, got.launched, before)
				case len(got.problems) > 0:
					t.Errorf("%s: %v", name, got.problems)
				case got.live > max(pods, before.live):
					// One claim per pod (they are anti-affine): more is a claim
					// made twice for the same pod.
					t.Errorf("%s: %d live claims for %d pending pods (the killed tick left %d)", name, got.live, pods, before.live)
				}
				slowest = max(slowest, ticks)
				if testing.Verbose() {
					t.Logf("%s: converged in %d tick(s), %s", name, ticks, time.Since(start).Round(time.Millisecond))
				}
				change.undo(t, w)
			}
		}
	}
	t.Logf("%d kill cases; %d ended before their kill point (a hostile answer ended the tick first); the slowest converged in %d ticks; the clock ran %s ahead", n, unreached, slowest, c.clk.Skew().Round(time.Second))
	return killed{cases: n, unreached: unreached, landed: landed}
}
