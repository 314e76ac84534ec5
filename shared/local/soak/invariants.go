package soak

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/emulator"
)

// The invariants' thresholds, in virtual time.
const (
	// orphanGrace: an instance may have no NodeClaim while garbage
	// collection has not run over it yet: Karpenter's 30 s grace, the
	// collector's 2-minute interval and the tick's minute, with a minute
	// to spare.
	orphanGrace = 5 * time.Minute
	// unlaunchedLimit: a NodeClaim must launch within three ticks while an
	// offering is available.
	unlaunchedLimit = 3*time.Minute + 30*time.Second
	// impairedLimit: a NodeClaim whose instance EC2 reports broken (for
	// the two minutes the check must fail) or scheduled for retirement is
	// deleting within three ticks.
	impairedLimit = 3*time.Minute + 30*time.Second
	// pendingLimit: every pod runs within five minutes of being created,
	// or of the last moment no capacity was available to it (every zone
	// and capacity type its pools allow out, or, for a pod spread over
	// zones, one of its zones out), plus the time EC2's capacity errors
	// stay marked, whichever is later. Nothing else restarts a pod's clock:
	// an interruption, a drift or a NodePool edit makes new pods, and a
	// pod the functions ignore is late whatever else happens.
	pendingLimit = 5 * time.Minute
	// killCost is what one killed provisioner or interruption invocation
	// may add to a pending pod's wait: its lease runs out and the next
	// tick takes the pod up. A pod waits pendingLimit plus killCost for
	// each such kill since its clock started.
	killCost = tickEvery + 30*time.Second
	// costTolerance: at quiescence the cluster costs at most this much more
	// than a fresh simulation of the same pods.
	costTolerance = 0.10
	// eventsKept is how many events a violation report shows.
	eventsKept = 40
)

// invariants watches the world and records what must never happen.
type invariants struct {
	w *world

	mu         sync.Mutex
	events     []string
	violations []Violation
	reported   map[string]bool
	evictions  map[string]int
	orphans    map[string]time.Time
	commands   map[string]bool

	worldMoves atomic.Int64
	// outages are the zone-wide capacity removals in force, as
	// "capacity-type/zone" by fault id (allOfferings for a fault that
	// fails every launch); blockedAt is when each claim last had every
	// offering it allows taken away by a capacity removal, haltedAt by a
	// fault failing every launch (all guarded by mu).
	outages   map[emulator.FaultID]string
	blockedAt map[string]time.Time
	haltedAt  map[string]time.Time
	// budgetEdits are the chaos schedule's edits of each pool's budgets,
	// oldest first (guarded by mu).
	budgetEdits map[string][]budgetEdit
	// impaired is, per instance EC2 reports broken or retiring, when its
	// claim became due for replacement (guarded by mu).
	impaired map[string]time.Time
	// podBlockedAt is when each pending pod last had no capacity available
	// to it (guarded by mu).
	podBlockedAt map[string]time.Time
	// kills are when provisioner and interruption invocations were
	// killed (guarded by mu).
	kills []time.Time
	// warm is when the first provisioner invocation ended (guarded by mu).
	warm time.Time
}

// provisioned records the end of a provisioner invocation: the first one
// of a seed is the cluster's cold start (the region's instance types and
// prices, the node class, the launch templates, each read or made for the
// first time through the hostile APIs), and pods that waited for it start
// their clock when it ends, as they would in a cluster Karpless just
// joined.
func (v *invariants) provisioned() {
	v.mu.Lock()
	if v.warm.IsZero() {
		v.warm = v.w.now()
	}
	v.mu.Unlock()
}

// killed records that an invocation that launches was killed now.
func (v *invariants) killed() {
	v.mu.Lock()
	v.kills = append(v.kills, v.w.now())
	v.mu.Unlock()
}

// budgetEdit is an edit of a NodePool's budgets: when the API server had
// applied it, and the budgets before it.
type budgetEdit struct {
	at     time.Time
	before []karpv1.Budget
}

// impairedAt records that EC2 reports instance id broken or retiring; its
// claim is due for replacement at due.
func (v *invariants) impairedAt(id string, due time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.impaired == nil {
		v.impaired = map[string]time.Time{}
	}
	if _, seen := v.impaired[id]; !seen {
		v.impaired[id] = due
	}
}

// budgetsEdited records that pool's budgets were just changed from before.
func (v *invariants) budgetsEdited(pool string, before []karpv1.Budget) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.budgetEdits[pool] = append(v.budgetEdits[pool], budgetEdit{at: v.w.now(), before: before})
}

// budgetsAt is np with the budgets it had when a command started: the
// command read the budgets after its start time (whole seconds, rounded
// down), so an edit applied at or after it may not have been seen, and the
// budgets before the first such edit are the ones it answers to.
func budgetsAt(np karpv1.NodePool, edits []budgetEdit, started time.Time) karpv1.NodePool {
	for _, e := range edits {
		if !e.at.Before(started) {
			np.Spec.Disruption.Budgets = e.before
			break
		}
	}
	return np
}

// allOfferings is the outage of a fault that fails every launch whatever
// its offering (EC2 refusing the launch's parameters, not its capacity).
const allOfferings = "*"

// outage records a zone-wide capacity removal starting (on) or ending;
// capacityType allOfferings is a fault that fails every launch.
func (v *invariants) outage(id emulator.FaultID, capacityType, zone string, on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if on {
		v.outages[id] = capacityType + "/" + zone
	} else {
		delete(v.outages, id)
	}
}

// soakZones are the zones of the soak's node class.
var soakZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

// unlaunchedSince is when a claim's launch clock starts: its creation, or
// the end of the last moment every offering it allows was out (plus the
// time EC2's capacity errors stay marked, as in Karpenter, since the
// functions cannot know sooner that the capacity is back), or the end of
// the last moment every launch failed whatever its offering. A claim none
// of whose offerings exists is not late.
func (v *invariants) unlaunchedSince(nc *karpv1.NodeClaim, now time.Time) time.Time {
	reqs := scheduling.RequirementsFromNodePool(nc.Spec.Requirements)
	zones, cts := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]bool{}
	for _, o := range v.outages {
		out[o] = true
	}
	if out[allOfferings+"/"+allOfferings] {
		v.haltedAt[nc.Name] = now
	}
	blocked := true
	for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
		for _, z := range soakZones {
			if cts.Has(ct) && zones.Has(z) && !out[ct+"/"+z] {
				blocked = false
			}
		}
	}
	if blocked {
		v.blockedAt[nc.Name] = now
	}
	since := nc.CreationTimestamp.Time
	if b, ok := v.blockedAt[nc.Name]; ok && b.Add(timing.DefaultUnavailableOfferingsTTL).After(since) {
		since = b.Add(timing.DefaultUnavailableOfferingsTTL)
	}
	// A launch that failed for its parameters marks no offering
	// unavailable, so the next tick may launch as soon as the fault ends.
	if h, ok := v.haltedAt[nc.Name]; ok && h.After(since) {
		since = h
	}
	return since
}

func newInvariants(w *world) *invariants {
	return &invariants{w: w, reported: map[string]bool{}, evictions: map[string]int{}, orphans: map[string]time.Time{}, commands: map[string]bool{},
		outages: map[emulator.FaultID]string{}, blockedAt: map[string]time.Time{}, haltedAt: map[string]time.Time{}, budgetEdits: map[string][]budgetEdit{}, podBlockedAt: map[string]time.Time{}}
}

// note adds an event to the log a violation report shows.
func (v *invariants) note(format string, args ...any) {
	line := fmt.Sprintf("[%s] ", clockString(v.w.since())) + fmt.Sprintf(format, args...)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events = append(v.events, line)
	if len(v.events) > 4*eventsKept {
		v.events = slices.Clone(v.events[len(v.events)-eventsKept:])
	}
}

func clockString(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// violate records a violation once per key.
func (v *invariants) violate(key, invariant, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reported[key] {
		return
	}
	v.reported[key] = true
	events := v.events
	if len(events) > eventsKept {
		events = events[len(events)-eventsKept:]
	}
	v.violations = append(v.violations, Violation{Seed: v.w.seed, At: v.w.since(), Invariant: invariant, Detail: detail, Events: slices.Clone(events)})
}

// failed says whether any invariant was violated.
func (v *invariants) failed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.violations) > 0
}

// evicted counts an eviction the API server accepted.
func (v *invariants) evicted(who, ns, name string) {
	v.mu.Lock()
	v.evictions[ns+"/"+name]++
	n := v.evictions[ns+"/"+name]
	v.mu.Unlock()
	v.note("%s evicted pod %s/%s", who, ns, name)
	if n > 1 {
		v.violate("evicted-twice/"+ns+"/"+name, "no pod evicted twice", "%s evicted pod %s/%s for the %d time", who, ns, name, n)
	}
}

// podDeleted checks a function's direct pod deletion: it skips the
// Eviction API (and so the PDBs), which only a NodeClaim's
// terminationGracePeriod allows, once less than the pod's own
// terminationGracePeriodSeconds is left of it (Karpenter's rule).
func (v *invariants) podDeleted(who, ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := v.w.admin.Core.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.Spec.NodeName == "" {
		return
	}
	nc, deadline := v.claimOfNode(ctx, p.Spec.NodeName)
	from := deadline
	if p.Spec.TerminationGracePeriodSeconds != nil {
		from = deadline.Add(-time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second)
	}
	if nc == nil || deadline.IsZero() || v.w.now().Before(from) {
		v.violate("deleted/"+ns+"/"+name, "no eviction that violates a PDB",
			"%s deleted pod %s/%s on node %s without the Eviction API while more than its own grace was left of its NodeClaim's terminationGracePeriod (deadline %v)", who, ns, name, p.Spec.NodeName, deadline)
	}
	v.note("%s deleted pod %s/%s (past the grace period)", who, ns, name)
}

// terminating checks, before a function's TerminateInstances, that the
// instance's node holds no pod that must still be evicted.
func (v *invariants) terminating(who, id string) {
	i, ok := v.w.emu.Instance(id)
	v.note("%s terminates %s (%s, node %q)", who, id, i.State, i.NodeName)
	if !ok || i.NodeName == "" || (i.State != emulator.StateRunning && i.State != emulator.StatePending) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := v.w.admin.Core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + i.NodeName})
	if err != nil {
		return
	}
	var undrained []string
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil || podutil.IsTerminal(&p) || podutil.IsOwnedByDaemonSet(&p) || podutil.IsOwnedByNode(&p) {
			continue
		}
		undrained = append(undrained, p.Namespace+"/"+p.Name)
	}
	if len(undrained) == 0 {
		return
	}
	if _, deadline := v.claimOfNode(ctx, i.NodeName); !deadline.IsZero() && !v.w.now().Before(deadline) {
		return
	}
	v.violate("terminated/"+id, "no instance terminated under a running pod that was neither evicted nor past its terminationGracePeriod",
		"%s terminated %s while node %s still ran %v", who, id, i.NodeName, undrained)
}

// claimOfNode finds the NodeClaim of a node and when its grace period
// runs out (zero: no deadline).
func (v *invariants) claimOfNode(ctx context.Context, node string) (*karpv1.NodeClaim, time.Time) {
	l, err := v.w.admin.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, time.Time{}
	}
	for i := range l.Items {
		nc := &l.Items[i]
		if nc.Status.NodeName != node {
			continue
		}
		if s, ok := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return nc, t
			}
		}
		if nc.DeletionTimestamp != nil && nc.Spec.TerminationGracePeriod != nil {
			return nc, nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration)
		}
		return nc, time.Time{}
	}
	return nil, time.Time{}
}

// check looks at the whole world: instances and claims, pods, budgets.
func (v *invariants) check(ctx context.Context) {
	now := v.w.now()
	claims, err := v.w.admin.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	byInstance, byName := map[string]*karpv1.NodeClaim{}, map[string]*karpv1.NodeClaim{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		byName[nc.Name] = nc
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			byInstance[id] = nc
		}
	}
	// Instances: each live one has a claim (after the grace), and no claim
	// has two.
	perClaim := map[string][]string{}
	live := map[string]bool{}
	for _, i := range v.w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateRunning
	}) {
		live[i.ID] = true
		name := i.Tags[wellknown.NodeClaimTagKey]
		perClaim[name] = append(perClaim[name], i.ID)
		if byInstance[i.ID] != nil || byName[name] != nil {
			delete(v.orphans, i.ID)
			continue
		}
		first, seen := v.orphans[i.ID]
		if !seen {
			v.orphans[i.ID] = now
			continue
		}
		if now.Sub(first) > orphanGrace {
			v.violate("orphan/"+i.ID, "no instance without a NodeClaim after the GC grace",
				"instance %s (%s, tagged nodeclaim %q) has had no NodeClaim for %s", i.ID, i.InstanceType, name, now.Sub(first).Round(time.Second))
		}
	}
	for id := range v.orphans {
		if !live[id] {
			delete(v.orphans, id)
		}
	}
	for name, ids := range perClaim {
		if name != "" && len(ids) > 1 {
			sort.Strings(ids)
			v.violate("double/"+name, "never two instances for one NodeClaim", "nodeclaim %s has instances %v", name, ids)
		}
	}
	// Claims launch within three ticks while an offering is available.
	for _, nc := range byName {
		if nc.DeletionTimestamp != nil || nc.IsTrue(karpv1.ConditionTypeLaunched) {
			continue
		}
		if since := v.unlaunchedSince(nc, now); now.Sub(since) > unlaunchedLimit {
			v.violate("unlaunched/"+nc.Name, "no NodeClaim left unlaunched longer than 3 ticks while an offering is available",
				"nodeclaim %s unlaunched for %s, %s of them with an offering available (attempt %q)", nc.Name, now.Sub(nc.CreationTimestamp.Time).Round(time.Second),
				now.Sub(since).Round(time.Second), nc.Annotations[cloud.LaunchAttemptAnnotation])
		}
	}
	// Impaired instances' claims are deleting within three ticks.
	v.mu.Lock()
	impaired := maps.Clone(v.impaired)
	v.mu.Unlock()
	for id, due := range impaired {
		nc := byInstance[id]
		if !live[id] || nc == nil || nc.DeletionTimestamp != nil {
			continue
		}
		if now.Sub(due) > impairedLimit {
			v.violate("impaired/"+id, "a NodeClaim whose instance EC2 reports impaired or retiring is replaced within 3 ticks",
				"nodeclaim %s on instance %s, due for replacement %s ago, is not deleting", nc.Name, id, now.Sub(due).Round(time.Second))
		}
	}
	// Pods run within five minutes of capacity being available to them.
	pools, err := v.w.admin.NodePools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	v.mu.Lock()
	out := map[string]bool{}
	for _, o := range v.outages {
		out[o] = true
	}
	v.mu.Unlock()
	pending := map[string]bool{}
	for _, p := range v.w.pods(ctx) {
		if p.DeletionTimestamp != nil || podutil.IsTerminal(&p) || p.Status.Phase == corev1.PodRunning {
			continue
		}
		pending[p.Name] = true
		v.mu.Lock()
		if !capacityFor(&p, pools.Items, out) {
			v.podBlockedAt[p.Name] = now
		}
		from := p.CreationTimestamp.Time
		if v.warm.IsZero() {
			from = now // nothing has provisioned yet
		} else if v.warm.After(from) {
			from = v.warm
		}
		if b, ok := v.podBlockedAt[p.Name]; ok && b.Add(timing.DefaultUnavailableOfferingsTTL).After(from) {
			from = b.Add(timing.DefaultUnavailableOfferingsTTL)
		}
		limit := pendingLimit
		for _, k := range v.kills {
			if !k.Before(from) {
				limit += killCost
			}
		}
		v.mu.Unlock()
		if age := now.Sub(p.CreationTimestamp.Time); now.Sub(from) > limit {
			where := "unbound"
			if p.Spec.NodeName != "" {
				where = "bound to " + p.Spec.NodeName
			}
			v.violate("pending/"+p.Name, "every pod Running within 5 virtual minutes of capacity being available to it",
				"pod %s %s, not running after %s (%s of them with capacity available to it, %s allowed with the kills since): %s", p.Name, where, age.Round(time.Second), now.Sub(from).Round(time.Second), limit, podReason(&p))
		}
	}
	v.mu.Lock()
	for name := range v.podBlockedAt {
		if !pending[name] {
			delete(v.podBlockedAt, name)
		}
	}
	v.mu.Unlock()
	v.checkBudgets(claims.Items)
}

// capacityFor judges, without the functions' help, whether EC2 could now
// give p a node: some NodePool whose taints p tolerates, whose
// requirements p's node selector and GPU request allow, has a zone and
// capacity type (both as the pool allows them) that no outage took. A pod
// spread over zones (DoNotSchedule) may need any of its zones, so each of
// them needs one. Instance types are not judged: EC2 runs out of a type
// only where the chaos says so, and every pool allows many.
func capacityFor(p *corev1.Pod, pools []karpv1.NodePool, out map[string]bool) bool {
	spread := false
	for _, c := range p.Spec.TopologySpreadConstraints {
		spread = spread || (c.TopologyKey == wellknown.ZoneLabel && c.WhenUnsatisfiable == corev1.DoNotSchedule)
	}
	_, gpu := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
	zoneOK := map[string]bool{}
	zonesAllowed := map[string]bool{}
	for i := range pools {
		np := &pools[i]
		if np.DeletionTimestamp != nil || !tolerated(p, np.Spec.Template.Spec.Taints) {
			continue
		}
		reqs := scheduling.RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)
		if gpu != reqs.Has(wellknown.InstanceGPUManufacturerLabel) {
			continue // GPU pods go to the GPU pool, the others not
		}
		if arch, ok := p.Spec.NodeSelector[wellknown.ArchLabel]; ok && reqs.Has(wellknown.ArchLabel) && !reqs.Get(wellknown.ArchLabel).Has(arch) {
			continue
		}
		for _, z := range soakZones {
			if reqs.Has(wellknown.ZoneLabel) && !reqs.Get(wellknown.ZoneLabel).Has(z) {
				continue
			}
			zonesAllowed[z] = true
			for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
				if (!reqs.Has(wellknown.CapacityTypeLabel) || reqs.Get(wellknown.CapacityTypeLabel).Has(ct)) && !out[ct+"/"+z] {
					zoneOK[z] = true
				}
			}
		}
	}
	if len(zoneOK) == 0 {
		return false
	}
	if spread {
		for z := range zonesAllowed {
			if !zoneOK[z] {
				return false
			}
		}
	}
	return true
}

// tolerated says whether p tolerates every NoSchedule/NoExecute taint.
func tolerated(p *corev1.Pod, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for _, tol := range p.Spec.Tolerations {
			keyOK := tol.Key == t.Key || (tol.Key == "" && tol.Operator == corev1.TolerationOpExists)
			valueOK := tol.Operator == corev1.TolerationOpExists || tol.Value == t.Value
			ok = ok || (keyOK && valueOK && (tol.Effect == "" || tol.Effect == t.Effect))
		}
		if !ok {
			return false
		}
	}
	return true
}

func podReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return string(p.Status.Phase)
}

// checkBudgets: when a disruption command starts executing, the nodes its
// pools have disrupting, counted as Karpenter counts them, fit the pools'
// budgets.
func (v *invariants) checkBudgets(claims []karpv1.NodeClaim) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fresh := map[string]*disruption.Record{}
	for i := range claims {
		r, err := disruption.DecodeRecord(claims[i].Annotations[disruption.CommandAnnotation])
		if err != nil || r.Phase != disruption.Executing || v.commands[r.ID] {
			continue
		}
		fresh[r.ID] = r
	}
	if len(fresh) == 0 {
		return
	}
	pools, err := v.w.admin.NodePools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	nodeList, err := v.w.admin.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	// notReadySince is when each node stopped being Ready (absent: Ready).
	notReadySince := map[string]time.Time{}
	for _, n := range nodeList.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				notReadySince[n.Name] = c.LastTransitionTime.Time
			}
		}
	}
	v.mu.Lock()
	edits := maps.Clone(v.budgetEdits)
	v.mu.Unlock()
	for id, r := range fresh {
		v.commands[id] = true
		v.note("disruption command %s executing: %s %s of %v -> %v", id, r.Method, r.Decision, r.Candidates, r.Replacements)
		asStarted := slices.Clone(pools.Items)
		if r.StartedAt != nil {
			for i := range asStarted {
				asStarted[i] = budgetsAt(asStarted[i], edits[asStarted[i].Name], *r.StartedAt)
			}
		}
		for _, o := range overBudget(r, claims, asStarted, notReadySince) {
			v.violate("budget/"+id+"/"+o.pool, "disruption budgets never exceeded",
				"command %s (%s) started with %d of nodepool %s's %d nodes disrupting; its budgets allow %d", id, r.Reason, o.disrupting, o.pool, o.total, o.allowed)
		}
	}
}

// overCount is a pool a command started over budget in.
type overCount struct {
	pool                       string
	total, disrupting, allowed int
}

// overBudget lists the pools of the command's candidates whose budgets the
// command exceeded when it started. A command answers to its candidates'
// pools only (a claim gone already leaves its pool unchecked). The count is
// Karpenter's (BuildDisruptionBudgetMapping): initialized nodes whose
// instance is not terminating yet; disrupting are those NotReady, deleting
// or in an executing command. A deletion (or a node going NotReady) after
// this command started is not this decision's doing.
func overBudget(r *disruption.Record, claims []karpv1.NodeClaim, pools []karpv1.NodePool, notReadySince map[string]time.Time) []overCount {
	ofCommand := map[string]bool{}
	for i := range claims {
		if slices.Contains(r.Candidates, claims[i].Name) {
			ofCommand[claims[i].Labels[wellknown.NodePoolLabel]] = true
		}
	}
	var out []overCount
	for _, np := range pools {
		if !ofCommand[np.Name] {
			continue
		}
		total, disrupting := 0, 0
		for i := range claims {
			nc := &claims[i]
			if nc.Labels[wellknown.NodePoolLabel] != np.Name || !nc.IsTrue(karpv1.ConditionTypeInitialized) || nc.IsTrue(karpv1.ConditionTypeInstanceTerminating) {
				continue
			}
			total++
			// Times are whole seconds: something in the command's own
			// second is given the benefit of the doubt.
			rec, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation])
			executing := err == nil && rec.Phase == disruption.Executing && rec.StartedAt != nil && r.StartedAt != nil &&
				(rec.ID == r.ID || rec.StartedAt.Before(*r.StartedAt))
			deletedBefore := nc.DeletionTimestamp != nil && r.StartedAt != nil && nc.DeletionTimestamp.Time.Before(*r.StartedAt)
			since, notReady := notReadySince[nc.Status.NodeName]
			notReadyBefore := notReady && r.StartedAt != nil && since.Before(*r.StartedAt)
			if executing || deletedBefore || notReadyBefore {
				disrupting++
			}
		}
		if allowed := budgetCeiling(&np, total, r.Reason); disrupting > allowed {
			out = append(out, overCount{pool: np.Name, total: total, disrupting: disrupting, allowed: allowed})
		}
	}
	return out
}

// budgetCeiling is the most nodes a pool's budgets let disrupt at once for
// reason: the smallest active budget, percentages rounded up (a bound at
// least as loose as Karpenter's rounding, so the check never blames a
// correct decision). Schedules are not used by the soak.
func budgetCeiling(np *karpv1.NodePool, total int, reason karpv1.DisruptionReason) int {
	allowed := math.MaxInt
	for _, b := range np.Spec.Disruption.Budgets {
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		n := 0
		if pct, ok := strings.CutSuffix(b.Nodes, "%"); ok {
			p, _ := strconv.Atoi(pct)
			n = int(math.Ceil(float64(total) * float64(p) / 100))
		} else {
			n, _ = strconv.Atoi(b.Nodes)
		}
		allowed = min(allowed, n)
	}
	return allowed
}
