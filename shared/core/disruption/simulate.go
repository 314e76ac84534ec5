package disruption

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// world is the simulator's view with the nodes already going away taken
// out and their pods added to every batch, computed once per decision.
type world struct {
	c *view
	// nodes are the simulation nodes that stay.
	nodes []*scheduling.Node
	// leavingPods are the pods of leaving nodes that need room.
	leavingPods []*corev1.Pod
	sims        int
}

// newWorld removes the nodes of deleting claims and of live commands other
// than except (their pods are rescheduled in every simulation, as Karpenter
// does for deleting nodes).
func (c *view) newWorld(except string) *world {
	w := &world{c: c}
	leavingNodes := map[string]bool{}
	for name := range c.leavingClaims(except) {
		if n := c.nodeOf[name]; n != nil {
			leavingNodes[n.Name] = true
		} else {
			leavingNodes[name] = true // in-flight claim: its simulation node has its name
		}
	}
	for _, n := range c.in.Cluster.Nodes {
		if n.DeletionTimestamp != nil {
			leavingNodes[n.Name] = true
		}
	}
	for _, n := range c.in.Simulation.Nodes {
		if leavingNodes[n.Name] {
			for _, p := range c.podsOn[n.Name] {
				if c.pdbs.currentlyReschedulable(p, c.in.Now) {
					w.leavingPods = append(w.leavingPods, p)
				}
			}
			continue
		}
		w.nodes = append(w.nodes, n)
	}
	return w
}

// simulation is the outcome of placing candidates' pods elsewhere.
type simulation struct {
	results *scheduling.Results
	// failure says why some pod that must move found no room ("" if all did).
	failure string
}

// simulateConsolidation is simulate as consolidation runs it (Karpenter's
// IsConsolidationSimulation): at most one new NodeClaim, and the
// candidates' pods kept off nodes still inside their NodePool's
// consolidateAfter window.
func (w *world) simulateConsolidation(cands []*Candidate) simulation {
	return w.simulate(cands, 1, true)
}

// simulate places the pods of cands (and of leaving nodes, and pending
// pods) on the remaining nodes plus at most maxNew new NodeClaims (-1: no
// limit). Every pod that must move has to be placed, and candidates' pods
// must not land on nodes that are not initialized yet, nor, for a
// consolidation, on nodes under consolidateAfter (settling): Karpenter
// keeps consolidation from filling a node whose pods only just changed,
// which would reset its window and could undo a scale-down in progress.
// Pending pods and the pods of leaving nodes may go there.
func (w *world) simulate(cands []*Candidate, maxNew int, consolidation bool) simulation {
	w.sims++
	c := w.c
	gone := map[string]bool{}
	for _, cn := range cands {
		gone[cn.Node.Name] = true
	}
	nodes := make([]*scheduling.Node, 0, len(w.nodes))
	for _, n := range w.nodes {
		if !gone[n.Name] {
			nodes = append(nodes, n)
		}
	}
	mustMove := map[*corev1.Pod]bool{}
	fromCandidates := map[*corev1.Pod]bool{}
	batch := make([]*corev1.Pod, 0, len(c.pending)+len(w.leavingPods))
	batch = append(batch, c.pending...)
	for _, cn := range cands {
		for _, p := range cn.Reschedulable {
			if c.pdbs.currentlyReschedulable(p, c.in.Now) {
				batch = append(batch, p)
				mustMove[p] = true
				fromCandidates[p] = true
			}
		}
	}
	for _, p := range w.leavingPods {
		batch = append(batch, p)
		mustMove[p] = true
	}
	snap := *c.in.Simulation
	snap.Nodes = nodes
	snap.Pods = batch
	// Karpenter's consolidation simulates in its reserved fallback mode: a
	// pod whose reservations are all held goes to on-demand or spot.
	opts := scheduling.Options{MaxNewNodeClaims: maxNew, ReservedFallback: true, MinValues: c.in.Options.MinValues, Preferences: c.in.Options.Preferences}
	if consolidation {
		opts.Settling, opts.Moving = c.settling(), fromCandidates
	}
	res := scheduling.Solve(&snap, opts)
	var failed []string
	for _, e := range res.Unschedulable {
		if mustMove[e.Pod] {
			failed = append(failed, fmt.Sprintf("pod %s/%s: %s", e.Pod.Namespace, e.Pod.Name, e.Reason))
		}
	}
	if len(failed) == 0 {
		inFlight := map[string]bool{}
		for _, n := range nodes {
			if n.InFlight {
				inFlight[n.Name] = true
			}
		}
		for name, pods := range res.Existing {
			if !inFlight[name] {
				continue
			}
			for _, p := range pods {
				if fromCandidates[p] {
					failed = append(failed, fmt.Sprintf("would schedule against uninitialized node %s", name))
					break
				}
			}
		}
	}
	out := simulation{results: res}
	if len(failed) > 0 {
		if len(failed) > 3 {
			failed = append(failed[:3], fmt.Sprintf("and %d more", len(failed)-3))
		}
		out.failure = strings.Join(failed, "; ")
	}
	return out
}

// bufferHosts are the staying nodes the buffers' virtual pods go on when
// the pending and leaving pods are placed on what exists (no new claim):
// the room the buffers hold now. Karpenter's provisioner records the same
// placement for its emptiness check (Cluster.HasBufferPods); the
// simulator is deterministic, so the provisioner's pass and this one
// agree on it.
func (w *world) bufferHosts() map[string]int {
	if !slices.ContainsFunc(w.c.pending, buffer.IsVirtual) {
		return nil
	}
	snap := *w.c.in.Simulation
	snap.Nodes = w.nodes
	snap.Pods = append(slices.Clone(w.c.pending), w.leavingPods...)
	return buffer.Hosts(scheduling.Solve(&snap, scheduling.Options{}))
}

// settling are the nodes (by simulation name) still inside their
// NodePool's consolidateAfter window: Karpenter's IsUnderConsolidateAfter,
// initialized and less than consolidateAfter (set, not zero) since the
// last pod event or, without one, since initialization. Computed once per
// decision.
func (c *view) settling() map[string]bool {
	if c.settlingNodes != nil {
		return c.settlingNodes
	}
	c.settlingNodes = map[string]bool{}
	for _, nc := range c.in.Cluster.NodeClaims {
		np := c.pool(nc)
		if np == nil {
			continue
		}
		after := consolidateAfter(np)
		init := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized)
		if after == nil || *after == 0 || init == nil || init.Status != metav1.ConditionTrue {
			continue
		}
		since := init.LastTransitionTime.Time
		if !nc.Status.LastPodEventTime.IsZero() {
			since = nc.Status.LastPodEventTime.Time
		}
		if c.in.Now.Sub(since) >= *after {
			continue
		}
		if n := c.nodeOf[nc.Name]; n != nil {
			c.settlingNodes[n.Name] = true
		} else {
			c.settlingNodes[nc.Name] = true
		}
	}
	return c.settlingNodes
}
