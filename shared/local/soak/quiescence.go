package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/whatif"
)

// quiescence checks the world at rest: nothing leaked, and the cluster
// costs at most costTolerance more than a fresh simulation of its pods
// (consolidation converged instead of stopping half-way or looping).
func (r *runner) quiescence(ctx context.Context) {
	w := r.w
	w.inv.check(ctx)
	leaks, err := w.emu.Leaks(ctx, w.admin)
	if err == nil {
		for _, i := range leaks {
			w.inv.violate("leak/"+i.ID, "no instance without a NodeClaim after the GC grace", "instance %s (%s, tags %v) leaked at quiescence", i.ID, i.InstanceType, i.Tags)
		}
	}
	f, err := r.freshCost(ctx)
	if err != nil {
		r.summary = fmt.Sprintf("(fresh simulation failed: %v)", err)
		w.inv.violate("fresh", "at quiescence the $/h is within 10% of a fresh simulation", "the fresh simulation could not run: %v", err)
		return
	}
	r.summary = fmt.Sprintf("nodes=%d kept=%d pods=%d cost-per-hour=%.3f fresh-simulation=%.3f", len(f.have), f.kept, f.pods, f.actual, f.fresh)
	w.inv.note("at rest: %s", r.summary)
	if f.unschedulable != "" {
		w.inv.violate("fresh-unschedulable", "at quiescence the $/h is within 10% of a fresh simulation", "a fresh simulation cannot place every pod: %s", f.unschedulable)
	}
	if f.actual > f.fresh*(1+costTolerance) {
		r.saveSnapshot(ctx, "quiescence.json.gz")
		w.inv.violate("cost", "at quiescence the $/h is within 10% of a fresh simulation",
			"the cluster costs $%.4f/h, a fresh simulation of its %d pods $%.4f/h (+%.0f%%); nodes %v; fresh %v", f.actual, f.pods, f.fresh, 100*(f.actual/f.fresh-1), f.have, f.want)
	}
}

// comparison is the cluster at rest beside a fresh simulation of its pods,
// both priced by the functions' own price book: the emulator's spot prices
// drift every SpotPriceInterval and the book follows on its refresh, so
// pricing one side live and the other from the book would measure the
// book's age, not whether consolidation converged.
type comparison struct {
	actual, fresh float64
	// kept are the nodes the reference keeps by rule; pods those it
	// places afresh.
	kept, pods    int
	unschedulable string
	have, want    []string
}

// freshCost prices the running instances and simulates scheduling every
// workload pod as if the cluster were empty, with the functions' own
// instance types, prices and simulator.
func (r *runner) freshCost(ctx context.Context) (c comparison, err error) {
	w := r.w
	// Reads only; the world's hostility may fail one, so try a few times.
	for attempt := 0; attempt < 5; attempt++ {
		if c, err = r.simulateFresh(ctx); err == nil {
			return
		}
		t := w.clk.NewTimer(time.Second)
		w.clk.Step(time.Second)
		<-t.C()
	}
	return
}

// simulateFresh runs the comparison while the virtual clock keeps moving:
// it reads through the functions' hostile clients, whose retries back off
// on that clock, and nothing else moves it while the runner waits here.
func (r *runner) simulateFresh(ctx context.Context) (comparison, error) {
	type result struct {
		c   comparison
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := r.compare(ctx)
		done <- result{c, err}
	}()
	for {
		select {
		case res := <-done:
			return res.c, res.err
		case <-time.After(20 * time.Millisecond):
			r.w.clk.Step(100 * time.Millisecond)
		}
	}
}

func (r *runner) compare(ctx context.Context) (comparison, error) {
	var c comparison
	w := r.w
	snap, err := snapshot.Take(ctx, w.admin, w.clk)
	if err != nil {
		return c, err
	}
	env, err := w.env("provisioner", "fresh-simulation", &deploy.KillSwitch{}, nil)
	if err != nil {
		return c, err
	}
	sess, err := env.Provisioner().NewSession(ctx, snap.NodeClasses)
	if err != nil {
		return c, err
	}
	book := prices(sess.Classes())
	for _, i := range w.emu.Instances(func(i emulator.Instance) bool { return i.State == emulator.StateRunning }) {
		price := r.booked(book, wellknown.ProviderID(i.Zone, i.ID))
		c.actual += price
		c.have = append(c.have, fmt.Sprintf("%s/%s/%s $%.4f", i.InstanceType, i.CapacityType, i.Zone, price))
	}
	// Nodes Karpenter keeps by rule keep their pods, as they do in the
	// cluster: nodes with a do-not-disrupt pod; spot nodes the
	// spot-to-spot rule keeps (no replacement with fewer than 15 cheaper
	// spot types to choose from); and nodes for which single-node
	// consolidation has no move, in a NodePool whose budget lets a command
	// take only one node at a time (multi-node consolidation cannot
	// combine them either, under Karpenter's rules). Which nodes those are
	// is judged here, from the cluster and the price book, never from what
	// the functions said or did: a reference that took their word would
	// trust the code it checks. Every other workload pod is placed afresh,
	// on the room those nodes have left or on new NodeClaims: the fresh
	// simulation is what a consolidation faithful to Karpenter could reach.
	claims := map[string]int{}
	for _, nc := range snap.NodeClaims {
		claims[nc.Labels[wellknown.NodePoolLabel]]++
	}
	oneAtATime := map[string]bool{}
	for _, np := range snap.NodePools {
		oneAtATime[np.Name] = budgetCeiling(np, claims[np.Name], karpv1.DisruptionReasonUnderutilized) < 2
	}
	moves := r.singleNodeMoves(snap, sess.Classes(), book)
	f := r.place(snap, sess.Classes(), book, keptForPods(snap), held(moves, oneAtATime, snap.NodeClaims))
	if f.freed > 0 && len(f.res.NewNodeClaims) >= f.freed {
		// Karpenter's consolidation never adds nodes (single-node replaces
		// one by one, multi-node many by one), so a placement that needs as
		// many new nodes as it frees is reachable only one node at a time:
		// as in a one-at-a-time pool, a node single-node consolidation
		// has no move for keeps its pods.
		every := map[string]bool{}
		for name := range oneAtATime {
			every[name] = true
		}
		f = r.place(snap, sess.Classes(), book, keptForPods(snap), held(moves, every, snap.NodeClaims))
	}
	c.fresh, c.pods, c.want, c.kept = f.kept, f.pods, f.want, f.fixed
	res := f.res
	for _, n := range res.NewNodeClaims {
		it, o := n.CheapestOffering()
		c.fresh += o.Price
		c.want = append(c.want, fmt.Sprintf("%s/%s/%s $%.4f (%d pods)", it.Name, o.CapacityType, o.Zone, o.Price, len(n.Pods)))
	}
	for _, u := range res.Unschedulable {
		c.unschedulable += fmt.Sprintf("%s: %s; ", u.Pod.Name, u.Reason)
	}
	return c, nil
}

// keptForPods names the nodes a do-not-disrupt pod keeps.
func keptForPods(snap *cluster.Snapshot) map[string]bool {
	fixed := map[string]bool{}
	for _, p := range snap.Pods {
		if p.Spec.NodeName != "" && p.Annotations[wellknown.DoNotDisruptAnnotation] == "true" && !podutil.IsTerminal(p) {
			fixed[p.Spec.NodeName] = true
		}
	}
	return fixed
}

// placement is a fresh simulation: the price of the nodes kept, the
// workload pods placed afresh, and how many nodes were freed for them.
type placement struct {
	kept        float64
	pods, freed int
	fixed       int
	want        []string
	res         *scheduling.Results
}

// place keeps the nodes fixed names and those of the NodeClaims held, and
// places every other workload pod afresh, on the room the kept nodes have
// left or on new NodeClaims.
func (r *runner) place(snap *cluster.Snapshot, classes map[string]*scheduling.NodeClass, book map[string]float64, fixed, held map[string]bool) placement {
	for _, nc := range snap.NodeClaims {
		if held[nc.Name] && nc.Status.NodeName != "" {
			fixed[nc.Status.NodeName] = true
		}
	}
	var f placement
	var pods, pending []*corev1.Pod
	for _, p := range snap.Pods {
		if podutil.IsTerminal(p) || p.DeletionTimestamp != nil {
			continue
		}
		if fixed[p.Spec.NodeName] {
			pods = append(pods, p)
			continue
		}
		if p.Namespace != workloadNamespace || podutil.IsOwnedByDaemonSet(p) {
			continue
		}
		q := p.DeepCopy()
		q.Spec.NodeName = ""
		pending = append(pending, q)
		pods = append(pods, q)
	}
	empty := *snap
	empty.Nodes, empty.NodeClaims, empty.Pods = nil, nil, pods
	for _, n := range snap.Nodes {
		if fixed[n.Name] {
			empty.Nodes = append(empty.Nodes, n)
		}
	}
	for _, nc := range snap.NodeClaims {
		if !fixed[nc.Status.NodeName] {
			if nc.Status.NodeName != "" {
				f.freed++
			}
			continue
		}
		empty.NodeClaims = append(empty.NodeClaims, nc)
		f.kept += r.booked(book, nc.Status.ProviderID)
	}
	f.fixed = len(empty.NodeClaims)
	f.res = scheduling.Solve(planning.SimulationInput(&empty, pending, classes), scheduling.Provisioning())
	f.pods = len(pending)
	if len(fixed) > 0 {
		f.want = append(f.want, fmt.Sprintf("%d node(s) kept (do-not-disrupt pods, spot-to-spot rule, no cheaper replacement) $%.4f", len(fixed), f.kept))
	}
	return f
}

// move is what single-node consolidation could do with one node, judged
// by the reference: nothing (none), delete it, or replace it with one
// cheaper node; spotRule marks a spot node whose only replacement has
// fewer than minSpotToSpotTypes cheaper spot types to choose from.
type move struct {
	none, spotRule bool
}

// minSpotToSpotTypes is Karpenter's spot-to-spot rule: a spot node is
// replaced by a spot node only when at least 15 cheaper types could be.
const minSpotToSpotTypes = 15

// singleNodeMoves judges, for each initialized NodeClaim, whether
// Karpenter's single-node consolidation could delete it (its pods fit on
// the other nodes) or replace it with one cheaper node, placing its pods
// with the scheduling simulator on the rest of the cluster as it is.
func (r *runner) singleNodeMoves(snap *cluster.Snapshot, classes map[string]*scheduling.NodeClass, book map[string]float64) map[string]move {
	out := map[string]move{}
	for _, cand := range snap.NodeClaims {
		node := cand.Status.NodeName
		if node == "" || cand.DeletionTimestamp != nil || !cand.IsTrue(karpv1.ConditionTypeInitialized) {
			continue
		}
		var moved, pods []*corev1.Pod
		for _, p := range snap.Pods {
			if podutil.IsTerminal(p) || p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.NodeName != node {
				pods = append(pods, p)
				continue
			}
			if p.Namespace != workloadNamespace || podutil.IsOwnedByDaemonSet(p) {
				continue
			}
			q := p.DeepCopy()
			q.Spec.NodeName = ""
			moved = append(moved, q)
			pods = append(pods, q)
		}
		rest := *snap
		rest.Pods, rest.Nodes, rest.NodeClaims = pods, nil, nil
		for _, n := range snap.Nodes {
			if n.Name != node {
				rest.Nodes = append(rest.Nodes, n)
			}
		}
		for _, nc := range snap.NodeClaims {
			if nc.Name != cand.Name {
				rest.NodeClaims = append(rest.NodeClaims, nc)
			}
		}
		res := scheduling.Solve(planning.SimulationInput(&rest, moved, classes), scheduling.Provisioning())
		price := r.booked(book, cand.Status.ProviderID)
		spot := cand.Labels[wellknown.CapacityTypeLabel] == wellknown.CapacityTypeSpot
		switch {
		case len(res.Unschedulable) > 0 || len(res.NewNodeClaims) > 1:
			out[cand.Name] = move{none: true}
		case len(res.NewNodeClaims) == 0:
			out[cand.Name] = move{} // deleted
		default:
			cheaper, spotCheaper := cheaperTypes(res.NewNodeClaims[0], price)
			switch {
			case spot && spotCheaper > 0 && spotCheaper < minSpotToSpotTypes:
				out[cand.Name] = move{none: true, spotRule: true}
			case spot && spotCheaper == 0, !spot && cheaper == 0:
				out[cand.Name] = move{none: true}
			}
		}
	}
	return out
}

// cheaperTypes counts n's instance types cheaper than price, of any
// capacity type and as spot, by Karpenter's rule
// (RemoveInstanceTypeOptionsByPriceAndMinValues): a type is cheaper when
// its worst launch price is, the dearest available offering in the zones
// n allows of the first capacity type (reserved, spot, on-demand) that has
// one, since the launch may get any of them. One cheap zone is not enough.
func cheaperTypes(n *scheduling.NewNodeClaim, price float64) (all, spot int) {
	reqs := scheduling.RequirementsFromNodePool(n.Requirements)
	zones, cts := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	worst := func(it *scheduling.InstanceType, ct string) (float64, bool) {
		dearest, found := 0.0, false
		for _, o := range it.Offerings {
			if !o.Available || o.CapacityType != ct || (zones != nil && !zones.Has(o.Zone)) {
				continue
			}
			dearest, found = max(dearest, o.Price), true
		}
		return dearest, found
	}
	for _, it := range n.InstanceTypes {
		for _, ct := range []string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
			if cts != nil && !cts.Has(ct) {
				continue
			}
			if p, ok := worst(it, ct); ok {
				if p < price {
					all++
				}
				break
			}
		}
		if cts == nil || cts.Has(wellknown.CapacityTypeSpot) {
			if p, ok := worst(it, wellknown.CapacityTypeSpot); ok && p < price {
				spot++
			}
		}
	}
	return all, spot
}

// held names the NodeClaims Karpenter's rules keep: by the spot-to-spot
// rule anywhere, and, in a NodePool whose budget allows one node at a
// time (oneAtATime), those single-node consolidation has no move for.
func held(moves map[string]move, oneAtATime map[string]bool, claims []*karpv1.NodeClaim) map[string]bool {
	out := map[string]bool{}
	for _, nc := range claims {
		m := moves[nc.Name]
		if m.spotRule || (m.none && oneAtATime[nc.Labels[wellknown.NodePoolLabel]]) {
			out[nc.Name] = true
		}
	}
	return out
}

// prices is the functions' price book as one map of offeringKey to $/h.
func prices(classes map[string]*scheduling.NodeClass) map[string]float64 {
	out := map[string]float64{}
	for _, class := range classes {
		for _, it := range class.InstanceTypes {
			for _, o := range it.Offerings {
				out[offeringKey(it.Name, o.Zone, o.CapacityType)] = o.Price
			}
		}
	}
	return out
}

func offeringKey(instanceType, zone, capacityType string) string {
	return instanceType + "/" + zone + "/" + capacityType
}

// booked is the book's price of a provider ID's instance (its type, zone
// and capacity type), or the emulator's when the book has none.
func (r *runner) booked(book map[string]float64, providerID string) float64 {
	if i, ok := r.w.emu.Instance(wellknown.InstanceIDFromProviderID(providerID)); ok {
		if p, ok := book[offeringKey(i.InstanceType, i.Zone, i.CapacityType)]; ok {
			return p
		}
	}
	return r.price(providerID)
}

// price is what the emulator charges for a provider ID's instance.
func (r *runner) price(providerID string) float64 {
	i, ok := r.w.emu.Instance(wellknown.InstanceIDFromProviderID(providerID))
	if !ok {
		return 0
	}
	if i.CapacityType == "spot" {
		return r.w.emu.SpotPrice(i.InstanceType, i.Zone)
	}
	p, _ := r.w.emu.OnDemandPrice(i.InstanceType)
	return p
}

// saveSnapshot writes what the functions see as a `karpless snapshot` file
// in the seed's folder, for `karpless simulate --snapshot` to explain.
func (r *runner) saveSnapshot(ctx context.Context, name string) {
	w := r.w
	f, err := whatif.Read(ctx, w.admin, config.DefaultNamespace, fmt.Sprintf("soak seed %d", w.seed))
	if err != nil {
		w.inv.note("saving a snapshot: %v", err)
		return
	}
	f.TakenAt = w.now()
	out, err := os.Create(filepath.Join(w.dir, name))
	if err != nil {
		return
	}
	defer out.Close()
	if err := f.Write(out, true); err == nil {
		w.inv.note("snapshot saved as %s", filepath.Join(w.dir, name))
	}
}
