// Package disrupt is the disruption function's tick: it takes the
// disruption lease, drains and terminates what is being deleted, collects
// garbage, expires old NodeClaims, keeps the NodeClaims' disruption
// conditions current, and carries disruption commands across ticks.
//
// A command lives only in annotations on its candidate NodeClaims
// (disruption.Record). It is first proposed (nothing else changes), then
// validated again against a fresh snapshot once its method's delay has
// passed, then executed: the record turns Executing and names the
// replacement NodeClaims before any exists, the replacements are created
// under those names and launched, the candidates are tainted
// karpenter.sh/disrupted and marked with the DisruptionReason condition;
// once every replacement is initialized the candidates are deleted and
// shared/ticks/termination drains them. A replacement that disappears or does not
// initialize in time abandons the command: uninitialized replacements are
// deleted, the candidates untainted and unmarked. Every step is idempotent
// and checked against what the cluster shows, so a tick killed anywhere is
// continued or cleaned up by the next.
package disrupt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	awszonalshift "github.com/karpless/karpless/shared/aws/zonalshift"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/repair"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/clockctx"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/function/tick"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/ticks/garbagecollection"
	"github.com/karpless/karpless/shared/ticks/lifecycle"
	"github.com/karpless/karpless/shared/ticks/termination"
)

// LeaseName is the disruption function's lease: one tick acts at a time.
// It is separate from the provisioner's; the two do not launch for the same
// pods (the provisioner sees replacements in flight).
const LeaseName = "karpless-disruption"

// StateConfigMap keeps the little the tick remembers between invocations:
// when garbage was last collected and where single-node consolidation
// stopped.
const StateConfigMap = "karpless-disruption"

// maxNotesPerPass bounds DisruptionBlocked/Unconsolidatable Events.
const maxNotesPerPass = 20

// Instances is the EC2 side of the tick.
type Instances interface {
	termination.Instances
	List(ctx context.Context, states ...string) ([]instance.Instance, error)
	// Health is EC2's instance status: impaired checks, scheduled events.
	Health(ctx context.Context) ([]repair.InstanceStatus, error)
}

// Provisioning lends the disruption tick, per pass, what replacing a node
// needs: the launchable instance types and the creation and launch of
// replacement NodeClaims (the provisioner, through app.Lend). The pass's
// Events and metrics are the tick's, flushed by it.
type Provisioning interface {
	NewSession(ctx context.Context, nodeClasses []*awsv1.EC2NodeClass, metrics *record.Metrics, events *record.Recorder) (Session, error)
}

// Session is one pass's loan; Close saves the capacity marks its launches
// made.
type Session interface {
	Guard(g lease.Guard)
	Classes() map[string]*scheduling.NodeClass
	CreateAndLaunch(ctx context.Context, claims []planning.NewClaim) ([]*karpv1.NodeClaim, error)
	Advance(ctx context.Context, claims []*karpv1.NodeClaim, nodes []*corev1.Node) (lifecycle.Summary, error)
	Close(ctx context.Context)
}

// EC2 reads instances' security groups for drift.
type EC2 interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// Disrupter holds the clients and settings of the disruption tick; it keeps
// no cluster data between invocations.
type Disrupter struct {
	Config config.Config
	Kube   *kube.Clients
	// Provisioning lends the instance types and launches replacements.
	Provisioning Provisioning
	Instances    Instances
	// ZonalShifts reads the zones ARC shifts the cluster away from
	// (ENABLE_ZONAL_SHIFT); nil reads none (zonalshift.go).
	ZonalShifts awszonalshift.Source
	// EC2 is optional: without it security-group drift is not checked.
	EC2 EC2
	// Templates is optional: without it launch templates are not collected.
	Templates garbagecollection.Templates
	Clock     clock.WithTicker
	Log       *slog.Logger
	// Metrics and Events are per invocation; Run creates them when nil.
	Metrics *record.Metrics
	Events  *record.Recorder
	// MetricsOut receives the EMF lines after each pass of Run and at its
	// end (nil: discarded).
	MetricsOut io.Writer

	ReplacementTimeout time.Duration
	GCInterval         time.Duration
	PollInterval       time.Duration

	// Decisions, in shadow mode (MODE=shadow), records the commands,
	// expirations, repairs and scale-downs a pass decides instead of
	// carrying them out; the pass writes nothing of Karpenter's: it does
	// not drain or terminate (termination), collect garbage, write
	// NodeClaim conditions or NodePool status and hashes (it keeps them in
	// memory for its own decisions), relabel, untaint or move commands.
	// Nil acts.
	Decisions *shadow.Recorder
}

// Command is what a pass did with one command, for logs and tests.
type Command struct {
	ID           string   `json:"id"`
	Method       string   `json:"method"`
	Reason       string   `json:"reason"`
	Decision     string   `json:"decision"`
	Candidates   []string `json:"candidates"`
	Replacements []string `json:"replacements,omitempty"`
	// Action is proposed, rejected, deferred (pods landed on a candidate
	// since validation), executed, waiting, finished or abandoned.
	Action      string  `json:"action"`
	Why         string  `json:"why,omitempty"`
	PriceBefore float64 `json:"priceBefore"`
	PriceAfter  float64 `json:"priceAfter"`
}

// Summary is what a tick did.
type Summary struct {
	Skipped string `json:"skipped,omitempty"`
	// Paused: the pause switch was on; the tick did nothing.
	Paused      bool                      `json:"paused,omitempty"`
	Passes      int                       `json:"passes"`
	Termination termination.Summary       `json:"termination"`
	Garbage     garbagecollection.Summary `json:"garbage"`
	Expired     []string                  `json:"expired,omitempty"`
	// Repaired are NodeClaims deleted for an unhealthy node (NODE_REPAIR).
	Repaired []string `json:"repaired,omitempty"`
	// Impaired are NodeClaims deleted because EC2 reports their instance
	// impaired or scheduled for an event.
	Impaired []string `json:"impaired,omitempty"`
	// ScaledDown are NodeClaims of static NodePools deleted beyond their
	// replicas.
	ScaledDown []string  `json:"scaledDown,omitempty"`
	Untainted  []string  `json:"untainted,omitempty"`
	Commands   []Command `json:"commands,omitempty"`
	// ShadowDecisions counts what a shadow pass recorded instead of
	// doing it.
	ShadowDecisions int `json:"shadowDecisions,omitempty"`
	// Blocked and Unconsolidatable say why nodes were not disrupted (the
	// first few, as "nodeclaim: why").
	Blocked          []string `json:"blocked,omitempty"`
	Unconsolidatable []string `json:"unconsolidatable,omitempty"`
	// StatusUpdates counts NodeClaims whose disruption conditions changed.
	StatusUpdates int `json:"statusUpdates"`
	// StatusLeft counts NodeClaims whose changed status the pass decided
	// on but left to the next pass to write (timing.StatusWriteBudget).
	StatusLeft  int           `json:"statusLeft,omitempty"`
	Simulations int           `json:"simulations"`
	Duration    time.Duration `json:"duration"`
	Errors      []string      `json:"errors,omitempty"`
}

// shadow reports whether the tick only records its decisions.
func (d *Disrupter) shadow() bool { return d.Decisions != nil }

// decided records a decision of a shadow pass.
func (d *Disrupter) decided(sum *Summary, dec shadow.Decision) {
	d.Decisions.Record(dec, d.Events)
	sum.ShadowDecisions++
}

func (d *Disrupter) validate() error {
	switch {
	case d.Kube == nil, d.Provisioning == nil, d.Instances == nil, d.Clock == nil, d.Log == nil:
		return errors.New("disrupter is missing a dependency")
	}
	return nil
}

func (d *Disrupter) prepare() {
	if d.Metrics == nil {
		d.Metrics = record.NewMetricsAt("Karpless", record.Level(d.Config.MetricsLevel))
	}
	if d.Events == nil {
		d.Events = record.NewRecorder(d.Kube.Core.CoreV1(), d.Clock, d.Log)
	}
	if d.ReplacementTimeout <= 0 {
		d.ReplacementTimeout = timing.ReplacementTimeout
	}
	if d.GCInterval <= 0 {
		d.GCInterval = timing.GCInterval
	}
	if d.PollInterval <= 0 {
		d.PollInterval = timing.DisruptionPollInterval
	}
}

// Run is one invocation. holder identifies it in the lease (the Lambda
// request id). A concurrent invocation finds the lease held and returns at
// once. While commands are in flight the tick keeps making passes (one
// every PollInterval, or when a proposal is due) until its window closes.
func (d *Disrupter) Run(ctx context.Context, holder string) (Summary, error) {
	start := d.Clock.Now()
	if err := d.validate(); err != nil {
		return Summary{}, err
	}
	d.prepare()
	// The context ends half the margin after the last pass may start, so a
	// pass running then can finish; the other half is the skeleton's.
	sk := tick.Skeleton{
		Leases: d.Kube.Core.CoordinationV1(), Namespace: d.Config.Namespace, Lease: LeaseName, Holder: holder,
		Duration: d.Config.LeaseDuration, Margin: d.Config.DeadlineMargin / 2, Clock: d.Clock, Log: d.Log,
		Events: d.Events, Metrics: d.Metrics, MetricsOut: d.MetricsOut,
		Pause: d.Kube.Core.CoreV1(),
	}
	var sum Summary
	var errs []error
	// After each pass, the metrics so far are written and the summary so
	// far logged: a tick killed later loses only the pass under way.
	checkpoint := func() {
		so := sum
		so.Duration = d.Clock.Since(start)
		sk.Checkpoint("disruption pass done", so)
	}
	held, err := sk.Run(ctx, func(ctx context.Context, l *lease.Lease) error {
		deadline := start.Add(d.Config.WatchWindow)
		if dl, ok := ctx.Deadline(); ok && dl.Add(-d.Config.DeadlineMargin/2).Before(deadline) {
			deadline = dl.Add(-d.Config.DeadlineMargin / 2)
		}
		if !deadline.After(start) {
			// No window: one pass, bounded by the invocation's own deadline.
			deadline = start.Add(time.Minute)
			if dl, ok := ctx.Deadline(); ok {
				deadline = dl.Add(-d.Config.DeadlineMargin / 2)
			}
		}
		ctx, cancel := clockctx.WithDeadline(ctx, d.Clock, deadline.Add(d.Config.DeadlineMargin/2))
		defer cancel()
		st := d.loadState(ctx)
		inv := &invocation{state: st, deadline: deadline, guard: l.Hold}
		for {
			next, err := d.pass(ctx, inv, &sum)
			sum.Passes++
			if err != nil {
				errs = append(errs, err)
				d.Log.Warn("disruption pass", "error", err)
			}
			checkpoint()
			if d.Config.WatchWindow <= 0 || next.IsZero() || next.After(deadline) || ctx.Err() != nil {
				break
			}
			if err := d.sleepUntil(ctx, next); err != nil {
				break
			}
			handover, err := l.Renew(ctx)
			if err != nil {
				errs = append(errs, err)
				break
			}
			if handover {
				d.Log.Info("hand-over requested; ending the tick")
				break
			}
		}
		d.saveState(context.WithoutCancel(ctx), inv.state)
		return nil
	})
	if errors.Is(err, tick.ErrPaused) {
		sum = Summary{Paused: true, Skipped: "paused (karpless resume to resume)", Duration: d.Clock.Since(start)}
		d.Log.Info("disruption tick done", "summary", sum)
		return sum, nil
	}
	if err != nil {
		return Summary{}, err
	}
	if !held {
		d.Log.Info("another invocation holds the disruption lease; nothing to do", "holder", holder)
		return Summary{Skipped: "lease held by another invocation"}, nil
	}
	sum.Duration = d.Clock.Since(start)
	for _, e := range errs {
		sum.Errors = append(sum.Errors, e.Error())
	}
	d.Log.Info("disruption tick done", "summary", sum)
	return sum, errors.Join(errs...)
}

func (d *Disrupter) sleepUntil(ctx context.Context, t time.Time) error {
	return tick.Sleep(ctx, d.Clock, t.Sub(d.Clock.Now()))
}

// state is the tick's memory between invocations.
type state struct {
	cm *corev1.ConfigMap
	// lastGC is when garbage was last collected.
	lastGC time.Time
	// resume is where single-node consolidation stopped.
	resume string
	// consolidated is the ConsolidationState in which consolidation last
	// found nothing, and when.
	consolidated   string
	consolidatedAt time.Time
	// skipMulti: a multi-node proposal failed its validation; the next
	// decision skips multi-node consolidation once.
	skipMulti bool
	// zonalShifts are the zones the last pass found shifted away from
	// (zonalshift.Zones.String).
	zonalShifts string
	changed     bool
}

const (
	keyLastGC         = "lastGarbageCollection"
	keyResume         = "singleNodeResumeAfter"
	keyConsolidated   = "consolidatedState"
	keyConsolidatedAt = "consolidatedAt"
	keySkipMulti      = "skipMultiNode"
)

func (d *Disrupter) loadState(ctx context.Context) *state {
	st := &state{}
	cm, err := d.Kube.Core.CoreV1().ConfigMaps(d.Config.Namespace).Get(ctx, StateConfigMap, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			d.Log.Warn("reading disruption state", "error", err)
		}
		return st
	}
	st.cm = cm
	if t, err := time.Parse(time.RFC3339, cm.Data[keyLastGC]); err == nil {
		st.lastGC = t
	}
	st.resume = cm.Data[keyResume]
	st.skipMulti = cm.Data[keySkipMulti] == "true"
	st.zonalShifts = cm.Data[ZonalShiftsKey]
	if t, err := time.Parse(time.RFC3339, cm.Data[keyConsolidatedAt]); err == nil {
		st.consolidated, st.consolidatedAt = cm.Data[keyConsolidated], t
	}
	return st
}

// saveState writes the state back; losing it only repeats work.
func (d *Disrupter) saveState(ctx context.Context, st *state) {
	if !st.changed {
		return
	}
	data := map[string]string{keyResume: st.resume}
	if st.skipMulti {
		data[keySkipMulti] = "true"
	}
	if st.zonalShifts != "" {
		data[ZonalShiftsKey] = st.zonalShifts
	}
	if !st.lastGC.IsZero() {
		data[keyLastGC] = st.lastGC.UTC().Format(time.RFC3339)
	}
	if st.consolidated != "" {
		data[keyConsolidated] = st.consolidated
		data[keyConsolidatedAt] = st.consolidatedAt.UTC().Format(time.RFC3339)
	}
	cms := d.Kube.Core.CoreV1().ConfigMaps(d.Config.Namespace)
	var err error
	if st.cm == nil {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: d.Config.Namespace}, Data: data}, metav1.CreateOptions{})
	} else {
		next := st.cm.DeepCopy()
		next.Data = data
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		d.Log.Warn("saving disruption state", "error", fmt.Errorf("configmap %s/%s: %w", d.Config.Namespace, StateConfigMap, err))
	}
}
