package watch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/invoke"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/local/controlplane/kubechaos"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/watch"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true, ControllerManager: true}))
}

// functionRuns counts a registered function's invocations and their time.
type functionRuns struct {
	mu       sync.Mutex
	n        int
	busy     time.Duration
	inFlight atomic.Int32
}

// reactionFromIdle runs the scenario TestReactionFromIdle checks and
// BenchmarkReactionFromIdle measures: with no provisioner tick watching,
// the time from a pod being created (it becomes pending a few
// milliseconds later) to the CreateFleet that launches its node, when
// the watcher starts the provisioner. The watcher runs as its schedule
// would, a new invocation every period with a window a second longer,
// here a 10-second period standing for the minute, so pods also arrive
// across the hand-over from one invocation to the next. The provisioner
// runs as the Lambda would, a fresh invocation per Invoke, one pass each
// (no watch window): nothing but the watcher starts it. The world is
// hostile (throttles, lost answers, 429s, ended watches, at-least-once
// async delivery); its imposed waits are reported apart.
//
// Every wait here is for a condition; its timeout only bounds a world that
// is stuck. The latencies are figures, reported by the benchmark (and
// logged by the test): a loaded machine makes them longer, not wrong.
func reactionFromIdle(t testing.TB, samples int) reaction {
	w := testworld.New(t, env, "provisioner")
	w.Apply(deploy.DefaultNodePool("default", karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge", "c5.xlarge", "m6i.xlarge"},
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The provisioner function, its Lambda handler: one pass per
	// invocation (no watch window), its metric lines kept.
	metrics := &testworld.Metrics{}
	w.App.Config.WatchWindow = 0
	w.App.Out = metrics
	handler := w.App.ProvisionerHandler()
	runs := &functionRuns{}
	var sources sync.Map
	w.Emu.RegisterFunction("provisioner", func(ctx context.Context, payload []byte) ([]byte, error) {
		runs.inFlight.Add(1)
		defer runs.inFlight.Add(-1)
		var ev lambdaevents.CloudWatchEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		sources.Store(ev.Source, true)
		start := time.Now()

		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := handler(ctx, ev)
		runs.mu.Lock()
		runs.n++
		runs.busy += time.Since(start)
		runs.mu.Unlock()
		return nil, err
	})

	// The watcher, on its schedule.
	cfg, err := w.Emu.AWSConfig("provisioner", 0)
	if err != nil {
		t.Fatal(err)
	}
	fn := invoke.Function{Lambda: lambda.NewFromConfig(cfg), Name: "provisioner"}
	const period = 10 * time.Second
	var watchers sync.WaitGroup
	var watcherTime atomic.Int64
	var invoked atomic.Int64
	go func() {
		for ctx.Err() == nil {
			watchers.Add(1)
			go func() {
				defer watchers.Done()
				wa := w.App.Watcher(fn)
				wa.Window = period + time.Second
				s, err := wa.Run(ctx)
				if err != nil {
					t.Errorf("watcher: %v", err)
				}
				watcherTime.Add(int64(s.Watched))
				invoked.Add(int64(s.Invoked))
			}()
			select {
			case <-time.After(period):
			case <-ctx.Done():
			}
		}
	}()
	time.Sleep(2 * time.Second) // the first watcher has listed

	rng := rand.New(rand.NewPCG(uint64(samples), 7))
	var raw, own []time.Duration
	for i := range samples {
		// Arrive at a random point, whatever runs.
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		calls := len(w.Emu.Calls())
		throttled := w.Chaos.Stats()[kubechaos.StatTooManyRequests]
		created := w.Clock.Now()
		w.Pods(fmt.Sprintf("p%d", i), 1, "3", nil)
		deadline := time.Now().Add(3 * time.Minute)
		var fleet emulator.Call
		var before []emulator.Call
		for fleet.At.IsZero() {
			all := w.Emu.Calls()[calls:]
			for k, c := range all {
				if c.Action == "CreateFleet" {
					fleet, before = c, all[:k]
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod p%d-0: no CreateFleet within 3 minutes (watchers invoked %d, provisioner runs %d)", i, invoked.Load(), runs.n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		d := fleet.At.Sub(created)
		imposed := time.Duration(w.Chaos.Stats()[kubechaos.StatTooManyRequests]-throttled)*kubechaos.RetryAfter + testworld.AWSBackoff(before)
		raw = append(raw, d)
		own = append(own, max(d-imposed, 0))

	}
	// Let the last pods' nodes register, as the watcher starts the
	// provisioner for them, then stop the watchers.
	w.Converge(time.Minute, nil)
	cancel()
	watchers.Wait()

	// Runs the watcher started observe no pod timings: the scheduled
	// ticks' windows cover them (none ran here).
	if n := len(metrics.Lines("karpenter_pods_startup_duration_seconds")); n > 0 {
		t.Errorf("runs the watcher started observed pod startups (%d lines)", n)
	}

	// Economy (no watcher): a pod waits for the next scheduled tick,
	// uniformly over the minute; the tick then passes at once (no batch
	// wait). Its own time, start to CreateFleet, measured with ticks run
	// as the schedule runs them, on a pod already pending.
	var tick []time.Duration
	want := max(samples/2, 4)
	for i := 0; len(tick) < want; i++ {
		if i == 3*want {
			t.Fatalf("%d economy pods, %d of them pending: the others ran on room the cluster had", i, len(tick))
		}
		name := fmt.Sprintf("e%d", i)
		w.Pods(name, 1, "3", nil)
		// A node the watchers' runs left without a pod (a claim the
		// scheduler then did not need) takes the pod at once: no tick
		// to measure, so another pod is made.
		if !pendingOrBound(t, w, name+"-0") {
			t.Logf("economy pod %s ran on a node already there; another is made", name)
			continue
		}
		calls := len(w.Emu.Calls())
		start := w.Clock.Now()
		tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := handler(tctx, lambdaevents.CloudWatchEvent{Source: "aws.events"}); err != nil {
			t.Logf("economy tick %d: %v", i, err)
		}
		tcancel()
		for _, c := range w.Emu.Calls()[calls:] {
			if c.Action == "CreateFleet" {
				tick = append(tick, c.At.Sub(start))
				break
			}
		}
		w.Converge(time.Minute, nil)
	}
	econ := make([]time.Duration, 0, 1000*len(tick))
	erng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		for _, d := range tick {
			econ = append(econ, time.Duration(erng.Int64N(int64(time.Minute)))+d)
		}
	}

	runs.mu.Lock()
	n, busy := runs.n, runs.busy
	runs.mu.Unlock()
	if _, ok := sources.Load(watch.PayloadSource); !ok {
		t.Error("no provisioner run came from the watcher")
	}
	if got := w.Claims(); len(got) < samples {
		t.Errorf("%d NodeClaims for %d pods", len(got), samples)
	}
	w.AssertNoLeaks()
	return reaction{raw: raw, own: own, tick: tick, econ: econ, invoked: invoked.Load(), runs: n, busy: busy}
}

// pendingOrBound waits until kube-scheduler has decided about the pod: it
// says whether the pod was marked unschedulable (true) or bound to a
// node already there (false). The timeout only bounds a stuck world.
func pendingOrBound(t testing.TB, w *testworld.World, name string) bool {
	t.Helper()
	var pending bool
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pending = podutil.IsUnschedulable(p)
		return pending || p.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s neither marked unschedulable nor bound: %v", name, err)
	}
	return pending
}

// reaction is what one run of the scenario measured.
type reaction struct {
	// raw: pod created -> CreateFleet; own: less the waits the world
	// imposed (throttling, backoff); tick: a scheduled tick's own time,
	// start -> CreateFleet; econ: with the wait for the next minute.
	raw, own, tick, econ []time.Duration
	invoked              int64
	runs                 int
	busy                 time.Duration
}

func (r reaction) log(t testing.TB) {
	t.Logf("pod created -> CreateFleet, from idle, watcher starting the provisioner (%d pods): median %s, p99 %s; less the waits the world imposed: median %s, p99 %s",
		len(r.raw), pct(r.raw, 0.5).Round(time.Millisecond), pct(r.raw, 0.99).Round(time.Millisecond), pct(r.own, 0.5).Round(time.Millisecond), pct(r.own, 0.99).Round(time.Millisecond))
	t.Logf("watcher: %d invocations sent; provisioner: %d runs, %s in all (%.2f s per run)", r.invoked, r.runs, r.busy.Round(time.Millisecond), r.busy.Seconds()/float64(max(r.runs, 1)))
	t.Logf("economy: a scheduled tick, start -> CreateFleet (%d pods): median %s, p99 %s; with the wait for the next minute's tick: median %s, p99 %s",
		len(r.tick), pct(r.tick, 0.5).Round(time.Millisecond), pct(r.tick, 0.99).Round(time.Millisecond), pct(r.econ, 0.5).Round(100*time.Millisecond), pct(r.econ, 0.99).Round(100*time.Millisecond))
}

// TestReactionFromIdle: from idle, the watcher starts the provisioner for
// every pod that arrives (across the watcher's hand-overs, in a hostile
// world), each gets its NodeClaim and launch, and the runs the watcher
// starts observe no pod startups. How fast is BenchmarkReactionFromIdle's
// figure.
func TestReactionFromIdle(t *testing.T) {
	reactionFromIdle(t, 4).log(t)
}

// BenchmarkReactionFromIdle reports the reaction time from idle (targets:
// median under 2 s and p99 under 5 s of the time less the waits the
// world imposed) and the economy mode's wait, as figures:
//
//	KARPLESS_REQUIRE_KUBE=1 go test ./shared/ticks/watch -run '^$' -bench ReactionFromIdle -benchtime 1x
//
// KARPLESS_REACTION_SAMPLES sets the pods measured (default 8).
func BenchmarkReactionFromIdle(b *testing.B) {
	samples := 8
	if v := os.Getenv("KARPLESS_REACTION_SAMPLES"); v != "" {
		samples, _ = strconv.Atoi(v)
	}
	for b.Loop() {
		r := reactionFromIdle(b, samples)
		r.log(b)
		b.ReportMetric(pct(r.own, 0.5).Seconds(), "own-median-s")
		b.ReportMetric(pct(r.own, 0.99).Seconds(), "own-p99-s")
		b.ReportMetric(pct(r.raw, 0.5).Seconds(), "median-s")
		b.ReportMetric(pct(r.econ, 0.5).Seconds(), "economy-median-s")
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// leaseTaker stands for the provisioner the watcher invokes: each
// invocation takes the provisioning lease, holds it a moment (a pass) and
// releases it, so the watcher sees its invocation answered.
type leaseTaker struct {
	env       *kubetest.Env
	ns, lease string
	n         atomic.Int32
}

func (l *leaseTaker) InvokeAsync(context.Context, []byte) error {
	n := l.n.Add(1)
	go func() {
		ctx := context.Background()
		ls := lease.New(l.env.Clients.Core.CoordinationV1(), l.ns, l.lease, fmt.Sprintf("run-%d", n), 30*time.Second, clock.RealClock{})
		if ok, err := ls.TryAcquire(ctx); !ok || err != nil {
			return
		}
		time.Sleep(300 * time.Millisecond)
		_ = ls.Release(ctx)
	}()
	return nil
}

// TestStaticNodePoolAndBufferStartProvisioner: the watcher starts the
// provisioner for what Karpenter's static and capacitybuffer controllers
// react to, a static NodePool created or scaled and a CapacityBuffer
// created, and not for a dynamic NodePool or a NodePool change that is
// neither its replicas nor its readiness.
func TestStaticNodePoolAndBufferStartProvisioner(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := e.Namespace(t)
	inv := &leaseTaker{env: e, ns: ns, lease: "karpless-provisioning"}
	w := &watch.Watcher{
		Core: e.Clients.Core, NodePools: e.Clients.NodePools, CapacityBuffers: e.Clients.CapacityBuffers(""),
		Invoker: inv, Namespace: ns, Lease: inv.lease,
		Window: time.Minute, BatchIdle: 200 * time.Millisecond, BatchMax: time.Second,
		Clock: clock.RealClock{}, Log: slog.New(slog.DiscardHandler),
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan watch.Summary)
	go func() {
		s, err := w.Run(wctx)
		if err != nil {
			t.Errorf("watcher: %v", err)
		}
		done <- s
	}()
	// invoked waits for the n-th invocation; none beyond it comes within
	// quiet after.
	invoked := func(n int32, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for inv.n.Load() < n && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := inv.n.Load(); got < n {
			t.Fatalf("%s: %d provisioner invocations, want %d", what, got, n)
		}
		time.Sleep(1500 * time.Millisecond)
		if got := inv.n.Load(); got != n {
			t.Fatalf("%s: %d provisioner invocations, want %d", what, got, n)
		}
	}
	time.Sleep(time.Second) // listed
	name := kubetest.Name(t)
	pools := e.Clients.NodePools
	t.Cleanup(func() {
		for _, n := range []string{name + "-dynamic", name + "-static"} {
			_ = pools.Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	if _, err := pools.Create(ctx, deploy.DefaultNodePool(name+"-dynamic"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	invoked(0, "a dynamic NodePool created")

	static := deploy.DefaultNodePool(name + "-static")
	static.Spec.Replicas = new(int64(1))
	np, err := pools.Create(ctx, static, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	invoked(1, "a static NodePool created")

	np.Labels = map[string]string{"team": "a"}
	if np, err = pools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	invoked(1, "a static NodePool relabelled")

	np.Spec.Replicas = new(int64(3))
	if _, err = pools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	invoked(2, "a static NodePool scaled")

	if _, err := e.Clients.CapacityBuffers(ns).Create(ctx, &cbv1.CapacityBuffer{
		ObjectMeta: metav1.ObjectMeta{Name: "buffer"},
		Spec:       cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "chunk"}, Replicas: new(int32(2))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	invoked(3, "a CapacityBuffer created")

	stop()
	if s := <-done; s.Work != 3 {
		t.Errorf("work %d, want 3 (the static pool created and scaled, the buffer created): %+v", s.Work, s)
	}
}
