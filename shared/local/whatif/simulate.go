package whatif

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/static"
)

// SimulationReport is one provisioning pass and one disruption pass over
// the snapshot, and what they do to the bill.
type SimulationReport struct {
	At    time.Time `json:"at"`
	Notes []string  `json:"notes,omitempty"`
	// Cluster counts what the snapshot holds.
	Cluster      ClusterCounts      `json:"cluster"`
	Provisioning ProvisioningResult `json:"provisioning"`
	Disruption   DisruptionResult   `json:"disruption"`
	Cost         Cost               `json:"cost"`
}

// ClusterCounts are the snapshot's sizes.
type ClusterCounts struct {
	Nodes int `json:"nodes"`
	// ManagedNodes are nodes with a NodeClaim; the others (node groups,
	// Fargate, self-managed) are never priced nor disrupted.
	ManagedNodes int `json:"managedNodes"`
	NodeClaims   int `json:"nodeClaims"`
	// InFlight are NodeClaims launched and not initialized yet.
	InFlight int `json:"inFlight"`
	Pods     int `json:"pods"`
	// Pending are the pods a provisioning pass simulates.
	Pending int `json:"pending"`
	// BufferPods are the CapacityBuffers' virtual pods it simulates too.
	BufferPods int `json:"bufferPods,omitempty"`
}

// ProvisioningResult is what one provisioning pass decides.
type ProvisioningResult struct {
	// Existing are pods that fit existing nodes or in-flight NodeClaims
	// (nothing is launched for them).
	Existing []Assignment `json:"existing,omitempty"`
	// NewNodeClaims are the NodeClaims the pass would create.
	NewNodeClaims []ClaimSummary `json:"newNodeClaims,omitempty"`
	// Unschedulable are pods that fit nowhere, with the reason.
	Unschedulable []PodReason `json:"unschedulable,omitempty"`
	// Static is what each static NodePool (spec.replicas) does: the
	// provisioner creates what it lacks, the disruption tick deletes what
	// it has beyond its replicas.
	Static []StaticPool `json:"static,omitempty"`
	// AddedPerHour is the $/h of the new NodeClaims, static ones included.
	AddedPerHour float64 `json:"addedPerHour"`
	// Buffers are the CapacityBuffers: how many chunks, and where the pass
	// puts their virtual pods (the pods of Existing and NewNodeClaims
	// named capacity-buffer-<buffer>-<i>).
	Buffers []BufferResult `json:"buffers,omitempty"`
}

// BufferResult is one CapacityBuffer in a provisioning pass.
type BufferResult struct {
	Buffer   string `json:"buffer"`
	Ready    bool   `json:"ready"`
	Replicas int32  `json:"replicas"`
	// Placed says where its virtual pods go; NotReady why it has none.
	Placed   string `json:"placed,omitempty"`
	NotReady string `json:"notReady,omitempty"`
}

// StaticPool is one static NodePool's state and what the next ticks do
// with it.
type StaticPool struct {
	NodePool string `json:"nodePool"`
	Replicas int64  `json:"replicas"`
	// Active are its claims neither deleting nor being replaced.
	Active int `json:"active"`
	// Create is how many NodeClaims the provisioner creates, each
	// launching as Launch; Delete the claims the disruption tick deletes.
	Create int       `json:"create,omitempty"`
	Launch *Offering `json:"launch,omitempty"`
	Delete []string  `json:"delete,omitempty"`
	// Line says it for people, e.g. "static nodepool web: 3 of 5
	// replicas, creating 2".
	Line string `json:"line"`
}

// staticPools is what static.Plan decides on the snapshot.
func (w *World) staticPools() ([]StaticPool, []static.Pool) {
	plan := static.Plan(disruption.StaticInput(w.snap, w.classes, w.now))
	var out []StaticPool
	for _, sp := range plan {
		p := StaticPool{NodePool: sp.NodePool.Name, Replicas: sp.Replicas, Active: sp.Count.Active, Create: sp.Create, Line: sp.Why}
		if sp.Claim != nil && sp.Create > 0 {
			p.Launch = w.launchOffering(sp.Claim)
		}
		for _, nc := range sp.Delete {
			p.Delete = append(p.Delete, nc.Name)
		}
		out = append(out, p)
	}
	return out, plan
}

// Assignment is pods placed on one existing node or in-flight claim.
type Assignment struct {
	Node     string   `json:"node"`
	InFlight bool     `json:"inFlight,omitempty"`
	Pods     []string `json:"pods"`
}

// PodReason is a pod and why it goes nowhere.
type PodReason struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// DisruptionResult is what one disruption pass decides.
type DisruptionResult struct {
	// Expired are NodeClaims past expireAfter: deleted at once, forcefully.
	Expired []string `json:"expired,omitempty"`
	// ScaledDown are NodeClaims of static NodePools beyond their replicas:
	// deleted at once, not subject to budgets.
	ScaledDown []string `json:"scaledDown,omitempty"`
	// Command is the voluntary disruption the pass would start (emptiness,
	// drift or consolidation; only the first method that acts), nil if none.
	Command *CommandSummary `json:"command,omitempty"`
	// Eligible counts candidates per method.
	Eligible map[string]int `json:"eligible"`
	// Blocked and Unconsolidatable are the notes the pass would publish as
	// DisruptionBlocked and Unconsolidatable Events.
	Blocked          []ClaimNote `json:"blocked,omitempty"`
	Unconsolidatable []ClaimNote `json:"unconsolidatable,omitempty"`
	// Stopped is set when the search ran out of time (results partial).
	Stopped bool `json:"stopped,omitempty"`
}

// ClaimNote is a remark about one NodeClaim.
type ClaimNote struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node,omitempty"`
	Message   string `json:"message"`
}

// Cost is the managed capacity's $/h before and after.
type Cost struct {
	// Before is every managed node's and in-flight NodeClaim's $/h: its
	// offering and, for a burstable type above its baseline, the surplus
	// CPU credits its pods spend (scheduling.NodeCredits).
	Before float64 `json:"before"`
	// AfterProvisioning adds the new NodeClaims.
	AfterProvisioning float64 `json:"afterProvisioning"`
	// AfterDisruption also takes away what the disruption command and the
	// scale-down of static NodePools remove and adds the command's
	// replacements (expired claims are not counted: their replacements
	// depend on their pods, provisioned on the next pass).
	AfterDisruption float64 `json:"afterDisruption"`
	// Unpriced are managed nodes whose offering has no known price.
	Unpriced []string `json:"unpriced,omitempty"`
}

// Simulate runs one provisioning pass and one disruption pass on the
// snapshot, as the two functions would on their next ticks (each sees the
// snapshot as it is; neither sees the other's result).
func (w *World) Simulate() *SimulationReport {
	r := &SimulationReport{At: w.now, Notes: w.Notes()}
	virtual := len(buffer.Pods(w.buffers))
	r.Cluster = ClusterCounts{Nodes: len(w.snap.Nodes), NodeClaims: len(w.snap.NodeClaims), Pods: len(w.snap.Pods), Pending: len(w.pending) - virtual, BufferPods: virtual}

	// Cost now: each NodeClaim's offering and credits.
	price := map[string]float64{}
	for _, n := range w.sim.Nodes {
		if n.NodeClaim == "" {
			continue
		}
		price[n.NodeClaim] = n.Price + scheduling.NodeCredits(n)
		if n.InFlight {
			r.Cluster.InFlight++
		}
		if n.Name != n.NodeClaim || !n.InFlight {
			r.Cluster.ManagedNodes++
		}
		if n.Price == 0 {
			r.Cost.Unpriced = append(r.Cost.Unpriced, n.NodeClaim)
		}
		r.Cost.Before += price[n.NodeClaim]
	}
	sort.Strings(r.Cost.Unpriced)

	// Provisioning.
	res := scheduling.Solve(w.sim, scheduling.Provisioning())
	inflight := map[string]bool{}
	for _, n := range w.sim.Nodes {
		inflight[n.Name] = n.InFlight
	}
	for node, pods := range res.Existing {
		a := Assignment{Node: node, InFlight: inflight[node]}
		for _, p := range pods {
			a.Pods = append(a.Pods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(a.Pods)
		r.Provisioning.Existing = append(r.Provisioning.Existing, a)
	}
	sort.Slice(r.Provisioning.Existing, func(i, j int) bool { return r.Provisioning.Existing[i].Node < r.Provisioning.Existing[j].Node })
	for _, n := range res.NewNodeClaims {
		c := w.summarizeClaim(n)
		if c.Launch != nil {
			r.Provisioning.AddedPerHour += c.Launch.Hourly()
		}
		r.Provisioning.NewNodeClaims = append(r.Provisioning.NewNodeClaims, c)
	}
	for _, e := range res.Unschedulable {
		r.Provisioning.Unschedulable = append(r.Provisioning.Unschedulable, PodReason{Pod: e.Pod.Namespace + "/" + e.Pod.Name, Reason: e.Reason})
	}
	sort.Slice(r.Provisioning.Unschedulable, func(i, j int) bool { return r.Provisioning.Unschedulable[i].Pod < r.Provisioning.Unschedulable[j].Pod })
	r.Provisioning.Static, _ = w.staticPools()
	for _, sp := range r.Provisioning.Static {
		if sp.Launch != nil {
			r.Provisioning.AddedPerHour += float64(sp.Create) * sp.Launch.Hourly()
		}
	}
	r.Cost.AfterProvisioning = r.Cost.Before + r.Provisioning.AddedPerHour
	placed := buffer.Place(res)
	for _, b := range w.buffers {
		br := BufferResult{Buffer: b.Key(), Ready: b.Ready, Replicas: b.Replicas}
		if b.Ready {
			pl := placed[b.Key()]
			if pl == nil {
				pl = &buffer.Placement{}
			}
			br.Placed = pl.String()
		} else if c := meta.FindStatusCondition(b.Status(nil, metav1.Time{}).Conditions, cbv1.ConditionReadyForProvisioning); c != nil {
			br.NotReady = c.Reason + ": " + c.Message
		}
		r.Provisioning.Buffers = append(r.Provisioning.Buffers, br)
	}

	// Disruption.
	v := w.disruption()
	for _, e := range disruption.Expirations(v.in) {
		r.Disruption.Expired = append(r.Disruption.Expired, e.NodeClaim.Name)
	}
	sort.Strings(r.Disruption.Expired)
	scaledDown := 0.0
	for _, sp := range r.Provisioning.Static {
		r.Disruption.ScaledDown = append(r.Disruption.ScaledDown, sp.Delete...)
		for _, name := range sp.Delete {
			scaledDown += price[name]
		}
	}
	plan := w.compute(v)
	r.Disruption.Stopped = plan.Stopped
	r.Disruption.Eligible = map[string]int{}
	for m, n := range plan.Eligible {
		r.Disruption.Eligible[string(m)] = n
	}
	r.Disruption.Blocked = notes(plan.Blocked)
	r.Disruption.Unconsolidatable = notes(plan.Unconsolidatable)
	r.Cost.AfterDisruption = r.Cost.AfterProvisioning - scaledDown
	if plan.Command != nil {
		r.Disruption.Command = w.summarizeCommand(plan.Command)
		r.Cost.AfterDisruption += plan.Command.PriceAfter - plan.Command.PriceBefore
	}
	return r
}

func notes(ns []disruption.Note) []ClaimNote {
	var out []ClaimNote
	for _, n := range ns {
		out = append(out, ClaimNote{NodeClaim: n.NodeClaim, Node: n.Node, Message: n.Message})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].NodeClaim < out[j].NodeClaim })
	return out
}

// WriteText renders the report for people.
func (r *SimulationReport) WriteText(w io.Writer) error {
	p := &printer{w: w}
	c := r.Cluster
	p.line("Cluster at %s: %d node(s) (%d managed by Karpless), %d NodeClaim(s) (%d in flight), %d pod(s), %d pending",
		r.At.UTC().Format(time.RFC3339), c.Nodes, c.ManagedNodes, c.NodeClaims, c.InFlight, c.Pods, c.Pending)
	if c.BufferPods > 0 {
		p.line("  and %d CapacityBuffer virtual pod(s), simulated as pending pods (they never run)", c.BufferPods)
	}
	p.line("")
	pr := r.Provisioning
	p.line("Provisioning pass:")
	if c.Pending == 0 && c.BufferPods == 0 {
		p.line("  no pending pod: nothing to do")
	}
	for _, a := range pr.Existing {
		where := "existing node " + a.Node
		if a.InFlight {
			where = "in-flight NodeClaim " + a.Node
		}
		p.line("  %d pod(s) fit %s: %s", len(a.Pods), where, list(a.Pods, 3))
	}
	for _, n := range pr.NewNodeClaims {
		launch := "no available offering"
		if n.Launch != nil {
			launch = n.Launch.String()
		}
		p.line("  create a NodeClaim of NodePool %s for %d pod(s): %s; %d instance type(s) (%s)",
			n.NodePool, len(n.Pods), launch, len(n.InstanceTypes), list(n.InstanceTypes, 4))
		p.line("      pods: %s", list(n.Pods, 4))
	}
	for _, u := range pr.Unschedulable {
		p.line("  %s cannot be placed: %s", u.Pod, u.Reason)
	}
	for _, b := range pr.Buffers {
		if b.Ready {
			p.line("  capacitybuffer %s: %d chunk(s) kept as virtual pods: %s", b.Buffer, b.Replicas, b.Placed)
		} else {
			p.line("  capacitybuffer %s: not ready (%s): no room kept", b.Buffer, b.NotReady)
		}
	}
	for _, sp := range pr.Static {
		if sp.Launch != nil {
			p.line("  %s, each as %s", sp.Line, sp.Launch)
		} else {
			p.line("  %s", sp.Line)
		}
	}
	p.line("")
	d := r.Disruption
	p.line("Disruption pass:")
	for _, e := range d.Expired {
		p.line("  delete %s: past its expireAfter (forceful)", e)
	}
	for _, sp := range pr.Static {
		for _, name := range sp.Delete {
			p.line("  delete %s: static nodepool %s has %d of %d replicas (scale-down, no budget)", name, sp.NodePool, sp.Active, sp.Replicas)
		}
	}
	switch {
	case d.Command != nil:
		p.line("  %s", d.Command.line())
		p.line("      why: %s; %s -> %s, saves %s", d.Command.Why, money(d.Command.PriceBefore), money(d.Command.PriceAfter), money(d.Command.Savings))
		if d.Command.Method != string(disruption.Drift) {
			p.line("      (proposed first, carried out after 15 s if a fresh look agrees; one command per pass, the next pass looks again)")
		}
	case len(d.Expired) == 0 && len(d.ScaledDown) == 0:
		p.line("  no voluntary disruption now")
	}
	var el []string
	for _, m := range disruption.Methods {
		el = append(el, fmt.Sprintf("%s %d", m, d.Eligible[string(m)]))
	}
	p.line("  eligible candidates: %s", strings.Join(el, ", "))
	for _, n := range d.Blocked {
		p.line("  blocked %s: %s", n.NodeClaim, n.Message)
	}
	for _, n := range d.Unconsolidatable {
		p.line("  not consolidatable %s: %s", n.NodeClaim, n.Message)
	}
	if d.Stopped {
		p.line("  (the search ran out of time: results are partial)")
	}
	p.line("")
	p.line("Cost of Karpless-managed capacity: %s now, %s after provisioning, %s after disruption (%+.4f $/h)",
		money(r.Cost.Before), money(r.Cost.AfterProvisioning), money(r.Cost.AfterDisruption), r.Cost.AfterDisruption-r.Cost.Before)
	if len(r.Cost.Unpriced) > 0 {
		p.line("  not priced (offering unknown to the catalog): %s", list(r.Cost.Unpriced, 5))
	}
	for _, n := range r.Notes {
		p.line("note: %s", n)
	}
	return p.err
}
