package scheduling

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Capacity types, in the order the AWS launch prefers them.
const (
	ctReserved = iota
	ctSpot
	ctOnDemand
	numCT
)

var ctNames = [numCT]string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand}

func ctIndex(name string) int {
	for i, n := range ctNames {
		if n == name {
			return i
		}
	}
	return -1
}

const allCT = uint8(1<<numCT - 1)

// tType is an instance type as one NodePool sees it.
type tType struct {
	it *InstanceType
	// alloc is allocatable minus the overhead of the DaemonSets that would
	// run on this type in this NodePool.
	alloc  []int64
	cap    []int64
	group  int
	pos    int // in template.types
	exotic bool
	// zones per capacity type where an available offering exists, within the
	// zones the NodePool allows.
	zones [numCT]uint64
	// price per capacity type and zone, +Inf when there is no offering.
	price []float64
	// resv are its available reserved offerings in the NodePool's zones.
	resv []resvOffer
	// credits prices the surplus CPU credits of a burstable type.
	credits creditModel
}

// creditsAt is the $/h of surplus credits a node of this type spends with
// podsCPU millicores of pods on it, plus its DaemonSets' requests.
func (t *template) creditsAt(tt *tType, podsCPU int64) float64 {
	if !tt.credits.burstable() {
		return 0
	}
	return tt.credits.hourly(podsCPU + t.groups[tt.group].overhead[dimCPU])
}

// resvOffer is a reserved offering of a type: its zone (index) and
// reservation.
type resvOffer struct {
	zone int
	o    *Offering
}

func (t *tType) priceIn(zm uint64, ctm uint8, nz int) float64 {
	best := math.Inf(1)
	for ct := 0; ct < numCT; ct++ {
		if ctm&(1<<ct) == 0 {
			continue
		}
		m := t.zones[ct] & zm
		for m != 0 {
			z := trailing(m)
			if p := t.price[ct*nz+z]; p < best {
				best = p
			}
			m &= m - 1
		}
	}
	return best
}

// daemonGroup is the DaemonSet overhead shared by a set of instance types.
type daemonGroup struct {
	overhead []int64
	ports    []hostPort
}

type orderKey struct {
	zm  uint64
	ctm uint8
}

// priceOrder lists a template's types that have an offering under some zone
// and capacity-type masks, cheapest first, exotic types after all others.
type priceOrder struct {
	idx   []int32
	price []float64
	// most is, per block of orderBlock positions, the largest allocatable
	// of its types in each dimension (dims wide each): a search for the
	// first type that holds a request skips the blocks that cannot. A GPU
	// pod tried on a NodePool without GPUs skips them all, and a large pod
	// on a new claim most of the cheaper, smaller types.
	most []int64
	// least is, per block, the smallest allocatable of its types in each
	// dimension: a request that fits it fits every type of the block.
	least []int64
	dims  int
	// plain is the number of types that are not exotic: they come first.
	plain int
}

// atLeast returns the first position whose price is at least p, among the
// exotic types (which come after all others) when exotic is set, else
// among the others.
func (o *priceOrder) atLeast(p float64, exotic bool) int {
	lo, hi := 0, o.plain
	if exotic {
		lo, hi = o.plain, len(o.idx)
	}
	return lo + sort.SearchFloat64s(o.price[lo:hi], p)
}

// orderBlock is the number of positions of a price order summarized in
// one block of priceOrder.most.
const orderBlock = 16

// from returns the first position at or after i whose block may hold req,
// or len(o.idx).
func (o *priceOrder) from(i int, req []int64) int {
	for i < len(o.idx) {
		b := i / orderBlock
		if fits(req, o.most[b*o.dims:(b+1)*o.dims]) {
			return i
		}
		i = (b + 1) * orderBlock
	}
	return len(o.idx)
}

// block returns the positions of block b, and whether req may fit some
// type of it (most) and fits all of them (least).
func (o *priceOrder) block(b int, req []int64) (lo, hi int, some, all bool) {
	lo, hi = b*orderBlock, min((b+1)*orderBlock, len(o.idx))
	some = fits(req, o.most[b*o.dims:(b+1)*o.dims])
	all = some && fits(req, o.least[b*o.dims:(b+1)*o.dims])
	return lo, hi, some, all
}

// template is a usable NodePool with its NodeClass's instance types.
type template struct {
	idx    int
	np     *karpv1.NodePool
	name   string
	weight int32
	class  *NodeClass
	// reqs are the NodePool requirements and template labels (as In), plus
	// the nodepool and nodeclass labels.
	reqs Requirements
	// base is reqs without zone and capacity type, which live in masks.
	base    Requirements
	labels  map[string]string
	taints  []corev1.Taint
	startup []corev1.Taint
	types   []*tType
	all     bitset
	zm      uint64
	ctm     uint8
	zoneC   bool
	ctC     bool
	groups  []daemonGroup

	hasLimits bool
	limits    []int64 // -1 where unlimited
	remaining []int64
	nodesLeft int64 // -1 unlimited

	minValueKeys []string
	zoneRank     []int
	zoneNames    []string
	byName       []int32 // type positions sorted by name

	orders   map[orderKey]*priceOrder
	compiled map[int32]*compiled
	// resvTypes are the positions of the types with reserved offerings.
	resvTypes []int32
}

// compiled is a pod's requirement set evaluated against one template.
type compiled struct {
	fail  *Incompatibility
	mask  bitset // nil: every type
	zm    uint64
	zoneC bool
	ctm   uint8
	ctC   bool
	rest  Requirements // keys other than zone, capacity type and hostname
	host  *Requirement
}

func trailing(m uint64) int { return bits.TrailingZeros64(m) }

// typeKeys are the label keys whose value is fixed by the instance type.
func (s *solver) isTypeKey(k string) bool { return s.typeKeys[k] }

func (s *solver) initTypeKeys() {
	s.typeKeys, s.choiceKeys = map[string]bool{}, nil
	for _, k := range catalog.LabelKeys() {
		s.typeKeys[k] = true
	}
	for _, nc := range s.snap.NodeClasses {
		if nc == nil {
			continue
		}
		for _, it := range nc.InstanceTypes {
			for k := range it.Labels {
				s.typeKeys[k] = true
			}
			for k := range it.LabelChoices {
				s.typeKeys[k] = true
				if s.choiceKeys == nil {
					s.choiceKeys = map[string]bool{}
				}
				s.choiceKeys[k] = true
			}
		}
	}
	for _, k := range []string{wellknown.ZoneLabel, wellknown.CapacityTypeLabel, wellknown.HostnameLabel} {
		delete(s.typeKeys, k)
	}
}

// skippedPool is a NodePool that cannot launch, and why.
type skippedPool struct {
	name, why string
}

func (s *solver) buildTemplates() {
	pools := slices.Clone(s.snap.NodePools)
	sort.SliceStable(pools, func(i, j int) bool {
		wi, wj := weightOf(pools[i]), weightOf(pools[j])
		if wi != wj {
			return wi > wj
		}
		return pools[i].Name < pools[j].Name
	})
	for _, np := range pools {
		if np == nil {
			continue
		}
		if np.DeletionTimestamp != nil {
			s.skipped = append(s.skipped, skippedPool{np.Name, "is being deleted"})
			continue
		}
		if np.Spec.Replicas != nil {
			s.skipped = append(s.skipped, skippedPool{np.Name, "is static (spec.replicas) and does not provision for pending pods"})
			continue
		}
		if err := poolstatus.Usable(np); err != nil {
			// Not Ready, or another provider's: Karpenter provisions
			// nothing with it.
			s.skipped = append(s.skipped, skippedPool{np.Name, fmt.Sprintf("is not ready: %v", err)})
			continue
		}
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			s.skipped = append(s.skipped, skippedPool{np.Name, "has no nodeClassRef"})
			continue
		}
		class := s.snap.NodeClasses[ref.Name]
		if class == nil {
			s.skipped = append(s.skipped, skippedPool{np.Name, fmt.Sprintf("references EC2NodeClass %s, which does not exist", ref.Name)})
			continue
		}
		if !class.Ready {
			s.skipped = append(s.skipped, skippedPool{np.Name, fmt.Sprintf("uses EC2NodeClass %s, which is not ready", ref.Name)})
			continue
		}
		t := s.newTemplate(np, class.ForPool(np.Name))
		if len(t.types) == 0 {
			// Karpenter's words lead, so the event reads as it does there.
			s.skipped = append(s.skipped, skippedPool{np.Name, fmt.Sprintf("launches nothing: nodepool requirements filtered out all available instance types (none of EC2NodeClass %s meets %s with an available offering)", class.Name, t.reqs)})
			continue
		}
		t.idx = len(s.templates)
		s.templates = append(s.templates, t)
	}
}

func weightOf(np *karpv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func (s *solver) newTemplate(np *karpv1.NodePool, class *NodeClass) *template {
	t := &template{
		np:        np,
		name:      np.Name,
		weight:    weightOf(np),
		class:     class,
		taints:    np.Spec.Template.Spec.Taints,
		startup:   np.Spec.Template.Spec.StartupTaints,
		orders:    map[orderKey]*priceOrder{},
		compiled:  map[int32]*compiled{},
		zoneNames: s.zones,
	}
	t.labels = map[string]string{}
	for k, v := range np.Spec.Template.Labels {
		t.labels[k] = v
	}
	t.labels[wellknown.NodePoolLabel] = np.Name
	t.labels[wellknown.EC2NodeClassLabel] = class.Name
	t.reqs = RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)
	t.reqs.AddAll(RequirementsFromLabels(t.labels))
	t.base = t.reqs.Copy()
	delete(t.base, wellknown.ZoneLabel)
	delete(t.base, wellknown.CapacityTypeLabel)
	for _, k := range t.reqs.Keys() {
		if t.reqs[k].MinValues != nil {
			t.minValueKeys = append(t.minValueKeys, k)
		}
	}
	t.zm, t.zoneC = s.zoneMask(t.reqs)
	t.ctm, t.ctC = ctMask(t.reqs)

	// Instance types that meet the NodePool's requirements and have an
	// available offering it allows.
	nz := len(s.zones)
	var typeReqs []*Requirement
	for _, k := range t.reqs.Keys() {
		if s.isTypeKey(k) {
			typeReqs = append(typeReqs, t.reqs[k])
		}
	}
	for _, it := range class.InstanceTypes {
		if it == nil || !labelsMatch(it, typeReqs) {
			continue
		}
		tt := &tType{it: it, exotic: isExotic(it), price: make([]float64, numCT*nz), credits: newCreditModel(it)}
		for i := range tt.price {
			tt.price[i] = math.Inf(1)
		}
		for oi := range it.Offerings {
			o := &it.Offerings[oi]
			ct := ctIndex(o.CapacityType)
			z, ok := s.zoneIdx[o.Zone]
			if !o.Available || ct < 0 || !ok || !maskHas(t.zm, z) || t.ctm&(1<<ct) == 0 {
				continue
			}
			if !OfferingMatchesReservation(t.reqs[wellknown.CapacityReservationIDLabel], o) {
				continue
			}
			if o.CapacityType == wellknown.CapacityTypeReserved {
				tt.resv = append(tt.resv, resvOffer{zone: z, o: o})
			}
			tt.zones[ct] |= 1 << uint(z)
			if o.Price < tt.price[ct*nz+z] {
				tt.price[ct*nz+z] = o.Price
			}
		}
		if tt.zones[0]|tt.zones[1]|tt.zones[2] == 0 {
			continue
		}
		tt.alloc = s.d.vec(it.Allocatable)
		tt.cap = s.d.vec(it.Capacity)
		if it.Capacity == nil {
			tt.cap = slices.Clone(tt.alloc)
		}
		if len(tt.resv) > 0 {
			t.resvTypes = append(t.resvTypes, int32(len(t.types)))
		}
		tt.pos = len(t.types)
		t.types = append(t.types, tt)
	}
	t.all = fullBitset(len(t.types))
	t.byName = make([]int32, len(t.types))
	for i := range t.byName {
		t.byName[i] = int32(i)
	}
	sort.Slice(t.byName, func(a, b int) bool { return t.types[t.byName[a]].it.Name < t.types[t.byName[b]].it.Name })
	s.buildDaemonGroups(t)
	s.initLimits(t)
	t.zoneRank = s.rankZones(t)
	return t
}

func labelsMatch(it *InstanceType, reqs []*Requirement) bool {
	for _, r := range reqs {
		if !it.LabelMatches(r) {
			return false
		}
	}
	return true
}

// zoneMask converts the zone requirement of reqs to a mask over known zones.
func (s *solver) zoneMask(reqs Requirements) (uint64, bool) {
	r, ok := reqs[wellknown.ZoneLabel]
	if !ok {
		return s.allZones, false
	}
	var m uint64
	for i, z := range s.zones {
		if r.Has(z) {
			m |= 1 << uint(i)
		}
	}
	return m, true
}

func ctMask(reqs Requirements) (uint8, bool) {
	r, ok := reqs[wellknown.CapacityTypeLabel]
	if !ok {
		return allCT, false
	}
	var m uint8
	for i, n := range ctNames {
		if r.Has(n) {
			m |= 1 << i
		}
	}
	return m, true
}

// rankZones orders zones by how cheap this template's types are there, to
// break ties between equally good topology domains in favour of price.
func (s *solver) rankZones(t *template) []int {
	nz := len(s.zones)
	score := make([]float64, nz)
	for _, tt := range t.types {
		best := math.Inf(1)
		for z := 0; z < nz; z++ {
			best = min(best, tt.priceIn(1<<uint(z), t.ctm, nz))
		}
		if math.IsInf(best, 1) || best == 0 {
			continue
		}
		for z := 0; z < nz; z++ {
			p := tt.priceIn(1<<uint(z), t.ctm, nz)
			if math.IsInf(p, 1) {
				score[z] += 4
			} else {
				score[z] += p / best
			}
		}
	}
	order := make([]int, nz)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return score[order[i]] < score[order[j]] })
	rank := make([]int, nz)
	for r, z := range order {
		rank[z] = r
	}
	return rank
}

// order returns the template's price order under the given masks.
func (t *template) order(s *solver, zm uint64, ctm uint8) *priceOrder {
	key := orderKey{zm, ctm}
	if o, ok := t.orders[key]; ok {
		return o
	}
	nz := len(s.zones)
	type entry struct {
		i      int32
		p      float64
		exotic bool
	}
	var es []entry
	for i, tt := range t.types {
		p := tt.priceIn(zm, ctm, nz)
		if math.IsInf(p, 1) {
			continue
		}
		es = append(es, entry{int32(i), p, tt.exotic})
	}
	sort.SliceStable(es, func(a, b int) bool {
		if es[a].exotic != es[b].exotic {
			return !es[a].exotic
		}
		if es[a].p != es[b].p {
			return es[a].p < es[b].p
		}
		return t.types[es[a].i].it.Name < t.types[es[b].i].it.Name
	})
	n := s.d.n()
	o := &priceOrder{idx: make([]int32, len(es)), price: make([]float64, len(es)), dims: n}
	o.most = make([]int64, (len(es)+orderBlock-1)/orderBlock*n)
	o.least = make([]int64, len(o.most))
	for i := range o.most {
		o.most[i], o.least[i] = math.MinInt64, math.MaxInt64
	}
	for i, e := range es {
		o.idx[i], o.price[i] = e.i, e.p
		if !e.exotic {
			o.plain++
		}
		m, l := o.most[i/orderBlock*n:], o.least[i/orderBlock*n:]
		for d, a := range t.types[e.i].alloc {
			m[d], l[d] = max(m[d], a), min(l[d], a)
		}
	}
	t.orders[key] = o
	return o
}

// compile evaluates a pod requirement set against the template.
func (t *template) compile(s *solver, id int32) *compiled {
	if c, ok := t.compiled[id]; ok {
		return c
	}
	reqs := s.reqSets[id]
	c := &compiled{zm: t.zm, ctm: t.ctm, rest: Requirements{}}
	for k, r := range reqs {
		switch k {
		case wellknown.ZoneLabel, wellknown.CapacityTypeLabel:
		case wellknown.HostnameLabel:
			c.host = r
		default:
			c.rest[k] = r
		}
	}
	if inc := t.base.Compatible(c.rest, IsWellKnown); inc != nil {
		c.fail = inc
		t.compiled[id] = c
		return c
	}
	if r, ok := reqs[wellknown.ZoneLabel]; ok {
		if h, ok := t.reqs[wellknown.ZoneLabel]; ok && !h.HasIntersection(r) {
			c.fail = &Incompatibility{Key: r.Key, Have: h, Want: r}
		}
		m, _ := s.zoneMask(reqs)
		c.zm &= m
		c.zoneC = true
		if c.zm == 0 && c.fail == nil {
			c.fail = &Incompatibility{Key: r.Key, Have: t.reqs.Get(wellknown.ZoneLabel), Want: r}
		}
	}
	if r, ok := reqs[wellknown.CapacityTypeLabel]; ok {
		m, _ := ctMask(reqs)
		c.ctm &= m
		c.ctC = true
		if c.ctm == 0 && c.fail == nil {
			c.fail = &Incompatibility{Key: r.Key, Have: t.reqs.Get(wellknown.CapacityTypeLabel), Want: r}
		}
	}
	var typeReqs []*Requirement
	for _, k := range c.rest.Keys() {
		if s.isTypeKey(k) {
			typeReqs = append(typeReqs, c.rest[k])
		}
	}
	if len(typeReqs) > 0 {
		c.mask = newBitset(len(t.types))
		for i, tt := range t.types {
			if labelsMatch(tt.it, typeReqs) {
				c.mask.set(i)
			}
		}
	}
	t.compiled[id] = c
	return c
}

// initLimits computes what is left of the NodePool's limits after the
// capacity of its existing and in-flight nodes.
func (s *solver) initLimits(t *template) {
	lim := t.np.Spec.Limits
	t.nodesLeft = -1
	if len(lim) == 0 {
		return
	}
	t.hasLimits = true
	t.limits = make([]int64, s.d.n())
	for i := range t.limits {
		t.limits[i] = -1
	}
	for name, q := range lim {
		if name == wellknown.ResourceNodes {
			t.nodesLeft = q.Value()
			continue
		}
		i, ok := s.d.index[name]
		if !ok {
			continue
		}
		if i == dimCPU {
			t.limits[i] = q.MilliValue()
		} else {
			t.limits[i] = q.Value()
		}
	}
	t.remaining = slices.Clone(t.limits)
	for _, n := range s.snap.Nodes {
		if n == nil || n.NodePool != t.name || n.Deleting {
			continue
		}
		c := n.Capacity
		if c == nil {
			c = n.Allocatable
		}
		v := s.d.vec(c)
		for i := range t.remaining {
			if t.limits[i] >= 0 {
				t.remaining[i] -= v[i]
			}
		}
		if t.nodesLeft >= 0 {
			t.nodesLeft--
		}
	}
}

// withinLimits reports whether a type's capacity fits what is left of the
// limits plus budget (a claim's own reservation).
func (t *template) withinLimits(tt *tType, budget []int64) bool {
	if !t.hasLimits {
		return true
	}
	for i, l := range t.limits {
		if l < 0 {
			continue
		}
		left := t.remaining[i]
		if budget != nil {
			left += budget[i]
		}
		if tt.cap[i] > left {
			return false
		}
	}
	return true
}
