package scheduling

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// podState is a pod of the batch and what the solve derived from it.
type podState struct {
	pod *corev1.Pod // as given
	cur *corev1.Pod // with the preferences relaxed so far (pod when none)
	req []int64
	// reqs are the node requirements under the preference policy, strict
	// the required ones only (topology domains use those).
	reqs       Requirements
	strict     Requirements
	reqID      int32
	ports      []hostPort
	volAlts    []Requirements
	vols       []volumeRef
	volErr     error
	owned      []*group
	inverse    []*group
	selectedBy []*group
	hostChecks []hostCheck
	tol        []int8 // per template: 0 unknown, 1 tolerates, 2 does not
	placed     bool
	// resvBlocked: the last try failed because the reserved capacity the
	// pod could use is held by other claims (strict mode).
	resvBlocked bool
	relaxed     *corev1.Pod // the most relaxed form tried, for diagnosis
	// relaxations are the preferences dropped so far, in words.
	relaxations []string
}

// hostCheck is a quick per-node test of a hostname topology group: the node
// is out when the group counts more than limit pods there.
type hostCheck struct {
	g     *group
	limit int32
}

type solver struct {
	// fill makes phase two grow a claim when that buys room for the
	// queued pods at a lower price per pod than a new claim (growsCheaper);
	// left is how many pods wait in the queue behind the one being placed.
	fill bool
	left int
	// minShort are the minValues keys the last failed check fell short
	// of (for diagnose).
	minShort  []string
	snap      *Snapshot
	opts      Options
	d         *dims
	zones     []string
	zoneIdx   map[string]int
	allZones  uint64
	typeKeys  map[string]bool
	templates []*template
	skipped   []skippedPool
	daemons   []*daemon
	existing  []*existingNode
	claims    []*claim
	fresh     []*claim
	topo      *topology
	vols      *volumes
	pods      []*podState
	inBatch   map[types.UID]bool

	reqIDs  map[string]int32
	reqSets []Requirements
	// podReqs are the requests of snap.Pods[i], nil for a pod with one
	// container and plain requests, whose vector initPods reads from the
	// container directly.
	podReqs []corev1.ResourceList
	// noReqs is the requirements of a pod without node selector or node
	// affinity, shared by all such pods (requirements are read only).
	noReqs   Requirements
	noReqsID int32

	tolerateSoft bool // some NodePool has a PreferNoSchedule taint
	// choiceKeys are the type keys some type has LabelChoices for.
	choiceKeys map[string]bool
	// resv is what each capacity reservation can still take (reservations.go).
	resv map[string]int

	scratchMask bitset
	// scratchAlt keeps a claim's narrowed mask while evalClaim tries a
	// pod's volume alternatives, each from it.
	scratchAlt bitset
	// finalize's scratch: the types that fit a claim and their offering
	// prices (while it decides which to send), credits and keep flags for
	// dropCostlyBurstable, the kept types' DaemonSet groups and set.
	scratchFitting []*tType
	scratchPrices  []float64
	scratchCredits []float64
	scratchKeep    []bool
	scratchGroups  []bool
	scratchChosen  bitset
	scratchReq     []int64
	decisions      []topoDecision
	index          slackIndex
	probes         []zoneProbe  // phase one's, for the pod being placed
	noProbes       bool         // tests: phase one evaluates every candidate
	keyBuf         bytes.Buffer // groupFor's key
}

// Solve places a batch of pending pods: on existing nodes and in-flight
// NodeClaims first, then on new NodeClaims from the NodePools by weight. It
// is a pure function of the snapshot: same input, same output.
//
// A provisioning solve of at most fillMaxPods pods that opens several
// NodeClaims runs a second time with the other growth rule (solver.fill),
// and the plan that places more pods, then costs less, is kept. Neither
// rule wins on every batch (bench/, docs/bench.md): one pod's marginal
// price favours the smallest new node again and again, each paying its
// DaemonSets; room for the queue favours big nodes, whose last size step
// is paid in full.
func Solve(snap *Snapshot, opts Options) *Results {
	return solveBoth(snap, opts, false)
}

// solveBoth is Solve; noProbes makes phase one evaluate every candidate
// (tests check that the probes change nothing). The first solve's plan is
// finalized before the second starts, so only one solve's state is held at
// a time: a backlog tick at 5,000 nodes has no room for two within its
// Lambda memory (docs/deploy.md).
func solveBoth(snap *Snapshot, opts Options, noProbes bool) *Results {
	r, unplaced, hourly, again := solveOnce(snap, opts, noProbes, false)
	if !again || opts.MaxNewNodeClaims >= 0 {
		return r
	}
	f := newSolver(snap, opts)
	f.noProbes, f.fill = noProbes, true
	f.run()
	// More pods placed, else less per hour by the claims' prices as the
	// solve keeps them (the type each would launch, credits included).
	if u := f.unplaced(); u < unplaced || (u == unplaced && f.claimsHourly() < hourly*(1-1e-9)) {
		return f.results()
	}
	return r
}

// solveOnce is one solve: its plan, the pods it left unplaced, the $/h of
// its claims, and whether the other growth rule may do better (several
// claims opened, a batch small enough for two solves).
func solveOnce(snap *Snapshot, opts Options, noProbes, fill bool) (*Results, int, float64, bool) {
	s := newSolver(snap, opts)
	s.noProbes, s.fill = noProbes, fill
	s.run()
	unplaced, hourly, again := s.unplaced(), s.claimsHourly(), len(s.claims) >= 2 && len(s.pods) <= fillMaxPods
	return s.results(), unplaced, hourly, again
}

// fillMaxPods is the largest batch solved with both growth rules: the
// second solve about doubles the CPU, and the 50,000-pod solve must stay
// under 3 s of it (2.4 s with one rule, 2026-11-26).
const fillMaxPods = 20000

func (s *solver) unplaced() int {
	n := 0
	for _, p := range s.pods {
		if !p.placed {
			n++
		}
	}
	return n
}

func (s *solver) claimsHourly() float64 {
	total := 0.0
	for _, c := range s.claims {
		total += c.price
	}
	return total
}

func newSolver(snap *Snapshot, opts Options) *solver {
	if opts.MaxInstanceTypes <= 0 {
		opts.MaxInstanceTypes = DefaultMaxInstanceTypes
	}
	s := &solver{snap: snap, opts: opts, d: newDims(), inBatch: map[types.UID]bool{}, reqIDs: map[string]int32{}}
	s.vols = newVolumes(snap)
	s.initDims()
	s.initZones()
	s.initTypeKeys()
	s.buildDaemons()
	s.daemonVectors()
	s.buildTemplates()
	s.initReservations()
	s.fresh = make([]*claim, len(s.templates))
	for _, t := range s.templates {
		for _, taint := range t.taints {
			if taint.Effect == corev1.TaintEffectPreferNoSchedule {
				s.tolerateSoft = true
			}
		}
	}
	s.newTopology()
	s.initExisting()
	s.initPods()
	s.initDemand()
	s.initTopology()
	for _, p := range s.pods {
		s.deriveHostChecks(p)
	}
	maxTypes, maxGroups := 0, 0
	for _, t := range s.templates {
		maxTypes = max(maxTypes, len(t.types))
		maxGroups = max(maxGroups, len(t.groups))
	}
	s.scratchMask = newBitset(maxTypes)
	s.scratchChosen = newBitset(maxTypes)
	s.scratchGroups = make([]bool, maxGroups)
	s.scratchReq = make([]int64, s.d.n())
	return s
}

// initDims interns every resource name of the snapshot.
func (s *solver) initDims() {
	for _, nc := range sortedClasses(s.snap) {
		for _, it := range nc.InstanceTypes {
			if it != nil {
				s.d.addList(it.Allocatable)
				s.d.addList(it.Capacity)
			}
		}
	}
	s.podReqs = make([]corev1.ResourceList, len(s.snap.Pods))
	for i, p := range s.snap.Pods {
		if p == nil {
			continue
		}
		if singleContainer(p) {
			for name := range p.Spec.Containers[0].Resources.Requests {
				s.d.add(name)
			}
			continue
		}
		r := PodRequests(p)
		s.podReqs[i] = r
		s.d.addList(r)
	}
	for _, np := range s.snap.NodePools {
		if np != nil {
			for name := range np.Spec.Limits {
				if name != wellknown.ResourceNodes {
					s.d.add(name)
				}
			}
		}
	}
	for _, n := range s.snap.Nodes {
		if n != nil {
			s.d.addList(n.Allocatable)
		}
	}
}

// singleContainer reports whether PodRequests of the pod is its one
// container's requests and a pod slot, which initPods turns into a vector
// without building the ResourceList (most pods: a map per pod was a tenth
// of a solve's allocations).
func singleContainer(p *corev1.Pod) bool {
	return len(p.Spec.Containers) == 1 && plainRequests(p)
}

func sortedClasses(snap *Snapshot) []*NodeClass {
	var out []*NodeClass
	for _, nc := range snap.NodeClasses {
		if nc != nil {
			out = append(out, nc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// initZones interns the zones offerings and nodes name, sorted; at most 64.
func (s *solver) initZones() {
	seen := map[string]bool{}
	for _, nc := range s.snap.NodeClasses {
		if nc == nil {
			continue
		}
		for _, it := range nc.InstanceTypes {
			if it == nil {
				continue
			}
			for _, o := range it.Offerings {
				seen[o.Zone] = true
			}
		}
	}
	for _, n := range s.snap.Nodes {
		if n != nil {
			if z, ok := n.Labels[wellknown.ZoneLabel]; ok {
				seen[z] = true
			}
		}
	}
	// The zones a NodePool lists stay on its NodeClaims even where no type
	// is offered (a NodeClaim lists its NodePool's zones, as Karpenter's):
	// they are known here, though no domain of them is registered and no
	// type can launch there.
	for _, np := range s.snap.NodePools {
		if np == nil {
			continue
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			key := r.Key
			if n, ok := wellknown.NormalizedLabels[key]; ok {
				key = n
			}
			if key == wellknown.ZoneLabel && r.Operator == corev1.NodeSelectorOpIn {
				for _, z := range r.Values {
					seen[z] = true
				}
			}
		}
	}
	for z := range seen {
		s.zones = append(s.zones, z)
	}
	sort.Strings(s.zones)
	if len(s.zones) > maxDomains {
		s.zones = s.zones[:maxDomains]
	}
	s.zoneIdx = map[string]int{}
	for i, z := range s.zones {
		s.zoneIdx[z] = i
		s.allZones |= 1 << uint(i)
	}
}

func (s *solver) internReqs(r Requirements) int32 {
	key := r.canonical()
	if id, ok := s.reqIDs[key]; ok {
		return id
	}
	id := int32(len(s.reqSets))
	s.reqIDs[key] = id
	s.reqSets = append(s.reqSets, r)
	return id
}

// initPods derives each pod's state and orders the batch as Karpenter does:
// most cpu first, then most memory, then oldest, then by UID.
func (s *solver) initPods() {
	s.noReqs = Requirements{}
	s.noReqsID = s.internReqs(s.noReqs)
	s.pods = make([]*podState, 0, len(s.snap.Pods))
	for i, p := range s.snap.Pods {
		if p == nil {
			continue
		}
		if p.UID != "" {
			s.inBatch[p.UID] = true
		}
		var req []int64
		if r := s.podReqs[i]; r != nil {
			req = s.d.vec(r)
		} else {
			req = s.d.vec(p.Spec.Containers[0].Resources.Requests)
			req[dimPods] = 1
		}
		ps := &podState{pod: p, cur: p, req: req}
		s.derive(ps)
		ps.volAlts, ps.vols, ps.volErr = s.vols.podVolumes(p)
		if ps.volErr == nil && hasDRARequirements(p) {
			ps.volErr = errDRA // kept off every node, as a volume error does
		}
		s.pods = append(s.pods, ps)
	}
	slices.SortStableFunc(s.pods, func(a, b *podState) int {
		if c := cmp.Compare(b.req[dimCPU], a.req[dimCPU]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.req[dimMemory], a.req[dimMemory]); c != 0 {
			return c
		}
		// Of equal pods, the more particular first: in-flight claims made
		// for pods that select a zone or a capacity type then go to them,
		// not to a pod that could go anywhere (which would leave the
		// particular pod to ask for another claim every pass).
		if c := cmp.Compare(len(b.strict), len(a.strict)); c != 0 {
			return c
		}
		if !a.pod.CreationTimestamp.Equal(&b.pod.CreationTimestamp) {
			if a.pod.CreationTimestamp.Before(&b.pod.CreationTimestamp) {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.pod.UID, b.pod.UID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pod.Namespace, b.pod.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.pod.Name, b.pod.Name)
	})
}

// derive recomputes what depends on the pod's current (relaxed) form.
func (s *solver) derive(p *podState) {
	strictOnly := s.opts.Preferences == PreferencesIgnore
	spec := &p.cur.Spec
	switch {
	case len(spec.NodeSelector) == 0 && (spec.Affinity == nil || spec.Affinity.NodeAffinity == nil):
		// Most pods: nothing to compute or intern.
		p.reqs, p.strict, p.reqID = s.noReqs, s.noReqs, s.noReqsID
	case strictOnly || spec.Affinity == nil || spec.Affinity.NodeAffinity == nil ||
		len(spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0:
		// Without preferred terms the two sets are the same.
		p.reqs = PodRequirements(p.cur, true)
		p.strict = p.reqs
		p.reqID = s.internReqs(p.reqs)
	default:
		p.reqs = PodRequirements(p.cur, false)
		p.strict = PodRequirements(p.cur, true)
		p.reqID = s.internReqs(p.reqs)
	}
	p.ports = hostPorts(p.cur)
	p.tol = make([]int8, len(s.templates))
}

func (s *solver) deriveHostChecks(p *podState) {
	p.hostChecks = p.hostChecks[:0]
	for _, g := range p.owned {
		if !g.hostname {
			continue
		}
		switch g.typ {
		case topoSpread:
			lim := g.maxSkew
			if g.selects(p.cur) {
				lim--
			}
			p.hostChecks = append(p.hostChecks, hostCheck{g, lim})
		case topoAntiAffinity:
			p.hostChecks = append(p.hostChecks, hostCheck{g, 0})
		}
	}
	for _, g := range p.selectedBy {
		if g.inverse && g.hostname {
			p.hostChecks = append(p.hostChecks, hostCheck{g, 0})
		}
	}
}

func (p *podState) hostOK(host int32) bool {
	for _, hc := range p.hostChecks {
		if hc.g.count(host) > hc.limit {
			return false
		}
	}
	return true
}

func (s *solver) toleratesTemplate(p *podState, t *template) bool {
	switch p.tol[t.idx] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := untolerated(t.taints, p.cur.Spec.Tolerations) == nil
	p.tol[t.idx] = 2
	if ok {
		p.tol[t.idx] = 1
	}
	return ok
}

// admits reports whether pod p may join a claim of template t at all: it
// tolerates the NodePool's taints and its requirements are compatible,
// both known per pod and template. The claims of a solve are searched by
// their room only, so a pod meets every claim with room, of any NodePool;
// this check rules out the other NodePools' claims (a GPU NodePool's
// large claims for every plain pod) before evalClaim's fuller work.
func (s *solver) admits(p *podState, t *template) bool {
	return s.toleratesTemplate(p, t) && t.compile(s, p.reqID).fail == nil
}

// run is Karpenter's queue: try each pod, relaxing its preferences when it
// does not fit; pods that still fail go to the back and are retried while
// the queue keeps making progress.
func (s *solver) run() {
	queue := slices.Clone(s.pods)
	lastLen := map[*podState]int{}
	for len(queue) > 0 {
		p := queue[0]
		if l, ok := lastLen[p]; ok && l == len(queue) {
			break
		}
		queue = queue[1:]
		s.left = len(queue)
		if s.trySchedule(p) {
			p.placed = true
			continue
		}
		s.resetRelaxation(p)
		queue = append(queue, p)
		lastLen[p] = len(queue)
	}
}

func (s *solver) trySchedule(p *podState) bool {
	for {
		p.resvBlocked = false
		if s.place(p) {
			return true
		}
		// Karpenter does not relax a pod that waits for reserved capacity:
		// it may schedule as it is in a later pass.
		if p.resvBlocked || !s.relax(p) {
			p.relaxed = p.cur
			return false
		}
	}
}

// A pod that fits no open claim at no extra cost either opens a new claim
// or grows a recent one to a bigger type, whichever costs less. Looking
// further back or at more candidates did not lower the cost of the
// benchmark batches; looking at none raised it by about 10%.
const (
	upgradeScan  = 32 // newest claims looked at for a cheaper upgrade
	upgradeEvals = 8  // of which at most this many are fully evaluated
)

// place puts pod p somewhere, or reports that nothing takes it.
func (s *solver) place(p *podState) bool {
	if p.volErr != nil {
		return false
	}
	// Real nodes first fit, in name order; of the in-flight ones, the
	// least wanted (initDemand).
	var inFlight *existingNode
	for _, e := range s.existing {
		if !e.usable || !fits(p.req, e.avail) || !p.hostOK(e.host) || (s.opts.Settling[e.node.Name] && s.opts.Moving[p.pod]) {
			continue
		}
		if inFlight != nil && e.demand >= inFlight.demand {
			continue
		}
		if s.evalExisting(e, p) != "" {
			continue
		}
		if !e.node.InFlight {
			s.commitExisting(e, p)
			return true
		}
		inFlight = e
	}
	if inFlight != nil {
		s.commitExisting(inFlight, p)
		return true
	}
	var ev claimEval
	// Phase one: the first open claim that takes the pod at no extra cost.
	probed := false
	for i := s.index.next(0, p.req); i >= 0; i = s.index.next(i+1, p.req) {
		c := s.claims[i]
		if !c.fitsSlack(p.req) || !p.hostOK(c.host) || !s.admits(p, c.t) {
			continue
		}
		if !s.noProbes {
			if !probed {
				s.probes, probed = s.zoneProbes(p, s.probes), true
			}
			if !s.mayKeepPrice(c, p, s.probes) {
				continue
			}
		}
		if s.evalClaim(c, p, &ev) && ev.price <= c.price {
			s.commitClaim(c, p, &ev)
			return true
		}
	}
	// Phase two: a new claim, or a recent claim grown to a bigger type when
	// that costs less.
	newT, newPrice := s.bestNewClaim(p)
	bestC, bestDelta := -1, 0.0
	evals := 0
	for i := len(s.claims) - 1; i >= 0 && i >= len(s.claims)-upgradeScan && evals < upgradeEvals; i-- {
		c := s.claims[i]
		if !p.hostOK(c.host) || !s.admits(p, c.t) {
			continue
		}
		if !s.evalClaim(c, p, &ev) {
			continue
		}
		evals++
		if d := ev.price - c.price; bestC < 0 || d < bestDelta {
			bestC, bestDelta = i, d
		}
	}
	grow := bestC >= 0 && bestDelta <= newPrice
	if !grow && s.fill && bestC >= 0 && newT != nil {
		grow = s.growsCheaper(p, s.claims[bestC], newT)
	}
	if newT == nil || grow {
		if bestC < 0 && newT == nil {
			// Phase three: any open claim at all, cheapest growth first.
			for i, c := range s.claims {
				if !p.hostOK(c.host) || !s.admits(p, c.t) || !s.evalClaim(c, p, &ev) {
					continue
				}
				if d := ev.price - c.price; bestC < 0 || d < bestDelta {
					bestC, bestDelta = i, d
				}
			}
		}
		if bestC >= 0 {
			c := s.claims[bestC]
			s.evalClaim(c, p, &ev)
			s.commitClaim(c, p, &ev)
			return true
		}
		return false
	}
	f := s.freshClaim(newT)
	s.evalClaim(f, p, &ev)
	s.openClaim(newT, p, &ev)
	return true
}

// growsCheaper reports whether growing claim c to the type that takes p
// buys room for the pods still queued at a lower price per pod than a new
// claim of template t: one pod's marginal price favours the
// smallest new node again and again, and every node pays its DaemonSets.
// Room is counted in copies of p, at most the pods left to place, and a
// burstable type's price per pod is at its best number of copies, credits
// included (a t4g.small holds one 300m pod at its baseline, six above it).
func (s *solver) growsCheaper(p *podState, c *claim, t *template) bool {
	var ev claimEval
	if !s.evalClaim(c, p, &ev) {
		return false
	}
	limit := int64(s.left) + 1
	grown := c.t.types[ev.order.idx[ev.pick]]
	room := s.scratchReq
	for i := range room {
		room[i] = grown.alloc[i] - c.req[i]
	}
	growPer := perPod(c.t, grown, ev.order.price[ev.pick]-c.price, c.req[dimCPU], p.req, copies(room, p.req, limit))
	f := s.freshClaim(t)
	if !s.evalClaim(f, p, &ev) {
		return false
	}
	fresh := t.types[ev.order.idx[ev.pick]]
	newPer := perPod(t, fresh, ev.order.price[ev.pick], 0, p.req, copies(fresh.alloc, p.req, limit))
	return growPer <= newPer
}

// perPod is the lowest $/h per copy of req, for 1..n copies, of paying
// fixed plus the credits type tt spends with baseCPU millicores of pods and
// the copies on it (burstable types); +Inf for no copies.
func perPod(t *template, tt *tType, fixed float64, baseCPU int64, req []int64, n int64) float64 {
	if n <= 0 {
		return math.Inf(1)
	}
	if !tt.credits.burstable() {
		return fixed / float64(n)
	}
	best := math.Inf(1)
	for k := int64(1); k <= n; k++ {
		best = min(best, (fixed+t.creditsAt(tt, baseCPU+k*req[dimCPU]))/float64(k))
	}
	return best
}

// copies is how many requests req fit in room, at most limit.
func copies(room, req []int64, limit int64) int64 {
	n := limit
	for i, r := range req {
		if r > 0 {
			n = min(n, room[i]/r)
		}
	}
	return n
}

// bestNewClaim returns the NodePool of the highest weight that can take the
// pod on a new claim, the cheapest among equal weights, and its price.
func (s *solver) bestNewClaim(p *podState) (*template, float64) {
	if s.opts.MaxNewNodeClaims >= 0 && len(s.claims) >= s.opts.MaxNewNodeClaims {
		return nil, 0
	}
	var ev claimEval
	var best *template
	bestPrice := 0.0
	for i, t := range s.templates {
		if best != nil && t.weight < best.weight {
			break
		}
		if t.nodesLeft == 0 {
			continue
		}
		f := s.freshClaim(t)
		if !p.hostOK(f.host) {
			continue
		}
		if s.evalClaim(f, p, &ev) {
			if best == nil || ev.price < bestPrice {
				best, bestPrice = s.templates[i], ev.price
			}
		} else if ev.why == whyReserved {
			// As Karpenter: a pod that waits for a NodePool's reserved
			// capacity does not fall back to NodePools after it.
			break
		}
	}
	return best, bestPrice
}

// relax drops the pod's next soft constraint, in Karpenter's order: extra
// required node-affinity terms, preferred pod affinity, preferred pod
// anti-affinity, preferred node affinity, ScheduleAnyway spreads, then
// tolerating PreferNoSchedule taints.
func (s *solver) relax(p *podState) bool {
	pod := p.cur
	if pod == p.pod {
		pod = p.pod.DeepCopy()
	}
	what := relaxPod(pod, s.tolerateSoft)
	if what == "" {
		return false
	}
	p.relaxations = append(p.relaxations, what)
	p.cur = pod
	s.refreshPod(p)
	return true
}

func (s *solver) resetRelaxation(p *podState) {
	p.relaxations = nil
	if p.cur == p.pod {
		return
	}
	p.cur = p.pod
	s.refreshPod(p)
}

func (s *solver) refreshPod(p *podState) {
	s.derive(p)
	before := len(s.topo.groups)
	p.owned = s.ownedGroups(p.cur)
	for _, g := range s.topo.groups[before:] {
		s.initLateGroup(g)
	}
	s.deriveHostChecks(p)
}

// initLateGroup prepares a group first seen after relaxation (its node
// filter changed): domains, bound pods, and which batch pods it selects.
func (s *solver) initLateGroup(g *group) {
	s.registerTemplateDomains(g)
	for _, n := range s.existing {
		if !g.filter.matches(n.taints, n.lookup) {
			continue
		}
		d := n.domainOf(s, g)
		if d < 0 {
			continue
		}
		if !n.node.InFlight {
			g.register(d)
		}
		for _, bp := range n.node.Pods {
			if !s.inBatch[bp.UID] && !ignoredForTopology(bp) && g.selects(bp) {
				g.record(d)
			}
		}
	}
	for _, q := range s.pods {
		if g.selects(q.pod) {
			q.selectedBy = append(q.selectedBy, g)
		}
	}
}

// relaxPod drops one soft constraint and says which, or returns "".
func relaxPod(pod *corev1.Pod, tolerateSoft bool) string {
	a := pod.Spec.Affinity
	if a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) > 1 {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms[1:]
			return "required node affinity term " + RequirementsFromNodeSelector(terms[0].MatchExpressions).String() + " (tried the next term)"
		}
	}
	if a != nil && a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		var t corev1.WeightedPodAffinityTerm
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, t = dropHeaviest(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		return fmt.Sprintf("preferred pod affinity on %s (weight %d)", t.PodAffinityTerm.TopologyKey, t.Weight)
	}
	if a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		var t corev1.WeightedPodAffinityTerm
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, t = dropHeaviest(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		return fmt.Sprintf("preferred pod anti-affinity on %s (weight %d)", t.PodAffinityTerm.TopologyKey, t.Weight)
	}
	if a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms := a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		sort.SliceStable(terms, func(i, j int) bool { return terms[i].Weight > terms[j].Weight })
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = terms[1:]
		return fmt.Sprintf("preferred node affinity %s (weight %d)", RequirementsFromNodeSelector(terms[0].Preference.MatchExpressions), terms[0].Weight)
	}
	for i, tsc := range pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			last := len(pod.Spec.TopologySpreadConstraints) - 1
			pod.Spec.TopologySpreadConstraints[i] = pod.Spec.TopologySpreadConstraints[last]
			pod.Spec.TopologySpreadConstraints = pod.Spec.TopologySpreadConstraints[:last]
			return fmt.Sprintf("ScheduleAnyway topology spread on %s (maxSkew %d)", tsc.TopologyKey, tsc.MaxSkew)
		}
	}
	if tolerateSoft {
		soft := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule}
		for i := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[i].MatchToleration(&soft) {
				return ""
			}
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, soft)
		return "the preference to avoid PreferNoSchedule taints"
	}
	return ""
}

func dropHeaviest(terms []corev1.WeightedPodAffinityTerm) ([]corev1.WeightedPodAffinityTerm, corev1.WeightedPodAffinityTerm) {
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].Weight > terms[j].Weight })
	return terms[1:], terms[0]
}

// results assembles the answer.
func (s *solver) results() *Results {
	r := &Results{Existing: map[string][]*corev1.Pod{}}
	for _, e := range s.existing {
		if len(e.placed) > 0 {
			r.Existing[e.node.Name] = e.placed
		}
	}
	for _, c := range s.claims {
		n, why := s.finalize(c)
		if n == nil {
			for _, p := range c.pods {
				r.Unschedulable = append(r.Unschedulable, PodError{Pod: p.pod, Reason: why})
			}
			continue
		}
		r.NewNodeClaims = append(r.NewNodeClaims, n)
	}
	for _, p := range s.pods {
		if !p.placed {
			if p.resvBlocked {
				r.Unschedulable = append(r.Unschedulable, PodError{Pod: p.pod, ReservedDeferred: true,
					Reason: "left for the next pass: the reserved capacity it can use is held by the NodeClaims of this one"})
				continue
			}
			r.Unschedulable = append(r.Unschedulable, PodError{Pod: p.pod, Reason: s.diagnose(p)})
		}
	}
	return r
}
