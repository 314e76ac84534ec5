package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/apis/crds"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/eventsource"
	"github.com/karpless/karpless/shared/local/pace"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// Options of a demo run.
type Options struct {
	Scenario *Scenario
	// Out receives the progress display and the summary line.
	Out io.Writer
	// ReportDir receives index.html (default "demo-report").
	ReportDir string
	// Log receives the engines' JSON logs (nil discards them).
	Log *slog.Logger
	// KubeBin overrides where the control-plane binaries are.
	KubeBin string
}

// Summary is the end state of a run.
type Summary struct {
	Nodes       int
	PodsRunning int
	PodsPending int
	CostPerHour float64
	Leaked      int
	Steps       []StepResult
	Report      string
}

// Line is the one line scripts read.
func (s Summary) Line() string {
	return fmt.Sprintf("summary: nodes=%d pods-running=%d pods-pending=%d cost-per-hour=%.3f leaked-instances=%d",
		s.Nodes, s.PodsRunning, s.PodsPending, s.CostPerHour, s.Leaked)
}

// StepResult is how a step went.
type StepResult struct {
	Name     string
	Start    time.Duration // virtual time since the run began
	Took     time.Duration
	Note     string
	Failed   string
	CostFrom float64
	CostTo   float64
	// CostCauses say what changed $/hour during the step, largest first
	// (costs.explain): "−0.526: the gpu node gpu-krmjg (g4dn.xlarge
	// on-demand, $0.526/h) left, empty".
	CostCauses []string
}

// speed is how much faster than real time the demo's clock runs while
// things move. The control plane reads the same virtual clock
// (controlplane.VirtualClock), so its timestamps agree with the engines'.
// EKS tokens are signed on the real clock, so the emulator judges them on
// it (TokenClock) however far the virtual clock runs ahead.
const speed = 3

// driftQuiet is how long disruption must have proposed nothing before an
// AMI release's step ends: longer than the bundled scenario's longest
// consolidateAfter (30 s) plus the 15 s a command waits before it is
// validated.
const driftQuiet = 50 * time.Second

type runner struct {
	o   Options
	s   *Scenario
	clk *controlplane.VirtualClock
	// real is when the clock last followed real time (guarded by realMu:
	// the clock also moves while a function runs).
	real   time.Time
	realMu sync.Mutex
	pace   *pace.Pacer // guarded by realMu
	begin  time.Time
	dir    string

	cluster *controlplane.Cluster
	admin   *kube.Clients
	emu     *emulator.Emulator
	prov    *app.Env
	disr    *app.Env
	intr    *app.Env
	queue   *eventsource.Mapping
	dyn     dynamic.Interface
	mapper  meta.RESTMapper

	lastProv, lastDisr, lastSample, lastChange, lastStatus time.Time
	// lastCommand is when the disruption function last proposed or
	// executed a command.
	lastCommand time.Time
	disrIdle    int
	claims      map[string]*claimView
	status      string
	timeline    []sample
	marks       []mark
	bands       bands
	costs       *costs
	log         []string
	deadline    time.Time
	interrupted map[string]bool
	// interruptedNodes are the nodes an interruption step reclaims, and
	// movedAt the first moment none of their workload pods remained there
	// and none was pending (workloadMoved): the step's note judges the
	// deadline by it, not by the end of the step (consolidation may still
	// be at work).
	interruptedNodes map[string]bool
	movedAt          time.Time
}

type claimView struct {
	created, launched, ready, deleting bool
	createdAt                          time.Time
}

type sample struct {
	T                               float64
	Nodes, Pending, Running, Claims int
	Cost                            float64
}

type mark struct {
	T    float64
	Name string
}

// Run runs the scenario and returns its summary. The summary is returned
// even when a step failed (with the error), so it can always be printed.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ReportDir == "" {
		o.ReportDir = "demo-report"
	}
	r := &runner{o: o, s: o.Scenario, claims: map[string]*claimView{}, interrupted: map[string]bool{}, pace: pace.New(), costs: newCosts()}
	if err := r.start(ctx); err != nil {
		r.stop()
		return nil, err
	}
	defer r.stop()
	// The world's clock keeps moving while a function runs, as it does in
	// production: a function that waits on its clock (for EC2 to list a
	// launch template it has just created) must not freeze the world.
	moving := make(chan struct{})
	defer close(moving)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-moving:
				return
			case <-t.C:
				r.advance()
			}
		}
	}()
	sum := &Summary{}
	var runErr error
	for i, st := range r.s.Steps {
		res, err := r.step(ctx, i, st)
		sum.Steps = append(sum.Steps, res)
		if err != nil {
			runErr = fmt.Errorf("step %d (%s): %w", i+1, st.Name, err)
			break
		}
	}
	if err := r.final(ctx, sum); err != nil && runErr == nil {
		runErr = err
	}
	report, rerr := r.writeReport(sum)
	if rerr != nil && runErr == nil {
		runErr = rerr
	}
	sum.Report = report
	if runErr == nil && r.s.Expect != nil {
		runErr = r.s.Expect.check(sum)
	}
	return sum, runErr
}

func (r *runner) now() time.Time       { return r.clk.Now() }
func (r *runner) since() time.Duration { return r.now().Sub(r.begin) }

func (r *runner) say(format string, args ...any) {
	line := fmt.Sprintf("[%s] %s", clockString(r.since()), fmt.Sprintf(format, args...))
	r.log = append(r.log, line)
	fmt.Fprintln(r.o.Out, line)
}

func clockString(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// start brings up the emulator (the API server authenticates tokens
// through it), the control plane with scheduler and controller manager,
// what the bootstrap function installs, and one engine per function.
func (r *runner) start(ctx context.Context) error {
	r.begin = time.Now()
	dir, err := os.MkdirTemp("", "karpless-demo-")
	if err != nil {
		return fmt.Errorf("creating the demo's work folder: %w", err)
	}
	r.dir = dir
	if r.clk, err = controlplane.NewVirtualClock(dir, r.begin); err != nil {
		return fmt.Errorf("creating the demo's virtual clock: %w", err)
	}
	r.real = time.Now()
	fmt.Fprintf(r.o.Out, "Karpless demo: %s\n%s\n\n", r.s.Name, strings.TrimSpace(r.s.Description))
	emu, err := emulator.New(emulator.Config{
		ClusterName: r.s.Cluster, Clock: r.clk, TokenClock: clock.RealClock{}, StateChangeEvents: true,
		PendingDelay: 3 * time.Second, JoinDelay: 4 * time.Second, ReadyDelay: 2 * time.Second,
		TerminateDelay: 5 * time.Second, PodGracePeriodCap: 3 * time.Second,
	})
	if err != nil {
		return err
	}
	r.emu = emu
	fmt.Fprintf(r.o.Out, "starting a local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) and the AWS emulator...\n")
	r.cluster, err = controlplane.Start(ctx, controlplane.Config{
		BinDir: r.o.KubeBin, Dir: filepath.Join(dir, "kube"), Scheduler: true, ControllerManager: true, TokenWebhookURL: emu.TokenWebhookURL(), VirtualClock: r.clk.Path(),
	})
	if err != nil {
		return err
	}
	if r.admin, err = kube.NewClients(r.cluster.RESTConfig); err != nil {
		return err
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	if _, err := bootstrap.Install(ctx, r.admin, bootstrap.Options{ClusterName: r.s.Cluster, NodeRoleName: emulator.NodeRoleName(r.s.Cluster), CRDs: all, Log: r.o.Log}); err != nil {
		return fmt.Errorf("installing CRDs and RBAC: %w", err)
	}
	if err := emu.ConnectCluster(r.admin, "", nil); err != nil {
		return err
	}
	configure := func(c *config.Config) { c.WatchWindow = 0 }
	for _, f := range []struct {
		id  string
		dst **app.Env
	}{{"provisioner", &r.prov}, {"disruption", &r.disr}, {"interruption", &r.intr}} {
		e, err := deploy.NewAuthenticatedEnv(ctx, emu, deploy.Options{Identity: f.id, Clock: r.clk, Log: r.o.Log.With("function", f.id), Configure: configure})
		if err != nil {
			return err
		}
		*f.dst = e
	}
	awsCfg, err := emu.AWSConfig("interruption", 2)
	if err != nil {
		return err
	}
	r.queue = &eventsource.Mapping{SQS: sqs.NewFromConfig(awsCfg), QueueURL: emu.InterruptionQueueURL(), QueueARN: emu.InterruptionQueueARN(), Region: emu.Region(), BatchSize: 10, VisibilityTimeout: 5 * time.Second}
	if r.dyn, err = dynamic.NewForConfig(r.cluster.RESTConfig); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(r.cluster.RESTConfig)
	if err != nil {
		return err
	}
	r.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	if _, err := r.admin.Core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.s.Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", r.s.Namespace, err)
	}
	fmt.Fprintf(r.o.Out, "control plane ready in %s; the functions authenticate with EKS tokens and run with the bootstrap's RBAC\n\n", time.Since(r.begin).Round(100*time.Millisecond))
	r.begin = r.clk.Now()
	r.lastChange = r.begin
	if err := r.apply(ctx, r.s.Manifests); err != nil {
		return fmt.Errorf("applying the scenario's manifests: %w", err)
	}
	return nil
}

func (r *runner) stop() {
	if r.emu != nil {
		r.emu.Close()
	}
	if r.cluster != nil {
		r.cluster.Stop()
	}
	if r.clk != nil {
		_ = r.clk.Close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// advance moves the virtual clock on by the real time since the last
// advance, speed times over, times the CPU share the machine gave the
// world meanwhile (pace): on a starved machine the control plane and the
// functions run slower, and a clock that kept real pace would have the
// interruption's two minutes and each step's timeout run out on work
// that was merely waiting for a CPU.
func (r *runner) advance() {
	r.realMu.Lock()
	defer r.realMu.Unlock()
	now := time.Now()
	share := r.pace.Share()
	r.clk.Step(time.Duration(float64(speed) * share * float64(now.Sub(r.real))))
	r.real = now
}

// fastForward skips ahead over a pure wait (consolidateAfter, the
// stabilisation delay, the node class refresh) while nothing moves.
func (r *runner) fastForward(d time.Duration) {
	r.clk.Step(d)
}

// step performs one step's action and runs the loop until its condition holds.
func (r *runner) step(ctx context.Context, i int, st Step) (StepResult, error) {
	r.advance()
	r.trackCost()
	from := r.since()
	res := StepResult{Name: st.Name, Start: from, CostFrom: r.costs.total()}
	fmt.Fprintln(r.o.Out)
	r.say("step %d/%d: %s", i+1, len(r.s.Steps), st.Name)
	r.marks = append(r.marks, mark{T: r.since().Seconds(), Name: st.Name})
	stepStart := r.now()
	var err error
	switch {
	case st.Apply != "":
		err = r.apply(ctx, st.Apply)
	case st.Scale != nil:
		err = r.scale(ctx, st.Scale)
	case st.Interrupt != nil:
		err = r.interrupt(ctx, st.Interrupt)
	case st.AMIRelease != "":
		imgs := r.emu.UpdateAMIs(st.AMIRelease)
		r.say("EKS publishes AMI release %s (%d images); al2023@latest now points at it", st.AMIRelease, len(imgs))
	}
	if err != nil {
		res.Failed = err.Error()
		return res, err
	}
	r.disrIdle = 0
	deadline := stepStart.Add(st.Timeout.Duration)
	for {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		r.advance()
		done, why := r.until(ctx, st, stepStart, r.tick(ctx))
		if done {
			break
		}
		if r.now().After(deadline) {
			res.Failed = fmt.Sprintf("%s not reached after %s: %s", st.Until, st.Timeout.Duration, why)
			r.say("step failed: %s", res.Failed)
			r.pendingReasons(ctx)
			return res, errors.New(res.Failed)
		}
		// Nothing has moved for a while and only a timer is left: skip ahead.
		if st.Until != UntilSettled && r.now().Sub(r.lastChange) > 3*time.Second {
			r.fastForward(5 * time.Second)
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.Took = r.now().Sub(stepStart)
	r.trackCost()
	res.CostTo = r.costs.total()
	res.CostCauses = r.costs.explain(from.Seconds(), r.since().Seconds())
	if st.Interrupt != nil && !r.deadline.IsZero() {
		if !r.movedAt.IsZero() && r.movedAt.Before(r.deadline) {
			res.Note = fmt.Sprintf("pods ran elsewhere %s before the instance's two-minute deadline", r.deadline.Sub(r.movedAt).Round(time.Second))
		} else {
			res.Note = "pods were still moving at the deadline"
		}
		r.say("%s", res.Note)
	}
	r.say("step done in %s; $/hour %.3f -> %.3f", res.Took.Round(time.Second), res.CostFrom, res.CostTo)
	if len(res.CostCauses) > 0 {
		r.say("$/hour %s, by cause: %s", signed(res.CostTo-res.CostFrom), strings.Join(res.CostCauses, "; "))
	}
	return res, nil
}

// tick is one turn of the world: the emulator moves, then each function
// runs as its trigger would fire it.
func (r *runner) tick(ctx context.Context) observed {
	if err := r.emu.Step(ctx); err != nil {
		r.o.Log.Warn("emulator step", "error", err)
	}
	now := r.now()
	// The provisioner's watch window reacts within about a second.
	if now.Sub(r.lastProv) >= time.Second {
		r.lastProv = now
		if _, err := r.prov.Provisioner().Pass(ctx); err != nil {
			r.o.Log.Warn("provisioner pass", "error", err)
		}
	}
	// The interruption function's queue is drained as events arrive.
	if out, err := r.queue.PollOnce(ctx, r.intr.InterruptionHandler()); err != nil {
		r.o.Log.Warn("interruption poll", "error", err)
	} else if out.Deleted < out.Received {
		// State-change events arrive for every launch and termination; only
		// messages left for redelivery are worth a line.
		r.say("interruption function: %d of %d message(s) left on the queue for redelivery", out.Received-out.Deleted, out.Received)
	}
	if now.Sub(r.lastDisr) >= 5*time.Second {
		r.lastDisr = now
		sum, err := r.disr.Disrupter().Run(ctx, fmt.Sprintf("demo-disruption-%d", now.UnixNano()))
		if err != nil {
			r.o.Log.Warn("disruption tick", "error", err)
		}
		if len(sum.Commands) == 0 {
			r.disrIdle++
		} else {
			r.disrIdle = 0
			r.lastChange, r.lastCommand = now, now
		}
		for _, c := range sum.Commands {
			if c.Action == "executed" {
				r.bands.executed(r.since().Seconds(), c.Method, c.Candidates, len(c.Replacements))
				r.costs.replaced(methodName(c.Method), c.Candidates, c.Replacements)
			}
			line := fmt.Sprintf("disruption: %s %s of %s", strings.ToLower(c.Method), c.Action, strings.Join(c.Candidates, ", "))
			if len(c.Replacements) > 0 {
				line += " -> " + strings.Join(c.Replacements, ", ")
			}
			if c.PriceBefore > 0 {
				line += fmt.Sprintf(" ($%.3f/h -> $%.3f/h)", c.PriceBefore, c.PriceAfter)
			}
			if c.Why != "" {
				line += ": " + c.Why
			}
			r.say("%s", line)
		}
	}
	return r.observe(ctx)
}

func (r *runner) pods(ctx context.Context) []corev1.Pod {
	l, err := r.admin.Core.CoreV1().Pods(r.s.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return l.Items
}

func (r *runner) nodeClaims(ctx context.Context) []karpv1.NodeClaim {
	l, err := r.admin.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return l.Items
}

// observed is what one look at the cluster read; a step's condition is
// judged on the same look that noted an interruption's move.
type observed struct {
	claims []karpv1.NodeClaim
	pods   []corev1.Pod
}

// observe prints what changed since the last look and samples the
// timeline, and returns what it read.
func (r *runner) observe(ctx context.Context) observed {
	claims := r.nodeClaims(ctx)
	live := map[string]bool{}
	for i := range claims {
		nc := &claims[i]
		live[nc.Name] = true
		v := r.claims[nc.Name]
		if v == nil {
			v = &claimView{created: true, createdAt: r.now()}
			r.claims[nc.Name] = v
			r.lastChange = r.now()
			req := nc.Spec.Resources.Requests
			types := 0
			for _, q := range nc.Spec.Requirements {
				if q.Key == wellknown.InstanceTypeLabel {
					types = len(q.Values)
				}
			}
			r.say("NodeClaim %s (nodepool %s): requests %s cpu, %s memory; %d instance types fit",
				nc.Name, nc.Labels[wellknown.NodePoolLabel], req.Cpu().String(), req.Memory().String(), types)
		}
		if !v.launched && nc.IsTrue(karpv1.ConditionTypeLaunched) {
			v.launched = true
			r.lastChange = r.now()
			it, zone, ct := nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.ZoneLabel], nc.Labels[wellknown.CapacityTypeLabel]
			r.say("  launched %s as %s %s in %s at $%.4f/h after %s (%s)",
				wellknown.InstanceIDFromProviderID(nc.Status.ProviderID), it, ct, zone, r.price(it, zone, ct), r.now().Sub(v.createdAt).Round(100*time.Millisecond),
				r.choice(nc, r.price(it, zone, ct), ct))
		}
		if !v.ready && nc.IsTrue(karpv1.ConditionTypeInitialized) {
			v.ready = true
			r.lastChange = r.now()
			r.say("  node %s ready %s after its NodeClaim", nc.Status.NodeName, r.now().Sub(v.createdAt).Round(time.Second))
		}
		if !v.deleting && nc.DeletionTimestamp != nil {
			v.deleting = true
			r.lastChange = r.now()
			why := "deleted"
			if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue {
				why = c.Reason
			} else if _, ok := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; ok {
				why = "interrupted"
			}
			r.costs.retiring(nc.Name, why)
			r.say("NodeClaim %s retiring (%s): draining node %s", nc.Name, why, nc.Status.NodeName)
		}
	}
	for name := range r.claims {
		if !live[name] {
			r.say("NodeClaim %s gone: instance terminated, node removed", name)
			r.bands.gone(r.since().Seconds(), name)
			delete(r.claims, name)
			r.lastChange = r.now()
		}
	}
	pods := r.pods(ctx)
	running, pending := 0, 0
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil:
			running++
		case p.Status.Phase == corev1.PodPending:
			pending++
		}
	}
	r.noteMoved(pods)
	r.trackCost()
	nodes := r.readyNodes(ctx)
	status := fmt.Sprintf("nodes %d | pods running %d, pending %d | $%.3f/h", nodes, running, pending, r.cost())
	if status != r.status && r.now().Sub(r.lastStatus) >= 2*time.Second {
		r.status, r.lastStatus = status, r.now()
		r.say("%s", status)
	}
	if r.now().Sub(r.lastSample) >= 2*time.Second {
		r.lastSample = r.now()
		r.timeline = append(r.timeline, sample{T: r.since().Seconds(), Nodes: nodes, Pending: pending, Running: running, Claims: len(claims), Cost: r.cost()})
	}
	return observed{claims: claims, pods: pods}
}

// noteMoved records when an interruption's workload first ran elsewhere
// (workloadMoved).
func (r *runner) noteMoved(pods []corev1.Pod) {
	if len(r.interruptedNodes) == 0 || !r.movedAt.IsZero() || !workloadMoved(pods, r.interruptedNodes) {
		return
	}
	r.movedAt = r.now()
}

// workloadMoved reports that an interruption's workload runs elsewhere: no
// pod but a DaemonSet's is left on the interrupted nodes, and none is
// pending. DaemonSet pods are left out of both: theirs on the interrupted
// node goes with the node, and a new node's own is pending until it is
// bound, which says nothing about the workload (consolidation may be
// replacing nodes in the same minutes).
func workloadMoved(pods []corev1.Pod, interrupted map[string]bool) bool {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" {
			continue
		}
		if interrupted[p.Spec.NodeName] || p.Status.Phase == corev1.PodPending {
			return false
		}
	}
	return true
}

func (r *runner) readyNodes(ctx context.Context) int {
	l, err := r.admin.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, node := range l.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && node.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n
}

// price is what the emulated account charges for the offering.
func (r *runner) price(instanceType, zone, capacityType string) float64 {
	if capacityType == wellknown.CapacityTypeSpot {
		return r.emu.SpotPrice(instanceType, zone)
	}
	p, _ := r.emu.OnDemandPrice(instanceType)
	return p
}

// choice says how EC2 chose among the claim's candidates and how the price
// compares with the cheapest candidate offering at the emulator's prices.
func (r *runner) choice(nc *karpv1.NodeClaim, chosen float64, ct string) string {
	allowed := map[string][]string{}
	for _, q := range nc.Spec.Requirements {
		if q.Operator == corev1.NodeSelectorOpIn {
			allowed[q.Key] = q.Values
		}
	}
	zones := allowed[wellknown.ZoneLabel]
	if len(zones) == 0 {
		seen := map[string]bool{}
		for _, sn := range r.emu.Subnets() {
			if !seen[sn.Zone] {
				seen[sn.Zone] = true
				zones = append(zones, sn.Zone)
			}
		}
	}
	types := allowed[wellknown.InstanceTypeLabel]
	cheapest := 0.0
	for _, it := range types {
		for _, z := range zones {
			if p := r.price(it, z, ct); p > 0 && (cheapest == 0 || p < cheapest) {
				cheapest = p
			}
		}
	}
	strategy := "lowest-price"
	if ct == wellknown.CapacityTypeSpot {
		strategy = "price-capacity-optimized"
	}
	why := fmt.Sprintf("%s fleet over %d candidate types", strategy, len(types))
	switch {
	case cheapest == 0:
	case chosen <= cheapest*1.0001:
		why += ": the cheapest candidate"
	default:
		why += fmt.Sprintf(", cheapest candidate $%.4f/h", cheapest)
	}
	return why
}

// trackCost shows the cost ledger the instances paid for now.
func (r *runner) trackCost() {
	var now []paidInstance
	for _, i := range r.emu.Instances(emulator.NotTerminated) {
		now = append(now, paidInstance{ID: i.ID, Claim: i.Tags[wellknown.NodeClaimTagKey], NodePool: i.Tags[wellknown.NodePoolTagKey],
			InstanceType: i.InstanceType, CapacityType: i.CapacityType, Price: r.price(i.InstanceType, i.Zone, i.CapacityType)})
	}
	r.costs.observe(r.since().Seconds(), now)
}

// cost is the hourly price of every instance not terminated.
func (r *runner) cost() float64 {
	total := 0.0
	for _, i := range r.emu.Instances(emulator.NotTerminated) {
		total += r.price(i.InstanceType, i.Zone, i.CapacityType)
	}
	return total
}

// until evaluates a step's condition on the round's look at the cluster,
// saying what it still waits for.
func (r *runner) until(ctx context.Context, st Step, stepStart time.Time, seen observed) (bool, string) {
	claims := seen.claims
	for _, p := range seen.pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false, fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
		}
	}
	if st.Interrupt != nil && !r.deadline.IsZero() {
		// Every pod runs, and observe noted the move on these pods. If the
		// queue has not delivered the event yet, the world only looks
		// settled: the interrupted node still runs its pods.
		if r.movedAt.IsZero() {
			return false, "the interrupted nodes still run their pods"
		}
	}
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			return false, fmt.Sprintf("NodeClaim %s is terminating", nc.Name)
		}
		if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
			return false, fmt.Sprintf("NodeClaim %s is not initialized", nc.Name)
		}
	}
	switch st.Until {
	case UntilConsolidated:
		if r.disrIdle < 3 || r.now().Sub(stepStart) < time.Minute {
			return false, "disruption may still act"
		}
	case UntilDriftless:
		nc, err := r.admin.EC2NodeClasses.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if at, ok := nodeclass.ResolvedAt(nc); !ok || at.Before(stepStart) {
			return false, "the EC2NodeClass has not been resolved since the release"
		}
		current := map[string]bool{}
		for _, a := range nc.Status.AMIs {
			current[a.ID] = true
		}
		for i := range claims {
			if !current[claims[i].Status.ImageID] || claims[i].IsTrue(karpv1.ConditionTypeDrifted) {
				return false, fmt.Sprintf("NodeClaim %s still runs image %s", claims[i].Name, claims[i].Status.ImageID)
			}
		}
		// A roll leaves nodes behind that disruption then takes (a
		// drifted node's replacement whose pods did not come back, as
		// the GPU Job's evicted pod does not): the step ends once
		// disruption has been quiet for longer than a consolidateAfter
		// and its validation, so whether they are in the step's summary
		// does not depend on the machine's speed.
		if r.now().Sub(r.lastCommand) < driftQuiet {
			return false, "disruption may still act"
		}
	}
	return true, ""
}

// apply server-side applies multi-document YAML (namespaced objects go to
// the scenario's namespace).
func (r *runner) apply(ctx context.Context, manifests string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifests)), 4096)
	var kinds []string
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("decoding manifests: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		var res dynamic.ResourceInterface = r.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(r.s.Namespace)
			}
			res = r.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		if _, err := res.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "karpless-demo", Force: new(true)}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
		}
		kinds = append(kinds, fmt.Sprintf("%s/%s", gvk.Kind, u.GetName()))
	}
	r.say("applied %s", strings.Join(kinds, ", "))
	return nil
}

func (r *runner) scale(ctx context.Context, s *Scale) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, s.Replicas)
	if _, err := r.admin.Core.AppsV1().Deployments(r.s.Namespace).Patch(ctx, s.Deployment, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scaling deployment %s: %w", s.Deployment, err)
	}
	r.say("deployment %s scaled to %d replicas", s.Deployment, s.Replicas)
	return nil
}

// interrupt sends events for the busiest matching nodes.
func (r *runner) interrupt(ctx context.Context, in *Interrupt) error {
	podsOn := map[string]int{}
	for _, p := range r.pods(ctx) {
		podsOn[p.Spec.NodeName]++
	}
	claims := r.nodeClaims(ctx)
	sort.SliceStable(claims, func(i, j int) bool { return podsOn[claims[i].Status.NodeName] > podsOn[claims[j].Status.NodeName] })
	var ids, names []string
	r.interruptedNodes, r.movedAt, r.deadline = map[string]bool{}, time.Time{}, time.Time{}
	for _, nc := range claims {
		if in.CapacityType != "" && nc.Labels[wellknown.CapacityTypeLabel] != in.CapacityType {
			continue
		}
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" && podsOn[nc.Status.NodeName] > 0 {
			ids = append(ids, id)
			r.interruptedNodes[nc.Status.NodeName] = true
			names = append(names, fmt.Sprintf("%s (%s, %d pods)", nc.Status.NodeName, nc.Labels[wellknown.InstanceTypeLabel], podsOn[nc.Status.NodeName]))
		}
		if len(ids) == in.Count {
			break
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("no %s node with pods to interrupt", in.CapacityType)
	}
	ev := emulator.Event{Kind: emulator.EventKind(in.Kind), InstanceIDs: ids}
	if in.Kind == string(emulator.EventSpotInterruption) {
		ev.TerminateAfter = 2 * time.Minute
		r.deadline = r.now().Add(2 * time.Minute)
	}
	if _, err := r.emu.InjectEvent(ev); err != nil {
		return err
	}
	for _, id := range ids {
		r.interrupted[id] = true
	}
	if r.deadline.IsZero() {
		r.say("EC2 sends %s for %s", in.Kind, strings.Join(names, ", "))
		return nil
	}
	r.say("EC2 sends %s for %s; the instance is reclaimed at %s", in.Kind, strings.Join(names, ", "), clockString(r.deadline.Sub(r.begin)))
	return nil
}

// pendingReasons prints what kube-scheduler says about each pending pod.
func (r *runner) pendingReasons(ctx context.Context) {
	for _, p := range r.pods(ctx) {
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		msg := "not scheduled yet"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Message
			}
		}
		if p.Spec.NodeName != "" {
			msg = fmt.Sprintf("bound to node %s, which has not started it", p.Spec.NodeName)
		}
		r.say("pending pod %s: %s", p.Name, msg)
	}
}

// final reads the end state.
func (r *runner) final(ctx context.Context, sum *Summary) error {
	r.advance()
	for _, p := range r.observe(ctx).pods {
		switch {
		case p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil:
			sum.PodsRunning++
		case p.Status.Phase == corev1.PodPending:
			sum.PodsPending++
		}
	}
	if sum.PodsPending > 0 {
		r.pendingReasons(ctx)
	}
	sum.Nodes = r.readyNodes(ctx)
	sum.CostPerHour = r.cost()
	leaks, err := r.emu.Leaks(ctx, r.admin)
	if err != nil {
		return fmt.Errorf("checking for leaked instances: %w", err)
	}
	sum.Leaked = len(leaks)
	for _, l := range leaks {
		r.say("LEAKED instance %s (%s, tags %v)", l.ID, l.InstanceType, l.Tags)
	}
	return nil
}

func (e *Expect) check(s *Summary) error {
	var errs []error
	cmp := func(what string, want *int, got int) {
		if want != nil && *want != got {
			errs = append(errs, fmt.Errorf("expected %s=%d, got %d", what, *want, got))
		}
	}
	cmp("nodes", e.Nodes, s.Nodes)
	cmp("pods-running", e.PodsRunning, s.PodsRunning)
	cmp("pods-pending", e.PodsPending, s.PodsPending)
	if s.Leaked != 0 {
		errs = append(errs, fmt.Errorf("%d leaked instances", s.Leaked))
	}
	return errors.Join(errs...)
}
