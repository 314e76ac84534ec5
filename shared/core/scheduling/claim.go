package scheduling

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// claimView is the constraint state of a NodeClaim being built (or of one a
// pod is being tried on).
type claimView struct {
	t     *template
	host  int32
	name  string
	zm    uint64
	zoneC bool
	ctm   uint8
	ctC   bool
	// reqs are the requirements on keys other than zone, capacity type and
	// hostname; shared copy-on-write.
	reqs Requirements
}

func (v *claimView) domainMask(s *solver, g *group) (uint64, bool) {
	switch g.dom {
	case s.topo.zoneDom:
		return v.zm, v.zoneC
	case s.topo.ctDom:
		return uint64(v.ctm), v.ctC
	}
	r, ok := v.reqs[g.key]
	if !ok {
		return g.registered, false
	}
	var m uint64
	if r.Operator() == corev1.NodeSelectorOpIn {
		for _, val := range r.Values() {
			if d := g.dom.id(val); d < maxDomains {
				m |= 1 << uint(d)
			}
		}
		return m, true
	}
	maskEach(g.registered, func(d int) {
		if r.Has(g.dom.names[d]) {
			m |= 1 << uint(d)
		}
	})
	return m, false
}

func (v *claimView) hostID() int32              { return v.host }
func (v *claimView) hostName() string           { return v.name }
func (v *claimView) nodeTaints() []corev1.Taint { return v.t.taints }

func (v *claimView) lookup(k string) (*Requirement, bool) {
	switch k {
	case wellknown.HostnameLabel:
		return NewRequirement(k, corev1.NodeSelectorOpIn, v.name), true
	case wellknown.ZoneLabel:
		if !v.zoneC {
			return nil, false
		}
		return NewRequirement(k, corev1.NodeSelectorOpIn, v.zoneNames(nil)...), true
	case wellknown.CapacityTypeLabel:
		if !v.ctC {
			return nil, false
		}
		var names []string
		for ct := 0; ct < numCT; ct++ {
			if v.ctm&(1<<ct) != 0 {
				names = append(names, ctNames[ct])
			}
		}
		return NewRequirement(k, corev1.NodeSelectorOpIn, names...), true
	}
	r, ok := v.reqs[k]
	return r, ok
}

func (v *claimView) zoneNames(_ *solver) []string {
	var out []string
	maskEach(v.zm, func(z int) { out = append(out, v.t.zoneNames[z]) })
	return out
}

// claim is a new NodeClaim opened during the solve.
type claim struct {
	claimView
	idx   int
	pods  []*podState
	req   []int64
	mask  bitset
	order *priceOrder
	// cursor is the position in order of the first type that fits (by
	// offering price); pick that of the type that costs least with the
	// surplus CPU credits of burstable types, at or after it.
	cursor, pick int
	// price is what pick costs, credits included.
	price  float64
	slack  []int64 // allocatable of the pick type minus req
	ports  []hostPort
	merged []int32
	// reserved is the share of the NodePool's limits this claim holds: the
	// capacity of its largest remaining type.
	reserved   []int64
	minRelaxed bool
	// minVals are the minValues the claim keeps, per template.minValueKeys,
	// once BestEffort relaxed them at its opening (nil: the NodePool's).
	minVals []int
	// held are the capacity reservations the claim holds (reservations.go).
	held []string
	// cheap caches cheapZones while the claim has cheapN-1 pods.
	cheap  uint64
	cheapN int
}

// claimEval is the outcome of trying a pod on a claim.
type claimEval struct {
	view     claimView
	maskNew  bool // the narrowed mask is in s.scratchMask
	order    *priceOrder
	pos      int // the first type that fits
	pick     int // the type that costs least, credits included
	price    float64
	merge    bool
	relaxed  bool
	minVals  []int // the relaxed minValues, when relaxed
	why      string
	topoFail *group
	// resv are the reservations the claim would hold.
	resv []string
}

// evalClaim tries pod p on claim c (c.pods empty for a fresh claim). It
// returns ok and fills ev with the narrowed state and the new price.
func (s *solver) evalClaim(c *claim, p *podState, ev *claimEval) bool {
	t := c.t
	*ev = claimEval{view: c.claimView}
	if !s.toleratesTemplate(p, t) {
		ev.why = "taint"
		return false
	}
	cr := t.compile(s, p.reqID)
	if cr.fail != nil {
		ev.why = "requirements"
		return false
	}
	if cr.host != nil && !cr.host.Has(c.name) {
		ev.why = "requirements"
		return false
	}
	v := &ev.view
	v.zm &= cr.zm
	v.zoneC = v.zoneC || cr.zoneC
	v.ctm &= cr.ctm
	v.ctC = v.ctC || cr.ctC
	if v.zm == 0 || v.ctm == 0 {
		ev.why = "requirements"
		return false
	}
	if len(cr.rest) > 0 && !slices.Contains(c.merged, p.reqID) {
		if c.reqs.Compatible(cr.rest, IsWellKnown) != nil {
			ev.why = "requirements"
			return false
		}
		v.reqs = c.reqs.Copy()
		v.reqs.AddAll(cr.rest)
		ev.merge = true
	}
	mask := c.mask
	if cr.mask != nil && !c.mask.subsetOf(cr.mask) {
		s.scratchMask = s.scratchMask[:len(c.mask)]
		s.scratchMask.and(c.mask, cr.mask)
		mask = s.scratchMask
		ev.maskNew = true
	}
	if ev.merge && len(s.choiceKeys) > 0 {
		// The masks meet the claim's and the pod's requirements one by
		// one; a type with label choices must meet both at once (a
		// claim that allows neither default nor dedicated tenancy has no
		// type left).
		for k := range cr.rest {
			if s.choiceKeys[k] {
				s.narrowMask(t, &mask, v.reqs[k], ev)
			}
		}
	}
	if len(p.ports) > 0 {
		if portConflict(c.ports, p.ports) != nil {
			ev.why = "host ports"
			return false
		}
		if !ev.maskNew {
			s.scratchMask = s.scratchMask[:len(c.mask)]
			s.scratchMask.copyFrom(mask)
			mask = s.scratchMask
			ev.maskNew = true
		}
		for i, tt := range t.types {
			if mask.has(i) && portConflict(t.groups[tt.group].ports, p.ports) != nil {
				mask.clear(i)
			}
		}
	}
	alts := p.volAlts
	if alts == nil {
		alts = []Requirements{nil}
	}
	base := *v
	// Each volume alternative starts from the claim as the pod's own
	// requirements left it: one that narrowed the types (by a type label)
	// and was then rejected must not narrow them for the next.
	baseMask, baseNew := mask, ev.maskNew
	if len(alts) > 1 && baseNew {
		s.scratchAlt = append(s.scratchAlt[:0], s.scratchMask[:len(c.mask)]...)
		baseMask = s.scratchAlt
	}
	for ai, alt := range alts {
		*v = base
		if ai > 0 {
			mask, ev.maskNew = baseMask, baseNew
			if baseNew {
				s.scratchMask = s.scratchMask[:len(c.mask)]
				s.scratchMask.copyFrom(baseMask)
				mask = s.scratchMask
			}
		}
		if alt != nil && !s.applyToView(v, alt, &mask, ev) {
			ev.why = "volume topology"
			continue
		}
		var bad *group
		s.decisions, bad = s.evalTopology(p, v, s.decisions)
		if bad != nil {
			ev.why, ev.topoFail = "topology", bad
			continue
		}
		if !s.applyDecisions(v, &mask, ev) {
			ev.why = "topology"
			continue
		}
		if s.fitClaim(c, p, v, mask, ev) && s.checkReserved(c, p, v, mask, ev) {
			return true
		}
		_ = ai
	}
	return false
}

// applyToView narrows a view by extra requirements (volume topology).
func (s *solver) applyToView(v *claimView, r Requirements, mask *bitset, ev *claimEval) bool {
	for _, k := range r.Keys() {
		q := r[k]
		switch {
		case k == wellknown.ZoneLabel:
			m, _ := s.zoneMask(Requirements{k: q})
			v.zm &= m
			v.zoneC = true
			if v.zm == 0 {
				return false
			}
		case k == wellknown.CapacityTypeLabel:
			m, _ := ctMask(Requirements{k: q})
			v.ctm &= m
			v.ctC = true
			if v.ctm == 0 {
				return false
			}
		case k == wellknown.HostnameLabel:
			if !q.Has(v.name) {
				return false
			}
		default:
			if h, ok := v.reqs[k]; ok && !h.HasIntersection(q) {
				return false
			} else if !ok && !IsWellKnown(k) && !q.AllowsAbsent() {
				return false
			}
			nr := v.reqs.Copy()
			nr.Add(q)
			v.reqs = nr
			if s.isTypeKey(k) {
				// The claim's whole requirement on the key, not q alone:
				// a type whose label has choices may meet each of two
				// requirements and not both.
				s.narrowMask(v.t, mask, nr[k], ev)
			}
		}
	}
	return true
}

func (s *solver) narrowMask(t *template, mask *bitset, q *Requirement, ev *claimEval) {
	if !ev.maskNew {
		s.scratchMask = s.scratchMask[:len(*mask)]
		s.scratchMask.copyFrom(*mask)
		*mask = s.scratchMask
		ev.maskNew = true
	}
	choice := s.choiceKeys[q.Key]
	for i, tt := range t.types {
		if !(*mask).has(i) {
			continue
		}
		var ok bool
		if choice {
			ok = tt.it.LabelMatches(q)
		} else {
			val, present := tt.it.Labels[q.Key]
			ok = q.Matches(val, present)
		}
		if !ok {
			(*mask).clear(i)
		}
	}
}

// applyDecisions narrows a view to the domains topology chose.
func (s *solver) applyDecisions(v *claimView, mask *bitset, ev *claimEval) bool {
	for _, d := range s.decisions {
		g := d.g
		switch g.dom {
		case s.topo.zoneDom:
			v.zm &= d.mask
			v.zoneC = true
			if v.zm == 0 {
				return false
			}
		case s.topo.ctDom:
			v.ctm &= uint8(d.mask)
			v.ctC = true
			if v.ctm == 0 {
				return false
			}
		default:
			var vals []string
			maskEach(d.mask, func(i int) { vals = append(vals, g.dom.names[i]) })
			q := NewRequirement(g.key, corev1.NodeSelectorOpIn, vals...)
			if h, ok := v.reqs[g.key]; ok && !h.HasIntersection(q) {
				return false
			}
			nr := v.reqs.Copy()
			nr.Add(q)
			v.reqs = nr
			if s.isTypeKey(g.key) {
				s.narrowMask(v.t, mask, nr[g.key], ev)
			}
		}
	}
	return true
}

// fitClaim finds the cheapest type of the narrowed claim that holds its
// pods plus p, within the NodePool's limits and minValues: the first that
// fits in the price order, unless it is burstable and its surplus CPU
// credits make a later one cheaper (cheapestWithCredits).
func (s *solver) fitClaim(c *claim, p *podState, v *claimView, mask bitset, ev *claimEval) bool {
	t := c.t
	order := t.order(s, v.zm, v.ctm)
	start := 0
	switch {
	case order == c.order:
		start = c.cursor // a narrower mask cannot make an earlier type fit
	case c.order != nil && !t.hasLimits:
		// The pod narrowed the claim's zones or capacity types: another
		// order. A type that costs less than the claim's price there cost
		// less before too (fewer offerings cost no less), so it came
		// before the claim's type in its order and did not fit then;
		// with more pods and a narrower mask it does not now. The search
		// starts at the claim's price (in the exotic part when the
		// claim's type is exotic, as exotic types all come after the
		// others). With limits, room given back since could make an
		// earlier type fit, so the search starts at 0.
		start = order.atLeast(c.price, t.types[c.order.idx[c.cursor]].exotic)
	}
	req := s.scratchReq[:len(c.req)]
	for i := range req {
		req[i] = c.req[i] + p.req[i]
	}
	pos := -1
	for i := order.from(start, req); i < len(order.idx); i = order.from(i+1, req) {
		ti := int(order.idx[i])
		if !mask.has(ti) {
			continue
		}
		tt := t.types[ti]
		if !fits(req, tt.alloc) {
			continue
		}
		if t.hasLimits && !t.withinLimits(tt, c.reserved) {
			continue
		}
		pos = i
		break
	}
	if pos < 0 {
		ev.why = "resources"
		return false
	}
	pick, best := pos, order.price[pos]
	if tt := t.types[order.idx[pos]]; tt.credits.burstable() {
		best += t.creditsAt(tt, req[dimCPU])
		if c.keepsPick(order, pos, mask, req) {
			pick, best = c.pick, order.price[c.pick]
		} else {
			pick, best = s.cheapestWithCredits(t, order, pos, best, mask, req, c.reserved)
		}
	}
	if len(t.minValueKeys) > 0 {
		ok, relaxed := s.checkMinValues(c, v, order, pos, mask, req)
		if !ok {
			ev.why = "minValues"
			return false
		}
		ev.relaxed, ev.minVals = relaxed != nil, relaxed
	}
	ev.order, ev.pos, ev.pick, ev.price = order, pos, pick, best
	return true
}

// cheapestWithCredits looks on from position pos of order, whose type
// fits req and costs best with its credits, for a type that costs less
// with credits. Credits only add to a price, so it stops at the first type
// whose offering alone costs best or more, and it never passes from the
// other types to exotic ones.
func (s *solver) cheapestWithCredits(t *template, order *priceOrder, pos int, best float64, mask bitset, req []int64, reserved []int64) (int, float64) {
	pick := pos
	exotic := t.types[order.idx[pos]].exotic
	for i := pos + 1; i < len(order.idx) && order.price[i] < best; i++ {
		ti := int(order.idx[i])
		tt := t.types[ti]
		if tt.exotic != exotic {
			break
		}
		if !mask.has(ti) || !fits(req, tt.alloc) || (t.hasLimits && !t.withinLimits(tt, reserved)) {
			continue
		}
		if p := order.price[i] + t.creditsAt(tt, req[dimCPU]); p < best {
			pick, best = i, p
		}
	}
	return pick, best
}

// keepsPick reports whether the claim's pick, a type that is not
// burstable, is still its cheapest with credits once req is on it: it
// still fits, and the types before it in the same order cannot have
// become cheaper (those that did not fit still do not, the burstable ones
// only spend more credits with more requests). Without NodePool limits
// only, whose share can change between evaluations.
func (c *claim) keepsPick(order *priceOrder, pos int, mask bitset, req []int64) bool {
	t := c.t
	if order != c.order || len(c.pods) == 0 || c.pick < pos || t.hasLimits {
		return false
	}
	ti := int(order.idx[c.pick])
	tt := t.types[ti]
	return !tt.credits.burstable() && mask.has(ti) && fits(req, tt.alloc)
}

// checkMinValues counts the distinct values of each minValues key across
// the types that fit (from position from of order on), as Karpenter's
// filterInstanceTypesByRequirements does. A claim that falls short fails,
// except under BestEffort on the claim being opened, whose minValues are
// then lowered to the counts (returned); pods added later must keep those,
// as Karpenter relaxes only when it opens a NodeClaim.
func (s *solver) checkMinValues(c *claim, v *claimView, order *priceOrder, from int, mask bitset, req []int64) (ok bool, relaxed []int) {
	t := c.t
	m := newMinValues(t.minValueKeys)
	for i := order.from(from, req); i < len(order.idx); i = order.from(i+1, req) {
		ti := int(order.idx[i])
		tt := t.types[ti]
		if !mask.has(ti) || !fits(req, tt.alloc) || (t.hasLimits && !t.withinLimits(tt, c.reserved)) {
			continue
		}
		m.add(tt, v.zm, v.ctm)
	}
	s.minShort = s.minShort[:0]
	for k := range t.minValueKeys {
		need, got := c.minValueOf(k), m.count(k)
		if got >= need {
			continue
		}
		if s.opts.MinValues != MinValuesBestEffort || len(c.pods) > 0 {
			s.minShort = append(s.minShort, t.minValueKeys[k])
			continue
		}
		if relaxed == nil {
			relaxed = make([]int, len(t.minValueKeys))
			for j := range relaxed {
				relaxed[j] = c.minValueOf(j)
			}
		}
		relaxed[k] = got
	}
	if len(s.minShort) > 0 {
		return false, nil
	}
	return true, relaxed
}

// newClaim opens a claim on a template.
func (s *solver) freshClaim(t *template) *claim {
	c := s.fresh[t.idx]
	if c == nil {
		c = &claim{req: make([]int64, s.d.n())}
		s.fresh[t.idx] = c
	}
	c.claimView = claimView{t: t, host: s.nextHostID(), name: s.nextHostName(), zm: t.zm, zoneC: t.zoneC, ctm: t.ctm, ctC: t.ctC, reqs: t.base}
	c.mask = t.all
	c.order = nil
	c.cursor, c.pick = 0, 0
	c.held = nil
	return c
}

func (s *solver) nextHostName() string {
	return fmt.Sprintf("hostname-placeholder-%04d", len(s.claims)+1)
}

func (s *solver) nextHostID() int32 {
	// A name not interned yet has no pods: any id past the table works for
	// evaluation; commitNew interns the real one.
	return int32(len(s.topo.hostDom.names)) + 1<<30
}

// commitClaim adds pod p to claim c using a successful evaluation.
func (s *solver) commitClaim(c *claim, p *podState, ev *claimEval) {
	t := c.t
	c.claimView = ev.view
	if ev.maskNew {
		c.mask = slices.Clone(s.scratchMask[:len(c.mask)])
	}
	if ev.merge {
		c.merged = append(c.merged, p.reqID)
	}
	c.pods = append(c.pods, p)
	addInto(c.req, p.req)
	c.order, c.cursor, c.pick, c.price = ev.order, ev.pos, ev.pick, ev.price
	if ev.relaxed {
		c.minRelaxed, c.minVals = true, ev.minVals
	}
	s.holdReservations(c, ev.resv)
	c.ports = append(c.ports, p.ports...)
	tt := t.types[c.order.idx[c.pick]]
	for i := range c.slack {
		c.slack[i] = tt.alloc[i] - c.req[i]
	}
	s.index.update(c.idx, c.slack)
	if t.hasLimits {
		s.updateReservation(c)
	}
	s.recordPlacement(p, &c.claimView)
}

// openClaim turns an evaluated fresh claim into a real one.
func (s *solver) openClaim(t *template, p *podState, ev *claimEval) *claim {
	f := s.fresh[t.idx]
	c := &claim{
		claimView: f.claimView,
		idx:       len(s.claims),
		req:       make([]int64, s.d.n()),
		mask:      t.all,
		slack:     make([]int64, s.d.n()),
	}
	c.name = s.nextHostName()
	c.host = s.topo.hostDom.id(c.name)
	ev.view.host, ev.view.name = c.host, c.name
	if t.hasLimits {
		c.reserved = make([]int64, s.d.n())
	}
	if t.nodesLeft > 0 {
		t.nodesLeft--
	}
	s.claims = append(s.claims, c)
	s.commitClaim(c, p, ev)
	return c
}

// updateReservation sets the claim's share of its NodePool's limits to the
// capacity of its largest remaining type, giving back what it no longer
// needs.
func (s *solver) updateReservation(c *claim) {
	t := c.t
	need := make([]int64, s.d.n())
	for i := c.order.from(c.cursor, c.req); i < len(c.order.idx); i = c.order.from(i+1, c.req) {
		ti := int(c.order.idx[i])
		tt := t.types[ti]
		if !c.mask.has(ti) || !fits(c.req, tt.alloc) || !t.withinLimits(tt, c.reserved) {
			continue
		}
		for d, l := range t.limits {
			if l >= 0 && tt.cap[d] > need[d] {
				need[d] = tt.cap[d]
			}
		}
	}
	for d, l := range t.limits {
		if l < 0 {
			continue
		}
		t.remaining[d] += c.reserved[d] - need[d]
		c.reserved[d] = need[d]
	}
}

// fitsSlack is the cheap test of phase one: the pod fits the claim's current
// cheapest type as it is.
func (c *claim) fitsSlack(req []int64) bool { return fits(req, c.slack) }

// zoneProbe is what phase one needs of one of a pod's zone spread or zone
// affinity groups, computed once per placement. A spread puts the pod in
// the least counted zone the claim allows, an affinity in the zones that
// already have pods of the group: a claim whose price is higher in all of
// them cannot take the pod at no extra cost, and is passed over without a
// full evaluation.
type zoneProbe struct {
	g     *group
	self  bool
	floor int32  // spread: the base of the skew
	has   uint64 // affinity: the zones with pods of the group the pod allows
}

// zoneProbes fills out with p's zone spread and affinity groups.
func (s *solver) zoneProbes(p *podState, out []zoneProbe) []zoneProbe {
	out = out[:0]
	for _, g := range p.owned {
		if g.dom != s.topo.zoneDom {
			continue
		}
		pod := podDomainMask(g, p.strict)
		switch g.typ {
		case topoSpread:
			out = append(out, zoneProbe{g: g, self: g.selects(p.cur), floor: spreadFloor(g, pod)})
		case topoAffinity:
			out = append(out, zoneProbe{g: g, has: g.populated(pod)})
		}
	}
	return out
}

// mayKeepPrice is phase one's quick test: false when the zone groups of
// probes put p only in zones where claim c cannot keep its price (or in
// none), so evaluating c in full would fail or find it costs more. It
// follows evalClaim and evalGroup: the claim's zones narrowed by the pod's
// requirements (pods with volume topology are not probed), then by each
// group (an affinity with no pods yet is left to the evaluation).
func (s *solver) mayKeepPrice(c *claim, p *podState, probes []zoneProbe) bool {
	if len(probes) == 0 || p.volAlts != nil {
		return true
	}
	cr := c.t.compile(s, p.reqID)
	if cr.fail != nil {
		return true
	}
	node := c.zm & cr.zm
	to := node
	for _, pr := range probes {
		switch pr.g.typ {
		case topoSpread:
			d := s.spreadPick(pr.g, pr.self, pr.floor, node, &c.claimView)
			if d < 0 {
				return false
			}
			to &= 1 << uint(d)
		case topoAffinity:
			if pr.has&node != 0 {
				to &= pr.has
			}
		}
	}
	return to&s.cheapZones(c) != 0
}

// cheapZones are the zones of claim c where its price may hold: those
// where a type of its mask that fits its requests has an offering at or
// below its price. Credits, NodePool limits and a new pod's requests and
// requirements only raise a price, so a zone left out here costs more
// whatever the pod.
func (s *solver) cheapZones(c *claim) uint64 {
	if c.cheapN == len(c.pods)+1 {
		return c.cheap
	}
	var m uint64
	maskEach(c.zm, func(z int) {
		o := c.t.order(s, 1<<uint(z), c.ctm)
		// Offering prices rise within the plain part and within the exotic
		// part: past the claim's price there is nothing cheaper.
		for _, part := range [2][2]int{{0, o.plain}, {o.plain, len(o.idx)}} {
			for i := o.from(part[0], c.req); i < part[1] && o.price[i] <= c.price; i = o.from(i+1, c.req) {
				tt := c.t.types[o.idx[i]]
				if c.mask.has(int(o.idx[i])) && fits(c.req, tt.alloc) && o.price[i]+c.t.creditsAt(tt, c.req[dimCPU]) <= c.price {
					m |= 1 << uint(z)
					return
				}
			}
		}
	})
	c.cheap, c.cheapN = m, len(c.pods)+1
	return m
}

// slackIndex finds claims with room for a pod without visiting every claim:
// claims are grouped in blocks of 64 whose largest cpu, memory and pod-slot
// slack are kept, so a search skips whole blocks that cannot hold the pod.
type slackIndex struct {
	slack [][3]int64 // per claim: cpu, memory, pods
	block [][3]int64 // per block: the largest of each
}

const slackBlock = 64

func (x *slackIndex) update(i int, slack []int64) {
	for len(x.slack) <= i {
		x.slack = append(x.slack, [3]int64{})
	}
	x.slack[i] = [3]int64{slack[dimCPU], slack[dimMemory], slack[dimPods]}
	b := i / slackBlock
	for len(x.block) <= b {
		x.block = append(x.block, [3]int64{})
	}
	var m [3]int64
	for j := b * slackBlock; j < min(len(x.slack), (b+1)*slackBlock); j++ {
		for d := range m {
			m[d] = max(m[d], x.slack[j][d])
		}
	}
	x.block[b] = m
}

// next returns the first claim at or after from whose slack may hold req,
// or -1.
func (x *slackIndex) next(from int, req []int64) int {
	cpu, mem, pods := req[dimCPU], req[dimMemory], req[dimPods]
	for i := from; i < len(x.slack); {
		b := i / slackBlock
		if m := x.block[b]; m[0] < cpu || m[1] < mem || m[2] < pods {
			i = (b + 1) * slackBlock
			continue
		}
		end := min(len(x.slack), (b+1)*slackBlock)
		for ; i < end; i++ {
			if sl := x.slack[i]; sl[0] >= cpu && sl[1] >= mem && sl[2] >= pods {
				return i
			}
		}
	}
	return -1
}

func describeMask(names []string, m uint64) string {
	var out []string
	maskEach(m, func(i int) {
		if i < len(names) {
			out = append(out, names[i])
		}
	})
	return "[" + strings.Join(out, " ") + "]"
}
