// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to the instance
// types a simulation prices and fits pods with, and says which overlays hold.
package overlay

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Input is what the overlays are applied to.
type Input struct {
	// Classes are the instance types of each EC2NodeClass by name. They may
	// be shared with other callers and are never modified.
	Classes map[string][]*scheduling.InstanceType
	// Pools are the NodePools. As in Karpenter, overlays are evaluated
	// through each NodePool (an overlay may select by karpenter.sh/nodepool
	// and by the labels of a pool's template), so pools that share a class
	// may see its types differently.
	Pools []*karpv1.NodePool
	// Overlays in any order; Apply orders them by weight.
	Overlays []*v1alpha1.NodeOverlay
}

// Outcome is what became of one overlay: the ValidationSucceeded condition
// it earns.
type Outcome struct {
	// Applied is false when the overlay is invalid or conflicts; it then
	// changed nothing at all (an overlay is applied whole or not at all).
	Applied bool
	// Reason and Message explain a false Applied.
	Reason, Message string
	// Types counts the instance types (per class) it selected through
	// any NodePool.
	Types int
}

// Changes say which overlay set what on one instance type of one class.
type Changes struct {
	// Price is the overlay whose price or priceAdjustment each offering
	// got, by OfferingKey.
	Price map[string]string
	// Capacity is the overlay that added each extended resource.
	Capacity map[corev1.ResourceName]string
}

// OfferingKey names an offering of a type in Changes.Price.
func OfferingKey(zone, capacityType string) string { return zone + "/" + capacityType }

// Result is the overlaid instance types and the outcome of each overlay.
type Result struct {
	// Pools has, by NodePool name, the instance types as each NodePool
	// whose class is in Input.Classes sees them. A type no overlay changed
	// for that pool is the input's; a changed one is a copy (offerings,
	// capacity and allocatable copied). Pools that see a class alike share
	// one slice.
	Pools map[string][]*scheduling.InstanceType
	// Classes has the keys of Input.Classes: the types as every NodePool
	// of the class sees them when they all agree, else (and for a class no
	// NodePool uses) the input's slice. PoolTypes gives the pools that
	// disagree.
	Classes map[string][]*scheduling.InstanceType
	// Overlays maps each overlay's name to its outcome.
	Overlays map[string]Outcome
	// Changes maps a NodePool and a type name to what overlays changed on
	// it.
	Changes map[string]map[string]*Changes
	// divergent holds, by class then NodePool, the types of the pools
	// that do not see the class as Classes has it.
	divergent map[string]map[string][]*scheduling.InstanceType
}

// PriceOverlay names the overlay that set the price of an offering of a
// type as a NodePool sees it, or "".
func (r Result) PriceOverlay(pool, instanceType, zone, capacityType string) string {
	if c := r.Changes[pool][instanceType]; c != nil {
		return c.Price[OfferingKey(zone, capacityType)]
	}
	return ""
}

// PoolTypes returns the NodePools of a class whose types differ from
// Classes[class] (an overlay selected some of the class's pools only),
// with their types; nil when they all agree.
func (r Result) PoolTypes(class string) map[string][]*scheduling.InstanceType {
	return r.divergent[class]
}

// NodeClasses returns classes with each class's types overlaid: its
// InstanceTypes are Classes[name] and its Pools are PoolTypes(name). The
// input is not modified; a class not in Classes is kept as it is.
func (r Result) NodeClasses(classes map[string]*scheduling.NodeClass) map[string]*scheduling.NodeClass {
	out := make(map[string]*scheduling.NodeClass, len(classes))
	for name, c := range classes {
		types, ok := r.Classes[name]
		if c == nil || !ok {
			out[name] = c
			continue
		}
		cp := *c
		cp.InstanceTypes, cp.Pools = types, r.divergent[name]
		out[name] = &cp
	}
	return out
}

// Order sorts overlays as Karpenter applies them: higher weight first (no
// weight is 0) and, among equal weights, by name descending.
func Order(overlays []*v1alpha1.NodeOverlay) []*v1alpha1.NodeOverlay {
	out := slices.Clone(overlays)
	sort.SliceStable(out, func(i, j int) bool {
		wi, wj := weight(out[i]), weight(out[j])
		if wi != wj {
			return wi > wj
		}
		return out[i].Name > out[j].Name
	})
	return out
}

func weight(o *v1alpha1.NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

// match is one instance type an overlay selects through one NodePool,
// with the offerings it selects.
type match struct {
	pool, class, name string
	typ               int
	offs              []int
}

// Apply applies the overlays as Karpenter's nodeoverlay controller and
// instance type store do: through each NodePool (its name and template
// labels with its class's types), in weight order, the first overlay to set
// an offering's price or an extended resource of a type wins it; an overlay
// that would set one that an overlay of the same weight set before it (on
// any NodePool) conflicts and is applied nowhere; an invalid overlay is
// applied nowhere. A class no NodePool uses is not evaluated (Karpenter
// only evaluates NodePools). Apply is pure and never modifies its input.
func Apply(in Input) Result {
	res := Result{Classes: map[string][]*scheduling.InstanceType{}, Pools: map[string][]*scheduling.InstanceType{},
		Overlays: map[string]Outcome{}, Changes: map[string]map[string]*Changes{}}
	var pools []*karpv1.NodePool
	for _, np := range in.Pools {
		if np == nil || np.Spec.Template.Spec.NodeClassRef == nil {
			continue
		}
		if _, ok := in.Classes[np.Spec.Template.Spec.NodeClassRef.Name]; !ok {
			// Karpenter cannot read the types of a pool whose class is
			// missing: the pool is not evaluated and the others go on.
			continue
		}
		pools = append(pools, np)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })

	st := store{prices: map[offeringKey]*priceClaim{}, caps: map[typeKey]*capClaim{}}
	for _, o := range Order(in.Overlays) {
		if err := Validate(o); err != nil {
			res.Overlays[o.Name] = Outcome{Reason: v1alpha1.ReasonRuntimeValidation, Message: err.Error()}
			continue
		}
		reqs := requirementsOf(o)
		var matches []match
		for _, np := range pools {
			class := np.Spec.Template.Spec.NodeClassRef.Name
			for ti, it := range in.Classes[class] {
				if offs := offeringsFor(it, reqs, np); len(offs) > 0 {
					matches = append(matches, match{pool: np.Name, class: class, typ: ti, name: it.Name, offs: offs})
				}
			}
		}
		// Validate every match before storing any: an overlay is applied
		// whole or not at all.
		change := priceChange(o)
		if slices.ContainsFunc(matches, func(m match) bool { return st.conflicts(o, change, m) }) {
			res.Overlays[o.Name] = Outcome{Reason: v1alpha1.ReasonConflict, Message: "conflict with another overlay"}
			continue
		}
		selected := map[[2]string]bool{}
		for _, m := range matches {
			st.store(o, change, m)
			selected[[2]string{m.class, m.name}] = true
		}
		res.Overlays[o.Name] = Outcome{Applied: true, Types: len(selected)}
	}
	st.build(in, pools, &res)
	return res
}

// offeringKey names an offering (by index) of a type (by index in its
// class) as a NodePool sees it; typeKey the type.
type offeringKey struct {
	pool     string
	typ, off int
}

type typeKey struct {
	pool string
	typ  int
}

// priceClaim is the overlay that set an offering's price and the weight
// of the last overlay that selected it (Karpenter's priceUpdate).
type priceClaim struct {
	overlay, change string
	lowest          int32
}

// capClaim is what overlays set on a type's capacity: the first to set
// each resource wins it; the last overlay to set any, and its weight,
// decide a conflict (Karpenter's capacityUpdate).
type capClaim struct {
	won       map[corev1.ResourceName]capWin
	lowestRes corev1.ResourceList
	lowest    int32
}

type capWin struct {
	overlay string
	q       resource.Quantity
}

// store is Karpenter's internalInstanceTypeStore: what the overlays
// applied so far set, per NodePool. Overlays come in weight order, so the
// weight last recorded is the lowest so far.
type store struct {
	prices map[offeringKey]*priceClaim
	caps   map[typeKey]*capClaim
}

// conflicts reports whether an overlay would set, on a match, what an
// overlay of its weight set before it: a price of one of its offerings, or
// a resource the last overlay to set the type's capacity set.
func (s *store) conflicts(o *v1alpha1.NodeOverlay, change string, m match) bool {
	w := weight(o)
	if change != "" {
		for _, oi := range m.offs {
			if c := s.prices[offeringKey{m.pool, m.typ, oi}]; c != nil && c.lowest == w {
				return true
			}
		}
	}
	if c := s.caps[typeKey{m.pool, m.typ}]; o.Spec.Capacity != nil && c != nil && c.lowest == w {
		for name := range o.Spec.Capacity {
			if _, ok := c.lowestRes[name]; ok {
				return true
			}
		}
	}
	return false
}

func (s *store) store(o *v1alpha1.NodeOverlay, change string, m match) {
	w := weight(o)
	if change != "" {
		for _, oi := range m.offs {
			k := offeringKey{m.pool, m.typ, oi}
			if c := s.prices[k]; c != nil {
				c.lowest = w
				continue
			}
			s.prices[k] = &priceClaim{overlay: o.Name, change: change, lowest: w}
		}
	}
	if o.Spec.Capacity == nil {
		return
	}
	k := typeKey{m.pool, m.typ}
	c := s.caps[k]
	if c == nil {
		c = &capClaim{won: map[corev1.ResourceName]capWin{}}
		s.caps[k] = c
	}
	for name, q := range o.Spec.Capacity {
		if _, won := c.won[name]; !won {
			c.won[name] = capWin{overlay: o.Name, q: q.DeepCopy()}
		}
	}
	c.lowestRes, c.lowest = o.Spec.Capacity, w
}

// touch is what the overlays set on one type as one NodePool sees it.
type touch struct {
	prices map[int]*priceClaim
	caps   map[corev1.ResourceName]capWin
}

// build makes each NodePool's types from what was stored, copying only
// the types something was set on; pools of a class that saw the same
// overlays set the same things share one slice.
func (s *store) build(in Input, pools []*karpv1.NodePool, res *Result) {
	touched := map[string]map[int]*touch{}
	at := func(pool string, typ int) *touch {
		if touched[pool] == nil {
			touched[pool] = map[int]*touch{}
		}
		t := touched[pool][typ]
		if t == nil {
			t = &touch{prices: map[int]*priceClaim{}, caps: map[corev1.ResourceName]capWin{}}
			touched[pool][typ] = t
		}
		return t
	}
	for k, c := range s.prices {
		at(k.pool, k.typ).prices[k.off] = c
	}
	for k, c := range s.caps {
		maps.Copy(at(k.pool, k.typ).caps, c.won)
	}

	type built struct {
		types   []*scheduling.InstanceType
		changes map[string]*Changes
	}
	bySig := map[string]map[string]built{} // class -> signature -> view
	sigOf := map[string]string{}
	poolsOf := map[string][]string{}
	for _, np := range pools {
		class := np.Spec.Template.Spec.NodeClassRef.Name
		sig := signature(touched[np.Name])
		if bySig[class] == nil {
			bySig[class] = map[string]built{}
		}
		b, ok := bySig[class][sig]
		if !ok {
			b.types, b.changes = overlaid(in.Classes[class], touched[np.Name])
			bySig[class][sig] = b
		}
		res.Pools[np.Name] = b.types
		if len(b.changes) > 0 {
			res.Changes[np.Name] = b.changes
		}
		sigOf[np.Name] = sig
		poolsOf[class] = append(poolsOf[class], np.Name)
	}
	for class, types := range in.Classes {
		res.Classes[class] = types
		if len(bySig[class]) == 1 {
			for _, b := range bySig[class] {
				res.Classes[class] = b.types
			}
			continue
		}
		// The pools disagree: the class keeps the types as no overlay
		// changed them, and each pool that differs is listed.
		base, baseSeen := bySig[class][""]
		for _, pool := range poolsOf[class] {
			if baseSeen && sigOf[pool] == "" {
				continue
			}
			if res.divergent == nil {
				res.divergent = map[string]map[string][]*scheduling.InstanceType{}
			}
			if res.divergent[class] == nil {
				res.divergent[class] = map[string][]*scheduling.InstanceType{}
			}
			res.divergent[class][pool] = res.Pools[pool]
		}
		if baseSeen {
			res.Classes[class] = base.types
		}
	}
}

// signature names what overlays set on a pool's types, so that pools that
// saw the same get the same view; "" when nothing was set.
func signature(ts map[int]*touch) string {
	var parts []string
	for typ, t := range ts {
		for off, c := range t.prices {
			parts = append(parts, fmt.Sprintf("%d/p%d=%s", typ, off, c.overlay))
		}
		for name, w := range t.caps {
			parts = append(parts, fmt.Sprintf("%d/c%s=%s", typ, name, w.overlay))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// overlaid copies the types something was set on and applies it; the
// others, and the slice when nothing was set, are the input's.
func overlaid(types []*scheduling.InstanceType, ts map[int]*touch) ([]*scheduling.InstanceType, map[string]*Changes) {
	if len(ts) == 0 {
		return types, nil
	}
	out := slices.Clone(types)
	changes := map[string]*Changes{}
	for i, t := range ts {
		it := types[i]
		cp := *it
		ch := &Changes{}
		if len(t.prices) > 0 {
			cp.Offerings = slices.Clone(it.Offerings)
			ch.Price = map[string]string{}
			for oi, c := range t.prices {
				off := &cp.Offerings[oi]
				off.Price = AdjustedPrice(off.Price, c.change)
				ch.Price[OfferingKey(off.Zone, off.CapacityType)] = c.overlay
			}
		}
		if len(t.caps) > 0 {
			cp.Capacity, cp.Allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
			if cp.Capacity == nil {
				cp.Capacity = corev1.ResourceList{}
			}
			if cp.Allocatable == nil {
				cp.Allocatable = corev1.ResourceList{}
			}
			ch.Capacity = map[corev1.ResourceName]string{}
			// Extended resources have no kubelet overhead: what the node
			// has, pods may use.
			for name, w := range t.caps {
				cp.Capacity[name], cp.Allocatable[name] = w.q.DeepCopy(), w.q.DeepCopy()
				ch.Capacity[name] = w.overlay
			}
		}
		out[i] = &cp
		changes[it.Name] = ch
	}
	return out, changes
}

func priceChange(o *v1alpha1.NodeOverlay) string {
	if o.Spec.Price != nil {
		return *o.Spec.Price
	}
	if o.Spec.PriceAdjustment != nil {
		return *o.Spec.PriceAdjustment
	}
	return ""
}

func requirementsOf(o *v1alpha1.NodeOverlay) scheduling.Requirements {
	exprs := make([]corev1.NodeSelectorRequirement, 0, len(o.Spec.Requirements))
	for _, r := range o.Spec.Requirements {
		exprs = append(exprs, r.AsNodeSelectorRequirement())
	}
	return scheduling.RequirementsFromNodeSelector(exprs)
}

// offeringsFor is Karpenter's getOverlaidOfferings: the type must be
// compatible with the requirements (a key the type does not define fails
// unless the requirement allows its absence), then the offerings whose zone
// and capacity type the requirements allow are selected.
func offeringsFor(it *scheduling.InstanceType, reqs scheduling.Requirements, np *karpv1.NodePool) []int {
	for _, k := range reqs.Keys() {
		want := reqs[k]
		switch k {
		case wellknown.ZoneLabel, wellknown.CapacityTypeLabel:
			if !slices.ContainsFunc(it.Offerings, func(o scheduling.Offering) bool { return want.Has(offeringValue(o, k)) }) {
				return nil
			}
			continue
		}
		if _, set := np.Spec.Template.Labels[k]; !set && k != wellknown.NodePoolLabel {
			if _, choice := it.LabelChoices[k]; choice {
				// A node of the type may get any of the choices
				// (instance-tenancy): the type matches when one does.
				if !it.LabelMatches(want) {
					return nil
				}
				continue
			}
		}
		v, ok := it.Labels[k]
		if k == wellknown.NodePoolLabel {
			v, ok = np.Name, true
		} else if lv, set := np.Spec.Template.Labels[k]; set {
			if ok && lv != v {
				// The pool's label and the type's own intersect in
				// nothing: no value can match.
				return nil
			}
			v, ok = lv, true
		}
		if !want.Matches(v, ok) {
			return nil
		}
	}
	zones, cts := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	var out []int
	for i, o := range it.Offerings {
		if zones.Has(o.Zone) && cts.Has(o.CapacityType) {
			out = append(out, i)
		}
	}
	return out
}

func offeringValue(o scheduling.Offering, key string) string {
	if key == wellknown.ZoneLabel {
		return o.Zone
	}
	return o.CapacityType
}
