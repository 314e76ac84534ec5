package whatif

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// PodNotFoundError is a pod the snapshot does not have.
type PodNotFoundError struct{ Namespace, Name string }

func (e *PodNotFoundError) Error() string {
	return fmt.Sprintf("pod %s/%s not found (finished pods, Succeeded or Failed, are not read)", e.Namespace, e.Name)
}

// NotPendingError is a pod bound to a node that is staying: nothing to
// provision for it.
type NotPendingError struct {
	Pod, Node, NodeClaim, NodePool string
}

func (e *NotPendingError) Error() string {
	s := fmt.Sprintf("pod %s is not pending: it is bound to node %s", e.Pod, e.Node)
	switch {
	case e.NodeClaim != "":
		s += fmt.Sprintf(" (NodeClaim %s of NodePool %s)", e.NodeClaim, e.NodePool)
	default:
		s += " (not launched by Karpless)"
	}
	return s
}

// Pod states a report can give.
const (
	// PodPending: kube-scheduler marked the pod Unschedulable; the next
	// provisioning pass provisions for it.
	PodPending = "pending"
	// PodLeavingNode: bound to a node being deleted or disrupted; the next
	// pass provisions room for it before it is evicted.
	PodLeavingNode = "leaving-node"
	// PodNotConsidered: pending, but not a pod Karpless provisions for (not
	// marked Unschedulable yet, nominated for preemption, being deleted, a
	// DaemonSet or static pod).
	PodNotConsidered = "not-considered"
)

// Placement kinds.
const (
	OnExistingNode  = "existing-node"
	OnInFlightClaim = "in-flight-nodeclaim"
	OnNewClaim      = "new-nodeclaim"
)

// PodReport is the answer to "why is this pod pending, where would it go?".
type PodReport struct {
	Pod string    `json:"pod"`
	At  time.Time `json:"at"`
	// State is pending, leaving-node or not-considered.
	State string `json:"state"`
	// Notes say why a pod is not considered, and where prices came from.
	Notes   []string `json:"notes,omitempty"`
	Placed  bool     `json:"placed"`
	Outcome string   `json:"outcome"`
	// Placement is where the pod goes, nil when it goes nowhere.
	Placement *Placement `json:"placement,omitempty"`
	// Relaxed are the soft constraints dropped to place it.
	Relaxed []string `json:"relaxed,omitempty"`
	// Nodes are the existing nodes and in-flight NodeClaims grouped by
	// verdict (judged before any pod of the batch is placed).
	Nodes []NodeGroup `json:"nodes,omitempty"`
	// NodePools are each NodePool's verdict, with its instance types.
	NodePools []PoolVerdict `json:"nodePools"`
}

// Placement is where a pod goes.
type Placement struct {
	// Kind is existing-node, in-flight-nodeclaim or new-nodeclaim.
	Kind string `json:"kind"`
	// Node is the node (existing-node, or an in-flight claim's registered
	// node).
	Node string `json:"node,omitempty"`
	// NodeClaim is the claim of the node or the in-flight claim.
	NodeClaim string `json:"nodeClaim,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	// New is the NodeClaim provisioning would create (new-nodeclaim).
	New *ClaimSummary `json:"new,omitempty"`
}

// NodeGroup is the nodes that got the same verdict.
type NodeGroup struct {
	Fits   bool     `json:"fits"`
	Reason string   `json:"reason"`
	Nodes  []string `json:"nodes"`
}

// PoolVerdict is whether a NodePool could launch a node for the pod.
type PoolVerdict struct {
	NodePool  string `json:"nodePool"`
	CanLaunch bool   `json:"canLaunch"`
	Reason    string `json:"reason"`
	// Fitting are the instance types that fit, cheapest first.
	Fitting []TypePrice `json:"fitting,omitempty"`
	// RuledOut are the other instance types, grouped by reason.
	RuledOut []TypeGroup `json:"ruledOut,omitempty"`
}

// TypePrice is a fitting instance type and its cheapest allowed offering.
type TypePrice struct {
	Name         string  `json:"name"`
	PricePerHour float64 `json:"pricePerHour"`
	Note         string  `json:"note,omitempty"`
}

// TypeGroup is instance types ruled out for the same reason.
type TypeGroup struct {
	// Category is nodepool, offerings, pod, zones, resources or limits.
	Category string   `json:"category"`
	Reason   string   `json:"reason"`
	Types    []string `json:"types"`
	// Details are per-type specifics (for "too small": what is short).
	Details []string `json:"details,omitempty"`
}

// ExplainPod explains one pod, named by namespace and name.
func (w *World) ExplainPod(namespace, name string) (*PodReport, error) {
	var pod *corev1.Pod
	for _, p := range w.snap.Pods {
		if p.Namespace == namespace && p.Name == name {
			pod = p
			break
		}
	}
	for _, p := range w.pending {
		if pod == nil && buffer.IsVirtual(p) && p.Namespace == namespace && p.Name == name {
			pod = p
		}
	}
	if pod == nil {
		return nil, &PodNotFoundError{Namespace: namespace, Name: name}
	}
	r := &PodReport{Pod: namespace + "/" + name, At: w.now}
	if buffer.IsVirtual(pod) {
		r.Notes = append(r.Notes, fmt.Sprintf("a virtual pod of CapacityBuffer %s: it never runs; the provisioner keeps room for it as for a pending pod", buffer.KeyOf(pod)))
	}
	inBatch := false
	for _, p := range w.pending {
		if p == pod {
			inBatch = true
		}
	}
	switch {
	case inBatch && pod.Spec.NodeName != "":
		r.State = PodLeavingNode
		r.Notes = append(r.Notes, fmt.Sprintf("bound to node %s, which is being deleted or disrupted: Karpless finds room for it elsewhere before it is evicted", pod.Spec.NodeName))
	case inBatch:
		r.State = PodPending
	case pod.Spec.NodeName != "":
		return nil, w.notPending(pod)
	default:
		r.State = PodNotConsidered
		r.Notes = append(r.Notes, whyNotConsidered(pod)+"; below is what a pass would do if it were")
	}
	r.Notes = append(r.Notes, w.notes...)

	e := scheduling.Explain(w.sim, pod, scheduling.Provisioning())
	r.Placed, r.Relaxed = e.Placed, e.Relaxed
	switch {
	case e.NodeClaim != nil:
		c := w.summarizeClaim(e.NodeClaim)
		r.Placement = &Placement{Kind: OnNewClaim, NodePool: c.NodePool, New: &c}
		r.Outcome = fmt.Sprintf("needs a new NodeClaim of NodePool %s", c.NodePool)
		if others := len(c.Pods) - 1; others > 0 {
			r.Outcome += fmt.Sprintf(", shared with %d other pending pod(s)", others)
		}
		r.Outcome += fmt.Sprintf(": %d instance type(s) fit", len(c.InstanceTypes))
		if c.Launch != nil {
			r.Outcome += "; the launch would pick " + c.Launch.String()
		}
	case e.Node != "":
		r.Placement = w.existingPlacement(e.Node)
		if r.Placement.Kind == OnInFlightClaim {
			r.Outcome = fmt.Sprintf("goes to NodeClaim %s (NodePool %s), launched for it and not ready yet: nothing more is launched", r.Placement.NodeClaim, r.Placement.NodePool)
		} else {
			r.Outcome = fmt.Sprintf("fits existing node %s: nothing is launched, kube-scheduler should bind it on its next attempt", e.Node)
		}
	default:
		r.Outcome = strings.TrimPrefix(e.Outcome, "cannot be placed: ")
		r.Outcome = "cannot be placed: " + r.Outcome
		if i := strings.Index(r.Outcome, " (after relaxing"); i >= 0 {
			r.Outcome = r.Outcome[:i]
		}
	}
	r.Nodes = groupNodes(e.Nodes)
	for _, v := range e.NodePools {
		r.NodePools = append(r.NodePools, poolVerdict(v))
	}
	return r, nil
}

func (w *World) notPending(pod *corev1.Pod) error {
	e := &NotPendingError{Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName}
	for _, n := range w.sim.Nodes {
		if n.Name == pod.Spec.NodeName {
			e.NodeClaim, e.NodePool = n.NodeClaim, n.NodePool
		}
	}
	return e
}

func whyNotConsidered(p *corev1.Pod) string {
	switch {
	case podutil.IsTerminating(p):
		return "the pod is being deleted: Karpless does not provision for it"
	case podutil.IsOwnedByDaemonSet(p):
		return "a DaemonSet's pod: it comes with each node, Karpless does not provision for it (its requests are counted on every new node)"
	case podutil.IsOwnedByNode(p):
		return "a static pod: Karpless does not provision for it"
	case p.Status.NominatedNodeName != "":
		return fmt.Sprintf("kube-scheduler nominated node %s for it (preemption): Karpless leaves it to the scheduler", p.Status.NominatedNodeName)
	}
	sched := p.Spec.SchedulerName
	if sched != "" && sched != corev1.DefaultSchedulerName {
		return fmt.Sprintf("scheduler %q has not marked it Unschedulable (condition PodScheduled=False, reason Unschedulable): Karpless provisions only for pods a scheduler gave up on", sched)
	}
	return "kube-scheduler has not marked it Unschedulable yet (condition PodScheduled=False, reason Unschedulable): Karpless provisions only for pods the scheduler gave up on"
}

func (w *World) existingPlacement(name string) *Placement {
	p := &Placement{Kind: OnExistingNode, Node: name}
	for _, n := range w.sim.Nodes {
		if n.Name != name {
			continue
		}
		p.NodeClaim, p.NodePool = n.NodeClaim, n.NodePool
		if n.InFlight && n.NodeClaim != "" {
			p.Kind = OnInFlightClaim
			if n.NodeClaim == n.Name {
				p.Node = "" // not registered yet
			}
		}
	}
	return p
}

func groupNodes(vs []scheduling.NodeVerdict) []NodeGroup {
	idx := map[string]int{}
	var out []NodeGroup
	for _, v := range vs {
		k := v.Reason
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, NodeGroup{Fits: v.Fits, Reason: v.Reason})
		}
		out[i].Nodes = append(out[i].Nodes, v.Node)
	}
	for i := range out {
		sort.Strings(out[i].Nodes)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Fits != out[j].Fits {
			return out[i].Fits
		}
		return len(out[i].Nodes) > len(out[j].Nodes)
	})
	return out
}

func poolVerdict(v scheduling.NodePoolVerdict) PoolVerdict {
	out := PoolVerdict{NodePool: v.NodePool, CanLaunch: v.Fits, Reason: v.Reason}
	idx := map[string]int{}
	for _, tv := range v.InstanceTypes {
		if tv.Category == "fits" {
			tp := TypePrice{Name: tv.Name, PricePerHour: tv.Price}
			if tv.Reason != "fits" {
				tp.Note = strings.TrimPrefix(tv.Reason, "fits ")
			}
			out.Fitting = append(out.Fitting, tp)
			continue
		}
		reason := tv.Reason
		if tv.Category == "resources" {
			reason = "too small for the pod"
		}
		k := tv.Category + "\x00" + reason
		i, ok := idx[k]
		if !ok {
			i = len(out.RuledOut)
			idx[k] = i
			out.RuledOut = append(out.RuledOut, TypeGroup{Category: tv.Category, Reason: reason})
		}
		g := &out.RuledOut[i]
		g.Types = append(g.Types, tv.Name)
		if tv.Category == "resources" {
			g.Details = append(g.Details, tv.Name+": "+strings.TrimPrefix(tv.Reason, "too small: "))
		}
	}
	sort.SliceStable(out.RuledOut, func(i, j int) bool { return len(out.RuledOut[i].Types) > len(out.RuledOut[j].Types) })
	return out
}

// WriteText renders the report for people.
func (r *PodReport) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.line("Pod %s (%s): %s.", r.Pod, r.State, r.Outcome)
	if len(r.Relaxed) > 0 {
		p.line("  placed after relaxing: %s", strings.Join(r.Relaxed, "; "))
	}
	if pl := r.Placement; pl != nil && pl.New != nil {
		c := pl.New
		p.line("  new NodeClaim: NodePool %s, EC2NodeClass %s, %d pod(s), instance types (cheapest first): %s",
			c.NodePool, c.NodeClass, len(c.Pods), list(c.InstanceTypes, 8))
	}
	for _, n := range r.Notes {
		p.line("  note: %s", n)
	}
	if len(r.Nodes) > 0 {
		p.line("")
		p.line("Existing nodes and in-flight NodeClaims:")
		for _, g := range r.Nodes {
			p.line("  %d: %s (%s)", len(g.Nodes), g.Reason, list(g.Nodes, 4))
		}
	}
	p.line("")
	if len(r.NodePools) == 0 {
		p.line("NodePools: none")
	} else {
		p.line("NodePools:")
	}
	for _, v := range r.NodePools {
		mark := "no "
		if v.CanLaunch {
			mark = "yes"
		}
		p.line("  [%s] %s: %s", mark, v.NodePool, v.Reason)
		if len(v.Fitting) > 0 {
			var ex []string
			for i, t := range v.Fitting {
				if i == 5 {
					break
				}
				ex = append(ex, fmt.Sprintf("%s %s", t.Name, money(t.PricePerHour)))
			}
			more := ""
			if len(v.Fitting) > 5 {
				more = fmt.Sprintf(", and %d more", len(v.Fitting)-5)
			}
			p.line("      %d instance type(s) fit: %s%s", len(v.Fitting), strings.Join(ex, ", "), more)
		}
		for _, g := range v.RuledOut {
			ex := list(g.Types, 4)
			if len(g.Details) > 0 {
				ex = list(g.Details, 3)
			}
			p.line("      %d ruled out, %s: %s (%s)", len(g.Types), g.Category, g.Reason, ex)
		}
	}
	return p.err
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
}

// list joins the first n items and says how many more there are.
func list(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", and %d more", len(items)-n)
}
