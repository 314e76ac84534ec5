package scheduling

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/karpless/karpless/shared/core/wellknown"
)

type topoType uint8

const (
	topoSpread topoType = iota
	topoAffinity
	topoAntiAffinity
)

func (t topoType) String() string {
	switch t {
	case topoSpread:
		return "topology spread"
	case topoAffinity:
		return "pod affinity"
	}
	return "pod anti-affinity"
}

// maxDomains is how many distinct values of one topology key (other than
// the hostname) are tracked; more are ignored.
const maxDomains = 64

// domains interns the values of one topology key.
type domains struct {
	key   string
	names []string
	index map[string]int32
}

func (d *domains) id(v string) int32 {
	if i, ok := d.index[v]; ok {
		return i
	}
	i := int32(len(d.names))
	d.index[v] = i
	d.names = append(d.names, v)
	return i
}

// nodeFilter decides which nodes count for a spread constraint
// (nodeAffinityPolicy and nodeTaintsPolicy).
type nodeFilter struct {
	honorAffinity bool
	alts          []Requirements
	honorTaints   bool
	tolerations   []corev1.Toleration
}

// group counts the pods a selector matches per domain of one key: a spread
// constraint, an affinity or anti-affinity term, or (inverse) the required
// anti-affinity of pods already placed, which repels the pods it selects.
type group struct {
	id         int
	typ        topoType
	inverse    bool
	key        string
	dom        *domains
	hostname   bool
	namespaces map[string]bool
	allNS      bool
	selector   labels.Selector
	maxSkew    int32
	minDomains int32
	filter     nodeFilter
	canonical  string

	counts     []int32
	registered uint64 // non-hostname keys: domains known to exist
	nonEmpty   int    // domains with a count above zero
}

func (g *group) count(d int32) int32 {
	if int(d) < len(g.counts) {
		return g.counts[d]
	}
	return 0
}

func (g *group) record(d int32) {
	if d < 0 {
		return
	}
	for int(d) >= len(g.counts) {
		g.counts = append(g.counts, 0)
	}
	if g.counts[d] == 0 {
		g.nonEmpty++
	}
	g.counts[d]++
	if !g.hostname && d < maxDomains {
		g.registered |= 1 << uint(d)
	}
}

func (g *group) register(d int32) {
	if !g.hostname && d >= 0 && d < maxDomains {
		g.registered |= 1 << uint(d)
	}
}

func (g *group) selects(p *corev1.Pod) bool {
	if !g.allNS && !g.namespaces[p.Namespace] {
		return false
	}
	return g.selector.Matches(labels.Set(p.Labels))
}

func (g *group) describe() string {
	var b strings.Builder
	b.WriteString(g.typ.String())
	fmt.Fprintf(&b, " on %s", g.key)
	if g.typ == topoSpread {
		fmt.Fprintf(&b, " (maxSkew %d", g.maxSkew)
		if g.minDomains > 0 {
			fmt.Fprintf(&b, ", minDomains %d", g.minDomains)
		}
		b.WriteString(")")
	}
	if s := g.selector.String(); s != "" {
		fmt.Fprintf(&b, " for pods %s", s)
	}
	return b.String()
}

// topology holds every group of the solve.
type topology struct {
	keys    map[string]*domains
	groups  []*group // ordered by creation: deterministic iteration
	byKey   map[string]*group
	zoneDom *domains
	ctDom   *domains
	hostDom *domains
}

func (s *solver) newTopology() {
	t := &topology{keys: map[string]*domains{}, byKey: map[string]*group{}}
	t.zoneDom = t.domainsFor(wellknown.ZoneLabel)
	for _, z := range s.zones {
		t.zoneDom.id(z)
	}
	t.ctDom = t.domainsFor(wellknown.CapacityTypeLabel)
	for _, c := range ctNames {
		t.ctDom.id(c)
	}
	t.hostDom = t.domainsFor(wellknown.HostnameLabel)
	s.topo = t
}

func (t *topology) domainsFor(key string) *domains {
	d, ok := t.keys[key]
	if !ok {
		d = &domains{key: key, index: map[string]int32{}}
		t.keys[key] = d
	}
	return d
}

// termSpec is a group definition taken from one pod term.
type termSpec struct {
	typ        topoType
	key        string
	namespaces map[string]bool
	allNS      bool
	selector   *metav1.LabelSelector
	maxSkew    int32
	minDomains int32
	filter     nodeFilter
}

// podTerms lists the groups a pod owns under the preference policy.
func (s *solver) podTerms(p *corev1.Pod) []termSpec {
	var out []termSpec
	respect := s.opts.Preferences == PreferencesRespect
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if !respect && tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		// The selector is only read; it is copied when matchLabelKeys add
		// to it.
		sel := tsc.LabelSelector
		if len(tsc.MatchLabelKeys) > 0 {
			sel = sel.DeepCopy()
		}
		for _, k := range tsc.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				if sel == nil {
					sel = &metav1.LabelSelector{}
				}
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
		ts := termSpec{typ: topoSpread, key: tsc.TopologyKey, namespaces: map[string]bool{p.Namespace: true}, selector: sel, maxSkew: tsc.MaxSkew}
		if tsc.MinDomains != nil {
			ts.minDomains = *tsc.MinDomains
		}
		ts.filter = makeNodeFilter(p, tsc.NodeTaintsPolicy, tsc.NodeAffinityPolicy)
		out = append(out, ts)
	}
	a := p.Spec.Affinity
	if a == nil {
		return out
	}
	add := func(typ topoType, term corev1.PodAffinityTerm) {
		ns, all := s.termNamespaces(p.Namespace, term)
		out = append(out, termSpec{typ: typ, key: term.TopologyKey, namespaces: ns, allNS: all, selector: term.LabelSelector, maxSkew: math.MaxInt32})
	}
	if a.PodAffinity != nil {
		for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			add(topoAffinity, term)
		}
		if respect {
			for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				add(topoAffinity, w.PodAffinityTerm)
			}
		}
	}
	if a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			add(topoAntiAffinity, term)
		}
		if respect {
			for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				add(topoAntiAffinity, w.PodAffinityTerm)
			}
		}
	}
	return out
}

// termNamespaces resolves a term's namespaces: the pod's own by default,
// else the listed ones and those its namespaceSelector picks from the
// snapshot's namespaces (an empty selector picks all).
func (s *solver) termNamespaces(own string, term corev1.PodAffinityTerm) (map[string]bool, bool) {
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		return map[string]bool{own: true}, false
	}
	out := map[string]bool{}
	for _, n := range term.Namespaces {
		out[n] = true
	}
	if term.NamespaceSelector != nil {
		if len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0 {
			return out, true
		}
		sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
		if err == nil {
			for _, ns := range s.snap.Namespaces {
				if ns != nil && sel.Matches(labels.Set(ns.Labels)) {
					out[ns.Name] = true
				}
			}
		}
	}
	return out, false
}

func makeNodeFilter(p *corev1.Pod, taints, affinity *corev1.NodeInclusionPolicy) nodeFilter {
	f := nodeFilter{honorAffinity: true, tolerations: p.Spec.Tolerations}
	if affinity != nil && *affinity == corev1.NodeInclusionPolicyIgnore {
		f.honorAffinity = false
	}
	if taints != nil && *taints == corev1.NodeInclusionPolicyHonor {
		f.honorTaints = true
	}
	sel := RequirementsFromLabels(p.Spec.NodeSelector)
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		f.alts = []Requirements{sel}
		return f
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		r := sel.Copy()
		for _, e := range term.MatchExpressions {
			r.Add(NewRequirement(e.Key, e.Operator, e.Values...))
		}
		f.alts = append(f.alts, r)
	}
	return f
}

func (f *nodeFilter) canonical(b *bytes.Buffer) {
	b.WriteString("a" + strconv.FormatBool(f.honorAffinity) + " t" + strconv.FormatBool(f.honorTaints) + " ")
	if f.honorAffinity {
		for _, a := range f.alts {
			b.WriteString(a.canonical())
			b.WriteByte('|')
		}
	}
	if f.honorTaints {
		for _, t := range f.tolerations {
			fmt.Fprintf(b, "%s/%s/%s/%s;", t.Key, t.Operator, t.Value, t.Effect)
		}
	}
}

// matches reports whether a node counts for the group: lookup gives the
// node's requirement on a key (labels for nodes, requirements for claims).
func (f *nodeFilter) matches(taints []corev1.Taint, lookup func(string) (*Requirement, bool)) bool {
	if f.honorTaints && untolerated(taints, f.tolerations) != nil {
		return false
	}
	if !f.honorAffinity || len(f.alts) == 0 {
		return true
	}
	for _, alt := range f.alts {
		ok := true
		for k, want := range alt {
			have, found := lookup(k)
			if !found {
				if !want.AllowsAbsent() {
					ok = false
					break
				}
				continue
			}
			if !have.HasIntersection(want) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// selectorKey writes a label selector canonically: labels and expressions
// sorted, values sorted.
func selectorKey(b *bytes.Buffer, sel *metav1.LabelSelector) {
	if sel == nil {
		b.WriteString("<nil>")
		return
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sel.MatchLabels[k])
		b.WriteByte(',')
	}
	if len(sel.MatchExpressions) == 0 {
		return
	}
	exprs := make([]string, 0, len(sel.MatchExpressions))
	for _, e := range sel.MatchExpressions {
		vals := slices.Clone(e.Values)
		sort.Strings(vals)
		exprs = append(exprs, fmt.Sprintf("%s %s %v", e.Key, e.Operator, vals))
	}
	sort.Strings(exprs)
	b.WriteString(strings.Join(exprs, ";"))
}

func (s *solver) groupFor(ts termSpec, inverse bool) *group {
	// The key is built for every term of every pod of the batch, so
	// without fmt (the same text as "%d|%v|%s|%d|%d|%v|").
	b := &s.keyBuf
	b.Reset()
	var num [24]byte
	b.Write(strconv.AppendInt(num[:0], int64(ts.typ), 10))
	b.WriteByte('|')
	b.WriteString(strconv.FormatBool(inverse))
	b.WriteByte('|')
	b.WriteString(ts.key)
	b.WriteByte('|')
	b.Write(strconv.AppendInt(num[:0], int64(ts.maxSkew), 10))
	b.WriteByte('|')
	b.Write(strconv.AppendInt(num[:0], int64(ts.minDomains), 10))
	b.WriteByte('|')
	b.WriteString(strconv.FormatBool(ts.allNS))
	b.WriteByte('|')
	if len(ts.namespaces) == 1 {
		for n := range ts.namespaces {
			b.WriteString(n)
		}
	} else {
		nss := make([]string, 0, len(ts.namespaces))
		for n := range ts.namespaces {
			nss = append(nss, n)
		}
		sort.Strings(nss)
		b.WriteString(strings.Join(nss, ","))
	}
	b.WriteByte('|')
	selectorKey(b, ts.selector)
	b.WriteByte('|')
	if ts.typ == topoSpread {
		ts.filter.canonical(b)
	}
	if g, ok := s.topo.byKey[string(b.Bytes())]; ok {
		return g
	}
	key := b.String()
	sel, err := metav1.LabelSelectorAsSelector(ts.selector)
	if err != nil {
		sel = labels.Nothing()
	}
	g := &group{
		id: len(s.topo.groups), typ: ts.typ, inverse: inverse, key: ts.key, dom: s.topo.domainsFor(ts.key),
		hostname: ts.key == wellknown.HostnameLabel, namespaces: ts.namespaces, allNS: ts.allNS,
		selector: sel, maxSkew: ts.maxSkew, minDomains: ts.minDomains, filter: ts.filter, canonical: key,
	}
	if ts.typ != topoSpread {
		g.filter = nodeFilter{}
	}
	s.topo.byKey[key] = g
	s.topo.groups = append(s.topo.groups, g)
	return g
}

// initTopology creates the groups of every pod in the batch, the inverse
// anti-affinity groups of placed pods, registers the domains NodePools can
// create, and counts the pods already bound.
func (s *solver) initTopology() {
	for _, p := range s.pods {
		p.owned = s.ownedGroups(p.pod)
		if hasAntiAffinity(p.pod, s.opts.Preferences == PreferencesRespect) {
			p.inverse = s.inverseGroups(p.pod)
		}
	}
	// Inverse anti-affinity of pods already placed.
	for _, n := range s.existing {
		for _, bp := range n.node.Pods {
			if s.inBatch[bp.UID] || ignoredForTopology(bp) || !hasAntiAffinity(bp, false) {
				continue
			}
			for _, g := range s.inverseGroups(bp) {
				if d := n.domainOf(s, g); d >= 0 {
					g.record(d)
				}
			}
		}
	}
	// Domains NodePools can launch into.
	for _, g := range s.topo.groups {
		s.registerTemplateDomains(g)
	}
	// Domains of existing nodes and the pods already on them.
	for _, n := range s.existing {
		for _, g := range s.topo.groups {
			if g.inverse {
				continue
			}
			matches := g.filter.matches(n.taints, n.lookup)
			d := n.domainOf(s, g)
			if d < 0 {
				continue
			}
			if matches && !n.node.InFlight {
				g.register(d)
			}
			if !matches {
				continue
			}
			for _, bp := range n.node.Pods {
				if s.inBatch[bp.UID] || ignoredForTopology(bp) || !g.selects(bp) {
					continue
				}
				g.record(d)
			}
		}
	}
	// Which groups select each pod of the batch. Groups are visited in
	// order, so each pod's selectedBy keeps the groups' order; a group
	// whose selector requires a label value only looks at the pods that
	// carry one of its values (many Deployments, each selecting its own
	// pods, would otherwise cost groups x pods selector matches).
	byLabel := map[string]map[string][]int{}
	for i, p := range s.pods {
		for k, v := range p.pod.Labels {
			if byLabel[k] == nil {
				byLabel[k] = map[string][]int{}
			}
			byLabel[k][v] = append(byLabel[k][v], i)
		}
	}
	for _, g := range s.topo.groups {
		candidates, indexed := candidatePods(g, byLabel)
		if !indexed {
			for _, p := range s.pods {
				if g.selects(p.pod) {
					p.selectedBy = append(p.selectedBy, g)
				}
			}
			continue
		}
		for _, i := range candidates {
			if p := s.pods[i]; g.selects(p.pod) {
				p.selectedBy = append(p.selectedBy, g)
			}
		}
	}
}

// candidatePods are the indexes, in batch order, of the pods that carry a
// value the group's selector requires (its first Equals or In
// requirement), from an index of the batch by label. indexed is false when
// the selector requires no value, and every pod is a candidate.
func candidatePods(g *group, byLabel map[string]map[string][]int) (candidates []int, indexed bool) {
	reqs, selectable := g.selector.Requirements()
	if !selectable {
		return nil, true
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		values := r.Values().List()
		for _, v := range values {
			candidates = append(candidates, byLabel[r.Key()][v]...)
		}
		if len(values) > 1 {
			slices.Sort(candidates)
			candidates = slices.Compact(candidates)
		}
		return candidates, true
	}
	return nil, false
}

func (s *solver) ownedGroups(p *corev1.Pod) []*group {
	var out []*group
	for _, ts := range s.podTerms(p) {
		g := s.groupFor(ts, false)
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

func (s *solver) inverseGroups(p *corev1.Pod) []*group {
	var out []*group
	for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		ns, all := s.termNamespaces(p.Namespace, term)
		g := s.groupFor(termSpec{typ: topoAntiAffinity, key: term.TopologyKey, namespaces: ns, allNS: all, selector: term.LabelSelector, maxSkew: math.MaxInt32}, true)
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

func hasAntiAffinity(p *corev1.Pod, includePreferred bool) bool {
	a := p.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	if len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return true
	}
	return includePreferred && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0
}

// ignoredForTopology skips pods that do not occupy a node.
func ignoredForTopology(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil
}

// registerTemplateDomains adds the values a NodePool can give the group's
// key; for spreads honouring taints, only NodePools the owners tolerate.
func (s *solver) registerTemplateDomains(g *group) {
	if g.hostname {
		return
	}
	for _, t := range s.templates {
		if g.filter.honorTaints && untolerated(t.taints, g.filter.tolerations) != nil {
			continue
		}
		for _, v := range s.templateDomainValues(t, g.key) {
			g.register(g.dom.id(v))
		}
	}
}

// templateDomainValues lists the values a NodePool can give a key.
func (s *solver) templateDomainValues(t *template, key string) []string {
	var out []string
	switch {
	case key == wellknown.ZoneLabel:
		var m uint64
		for _, tt := range t.types {
			m |= tt.zones[0] | tt.zones[1] | tt.zones[2]
		}
		maskEach(m, func(z int) { out = append(out, s.zones[z]) })
	case key == wellknown.CapacityTypeLabel:
		var m uint8
		for _, tt := range t.types {
			for ct := 0; ct < numCT; ct++ {
				if tt.zones[ct] != 0 {
					m |= 1 << ct
				}
			}
		}
		for ct := 0; ct < numCT; ct++ {
			if m&(1<<ct) != 0 {
				out = append(out, ctNames[ct])
			}
		}
	case s.isTypeKey(key):
		seen := map[string]bool{}
		for _, tt := range t.types {
			for _, v := range tt.it.LabelValues(key) {
				if !seen[v] {
					seen[v] = true
					out = append(out, v)
				}
			}
		}
		sort.Strings(out)
	default:
		if r, ok := t.reqs[key]; ok && r.Operator() == corev1.NodeSelectorOpIn {
			out = append(out, r.Values()...)
		}
	}
	return out
}

// placement is what topology needs to know about a candidate node.
type placement interface {
	// domainMask is the node's allowed domains of a (non-hostname) key as a
	// mask, and whether the node constrains the key at all.
	domainMask(s *solver, g *group) (uint64, bool)
	// hostID is the node's hostname domain.
	hostID() int32
	hostName() string
	nodeTaints() []corev1.Taint
	lookup(key string) (*Requirement, bool)
}

// podDomainMask is the pod's own (strict) requirement on a key as a mask
// over the group's registered domains.
func podDomainMask(g *group, strict Requirements) uint64 {
	r, ok := strict[g.key]
	if !ok {
		return g.registered
	}
	var m uint64
	maskEach(g.registered, func(d int) {
		if r.Has(g.dom.names[d]) {
			m |= 1 << uint(d)
		}
	})
	return m
}

// populated are the domains of mask (within those registered) that hold
// pods of the group.
func (g *group) populated(mask uint64) uint64 {
	var m uint64
	maskEach(g.registered&mask, func(d int) {
		if g.count(int32(d)) > 0 {
			m |= 1 << uint(d)
		}
	})
	return m
}

// spreadFloor is the base of a spread group's skew for a pod whose
// requirements allow the domains in pod: their smallest count, or 0 while
// fewer than minDomains are supported.
func spreadFloor(g *group, pod uint64) int32 {
	floor := int32(math.MaxInt32)
	supported := int32(0)
	maskEach(g.registered&pod, func(d int) {
		supported++
		floor = min(floor, g.count(int32(d)))
	})
	if g.minDomains > 0 && supported < g.minDomains {
		floor = 0
	}
	return floor
}

// spreadPick is the domain, among node's, where a spread group puts the
// pod: the least counted within maxSkew of floor, ties to the better
// ranked; -1 when none is within the skew.
func (s *solver) spreadPick(g *group, self bool, floor int32, node uint64, c placement) int {
	best, bestCount := -1, int32(math.MaxInt32)
	maskEach(g.registered&node, func(d int) {
		cnt := g.count(int32(d))
		if self {
			cnt++
		}
		if int64(cnt)-int64(floor) > int64(g.maxSkew) {
			return
		}
		if cnt < bestCount || (cnt == bestCount && s.domainRank(c, g, d) < s.domainRank(c, g, best)) {
			best, bestCount = d, cnt
		}
	})
	return best
}

// topoDecision is one group's verdict for a candidate: the domains the node
// must narrow to (non-hostname keys).
type topoDecision struct {
	g    *group
	mask uint64
}

// evalTopology checks every group that governs pod p on candidate c and
// returns the domain narrowings, or the group that rules c out.
func (s *solver) evalTopology(p *podState, c placement, out []topoDecision) ([]topoDecision, *group) {
	out = out[:0]
	for _, g := range p.owned {
		m, ok := s.evalGroup(g, p, c)
		if !ok {
			return out, g
		}
		if !g.hostname {
			out = append(out, topoDecision{g, m})
		}
	}
	for _, g := range p.selectedBy {
		if !g.inverse {
			continue
		}
		m, ok := s.evalGroup(g, p, c)
		if !ok {
			return out, g
		}
		if !g.hostname {
			out = append(out, topoDecision{g, m})
		}
	}
	return out, nil
}

// evalGroup applies one group to a candidate.
func (s *solver) evalGroup(g *group, p *podState, c placement) (uint64, bool) {
	self := g.selects(p.cur)
	if g.hostname {
		h := c.hostID()
		n := g.count(h)
		switch g.typ {
		case topoSpread:
			if self {
				n++
			}
			return 0, n <= g.maxSkew
		case topoAntiAffinity:
			return 0, n == 0
		default:
			pr, ok := p.strict[g.key]
			if ok && !pr.Has(c.hostName()) {
				return 0, false
			}
			if n > 0 {
				return 0, true
			}
			if !self {
				return 0, false
			}
			if g.nonEmpty == 0 || !ok {
				return 0, g.nonEmpty == 0
			}
			// Bootstrap only when no placed pod is in a domain the pod allows.
			for d, cnt := range g.counts {
				if cnt > 0 && pr.Has(g.dom.names[d]) {
					return 0, false
				}
			}
			return 0, true
		}
	}
	node, constrained := c.domainMask(s, g)
	if _, real := c.(*existingNode); real && !constrained {
		// A node without the label: spreads and affinities cannot count it,
		// anti-affinity has nothing to avoid there.
		return 0, g.typ == topoAntiAffinity
	}
	pod := podDomainMask(g, p.strict)
	switch g.typ {
	case topoSpread:
		best := s.spreadPick(g, self, spreadFloor(g, pod), node, c)
		if best < 0 {
			return 0, false
		}
		return 1 << uint(best), true
	case topoAffinity:
		if opts := g.populated(pod & node); opts != 0 {
			return opts, true
		}
		if !self {
			return 0, false
		}
		if g.nonEmpty > 0 && g.populated(pod) != 0 {
			return 0, false
		}
		best := -1
		maskEach(g.registered&pod&node, func(d int) {
			if best < 0 || s.domainRank(c, g, d) < s.domainRank(c, g, best) {
				best = d
			}
		})
		if best < 0 {
			return 0, false
		}
		return 1 << uint(best), true
	default:
		var opts uint64
		best := -1
		maskEach(g.registered&pod&node, func(d int) {
			if g.count(int32(d)) == 0 {
				opts |= 1 << uint(d)
				if best < 0 || s.domainRank(c, g, d) < s.domainRank(c, g, best) {
					best = d
				}
			}
		})
		if best >= 0 && !g.inverse {
			// An owner takes one empty domain, not all of them: Karpenter
			// would narrow a new claim to every empty domain and record them
			// all as taken, so only one pod per batch could be placed.
			return 1 << uint(best), true
		}
		return opts, opts != 0
	}
}

// domainRank orders equally good domains: for zones, the candidate's
// NodePool's cheapest first; otherwise by name order of first sight.
func (s *solver) domainRank(c placement, g *group, d int) int {
	if d < 0 {
		return math.MaxInt
	}
	if g.dom == s.topo.zoneDom {
		if cl, ok := c.(*claimView); ok && d < len(cl.t.zoneRank) {
			return cl.t.zoneRank[d]
		}
	}
	return d
}

// recordPlacement counts pod p on its final node in every group.
func (s *solver) recordPlacement(p *podState, c placement) {
	taints := c.nodeTaints()
	for _, g := range p.selectedBy {
		if g.inverse {
			continue
		}
		if !g.filter.matches(taints, c.lookup) {
			continue
		}
		s.recordDomains(g, c, g.typ == topoAntiAffinity)
	}
	for _, g := range p.inverse {
		s.recordDomains(g, c, true)
	}
}

// recordDomains records the candidate's domains of the group's key: every
// allowed one when all, else only a single determined one.
func (s *solver) recordDomains(g *group, c placement, all bool) {
	if g.hostname {
		g.record(c.hostID())
		return
	}
	m, constrained := c.domainMask(s, g)
	if !constrained {
		return
	}
	n := 0
	maskEach(m, func(int) { n++ })
	if n == 1 || all {
		maskEach(m, func(d int) { g.record(int32(d)) })
	}
}
