package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/disruption"
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
	r.summary = fmt.Sprintf("nodes=%d pods=%d cost-per-hour=%.3f fresh-simulation=%.3f", len(f.have), f.pods, f.actual, f.fresh)
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
	pods          int
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
	// cluster: nodes with a do-not-disrupt pod, spot nodes the spot-to-spot
	// rule keeps (no replacement with fewer than 15 cheaper types to choose
	// from, by the disruption function's latest word on them), and nodes
	// single-node consolidation found no move for in a NodePool whose
	// budget lets a command take only one node at a time (multi-node
	// consolidation cannot combine them either, under Karpenter's rules).
	// Every other workload pod is placed afresh, on the room those nodes
	// have left or on new NodeClaims: the fresh simulation is what a
	// consolidation faithful to Karpenter could reach.
	events, err := w.admin.Core.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=Unconsolidatable"})
	if err != nil {
		return c, err
	}
	claims := map[string]int{}
	for _, nc := range snap.NodeClaims {
		claims[nc.Labels[wellknown.NodePoolLabel]]++
	}
	oneAtATime := map[string]bool{}
	for _, np := range snap.NodePools {
		oneAtATime[np.Name] = budgetCeiling(np, claims[np.Name], karpv1.DisruptionReasonUnderutilized) < 2
	}
	f := r.place(snap, sess.Classes(), book, keptForPods(snap), heldByRule(events.Items, oneAtATime, snap.NodeClaims))
	if f.freed > 0 && len(f.res.NewNodeClaims) >= f.freed {
		// Karpenter's consolidation never adds nodes (single-node replaces
		// one by one, multi-node many by one), so a placement that needs as
		// many new nodes as it frees is reachable only one node at a time:
		// as in a one-at-a-time pool, a node single-node consolidation
		// found no cheaper replacement for keeps its pods.
		every := map[string]bool{}
		for name := range oneAtATime {
			every[name] = true
		}
		f = r.place(snap, sess.Classes(), book, keptForPods(snap), heldByRule(events.Items, every, snap.NodeClaims))
	}
	c.fresh, c.pods, c.want = f.kept, f.pods, f.want
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
	f.res = scheduling.Solve(planning.SimulationInput(&empty, pending, classes), scheduling.Provisioning())
	f.pods = len(pending)
	if len(fixed) > 0 {
		f.want = append(f.want, fmt.Sprintf("%d node(s) kept (do-not-disrupt pods, spot-to-spot rule, no cheaper replacement) $%.4f", len(fixed), f.kept))
	}
	return f
}

// heldByRule names the NodeClaims whose latest Unconsolidatable Event says
// Karpenter's spot-to-spot rule keeps them, or, in a NodePool whose budget
// allows one node at a time (oneAtATime), that single-node consolidation
// can find no cheaper replacement.
func heldByRule(events []corev1.Event, oneAtATime map[string]bool, claims []*karpv1.NodeClaim) map[string]bool {
	type latest struct {
		at  time.Time
		msg string
	}
	last := map[string]latest{}
	for _, e := range events {
		if e.Reason != "Unconsolidatable" || e.InvolvedObject.Kind != "NodeClaim" {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		if l, ok := last[e.InvolvedObject.Name]; !ok || !at.Before(l.at) {
			last[e.InvolvedObject.Name] = latest{at: at, msg: e.Message}
		}
	}
	pool := map[string]string{}
	for _, nc := range claims {
		pool[nc.Name] = nc.Labels[wellknown.NodePoolLabel]
	}
	out := map[string]bool{}
	for name, l := range last {
		switch {
		case strings.HasPrefix(l.msg, disruption.SpotToSpotRule):
			out[name] = true
		case oneAtATime[pool[name]] && strings.HasPrefix(l.msg, disruption.NoCheaperReplacement):
			out[name] = true
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
