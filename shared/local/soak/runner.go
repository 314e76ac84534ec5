package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/clockctx"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/eventsource"
	"github.com/karpless/karpless/shared/local/pace"
)

// The functions' triggers, as the CDK stack deploys them.
const (
	tickEvery           = time.Minute      // EventBridge schedule of the provisioner and disruption
	tickTimeout         = 70 * time.Second // their Lambda timeout (infra/stack)
	interruptionTimeout = 60 * time.Second
	queueVisibility     = 6 * interruptionTimeout // the queue's visibility timeout
	batchSize           = 10
	// maxInterruptionInvocations: the event source mapping runs batches
	// concurrently.
	maxInterruptionInvocations = 2
)

// The chaos schedule's kills and pace.
const (
	// killRate of invocations die at a random external call.
	killRate = 0.10
	// maxKillPoint bounds the call a kill lands on; an invocation that
	// makes fewer calls is not killed.
	maxKillPoint = 30
	// checkEvery is how often the whole world is checked.
	checkEvery = 15 * time.Second
	// restCheckEvery is how often settling asks whether the cluster is at
	// rest: a few busy steps, far below the quiet window (minutes), so a
	// rest is seen at most this late; asking every step listed the pods
	// and claims several times a second of real time.
	restCheckEvery = 6 * time.Second
	// busyStep is how far virtual time moves while something is in motion
	// (while invocations run, times the CPU share the machine left them:
	// pacer).
	busyStep = 2 * time.Second
	// stepPause lets the real-time parts (kube-scheduler,
	// kube-controller-manager, watches) react between steps.
	stepPause = 4 * time.Millisecond
	// activeSpeed bounds how much faster than real time the clock runs
	// while an invocation works between its calls (times the CPU share).
	// A Lambda's own work takes its real time; stepping busyStep per
	// loop instead ran the clock some hundred times faster than the
	// functions' work, and on a loaded machine (the CI seeds beside make
	// test's other packages) a pass that computed for a second of real
	// time met its 70 s deadline: "listing nodeoverlays: context deadline
	// exceeded", claims left unlaunched for two ticks.
	activeSpeed = 20
)

// seedResult is one seed's share of the report.
type seedResult struct {
	// dir keeps the seed's logs (empty once removed).
	dir                        string
	virtual, real              time.Duration
	invocations, kills, faults int
	violations                 []Violation
	summary                    string
	coverage                   map[string]int64
	coverageLine               string
}

// runner drives one seed: the clock, the triggers and the chaos.
type runner struct {
	w     *world
	chaos *chaos
	queue *sqs.Client

	// calm stops churn, kills and world moves (the settling phase).
	calm        atomic.Bool
	active      atomic.Int64
	interrupts  atomic.Int64
	invocations atomic.Int64
	kills       atomic.Int64
	wg          sync.WaitGroup

	nextTick, nextCheck time.Time
	// pace slows the clock while invocations run on a starved machine.
	pace *pace.Pacer
	// stepped is the real time the clock last moved.
	stepped time.Time
	// summary describes the cluster at quiescence.
	summary string

	// The scenarios (scenarios.go): the next one due, the orphans made,
	// the armed kill after CreateFleet and whether it fired.
	nextScenario int
	tried        bool
	orphans      int
	fleetKill    fleetKillState
	fleetKilled  atomic.Bool
}

func runSeed(ctx context.Context, o Options, seed uint64) (res seedResult, err error) {
	start := time.Now()
	dir := o.Dir
	keep := dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "karpless-soak-"); err != nil {
			return res, err
		}
	}
	dir = filepath.Join(dir, fmt.Sprintf("seed-%d", seed))
	w, err := newWorld(ctx, o, seed, dir)
	if err != nil {
		return res, err
	}
	// The fake kubelet reads pods from a watch, as a real one: listing
	// them every turn was the API server's most frequent request (1,300
	// to 1,600 a seed).
	stopWatch := w.emu.WatchPods(ctx)
	defer func() {
		stopWatch()
		w.close()
		if !keep && len(res.violations) == 0 && err == nil {
			_ = os.RemoveAll(filepath.Dir(dir))
		}
	}()
	if err := w.setupWorkload(ctx); err != nil {
		return res, err
	}
	awsCfg, err := w.emu.AWSConfig("interruption", 0)
	if err != nil {
		return res, err
	}
	r := &runner{w: w, chaos: newChaos(w), queue: sqs.NewFromConfig(awsCfg), nextTick: w.now(), nextCheck: w.now(), pace: pace.New()}
	w.afterMoves = func() bool { return !r.calm.Load() }
	r.loop(ctx, w.begin.Add(o.Duration), o.FailFast)
	// Settling may wait out a terminationGracePeriod (10 minutes) on a
	// node a do-not-disrupt pod holds, after drift or expiry chose it.
	settle := 45 * time.Minute
	if o.Quick {
		settle = 30 * time.Minute
	}
	if o.FailFast && w.inv.failed() {
		r.calm.Store(true)
		r.drain(ctx)
	} else {
		r.settle(ctx, settle)
	}

	res.virtual = w.since()
	res.real = time.Since(start)
	res.invocations, res.kills = int(r.invocations.Load()), int(r.kills.Load())
	for _, n := range w.emu.HostileEvents() {
		res.faults += n
	}
	for k, n := range w.kchaos.Stats() {
		if k != "requests" && k != "reached-server" {
			res.faults += n
		}
	}
	res.faults += r.chaos.actions + int(w.inv.worldMoves.Load())
	w.inv.mu.Lock()
	res.violations = append(res.violations, w.inv.violations...)
	w.inv.mu.Unlock()
	res.summary = r.summary
	res.coverage, res.coverageLine = w.cov.counts(), w.cov.String()
	res.dir = dir
	return res, ctx.Err()
}

// loop runs the world until the virtual clock reaches until, or, with
// failFast, until the first violation.
func (r *runner) loop(ctx context.Context, until time.Time, failFast bool) {
	w := r.w
	for w.now().Before(until) && ctx.Err() == nil && !(failFast && w.inv.failed()) {
		r.turn(ctx)
	}
}

// turn is one step of the world: triggers fire, the chaos schedule acts,
// the emulator moves, the invariants are checked, and the clock advances.
func (r *runner) turn(ctx context.Context) {
	w := r.w
	now := w.now()
	if !now.Before(r.nextTick) {
		r.invoke(ctx, "provisioner", tickTimeout, func(ctx context.Context, env *app.Env) (string, error) {
			s, err := env.ProvisionerHandler()(ctx, lambdaevents.CloudWatchEvent{})
			return fmt.Sprintf("provisioner: %d pending, %d claims created, %d launched %s", s.PendingPods, s.NodeClaimsCreated, s.Launched, s.Skipped), err
		})
		r.invoke(ctx, "disruption", tickTimeout, func(ctx context.Context, env *app.Env) (string, error) {
			s, err := env.DisruptionHandler()(ctx, lambdaevents.CloudWatchEvent{})
			line := fmt.Sprintf("disruption: %d passes, %d simulations %s", s.Passes, s.Simulations, s.Skipped)
			if len(s.Unconsolidatable) > 0 {
				line += fmt.Sprintf("; unconsolidatable %d, first %s", len(s.Unconsolidatable), s.Unconsolidatable[0])
			}
			for _, c := range s.Commands {
				line += fmt.Sprintf("; %s %s %v->%v (%s)", c.Action, c.Method, c.Candidates, c.Replacements, c.Why)
			}
			return line, err
		})
		r.nextTick = r.nextTick.Add(tickEvery)
	}
	r.chaos.due(ctx)
	if !r.calm.Load() {
		r.chaos.act(ctx)
		r.scenarioDue(ctx)
	}
	r.pollQueue(ctx)
	if err := w.emu.StepWatched(ctx); err != nil {
		w.inv.note("emulator step: %v", err)
	}
	if !now.Before(r.nextCheck) {
		w.inv.check(ctx)
		r.nextCheck = now.Add(checkEvery)
	}
	r.advance()
}

// advance waits for the functions' calls in flight to be answered, then
// moves the clock: by busyStep while anything moves, else straight to
// the next thing due.
func (r *runner) advance() {
	w := r.w
	start := time.Now()
	wait := start.Add(2 * time.Second)
	for w.inflight.Load() > 0 && time.Now().Before(wait) {
		time.Sleep(500 * time.Microsecond)
	}
	step := busyStep
	if r.active.Load() > 0 {
		worked := time.Duration(-1) // a call outstanding for two seconds
		if w.inflight.Load() == 0 && !r.stepped.IsZero() {
			worked = start.Sub(r.stepped)
		}
		step = activeStep(worked, r.pace.Share())
	}
	if !r.busy() {
		next := r.nextTick
		if !r.calm.Load() && r.chaos.nextAt().Before(next) {
			next = r.chaos.nextAt()
		}
		if r.nextCheck.Before(next) {
			next = r.nextCheck
		}
		step = max(next.Sub(w.now()), busyStep)
	}
	w.clk.Step(step)
	r.stepped = time.Now()
	time.Sleep(stepPause)
}

// activeStep is how far the clock moves while invocations run: busyStep
// times the CPU share, and, when the invocations worked between their
// calls for worked of real time since the last step (negative: a call has
// been outstanding for two seconds, and the clock moves on), at most
// activeSpeed times that.
func activeStep(worked time.Duration, share float64) time.Duration {
	step := time.Duration(float64(busyStep) * share)
	if worked >= 0 {
		step = min(step, time.Duration(float64(worked)*activeSpeed*share))
	}
	return step
}

// busy says whether anything is in motion that needs small steps.
func (r *runner) busy() bool {
	if r.active.Load() > 0 {
		return true
	}
	moving := r.w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateShuttingDown ||
			(i.State == emulator.StateRunning && r.w.now().Sub(i.StateChanged) < time.Minute)
	})
	if len(moving) > 0 {
		return true
	}
	for _, m := range r.w.emu.Messages(r.w.emu.InterruptionQueueURL()) {
		if !m.InFlight {
			return true
		}
	}
	return false
}

// invoke runs one invocation of a function, as Lambda would: its own
// engines, a deadline, maybe a kill at one of its external calls.
func (r *runner) invoke(ctx context.Context, identity string, timeout time.Duration, run func(context.Context, *app.Env) (string, error)) {
	w := r.w
	n := r.invocations.Add(1)
	ks := &deploy.KillSwitch{}
	if !r.calm.Load() && w.chance(killRate) {
		ks.At, ks.After = 1+w.intn(maxKillPoint), w.chance(0.5)
	}
	var fleetKill *deploy.KillSwitch
	if identity == "provisioner" && !r.calm.Load() {
		if fleetKill = r.takeFleetKill(); fleetKill != nil {
			ks = fleetKill
		}
	}
	holder := fmt.Sprintf("%s-%d", identity, n)
	warm := w.container(identity)
	env, err := w.env(identity, holder, ks, warm)
	if err != nil {
		w.inv.note("%s could not start: %v", holder, err)
		return
	}
	ictx, cancel := clockctx.WithTimeout(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: holder}), w.clk, timeout)
	r.active.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.active.Add(-1)
		defer cancel()
		// The runtime stops the invocation at its deadline: nothing after.
		stop := context.AfterFunc(ictx, func() {
			if errors.Is(ictx.Err(), context.DeadlineExceeded) {
				ks.Kill()
			}
		})
		defer stop()
		line, err := run(ictx, env)
		if fleetKill != nil {
			r.fleetKillDone(fleetKill)
		}
		if identity == "provisioner" {
			w.inv.provisioned()
		}
		if ks.Dead() {
			r.kills.Add(1)
			if identity != "disruption" {
				w.inv.killed() // a launch may have died with it
			}
			calls := ks.Calls()
			at := "its deadline"
			if ks.At > 0 && ks.At <= len(calls) {
				when := "before"
				if ks.After {
					when = "after"
				}
				at = fmt.Sprintf("%s call %d (%s)", when, ks.At, calls[ks.At-1])
			}
			w.inv.note("%s killed at %s", holder, at)
			return
		}
		w.release(identity, warm)
		if err != nil {
			line += fmt.Sprintf(" [errors: %v]", err)
		}
		w.inv.note("%s: %s", holder, line)
	}()
}

// pollQueue is the SQS event source mapping: it hands visible messages to
// the interruption function in batches and deletes what the function did
// not report as failed (nothing, if the invocation died).
func (r *runner) pollQueue(ctx context.Context) {
	w := r.w
	if r.interrupts.Load() >= maxInterruptionInvocations {
		return
	}
	visible := false
	for _, m := range w.emu.Messages(w.emu.InterruptionQueueURL()) {
		visible = visible || !m.InFlight
	}
	if !visible {
		return
	}
	out, err := r.queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(w.emu.InterruptionQueueURL()), MaxNumberOfMessages: batchSize,
		VisibilityTimeout:           int32(queueVisibility / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil || len(out.Messages) == 0 {
		return
	}
	batch := lambdaevents.SQSEvent{Records: eventsource.Records(out.Messages, w.emu.InterruptionQueueARN(), w.emu.Region())}
	r.interrupts.Add(1)
	r.invoke(ctx, "interruption", interruptionTimeout, func(ctx context.Context, env *app.Env) (string, error) {
		defer r.interrupts.Add(-1)
		resp, err := env.InterruptionHandler()(ctx, batch)
		if err != nil || ctx.Err() != nil {
			return fmt.Sprintf("interruption: batch of %d failed", len(batch.Records)), err
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		deleted := 0
		for _, m := range batch.Records {
			if failed[m.MessageId] {
				continue
			}
			// The mapping's own calls: not the function's, not killed.
			if _, err := r.queue.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(w.emu.InterruptionQueueURL()), ReceiptHandle: aws.String(m.ReceiptHandle)}); err == nil {
				deleted++
			}
		}
		return fmt.Sprintf("interruption: %d messages, %d done, %d failed", len(batch.Records), deleted, len(failed)), nil
	})
}

// settle stops the chaos and lets the functions bring the cluster to rest,
// then checks what must hold at quiescence.
func (r *runner) settle(ctx context.Context, limit time.Duration) {
	w := r.w
	r.calm.Store(true)
	r.chaos.liftAll()
	w.inv.note("settling: churn, kills and capacity faults stop")
	// The evening's scale-down: every workload to its smallest, so that
	// the cluster at rest has nodes to empty and to shrink, and the cost
	// check judges consolidation, not only what churn left.
	for _, d := range workloads() {
		w.scale(ctx, d.name, d.min)
	}
	start := w.now()
	until := start.Add(limit)
	quietSince, nextRestCheck := time.Time{}, time.Time{}
	for w.now().Before(until) && ctx.Err() == nil {
		r.turn(ctx)
		if w.now().Before(nextRestCheck) {
			continue
		}
		nextRestCheck = w.now().Add(restCheckEvery)
		if !r.quiet(ctx) {
			quietSince = time.Time{}
			if claims, err := w.admin.NodeClaims.List(ctx, metav1.ListOptions{}); err == nil {
				until = settleDeadline(claims.Items, start, limit, r.quietWindow(ctx), until)
			}
			continue
		}
		if quietSince.IsZero() {
			quietSince = w.now()
		}
		if w.now().Sub(quietSince) < r.quietWindow(ctx) {
			continue
		}
		// At rest, but the invocations still running may act yet (a
		// disruption tick's last pass executing a command the last world
		// move allowed): let them finish, and judge only a cluster still
		// at rest after them.
		r.drain(ctx)
		if r.quiet(ctx) {
			break
		}
		w.inv.note("moving again after the running invocations finished: %s", r.unrest(ctx))
		quietSince = time.Time{}
	}
	if quietSince.IsZero() || w.now().Sub(quietSince) < r.quietWindow(ctx) {
		w.inv.check(ctx)
		w.inv.violate("settle", "consolidation converges (no churn loop)", "the cluster did not come to rest within %s of the churn stopping: %s", w.now().Sub(start).Round(time.Second), r.unrest(ctx))
	}
	r.drain(ctx)
	r.quiescence(ctx)
}

// settleDeadline moves the end of settling past a drain that waits, by
// design, for a claim's terminationGracePeriod (a do-not-disrupt pod on a
// node drift or expiry chose late in the churn): that wait is Karpenter's
// behaviour, not a churn loop. A loop that keeps starting such drains still
// fails, as the deadline never moves past twice the limit.
func settleDeadline(claims []karpv1.NodeClaim, start time.Time, limit, quiet time.Duration, until time.Time) time.Time {
	for _, nc := range claims {
		if nc.DeletionTimestamp == nil || nc.Spec.TerminationGracePeriod == nil {
			continue
		}
		end := nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration + quiet + 3*time.Minute)
		if end.After(until) {
			until = end
		}
	}
	if hard := start.Add(2 * limit); until.After(hard) {
		until = hard
	}
	return until
}

// drain lets the invocations still running finish: they wait on the
// virtual clock (watch windows, backoffs), so it keeps moving.
func (r *runner) drain(ctx context.Context) {
	for r.active.Load() > 0 && ctx.Err() == nil {
		if err := r.w.emu.StepWatched(ctx); err != nil {
			r.w.inv.note("emulator step: %v", err)
		}
		r.advance()
	}
	r.wg.Wait()
}

// quietWindow is how long the cluster must stay still to be at rest: long
// enough for every node to become consolidatable (the pools' longest
// consolidateAfter) and for a tick to look at it, validate and act; and for
// a "nothing to consolidate" found while offerings were marked unavailable
// (by an interruption or a capacity error, for
// timing.DefaultUnavailableOfferingsTTL), and then held while the cluster
// does not change (timing.ConsolidatedTTL, as Karpenter), to be computed
// afresh. Checked sooner, the cost comparison would judge a decision made
// on facts that have since changed.
func (r *runner) quietWindow(ctx context.Context) time.Duration {
	window := timing.ConsolidatedTTL + timing.DefaultUnavailableOfferingsTTL + 2*time.Minute
	pools, err := r.w.admin.NodePools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return window
	}
	for _, np := range pools.Items {
		if d := np.Spec.Disruption.ConsolidateAfter.Duration; d != nil {
			window = max(window, *d+2*time.Minute)
		}
	}
	return window
}

// quiet: every pod runs, every claim is initialized and staying, no
// command is in flight, no instance is changing state.
func (r *runner) quiet(ctx context.Context) bool { return r.unrest(ctx) == "" }

func (r *runner) unrest(ctx context.Context) string {
	w := r.w
	for _, p := range w.pods(ctx) {
		if p.DeletionTimestamp != nil || (p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
			target := p.Spec.NodeName
			if a := p.Spec.Affinity; target == "" && a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					for _, f := range t.MatchFields {
						target = "for node " + strings.Join(f.Values, ",")
					}
				}
			}
			return fmt.Sprintf("pod %s is %s (deleting %v, node %q): %s", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, target, podReason(&p))
		}
	}
	claims, err := w.admin.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil || !nc.IsTrue(karpv1.ConditionTypeInitialized) {
			return "nodeclaim " + nc.Name + " is moving"
		}
		if _, ok := nc.Annotations[disruption.CommandAnnotation]; ok {
			return "nodeclaim " + nc.Name + " is in a disruption command"
		}
	}
	if moving := w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateShuttingDown
	}); len(moving) > 0 {
		return "instance " + moving[0].ID + " is " + moving[0].State
	}
	return ""
}
