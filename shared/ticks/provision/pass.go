package provision

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/ticks/lifecycle"
)

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// invocation is what one tick reads once and reuses across its passes.
type invocation struct {
	cloud    *cloud.Cloud
	resolved map[string]bool // EC2NodeClass UID/generation resolved this tick
	// guard, when set, is checked before every NodeClaim is created and
	// every instance launched: it fails once the invocation no longer holds
	// the provisioning lease, so a pass that outlives its lease stops before
	// it provisions the same pods as the new holder.
	guard lease.Guard
	// overlays are the NodeOverlays of the last snapshot, applied after
	// every Use of the invocation.
	overlays overlays
	// podTimings asks the next pass to observe the pods' startup and bound
	// durations (startup.go): the first pass of a scheduled tick.
	podTimings bool
	// shifted are the zones ARC shifts the cluster away from, read once
	// per pass (readZonalShift).
	shifted zonalshift.Zones
}

type passResult struct {
	pending, created, launched, unschedulable int
	// deferred are pending pods left for the next pass
	// (timing.MaxPodsPerPass).
	deferred int
	// decisions are the launches a shadow pass recorded.
	decisions     int
	lifecycle     lifecycle.Summary
	snapshotBytes int64
	// work is true when something is in motion: pods waiting or claims
	// not yet initialized. Only then does the tick keep watching.
	work bool
	// buffers is where the pass's simulations put the CapacityBuffers'
	// virtual pods.
	buffers buffer.Tally
}

// Pass runs one provisioning pass. It is exported for the interruption and
// disruption functions, which provision for displaced pods in their own
// invocation (holding the provisioning lease).
func (p *Provisioner) Pass(ctx context.Context) (Summary, error) {
	return p.passOnce(ctx, &invocation{resolved: map[string]bool{}})
}

// passOnce is one pass with its own invocation state.
func (p *Provisioner) passOnce(ctx context.Context, inv *invocation) (Summary, error) {
	p.prepare()
	defer p.Events.Flush(context.WithoutCancel(ctx))
	r, err := p.pass(ctx, inv)
	var s Summary
	s.add(r)
	return s, err
}

func (p *Provisioner) pass(ctx context.Context, inv *invocation) (passResult, error) {
	var res passResult
	snapAt := p.Clock.Now()
	snap, err := snapshot.Take(ctx, p.Kube, p.Clock)
	if err != nil {
		return res, err
	}
	if inv.podTimings {
		inv.podTimings = false
		p.recordPodTimings(snap.Pods, snapAt)
	}
	res.snapshotBytes = snap.Stats.BytesRead
	if err := p.openCloud(ctx, inv); err != nil {
		return res, err
	}
	defer inv.cloud.Close(ctx)
	if err := p.readZonalShift(ctx, inv); err != nil {
		return res, err
	}
	inv.cloud.ZonalShift(inv.shifted, snap.NodeClaims, snap.NodeClasses)
	if p.shadow() {
		defer p.Decisions.Flush(context.WithoutCancel(ctx))
	}
	var errs []error
	// Shadow mode: the EC2NodeClasses' finalizer and status are
	// Karpenter's to write; the pass decides with the status Karpenter
	// resolved.
	if !p.shadow() {
		// A class whose finalization fails now (one throttled call) keeps
		// its finalizer until a later pass: nothing else waits for it.
		if err := p.finalizeNodeClasses(ctx, inv, snap.NodeClasses, snap.NodeClaims); err != nil {
			errs = append(errs, err)
			p.Log.Warn("running the ec2nodeclass finalizer", "error", err)
		}
		// A class that cannot be resolved now (one throttled call) keeps
		// the status it last resolved to: the other classes, and the
		// claims of this one, go on.
		if err := p.resolveNodeClasses(ctx, inv, snap.NodeClasses); err != nil {
			errs = append(errs, err)
			p.Log.Warn("resolving ec2nodeclasses; using their last resolved status", "error", err)
		}
	}
	if err := inv.cloud.Use(ctx, snap.NodeClasses); err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	inv.overlays = overlays{items: snap.NodeOverlays, pools: snap.NodePools}
	applied := inv.applyOverlays()
	if !p.shadow() {
		p.recordOverlays(ctx, snap.NodeOverlays, applied)
		// Shadow mode: every NodeClaim is Karpenter's to launch,
		// register and initialize.
		lr, err := p.reconcileClaims(ctx, inv, snap.NodeClaims, snap.Nodes)
		res.lifecycle = lr.lifecycle
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Static NodePools first: the claims they create are durable and
	// launched at once, and the simulation below reads them back as
	// in-flight capacity.
	if err := p.keepStatic(ctx, inv, snap, &res); err != nil {
		errs = append(errs, err)
	}
	pending := planning.PodsToProvision(snap, p.Clock.Now())
	res.pending = len(pending)
	res.work = res.work || len(pending) > 0 || res.lifecycle.InFlight > 0
	// A backlog larger than one simulation should hold is taken in shares,
	// the oldest pods first: the rest waits for the next pass, which finds
	// the claims made for this share in flight.
	pending, res.deferred = planning.Bounded(pending, timing.MaxPodsPerPass)
	if res.deferred > 0 {
		p.Log.Info("pending pods beyond one pass's share left for the next pass",
			"pending", res.pending, "this_pass", len(pending), "left", res.deferred)
	}
	bufs := buffer.Resolve(snap, metav1.NewTime(p.Clock.Now()))
	if !p.shadow() {
		defer func() { p.recordBuffers(ctx, bufs, &res.buffers) }()
	}
	pending = withBuffers(pending, bufs)
	if len(pending) == 0 {
		return res, errors.Join(errs...)
	}
	for round := 1; ; round++ {
		deferred, err := p.provisionRound(ctx, inv, snap, pending, &res)
		if err != nil {
			errs = append(errs, err)
		}
		// Pods left for reserved capacity held by this round's claims are
		// provisioned again once those launched, as Karpenter's next
		// scheduling loop does: the reservations used up, they go to what
		// is left (another reservation, or on-demand and spot).
		if len(deferred) == 0 || res.launched == 0 || round == maxReservedRounds || ctx.Err() != nil {
			return res, errors.Join(errs...)
		}
		if err := inv.cloud.Use(ctx, snap.NodeClasses); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		inv.applyOverlays()
		pending = deferred
	}
}

// maxReservedRounds bounds the solves of one pass: each round after the
// first is for pods that waited for reserved capacity the previous round's
// claims held; a pessimistic claim holds every reservation it could use,
// so a few rounds settle what one would not, and the next pass does the
// rest.
const maxReservedRounds = 3

// provisionRound simulates the pending pods, creates the claims the
// simulation asks for and launches them; it returns the pods left for the
// reserved capacity those claims hold.
func (p *Provisioner) provisionRound(ctx context.Context, inv *invocation, snap *cluster.Snapshot, pending []*corev1.Pod, res *passResult) ([]*corev1.Pod, error) {
	var errs []error
	classes := inv.cloud.InstanceTypes()
	// Launches above changed claims (labels, status): read them again so the
	// simulation sees the in-flight capacity as it now is.
	claims, err := kube.AllNodeClaims(ctx, p.Kube)
	if err != nil {
		return nil, err
	}
	snap.NodeClaims = claims
	start := p.Clock.Now()
	opts := scheduling.Provisioning()
	if p.Config.MinValuesBestEffortOn() {
		opts.MinValues = scheduling.MinValuesBestEffort
	}
	if p.Config.PreferencesIgnored() {
		opts.Preferences = scheduling.PreferencesIgnore
	}
	results := scheduling.Solve(planning.SimulationInput(snap, pending, classes), opts)
	p.Metrics.Observe("karpenter_scheduler_scheduling_duration_seconds", "Seconds", p.Clock.Since(start).Seconds(), map[string]string{"controller": "provisioner"})
	p.Metrics.Gauge("karpenter_scheduler_queue_depth", float64(len(pending)), map[string]string{"controller": "provisioner"})
	res.buffers.Add(results)
	res.unschedulable = 0
	var deferred []*corev1.Pod
	for _, e := range results.Unschedulable {
		if buffer.IsVirtual(e.Pod) && !e.ReservedDeferred {
			// Virtual pods get no Events (they do not exist): their
			// buffer's Provisioning condition says why.
			continue
		}
		if e.ReservedDeferred {
			// Not a failure (Karpenter publishes nothing): the pod waits
			// for the reserved capacity this round's claims hold.
			deferred = append(deferred, e.Pod)
			continue
		}
		res.unschedulable++
		if !p.shadow() { // Karpenter tells the pods in shadow mode
			p.Events.Warning(record.ObjectOf(podGVK, e.Pod), "FailedScheduling", "Failed to schedule pod, %s", e.Reason)
		}
	}
	if len(deferred) > 0 {
		p.Log.Info("deferring pods to a later simulation: the reserved capacity they can use is held", "pods", len(deferred))
	}
	for node, pods := range results.Existing {
		if p.shadow() {
			break
		}
		for _, pod := range buffer.WithoutVirtual(pods) {
			p.Events.Normal(record.ObjectOf(podGVK, pod), "Nominated", "Pod should schedule on: %s", node)
		}
	}
	if !p.shadow() {
		errs = append(errs, p.nominate(ctx, snap, results))
	}
	pools := map[string]*karpv1.NodePool{}
	for _, np := range snap.NodePools {
		pools[np.Name] = np
	}
	news := results.NewNodeClaims
	if len(news) > timing.MaxNodeClaimsPerPass && !p.shadow() {
		// The pods of the claims not created stay pending: the next pass
		// finds the ones created here in flight and makes the rest. (A
		// shadow pass creates nothing: it records every decision.)
		left := 0
		for _, n := range news[timing.MaxNodeClaimsPerPass:] {
			left += len(buffer.WithoutVirtual(n.Pods))
		}
		res.deferred += left
		p.Log.Info("nodeclaims beyond one pass's share left for the next pass",
			"nodeclaims", len(news), "this_pass", timing.MaxNodeClaimsPerPass, "pods_left", left)
		news = news[:timing.MaxNodeClaimsPerPass]
	}
	created, err := p.createClaims(ctx, inv, pools, news, "provisioning", res)
	if err != nil {
		errs = append(errs, err)
	}
	// The claims are durable: a launch that fails here is retried by the
	// next pass.
	before := inv.cloud.Launched()
	errs = append(errs, inv.cloud.LaunchAll(ctx, created))
	res.launched += inv.cloud.Launched() - before
	return deferred, errors.Join(errs...)
}

// nominate marks the NodeClaims of the nodes (and in-flight claims) the
// simulation placed real pending pods on, as Karpenter's Results.Record
// nominates them: disruption leaves them alone for the nomination window,
// so that a node is not taken away as the pods it is about to receive
// arrive. Buffers' virtual pods nominate nothing (they would hold their
// nodes for ever; emptiness leaves those nodes for their own reason).
func (p *Provisioner) nominate(ctx context.Context, snap *cluster.Snapshot, results *scheduling.Results) error {
	if len(results.Existing) == 0 {
		return nil
	}
	byNode := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		byNode[nc.Name] = nc
		if nc.Status.NodeName != "" {
			byNode[nc.Status.NodeName] = nc
		}
	}
	now, window := p.Clock.Now(), disruption.NominationWindow(p.Config.BatchMax)
	var errs []error
	for node, pods := range results.Existing {
		nc := byNode[node]
		if nc == nil || len(buffer.WithoutVirtual(pods)) == 0 {
			continue
		}
		v := disruption.Nomination(nc, now, window)
		if v == "" {
			continue
		}
		if err := p.Kube.AnnotateNodeClaim(ctx, nc, map[string]*string{disruption.NominatedUntilAnnotation: &v}); err != nil && !kube.IsGone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcileClaims advances each claim one lifecycle step, launching the
// ones not launched yet with the pass's view of offerings.
func (p *Provisioner) reconcileClaims(ctx context.Context, inv *invocation, claims []*karpv1.NodeClaim, nodes []*corev1.Node) (passResult, error) {
	lc := &lifecycle.Lifecycle{
		Kube: p.Kube, Instances: inv.cloud.Instances, Launcher: inv.cloud, Cluster: p.Config.ClusterName,
		Clock: p.Clock, Log: p.Log, Events: p.Events, Metrics: p.Metrics, RegistrationTTL: p.Config.RegistrationTTL,
	}
	s, err := lc.Reconcile(ctx, claims, nodes)
	return passResult{lifecycle: s}, err
}

// resolveNodeClasses refreshes the status of each EC2NodeClass that is
// stale (never resolved, spec changed, or older than a minute), once per tick.
func (p *Provisioner) resolveNodeClasses(ctx context.Context, inv *invocation, ncs []*awsv1.EC2NodeClass) error {
	var errs []error
	var info *eksauth.ClusterInfo
	for i, nc := range ncs {
		key := fmt.Sprintf("%s/%d", nc.UID, nc.Generation)
		if inv.resolved[key] || nc.DeletionTimestamp != nil || !nodeclass.IsStale(nc, p.Clock.Now(), p.Config.NodeClassRefresh()) {
			continue
		}
		if info == nil {
			got, err := p.Cluster(ctx)
			if err != nil {
				return fmt.Errorf("reading cluster facts: %w", err)
			}
			info = &got
		}
		status, err := p.Resolver.Resolve(ctx, nc, *info)
		if err != nil {
			errs = append(errs, fmt.Errorf("resolving ec2nodeclass %s: %w", nc.Name, err))
			continue
		}
		inv.resolved[key] = true
		updated, err := nodeclass.Apply(ctx, p.Kube.EC2NodeClasses, nc, status, info.CABundle, p.Clock.Now())
		if err != nil {
			errs = append(errs, err)
		}
		if updated != nil {
			ncs[i] = updated
		}
	}
	return errors.Join(errs...)
}

// createClaims creates the NodeClaim of each simulated claim (the one way
// a pass creates claims), checking the lease before each. It returns the
// claims created. In shadow mode it records each as a decision (reason
// says why it is wanted: provisioning or static) and creates none.
func (p *Provisioner) createClaims(ctx context.Context, inv *invocation, pools map[string]*karpv1.NodePool, news []*scheduling.NewNodeClaim, reason string, res *passResult) ([]*karpv1.NodeClaim, error) {
	if p.shadow() {
		p.recordLaunches(news, reason, res)
		return nil, nil
	}
	var errs []error
	var created []*karpv1.NodeClaim
	for _, n := range news {
		np, nc := pools[n.NodePool], inv.cloud.NodeClass(n.NodeClass)
		if np == nil || nc == nil {
			errs = append(errs, fmt.Errorf("simulation chose unknown nodepool %q or node class %q", n.NodePool, n.NodeClass))
			continue
		}
		if err := inv.guard.Check(ctx, "creating a nodeclaim"); err != nil {
			errs = append(errs, err)
			break
		}
		claim, err := p.Kube.NodeClaims.Create(ctx, annotateOverlays(planning.NodeClaimFor(np, nc, n), n, inv.overlays.applied), metav1.CreateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err))
			continue
		}
		res.created++
		created = append(created, claim)
		it, o := n.CheapestOffering()
		p.Log.Info("created nodeclaim", "nodeclaim", claim.Name, "nodepool", np.Name, "pods", len(n.Pods),
			"instance_types", len(n.InstanceTypes), "cheapest", it.Name, "zone", o.Zone, "capacity_type", o.CapacityType, "price", o.Price, "credits", n.CreditHourly(it))
		p.Metrics.Count("karpenter_nodeclaims_created_total", 1, map[string]string{"nodepool": np.Name, "reason": "provisioning"})
		for _, pod := range buffer.WithoutVirtual(n.Pods) {
			p.Events.Normal(record.ObjectOf(podGVK, pod), "Nominated", "Pod should schedule on: nodeclaim/%s", claim.Name)
		}
	}
	return created, errors.Join(errs...)
}

// recordLaunches records the launches a shadow pass decided: one decision
// per simulated claim (a static NodePool's identical claims as one, with
// their count).
func (p *Provisioner) recordLaunches(news []*scheduling.NewNodeClaim, reason string, res *passResult) {
	count := map[*scheduling.NewNodeClaim]int{}
	var order []*scheduling.NewNodeClaim
	for _, n := range news {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	for _, n := range order {
		d := shadow.Launch(n, reason)
		if count[n] > 1 {
			d.Count = count[n]
		}
		p.Decisions.Record(d, p.Events)
		res.decisions++
	}
}
