package disrupt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/ticks/garbagecollection"
	"github.com/karpless/karpless/shared/ticks/termination"
)

var (
	nodeGVK      = corev1.SchemeGroupVersion.WithKind("Node")
	nodeClaimGVK = karpv1.SchemeGroupVersion.WithKind("NodeClaim")
)

// invocation is what one tick reads once and reuses across its passes.
type invocation struct {
	state    *state
	deadline time.Time
	// guard checks the disruption lease before replacements are created
	// and launched (nil outside Run).
	guard   lease.Guard
	facts   map[string]disruption.InstanceFacts
	factsOK bool
	// healthRead: EC2's instance status was read in this invocation
	// (once, as Karpenter polls it once a minute).
	healthRead bool
}

// Pass runs one pass outside Run (no lease, no loop): for tests and for
// callers that hold the lease themselves. It returns when the next pass
// would be due (zero when nothing is in flight).
func (d *Disrupter) Pass(ctx context.Context) (Summary, time.Time, error) {
	if err := d.validate(); err != nil {
		return Summary{}, time.Time{}, err
	}
	d.prepare()
	defer d.Events.Flush(context.WithoutCancel(ctx))
	inv := &invocation{state: d.loadState(ctx), deadline: d.Clock.Now().Add(time.Minute)}
	if dl, ok := ctx.Deadline(); ok {
		inv.deadline = dl
	}
	var sum Summary
	next, err := d.pass(ctx, inv, &sum)
	sum.Passes = 1
	d.saveState(context.WithoutCancel(ctx), inv.state)
	return sum, next, err
}

// pass is one look at the cluster and one step on everything: terminate,
// collect, expire, keep conditions, move commands, maybe propose one.
func (d *Disrupter) pass(ctx context.Context, inv *invocation, sum *Summary) (time.Time, error) {
	var errs []error
	snapTime := d.Clock.Now()
	snap, err := snapshot.Take(ctx, d.Kube, d.Clock)
	if err != nil {
		return time.Time{}, err
	}
	if d.shadow() {
		defer d.Decisions.Flush(context.WithoutCancel(ctx))
	}
	instances, err := d.zonalShift(ctx, inv, snap)
	if err != nil {
		return time.Time{}, err
	}
	// Shadow mode: Karpenter drains and terminates what it deletes, and
	// collects its own garbage.
	var ts termination.Summary
	if !d.shadow() {
		term := &termination.Terminator{Kube: d.Kube, Instances: instances, Clock: d.Clock, Log: d.Log, Events: d.Events, Metrics: d.Metrics}
		ts, err = term.Reconcile(ctx, snap)
		addTermination(&sum.Termination, ts)
		if err != nil {
			errs = append(errs, fmt.Errorf("termination: %w", err))
		}
	}
	if now := d.Clock.Now(); !d.shadow() && now.Sub(inv.state.lastGC) >= d.GCInterval {
		if err := d.collect(ctx, instances, snap, snapTime, sum); err != nil {
			errs = append(errs, fmt.Errorf("garbage collection: %w", err))
		}
		inv.state.lastGC, inv.state.changed = now, true
	}
	sess, err := d.Provisioning.NewSession(ctx, snap.NodeClasses, d.Metrics, d.Events)
	if err != nil {
		return time.Time{}, errors.Join(append(errs, fmt.Errorf("reading instance types: %w", err))...)
	}
	defer sess.Close(context.WithoutCancel(ctx))
	sess.Guard(inv.guard)
	if d.EC2 != nil && !inv.factsOK {
		if inv.facts, err = instanceFacts(ctx, d.EC2, d.Config.ClusterName); err != nil {
			d.Log.Warn("reading instance security groups; network drift is not checked this tick", "error", err)
		} else {
			inv.factsOK = true
		}
	}
	classes := sess.Classes()
	sim := planning.SimulationInput(snap, nil, classes)
	in := d.input(snap, sim, classes, inv)

	stopAt := d.Clock.Now().Add(timing.StatusWriteBudget)
	if inv.deadline.Before(stopAt) {
		stopAt = inv.deadline
	}
	n, left, err := d.applyStatus(ctx, in, stopAt)
	sum.StatusUpdates += n
	sum.StatusLeft += left
	if err != nil {
		errs = append(errs, err)
	}
	if err := d.stampPools(ctx, in); err != nil {
		errs = append(errs, err)
	}
	expired, err := d.expire(ctx, in, sum)
	sum.Expired = append(sum.Expired, expired...)
	if err != nil {
		errs = append(errs, err)
	}
	repaired, err := d.repair(ctx, in, sum)
	sum.Repaired = append(sum.Repaired, repaired...)
	if err != nil {
		errs = append(errs, fmt.Errorf("node repair: %w", err))
	}
	if !d.shadow() {
		if err := d.demote(ctx, in); err != nil {
			errs = append(errs, err)
		}
	}
	scaled, err := d.scaleDown(ctx, in, sum)
	sum.ScaledDown = append(sum.ScaledDown, scaled...)
	if err != nil {
		errs = append(errs, err)
	}
	// Shadow mode: no command of Karpless's is in flight, and the
	// disrupted taints are Karpenter's.
	var next time.Time
	var changed, proposed bool
	if !d.shadow() {
		cmds := disruption.Commands(snap)
		untainted, err := d.cleanupStale(ctx, snap, cmds)
		sum.Untainted = append(sum.Untainted, untainted...)
		if err != nil {
			errs = append(errs, err)
		}
		if len(untainted) > 0 {
			sim = planning.SimulationInput(snap, nil, classes)
		}
		in = d.input(snap, sim, classes, inv)
		next, changed, proposed, err = d.advance(ctx, in, sess, inv, cmds, sum)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(expired) > 0 || len(scaled) > 0 || len(repaired) > 0 {
		changed = true
	}
	if !changed && !proposed && d.Clock.Now().Before(inv.deadline) {
		n, err := d.decide(ctx, in, sess, inv, sum)
		if err != nil {
			errs = append(errs, err)
		}
		next = earliest(next, n)
	}
	// EC2's view of the instances last: its three reads come after the
	// pass's writes, so a tick cut short spends its calls on moving what
	// is in flight first.
	impaired, err := d.instanceStatus(ctx, inv, in, sum)
	sum.Impaired = append(sum.Impaired, impaired...)
	if err != nil {
		errs = append(errs, fmt.Errorf("instance status: %w", err))
	}
	if changed || len(impaired) > 0 {
		next = earliest(next, d.Clock.Now())
	}
	if ts.InFlight > 0 {
		// A drain in flight (a PDB letting one pod go at a time, a deleted
		// node, an expiry, an interruption) moves on every poll within the
		// tick, as commands do, not a minute later: a pod due for
		// deletion at its terminationGracePeriod's end minus its own grace
		// is deleted within seconds of that time.
		next = earliest(next, d.Clock.Now().Add(d.PollInterval))
	}
	return next, errors.Join(errs...)
}

// minValuesPolicy is MIN_VALUES_POLICY for the replacements' simulation,
// the provisioner's, as Karpenter's disruption uses its one option.
func minValuesPolicy(c config.Config) scheduling.MinValuesPolicy {
	if c.MinValuesBestEffortOn() {
		return scheduling.MinValuesBestEffort
	}
	return scheduling.MinValuesStrict
}

// preferencePolicy is PREFERENCE_POLICY for the replacements' simulation,
// the provisioner's, as Karpenter's one option serves both.
func preferencePolicy(c config.Config) scheduling.PreferencePolicy {
	if c.PreferencesIgnored() {
		return scheduling.PreferencesIgnore
	}
	return scheduling.PreferencesRespect
}

// input assembles the pure core's input. The compute stops a couple of
// seconds before the tick's deadline.
func (d *Disrupter) input(snap *cluster.Snapshot, sim *scheduling.Snapshot, classes map[string]*scheduling.NodeClass, inv *invocation) *disruption.Input {
	stopAt := inv.deadline.Add(-2 * time.Second)
	in := &disruption.Input{
		Cluster: snap, Simulation: sim, Classes: classes, Now: d.Clock.Now(),
		Options: disruption.Options{
			SpotToSpotConsolidation: d.Config.SpotToSpotConsolidation,
			MinValues:               minValuesPolicy(d.Config),
			Preferences:             preferencePolicy(d.Config),
			Stop:                    func() bool { return d.Clock.Now().After(stopAt) },
			ResumeSingleNodeAfter:   inv.state.resume,
			SkipMultiNode:           inv.state.skipMulti,
		},
	}
	st := inv.state
	in.Options.Consolidated = st.consolidated != "" && d.Clock.Since(st.consolidatedAt) < timing.ConsolidatedTTL &&
		st.consolidated == disruption.ConsolidationState(in)
	if inv.factsOK {
		in.Instances = inv.facts
	}
	return in
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	}
	return a
}

func addTermination(dst *termination.Summary, s termination.Summary) {
	dst.Draining += s.Draining
	dst.Evicted += s.Evicted
	dst.Blocked += s.Blocked
	dst.Terminated += s.Terminated
	dst.Finished += s.Finished
	dst.InFlight = s.InFlight // the last pass's, a state, not a count
}

// collect runs garbage collection against instances listed after the
// snapshot.
func (d *Disrupter) collect(ctx context.Context, instances Instances, snap *cluster.Snapshot, snapTime time.Time, sum *Summary) error {
	live, err := instances.List(ctx)
	if err != nil {
		return err
	}
	gc := &garbagecollection.Collector{
		Kube: d.Kube, Instances: instances, Templates: d.Templates, Cluster: d.Config.ClusterName,
		Clock: d.Clock, Log: d.Log, Events: d.Events, Metrics: d.Metrics,
	}
	s, err := gc.Run(ctx, snap, snapTime, live)
	sum.Garbage.Instances = append(sum.Garbage.Instances, s.Instances...)
	sum.Garbage.NodeClaims = append(sum.Garbage.NodeClaims, s.NodeClaims...)
	sum.Garbage.Nodes = append(sum.Garbage.Nodes, s.Nodes...)
	sum.Garbage.Templates = append(sum.Garbage.Templates, s.Templates...)
	return err
}

// applyStatus writes the disruption conditions, lastPodEventTime and
// annotations the core computed, and mirrors them on the snapshot's copies.
// The writes stop at stopAt: the changes left are mirrored all the same, so
// this pass decides on them, and the next pass, which computes them again,
// writes them. Changed conditions go first (other functions read them),
// then pod event times and fingerprints. It returns how many claims were
// written and how many were left.
func (d *Disrupter) applyStatus(ctx context.Context, in *disruption.Input, stopAt time.Time) (int, int, error) {
	var errs []error
	n, left := 0, 0
	now := metav1.NewTime(d.Clock.Now())
	changes := disruption.StatusChanges(in)
	slices.SortStableFunc(changes, func(a, b disruption.ClaimStatus) int {
		return cmp.Compare(statusRank(a), statusRank(b))
	})
	for _, ch := range changes {
		nc := ch.NodeClaim
		if d.shadow() {
			// Karpenter writes its claims' conditions; the pass keeps
			// its own view in memory for its decisions.
			shadowStatus(nc, ch, now)
			continue
		}
		if !d.Clock.Now().Before(stopAt) {
			shadowStatus(nc, ch, now)
			left++
			continue
		}
		// The status first: written on the snapshot's copy, it costs one
		// request unless the claim changed since (the annotation patch,
		// written first, would always make it conflict). A tick that dies
		// between the two leaves the old fingerprint, which dates the
		// next pod event later, never earlier.
		if len(ch.Set) > 0 || len(ch.Clear) > 0 || !ch.LastPodEventTime.IsZero() {
			mutate := func(c *karpv1.NodeClaim) {
				for _, cond := range ch.Set {
					c.SetCondition(cond.Type, cond.Status, cond.Reason, cond.Message, now)
				}
				for _, t := range ch.Clear {
					meta.RemoveStatusCondition(&c.Status.Conditions, t)
				}
				if !ch.LastPodEventTime.IsZero() {
					c.Status.LastPodEventTime = metav1.NewTime(ch.LastPodEventTime)
				}
			}
			if err := d.Kube.UpdateNodeClaimStatusFromCopy(ctx, nc, mutate); err != nil {
				if !kube.IsGone(err) {
					errs = append(errs, err)
				}
				continue
			}
			n++
			for _, cond := range ch.Set {
				if cond.Type == karpv1.ConditionTypeDrifted {
					d.Log.Info("marked drifted", "nodeclaim", nc.Name, "reason", cond.Reason)
				}
			}
		}
		if len(ch.Annotations) > 0 {
			vals := map[string]*string{}
			for k, v := range ch.Annotations {
				vals[k] = new(v)
			}
			if err := d.patchAnnotations(ctx, nc, vals); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if left > 0 {
		d.Log.Info("nodeclaim status writes left for the next pass", "written", n, "left", left)
	}
	return n, left, errors.Join(errs...)
}

// statusRank orders a pass's status writes: changed conditions first.
func statusRank(ch disruption.ClaimStatus) int {
	if len(ch.Set) > 0 || len(ch.Clear) > 0 {
		return 0
	}
	return 1
}

// stampPools writes each NodePool's drift hash on it, and its status
// (conditions, resources, nodes), as Karpenter does.
func (d *Disrupter) stampPools(ctx context.Context, in *disruption.Input) error {
	d.reportPools(in) // karpenter_nodepools_usage and _limit (poolmetrics.go)
	var errs []error
	if d.shadow() {
		return d.stampPoolsInMemory(in)
	}
	classes := map[string]*awsv1.EC2NodeClass{}
	for _, c := range in.Cluster.NodeClasses {
		classes[c.Name] = c
	}
	now := d.Clock.Now()
	for _, np := range in.Cluster.NodePools {
		var class *awsv1.EC2NodeClass
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			class = classes[ref.Name]
		}
		if _, err := d.Kube.SetNodePoolStatus(ctx, np, func(cur *karpv1.NodePool) karpv1.NodePoolStatus {
			return poolstatus.Status(cur, class, in.Cluster.NodeClaims, in.Cluster.Nodes, now)
		}); err != nil {
			errs = append(errs, err)
		}
	}
	for name, h := range disruption.PoolHashes(in) {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
			wellknown.NodePoolHashAnnotation, h, wellknown.NodePoolHashVersionAnnotation, wellknown.NodePoolHashVersion)
		if _, err := d.Kube.NodePools.Patch(ctx, name, mergePatch, patch, metav1.PatchOptions{}); err != nil && !kube.IsGone(err) {
			errs = append(errs, fmt.Errorf("stamping nodepool %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// expire deletes NodeClaims past their expireAfter (forceful: no budget).
// A shadow pass records them.
func (d *Disrupter) expire(ctx context.Context, in *disruption.Input, sum *Summary) ([]string, error) {
	var out []string
	var errs []error
	now := metav1.NewTime(d.Clock.Now())
	if d.shadow() {
		for _, e := range disruption.Expirations(in) {
			d.decided(sum, shadow.Deletion(shadow.KindExpire, e.NodeClaim, claimPrice(in, e.NodeClaim.Name),
				"expireAfter elapsed at "+e.ExpiredAt.UTC().Format(time.RFC3339)))
		}
		for _, nc := range disruption.CapacityBlockExpirations(in) {
			if nc.DeletionTimestamp == nil {
				d.decided(sum, shadow.Deletion(shadow.KindExpire, nc, claimPrice(in, nc.Name),
					"capacity block "+nc.Labels[wellknown.CapacityReservationIDLabel]+" ends"))
			}
		}
		return nil, nil
	}
	for _, e := range disruption.Expirations(in) {
		nc := e.NodeClaim
		err := d.Kube.UpdateNodeClaimStatus(ctx, nc, func(c *karpv1.NodeClaim) {
			c.SetCondition(karpv1.ConditionTypeExpired, metav1.ConditionTrue, "Expired", "expireAfter elapsed at "+e.ExpiredAt.UTC().Format(time.RFC3339), now)
		})
		if err != nil && !kube.IsGone(err) {
			errs = append(errs, err)
			continue
		}
		if err := d.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		nc.DeletionTimestamp = &now
		out = append(out, nc.Name)
		d.Events.Normal(record.ObjectOf(nodeClaimGVK, nc), "DisruptionTerminating", "Disrupting NodeClaim: Expired")
		d.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": "expired", "nodepool": nc.Labels[wellknown.NodePoolLabel], "capacity_type": nc.Labels[wellknown.CapacityTypeLabel],
		})
		d.Log.Info("deleting expired nodeclaim", "nodeclaim", nc.Name, "expired_at", e.ExpiredAt)
	}
	// Capacity Blocks about to end (Karpenter's capacity reservation
	// expiration controller): deleted without a condition or budget.
	for _, nc := range disruption.CapacityBlockExpirations(in) {
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := d.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		nc.DeletionTimestamp = &now
		out = append(out, nc.Name)
		d.Log.Info("initiating delete for capacity block expiration", "nodeclaim", nc.Name, "capacity_reservation_id", nc.Labels[wellknown.CapacityReservationIDLabel])
	}
	return out, errors.Join(errs...)
}

// demote relabels on-demand the reserved NodeClaims (and their Nodes)
// whose instances left their reservation, as Karpenter's capacity type
// controller does. Labels only: a relabelled claim is as good as before.
func (d *Disrupter) demote(ctx context.Context, in *disruption.Input) error {
	var errs []error
	for _, nc := range disruption.CapacityTypeDemotions(in) {
		labels := map[string]*string{wellknown.CapacityTypeLabel: new(wellknown.CapacityTypeOnDemand)}
		for _, k := range disruption.ReservedCapacityLabels {
			labels[k] = nil
		}
		if err := d.Kube.LabelNodeClaim(ctx, nc, labels); err != nil && !kube.IsGone(err) {
			errs = append(errs, err)
			continue
		}
		if nc.Status.NodeName != "" {
			if err := d.Kube.LabelNode(ctx, nc.Status.NodeName, labels); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		d.Log.Info("updated capacity type for nodeclaim: its capacity reservation ended", "nodeclaim", nc.Name, "capacity_type", wellknown.CapacityTypeOnDemand)
	}
	return errors.Join(errs...)
}

// cleanupStale removes disrupted taints and DisruptionReason conditions
// that no command in execution accounts for (a tick died after tainting,
// or a command was abandoned halfway), as Karpenter does at every loop.
func (d *Disrupter) cleanupStale(ctx context.Context, snap *cluster.Snapshot, cmds []*disruption.Pending) ([]string, error) {
	executing := disruption.ExecutingClaims(cmds)
	byProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		if nc.Status.ProviderID != "" {
			byProvider[nc.Status.ProviderID] = nc
		}
	}
	var out []string
	var errs []error
	for _, n := range snap.Nodes {
		if n.DeletionTimestamp != nil || !wellknown.IsDisrupted(n) {
			continue
		}
		nc := byProvider[n.Spec.ProviderID]
		if nc != nil && (nc.DeletionTimestamp != nil || executing[nc.Name]) {
			continue
		}
		if err := d.untaint(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		// The rest of the pass reads the snapshot: it must not see the
		// taint just removed (a proposal left by a tick killed after
		// tainting would be rejected for it).
		n.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) })
		out = append(out, n.Name)
	}
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil || executing[nc.Name] || meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil {
			continue
		}
		if err := d.clearDisruptionReason(ctx, nc); err != nil {
			errs = append(errs, err)
		}
	}
	if len(out) > 0 {
		d.Log.Info("removed stale disrupted taints", "nodes", out)
	}
	return out, errors.Join(errs...)
}

// decide computes a new command and proposes it (drift is carried out at
// once, as Karpenter does). It returns when the proposal is due.
func (d *Disrupter) decide(ctx context.Context, in *disruption.Input, sess Session, inv *invocation, sum *Summary) (time.Time, error) {
	start := d.Clock.Now()
	plan := disruption.Compute(in)
	sum.Simulations += plan.Simulations
	d.report(plan, start)
	for i, n := range plan.Blocked {
		if i < maxNotesPerPass {
			sum.Blocked = append(sum.Blocked, n.NodeClaim+": "+n.Message)
		}
	}
	for i, n := range plan.Unconsolidatable {
		if i < maxNotesPerPass {
			sum.Unconsolidatable = append(sum.Unconsolidatable, n.NodeClaim+": "+n.Message)
		}
	}
	if plan.ResumeSingleNodeAfter != inv.state.resume {
		inv.state.resume, inv.state.changed = plan.ResumeSingleNodeAfter, true
	}
	if inv.state.skipMulti && !plan.Stopped {
		// Single-node consolidation has had its turn.
		inv.state.skipMulti, inv.state.changed = false, true
	}
	switch {
	case plan.NothingToConsolidate:
		inv.state.consolidated, inv.state.consolidatedAt, inv.state.changed = disruption.ConsolidationState(in), d.Clock.Now(), true
	case plan.Command != nil && inv.state.consolidated != "":
		inv.state.consolidated, inv.state.changed = "", true
	}
	cmd := plan.Command
	if cmd == nil {
		return time.Time{}, nil
	}
	if d.shadow() {
		// Recorded as soon as computed, without the proposal's wait
		// and validation: nothing carries it out.
		d.decided(sum, shadow.Command(cmd))
		sum.Commands = append(sum.Commands, Command{Method: string(cmd.Method), Reason: string(cmd.Reason()), Decision: cmd.Decision(),
			Candidates: cmd.CandidateNames(), Action: "shadow", Why: cmd.Why, PriceBefore: cmd.PriceBefore, PriceAfter: cmd.PriceAfter})
		return time.Time{}, nil
	}
	rec := disruption.NewRecord(cmd, d.Clock.Now())
	if cmd.Method.ValidationDelay() == 0 {
		return d.Clock.Now(), d.execute(ctx, in, rec, cmd, sess, sum)
	}
	for _, cn := range cmd.Candidates {
		if err := d.writeRecord(ctx, cn.NodeClaim, rec); err != nil {
			return time.Time{}, err
		}
		if cmd.Method != disruption.Emptiness {
			msg := disruption.CandidateMessage(cmd.EventCommand(cn), cmd.Savings())
			d.Events.Normal(record.ObjectOf(nodeGVK, cn.Node), "ConsolidationCandidate", "%s", msg)
			d.Events.Normal(record.ObjectOf(nodeClaimGVK, cn.NodeClaim), "ConsolidationCandidate", "%s", msg)
		}
	}
	d.approved(cmd)
	sum.Commands = append(sum.Commands, commandOf(rec, "proposed", cmd.Why))
	d.Log.Info("proposed disruption", "command", cmd.String(), "id", rec.ID, "why", cmd.Why)
	return rec.ProposedAt.Add(cmd.Method.ValidationDelay()), nil
}

// approved publishes what a Balanced NodePool's score of a move was, as
// Karpenter does: a single-node move's ConsolidationApproved Events on its
// node and claim, a multi-node move's on each Balanced NodePool, and the
// karpenter_consolidation_moves_total and karpenter_consolidation_score
// metrics (only approved moves are proposed here, so only they are counted).
func (d *Disrupter) approved(cmd *disruption.Command) {
	if len(cmd.Scores) == 0 {
		return
	}
	for pool, s := range cmd.Scores {
		labels := map[string]string{"decision": "approved", "nodepool": pool, "policy": "Balanced"}
		d.Metrics.Count("karpenter_consolidation_moves_total", 1, labels)
		d.Metrics.Observe("karpenter_consolidation_score", "None", s.Value(), labels)
		if len(cmd.Candidates) == 1 {
			cn := cmd.Candidates[0]
			d.Events.Normal(record.ObjectOf(nodeClaimGVK, cn.NodeClaim), "ConsolidationApproved", "%s", s)
			if cn.Node != nil {
				d.Events.Normal(record.ObjectOf(nodeGVK, cn.Node), "ConsolidationApproved", "%s", s)
			}
			continue
		}
		d.Events.Normal(record.Object{Kind: "NodePool", APIVersion: karpv1.SchemeGroupVersion.String(), Name: pool}, "ConsolidationApproved", "%s", s)
	}
}

// report publishes what the computation found.
func (d *Disrupter) report(plan *disruption.Plan, start time.Time) {
	for reason, m := range plan.Budgets {
		for pool, r := range m {
			labels := map[string]string{"nodepool": pool, "reason": strings.ToLower(string(reason))}
			d.Metrics.Gauge("karpenter_nodepools_allowed_disruptions", float64(r.Allowed), labels)
			d.Metrics.Gauge("karpenter_nodepools_nodes_consuming_budgets", float64(r.Disrupting), labels)
			if r.Err != nil {
				d.Log.Error("invalid disruption budget; the nodepool is not disrupted", "nodepool", pool, "error", r.Err)
			}
			if r.Allowed == 0 && r.Total > 0 && !d.shadow() {
				obj := record.Object{Kind: "NodePool", APIVersion: karpv1.SchemeGroupVersion.String(), Name: pool}
				d.Events.Normal(obj, "DisruptionBlocked", "No allowed disruptions for disruption reason %s due to blocking budget", reason)
			}
		}
	}
	for m, n := range plan.Eligible {
		d.Metrics.Gauge("karpenter_voluntary_disruption_eligible_nodes", float64(n), map[string]string{"reason": strings.ToLower(string(m.Reason())), "consolidation_type": m.ConsolidationType()})
	}
	d.Metrics.Observe("karpenter_voluntary_disruption_decision_evaluation_duration_seconds", "Seconds", d.Clock.Since(start).Seconds(), nil)
	if plan.Stopped {
		d.Metrics.Count("karpenter_voluntary_disruption_consolidation_timeouts_total", 1, nil)
	}
	notes := func(ns []disruption.Note, reason, prefix string) {
		for i, n := range ns {
			if i == maxNotesPerPass {
				d.Log.Info("more nodes not reported as events", "reason", reason, "count", len(ns)-i)
				break
			}
			obj := record.Object{Kind: nodeClaimGVK.Kind, APIVersion: nodeClaimGVK.GroupVersion().String(), Name: n.NodeClaim}
			d.Events.Normal(obj, reason, "%s%s", prefix, n.Message)
			if n.Node != "" {
				d.Events.Normal(record.Object{Kind: "Node", APIVersion: "v1", Name: n.Node}, reason, "%s%s", prefix, n.Message)
			}
		}
	}
	if d.shadow() {
		return // Karpenter tells its nodes and claims why
	}
	notes(plan.Blocked, "DisruptionBlocked", "")
	notes(plan.Unconsolidatable, "Unconsolidatable", "")
}

// instanceFacts reads subnet and security groups of the cluster's running
// instances.
func instanceFacts(ctx context.Context, api EC2, cluster string) (map[string]disruption.InstanceFacts, error) {
	out := map[string]disruption.InstanceFacts{}
	pages := ec2.NewDescribeInstancesPaginator(api, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + wellknown.ClusterTagKey(cluster)), Values: []string{wellknown.OwnedTagValue}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
		},
		MaxResults: aws.Int32(1000),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				f := disruption.InstanceFacts{SubnetID: aws.ToString(i.SubnetId)}
				f.Reserved = i.CapacityReservationId != nil && i.CapacityReservationSpecification != nil &&
					i.CapacityReservationSpecification.CapacityReservationPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly
				for _, g := range i.SecurityGroups {
					f.SecurityGroupIDs = append(f.SecurityGroupIDs, aws.ToString(g.GroupId))
				}
				out[aws.ToString(i.InstanceId)] = f
			}
		}
	}
	return out, nil
}

// shadowStatus applies a status change to the pass's copy of the claim
// only (shadow mode).
func shadowStatus(nc *karpv1.NodeClaim, ch disruption.ClaimStatus, now metav1.Time) {
	if len(ch.Annotations) > 0 {
		nc.Annotations = maps.Clone(nc.Annotations)
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		maps.Copy(nc.Annotations, ch.Annotations)
	}
	for _, cond := range ch.Set {
		nc.SetCondition(cond.Type, cond.Status, cond.Reason, cond.Message, now)
	}
	for _, t := range ch.Clear {
		meta.RemoveStatusCondition(&nc.Status.Conditions, t)
	}
	if !ch.LastPodEventTime.IsZero() {
		nc.Status.LastPodEventTime = metav1.NewTime(ch.LastPodEventTime)
	}
}

// stampPoolsInMemory sets the drift hashes on the pass's copies of the
// NodePools (shadow mode: Karpenter stamps its NodePools).
func (d *Disrupter) stampPoolsInMemory(in *disruption.Input) error {
	hashes := disruption.PoolHashes(in)
	for _, np := range in.Cluster.NodePools {
		h, ok := hashes[np.Name]
		if !ok {
			continue
		}
		np.Annotations = maps.Clone(np.Annotations)
		if np.Annotations == nil {
			np.Annotations = map[string]string{}
		}
		np.Annotations[wellknown.NodePoolHashAnnotation] = h
		np.Annotations[wellknown.NodePoolHashVersionAnnotation] = wellknown.NodePoolHashVersion
	}
	return nil
}

// claimPrice is the $/h the pass's simulation knows for a claim (0 when
// unknown).
func claimPrice(in *disruption.Input, name string) float64 {
	for _, n := range in.Simulation.Nodes {
		if n.NodeClaim == name {
			return n.Price
		}
	}
	return 0
}
