package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// existingNode is a node or in-flight NodeClaim pods may be placed on.
type existingNode struct {
	node     *Node
	taints   []corev1.Taint
	labels   map[string]string // with the hostname filled in
	reqs     Requirements      // labels as requirements, for topology filters
	avail    []int64
	host     int32
	ports    []hostPort
	volumes  map[string]bool  // volume ids mounted
	attached map[string]int64 // driver -> volumes
	limits   map[string]int64 // driver -> attach limit
	usable   bool
	placed   []*corev1.Pod
	compat   map[int32]*Requirement // reqID -> first failing requirement (nil: ok)
	demand   int                    // in-flight only: batch pods whose requirements it meets
	// open is set for a NodeClaim whose Node has not joined yet: what its
	// node may still be, beyond the labels certain.
	open *openClaim
}

// openClaim is what a NodeClaim without a Node may still become: its
// requirements and the instance types it may launch as, narrowed by the
// pods the solve places on it (as Karpenter narrows an existing node's
// requirements when it adds a pod), so that two pods wanting different
// values of a key it leaves open do not both count on it.
type openClaim struct {
	reqs  Requirements
	types []*InstanceType // nil: none known, type keys are read from reqs
}

// initExisting builds the existing nodes, real ones first, then in-flight
// NodeClaims, each by name.
func (s *solver) initExisting() {
	nodes := make([]*Node, 0, len(s.snap.Nodes))
	for _, n := range s.snap.Nodes {
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool {
		if nodes[i].InFlight != nodes[j].InFlight {
			return !nodes[i].InFlight
		}
		return nodes[i].Name < nodes[j].Name
	})
	pools := map[string]*template{}
	for _, t := range s.templates {
		pools[t.name] = t
	}
	for _, n := range nodes {
		e := &existingNode{node: n, usable: !n.MarkedForDeletion, compat: map[int32]*Requirement{}, volumes: map[string]bool{}, attached: map[string]int64{}}
		e.labels = make(map[string]string, len(n.Labels)+1)
		for k, v := range n.Labels {
			e.labels[k] = v
		}
		if _, ok := e.labels[wellknown.HostnameLabel]; !ok {
			e.labels[wellknown.HostnameLabel] = n.Name
		}
		e.reqs = RequirementsFromLabels(e.labels)
		if n.Requirements != nil {
			e.open = s.openClaimOf(n, e.labels)
		}
		e.taints = s.effectiveTaints(n, pools[n.NodePool])
		e.avail = s.d.vec(n.Allocatable)
		if n.Requested != nil {
			subInto(e.avail, s.d.vec(n.Requested))
		}
		for _, bp := range n.Pods {
			if ignoredForTopology(bp) {
				continue
			}
			if n.Requested == nil {
				subInto(e.avail, s.d.vec(PodRequests(bp)))
			}
			e.ports = append(e.ports, hostPorts(bp)...)
			_, refs, _ := s.vols.podVolumes(bp)
			for _, r := range refs {
				if !e.volumes[r.id] {
					e.volumes[r.id] = true
					e.attached[r.driver]++
				}
			}
		}
		subInto(e.avail, s.existingDaemonOverhead(n, e.taints))
		e.limits = s.vols.limits[n.Name]
		e.host = s.topo.hostDom.id(e.labels[wellknown.HostnameLabel])
		s.existing = append(s.existing, e)
	}
}

// initDemand counts, for each in-flight node, the pods of the batch whose
// requirements its labels meet. Of the in-flight nodes that take a pod, the
// least wanted is chosen: a claim made for a pod that selects a zone then
// stays for that pod, rather than going to a pod that could go to any
// (which would leave the zonal pod to ask for another claim every pass).
func (s *solver) initDemand() {
	perReq := map[int32]int{}
	for _, p := range s.pods {
		perReq[p.reqID]++
	}
	for _, e := range s.existing {
		if !e.node.InFlight || !e.usable {
			continue
		}
		for id, n := range perReq {
			bad, ok := e.compat[id]
			if !ok {
				bad = s.unmet(e, s.reqSets[id])
				e.compat[id] = bad
			}
			if bad == nil {
				e.demand += n
			}
		}
	}
}

// effectiveTaints drops, for managed nodes that are not initialized yet,
// the taints expected to go away: known ephemeral ones and the NodePool's
// startup taints.
func (s *solver) effectiveTaints(n *Node, t *template) []corev1.Taint {
	if n.NodeClaim == "" || n.Labels[wellknown.InitializedLabel] == "true" {
		return n.Taints
	}
	var out []corev1.Taint
	for i := range n.Taints {
		tt := &n.Taints[i]
		if wellknown.IsEphemeralTaint(tt) {
			continue
		}
		startup := false
		if t != nil {
			for j := range t.startup {
				if t.startup[j].MatchTaint(tt) {
					startup = true
				}
			}
		}
		if !startup {
			out = append(out, *tt)
		}
	}
	return out
}

func (e *existingNode) domainMask(s *solver, g *group) (uint64, bool) {
	v, ok := e.labels[g.key]
	if !ok {
		return 0, false
	}
	d := g.dom.id(v)
	if d >= maxDomains {
		return 0, false
	}
	return 1 << uint(d), true
}

func (e *existingNode) domainOf(s *solver, g *group) int32 {
	v, ok := e.labels[g.key]
	if !ok {
		return -1
	}
	return g.dom.id(v)
}

func (e *existingNode) hostID() int32              { return e.host }
func (e *existingNode) hostName() string           { return e.labels[wellknown.HostnameLabel] }
func (e *existingNode) nodeTaints() []corev1.Taint { return e.taints }
func (e *existingNode) lookup(k string) (*Requirement, bool) {
	r, ok := e.reqs[k]
	return r, ok
}

// evalExisting reports why pod p cannot go on node e ("" if it can).
func (s *solver) evalExisting(e *existingNode, p *podState) string {
	if i := firstShort(p.req, e.avail); i >= 0 {
		return fmt.Sprintf("not enough %s (%s free, %s requested)", s.d.names[i], quantityString(s.d, i, max(e.avail[i], 0)), quantityString(s.d, i, p.req[i]))
	}
	if t := untolerated(e.taints, p.cur.Spec.Tolerations); t != nil {
		return fmt.Sprintf("taint %s is not tolerated", taintString(t))
	}
	bad, ok := e.compat[p.reqID]
	if !ok {
		bad = s.unmet(e, p.reqs)
		e.compat[p.reqID] = bad
	}
	if bad != nil {
		v, has := e.labels[bad.Key]
		if !has && e.open != nil {
			return fmt.Sprintf("pod requires %s, which NodeClaim %s cannot launch with", bad, e.node.Name)
		}
		if !has {
			return fmt.Sprintf("pod requires %s, node has no such label", bad)
		}
		return fmt.Sprintf("pod requires %s, node has %s=%s", bad, bad.Key, v)
	}
	if hp := portConflict(e.ports, p.ports); hp != nil {
		return fmt.Sprintf("host port %s is taken", hp)
	}
	if len(p.vols) > 0 && e.limits != nil {
		extra := map[string]int64{}
		for _, v := range p.vols {
			if !e.volumes[v.id] {
				extra[v.driver]++
			}
		}
		for d, n := range extra {
			if l, ok := e.limits[d]; ok && e.attached[d]+n > l {
				return fmt.Sprintf("CSI driver %s can attach %d volumes and %d are in use", d, l, e.attached[d])
			}
		}
	}
	if p.volAlts != nil {
		ok := false
		for _, alt := range p.volAlts {
			if s.unmet(e, alt) == nil {
				ok = true
				break
			}
		}
		if !ok {
			return "its volumes cannot be attached in this node's zone"
		}
	}
	var bad2 *group
	s.decisions, bad2 = s.evalTopology(p, e, s.decisions)
	if bad2 != nil {
		return fmt.Sprintf("%s would be violated", bad2.describe())
	}
	return ""
}

func (s *solver) commitExisting(e *existingNode, p *podState) {
	subInto(e.avail, p.req)
	e.ports = append(e.ports, p.ports...)
	for _, v := range p.vols {
		if !e.volumes[v.id] {
			e.volumes[v.id] = true
			e.attached[v.driver]++
		}
	}
	e.placed = append(e.placed, p.pod)
	if e.open != nil {
		s.narrowOpen(e, p.reqs)
	}
	s.recordPlacement(p, e)
}

// openClaimOf is what claim n may still become: its requirements, and
// those of its instance types that meet them and its labels.
func (s *solver) openClaimOf(n *Node, labels map[string]string) *openClaim {
	o := &openClaim{reqs: RequirementsFromNodePool(n.Requirements)}
	var typed []*Requirement
	for _, k := range o.reqs.Keys() {
		if _, set := labels[k]; !set && s.isTypeKey(k) {
			typed = append(typed, o.reqs[k])
		}
	}
	for k, v := range labels {
		if s.isTypeKey(k) {
			typed = append(typed, NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
	}
	for _, it := range n.InstanceTypes {
		if firstUnmetBy(it, typed) == nil {
			o.types = append(o.types, it)
		}
	}
	// With no type left to go by (the class no longer offers them), the
	// claim's requirements say what it may be.
	return o
}

// unmet returns the first of want that node e cannot meet, nil when it
// meets them all. A node meets a requirement by its label. A NodeClaim
// without a Node meets one, on a key it has no label for yet, when some
// launch it allows would: on an instance attribute, one of its types
// meets it (one type meets every such requirement of want); on another
// key, its requirement there has values in common with want's, or it has
// none and the key is a well-known one every node gets (the region, the
// zone ID) or want lets the label be absent: as Karpenter's scheduler
// judges a NodeClaim it opened in the same solve. Karpenter makes no pass
// at all while a NodeClaim has no provider ID (its cluster state is not
// synced until the launch resolves the labels); Karpless passes go on for
// other pods, and the pods the claim could take wait for its launch as
// they would have in Karpenter. A pod its launch then fails to meet gets
// capacity in the pass after, from the claim's labels, as in Karpenter.
func (s *solver) unmet(e *existingNode, want Requirements) *Requirement {
	if e.open == nil {
		return want.MatchesLabels(e.labels)
	}
	o := e.open
	var typed []*Requirement
	for _, k := range want.Keys() {
		w := want[k]
		if v, ok := e.labels[k]; ok {
			if !w.Matches(v, true) {
				return w
			}
			continue
		}
		if o.types != nil && s.isTypeKey(k) {
			typed = append(typed, w)
			continue
		}
		if h, ok := o.reqs[k]; ok {
			if !h.HasIntersection(w) {
				return w
			}
			continue
		}
		if !w.AllowsAbsent() && !IsWellKnown(k) {
			return w
		}
	}
	if len(typed) == 0 {
		return nil
	}
	var first *Requirement
	for _, it := range o.types {
		bad := firstUnmetBy(it, typed)
		if bad == nil {
			return nil
		}
		if first == nil {
			first = bad
		}
	}
	return first
}

// narrowOpen narrows a NodeClaim without a Node to what it must be for
// the pod just placed on it (want, which unmet found it can meet), and
// forgets the compatibilities found before.
func (s *solver) narrowOpen(e *existingNode, want Requirements) {
	o := &openClaim{reqs: e.open.reqs.Copy(), types: e.open.types}
	for _, k := range want.Keys() {
		if _, ok := e.labels[k]; ok {
			continue
		}
		w := want[k]
		if o.types != nil && s.isTypeKey(k) {
			var kept []*InstanceType
			for _, it := range o.types {
				if it.LabelMatches(w) {
					kept = append(kept, it)
				}
			}
			o.types = kept
			continue
		}
		o.reqs.Add(w)
	}
	e.open = o
	clear(e.compat)
}

// firstUnmetBy returns the first of reqs a node of type it cannot meet.
func firstUnmetBy(it *InstanceType, reqs []*Requirement) *Requirement {
	for _, r := range reqs {
		if !it.LabelMatches(r) {
			return r
		}
	}
	return nil
}
