package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Explanation says where one pod goes and why, and what rules out every
// other place: each existing node, each NodePool, each instance type.
type Explanation struct {
	Pod string // namespace/name
	// Outcome is one sentence: where the pod goes, or why it cannot go anywhere.
	Outcome string
	Placed  bool
	// Node is the existing node or in-flight NodeClaim it goes to, if any.
	Node string
	// NodeClaim is the new NodeClaim it goes to, if any.
	NodeClaim *NewNodeClaim
	// Relaxed lists the soft constraints dropped to place it.
	Relaxed []string
	// Nodes and NodePools are judged before any pod of the batch is placed:
	// they say whether the pod could go there at all, and if not, why.
	Nodes     []NodeVerdict
	NodePools []NodePoolVerdict
}

// NodeVerdict is whether the pod fits an existing node, and why not.
type NodeVerdict struct {
	Node   string
	Fits   bool
	Reason string
}

// NodePoolVerdict is whether a NodePool could launch a node for the pod.
type NodePoolVerdict struct {
	NodePool      string
	Fits          bool
	Reason        string
	InstanceTypes []TypeVerdict
}

// TypeVerdict says what rules an instance type out for the pod.
type TypeVerdict struct {
	Name string
	// Category groups verdicts: fits, nodepool, offerings, pod, zones,
	// resources, limits.
	Category string
	Reason   string
	Price    float64 // cheapest allowed offering, when it fits
}

// Explain solves the snapshot with the pod in the batch (added if absent)
// and explains the outcome for that pod.
func Explain(snap *Snapshot, pod *corev1.Pod, opts Options) *Explanation {
	in := *snap
	found := false
	for _, p := range snap.Pods {
		if p == pod || (pod.UID != "" && p.UID == pod.UID) {
			pod, found = p, true
			break
		}
	}
	if !found {
		in.Pods = append(append([]*corev1.Pod{}, snap.Pods...), pod)
	}
	out := &Explanation{Pod: pod.Namespace + "/" + pod.Name}

	s := newSolver(&in, opts)
	s.run()
	res := s.results()
	var ps *podState
	for _, p := range s.pods {
		if p.pod == pod {
			ps = p
		}
	}
	for node, pods := range res.Existing {
		for _, p := range pods {
			if p == pod {
				out.Placed, out.Node = true, node
			}
		}
	}
	for _, c := range res.NewNodeClaims {
		for _, p := range c.Pods {
			if p == pod {
				out.Placed, out.NodeClaim = true, c
			}
		}
	}
	if out.Placed {
		out.Relaxed = ps.relaxations
	}
	switch {
	case out.Node != "":
		out.Outcome = fmt.Sprintf("goes to existing node %s", out.Node)
	case out.NodeClaim != nil:
		it, o := out.NodeClaim.CheapestOffering()
		out.Outcome = fmt.Sprintf("goes to a new NodeClaim of NodePool %s with %d other pod(s); %d instance types fit, the launch would pick %s %s in %s at $%.4f/h",
			out.NodeClaim.NodePool, len(out.NodeClaim.Pods)-1, len(out.NodeClaim.InstanceTypes), it.Name, o.CapacityType, o.Zone, o.Price)
	default:
		for _, e := range res.Unschedulable {
			if e.Pod == pod {
				out.Outcome = "cannot be placed: " + e.Reason
			}
		}
	}
	if len(out.Relaxed) > 0 {
		out.Outcome += " (after relaxing " + strings.Join(out.Relaxed, "; ") + ")"
	}

	// What rules out what, before the batch is placed.
	f := newSolver(&in, opts)
	var fp *podState
	for _, p := range f.pods {
		if p.pod == pod {
			fp = p
		}
	}
	// Judge the pod in the form the solve last tried: with the preferences
	// it had to drop already dropped.
	tried := ps.cur
	if !out.Placed && ps.relaxed != nil {
		tried = ps.relaxed
	}
	if tried != fp.cur {
		fp.cur = tried
		f.refreshPod(fp)
	}
	for _, e := range f.existing {
		v := NodeVerdict{Node: e.node.Name}
		switch {
		case !e.usable:
			v.Reason = "the node is being deleted"
		case fp.volErr != nil:
			v.Reason = fp.volErr.Error()
		default:
			v.Reason = f.evalExisting(e, fp)
		}
		v.Fits = v.Reason == ""
		if v.Fits {
			v.Reason = "fits"
		}
		out.Nodes = append(out.Nodes, v)
	}
	for _, sk := range f.skipped {
		out.NodePools = append(out.NodePools, NodePoolVerdict{NodePool: sk.name, Reason: "NodePool " + sk.name + " " + sk.why})
	}
	for _, t := range f.templates {
		v := NodePoolVerdict{NodePool: t.name}
		if fp.volErr != nil {
			v.Reason = fp.volErr.Error()
		} else {
			tv := f.templateVerdict(t, fp)
			v.Fits, v.Reason = tv.category == "ok", tv.text
		}
		v.InstanceTypes = f.typeVerdicts(t, fp)
		out.NodePools = append(out.NodePools, v)
	}
	sort.SliceStable(out.NodePools, func(i, j int) bool { return out.NodePools[i].NodePool < out.NodePools[j].NodePool })
	return out
}

// typeVerdicts judges every instance type of the NodePool's class.
func (s *solver) typeVerdicts(t *template, p *podState) []TypeVerdict {
	byName := map[string]*tType{}
	for _, tt := range t.types {
		byName[tt.it.Name] = tt
	}
	cr := t.compile(s, p.reqID)
	zm, ctm := cr.zm, cr.ctm
	for _, a := range p.volAlts {
		m, _ := s.zoneMask(a)
		zm &= m
	}
	nz := len(s.zones)
	var out []TypeVerdict
	for _, it := range t.class.InstanceTypes {
		v := TypeVerdict{Name: it.Name}
		v.Category, v.Reason = s.typeVerdict(t, p, cr, it, byName[it.Name], zm, ctm)
		if v.Category == "fits" {
			v.Price = byName[it.Name].priceIn(zm, ctm, nz)
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Category == "fits") != (out[j].Category == "fits") {
			return out[i].Category == "fits"
		}
		if out[i].Price != out[j].Price {
			return out[i].Price < out[j].Price
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (s *solver) typeVerdict(t *template, p *podState, cr *compiled, it *InstanceType, tt *tType, zm uint64, ctm uint8) (string, string) {
	for _, k := range t.reqs.Keys() {
		if !s.isTypeKey(k) {
			continue
		}
		if !it.LabelMatches(t.reqs[k]) {
			return "nodepool", fmt.Sprintf("NodePool %s requires %s", t.name, t.reqs[k])
		}
	}
	if tt == nil {
		unavailable := false
		for _, o := range it.Offerings {
			if z, ok := s.zoneIdx[o.Zone]; ok && maskHas(t.zm, z) && ctIndex(o.CapacityType) >= 0 && t.ctm&(1<<ctIndex(o.CapacityType)) != 0 && !o.Available {
				unavailable = true
			}
		}
		if unavailable {
			return "offerings", fmt.Sprintf("every offering in the NodePool's zones %s is marked unavailable (insufficient capacity recently)", describeMask(s.zones, t.zm))
		}
		return "offerings", fmt.Sprintf("not offered in the NodePool's zones %s and capacity types", describeMask(s.zones, t.zm))
	}
	for _, k := range cr.rest.Keys() {
		if !s.isTypeKey(k) {
			continue
		}
		if !it.LabelMatches(cr.rest[k]) {
			return "pod", fmt.Sprintf("pod requires %s", cr.rest[k])
		}
	}
	if math.IsInf(tt.priceIn(zm, ctm, len(s.zones)), 1) {
		return "zones", fmt.Sprintf("no available offering in the zones the pod can use %s", describeMask(s.zones, zm))
	}
	if i := firstShort(p.req, tt.alloc); i >= 0 {
		raw := s.d.vec(it.Allocatable)
		msg := fmt.Sprintf("too small: pod needs %s %s, type has %s", quantityString(s.d, i, p.req[i]), s.d.names[i], quantityString(s.d, i, max(tt.alloc[i], 0)))
		if over := raw[i] - tt.alloc[i]; over > 0 {
			msg += fmt.Sprintf(" after %s of DaemonSets", quantityString(s.d, i, over))
		}
		return "resources", msg
	}
	if t.hasLimits && !t.withinLimits(tt, nil) {
		return "limits", fmt.Sprintf("its capacity would exceed what is left of NodePool %s's limits", t.name)
	}
	if len(p.ports) > 0 && portConflict(t.groups[tt.group].ports, p.ports) != nil {
		return "pod", "a DaemonSet on this type uses the pod's host port"
	}
	if tt.exotic {
		return "fits", "fits (GPU, accelerator or metal: launched only when no other type fits)"
	}
	return "fits", "fits"
}

// String renders the explanation for people; instance types are grouped by
// reason with a few examples each.
func (e *Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s %s.\n", e.Pod, e.Outcome)
	if len(e.Nodes) > 0 {
		b.WriteString("Existing nodes:\n")
		for _, n := range e.Nodes {
			fmt.Fprintf(&b, "  %s: %s\n", n.Node, n.Reason)
		}
	}
	if len(e.NodePools) > 0 {
		b.WriteString("NodePools:\n")
	}
	for _, np := range e.NodePools {
		fmt.Fprintf(&b, "  %s: %s\n", np.NodePool, np.Reason)
		groups := map[string][]TypeVerdict{}
		var order []string
		for _, v := range np.InstanceTypes {
			key := v.Category + "\x00" + v.Reason
			if v.Category == "resources" {
				key = v.Category
			}
			if _, ok := groups[key]; !ok {
				order = append(order, key)
			}
			groups[key] = append(groups[key], v)
		}
		for _, k := range order {
			vs := groups[k]
			var ex []string
			for i, v := range vs {
				if i == 4 {
					ex = append(ex, fmt.Sprintf("and %d more", len(vs)-4))
					break
				}
				if v.Category == "fits" {
					ex = append(ex, fmt.Sprintf("%s $%.4f/h", v.Name, v.Price))
				} else if v.Category == "resources" {
					ex = append(ex, fmt.Sprintf("%s: %s", v.Name, strings.TrimPrefix(v.Reason, "too small: ")))
				} else {
					ex = append(ex, v.Name)
				}
			}
			label := vs[0].Reason
			if vs[0].Category == "resources" {
				label = "too small"
			}
			fmt.Fprintf(&b, "    %d instance types: %s (%s)\n", len(vs), label, strings.Join(ex, ", "))
		}
	}
	return b.String()
}
