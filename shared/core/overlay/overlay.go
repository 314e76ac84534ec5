// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to the instance
// types a simulation prices and fits pods with, and says which overlays hold.
package overlay

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// ReasonSharedNodeClass is a Karpless-only reason of ValidationSucceeded
// False: the overlay selects some NodePools but not others that share an
// EC2NodeClass. Karpless keeps instance types per EC2NodeClass, not per
// NodePool as Karpenter does, so it cannot apply the overlay to one pool's
// view of the class only; it applies it nowhere rather than to the wrong
// pools.
const ReasonSharedNodeClass = "SharedNodeClass"

// Input is what the overlays are applied to.
type Input struct {
	// Classes are the instance types of each EC2NodeClass by name. They may
	// be shared with other callers and are never modified.
	Classes map[string][]*scheduling.InstanceType
	// Pools are the NodePools: an overlay may select by karpenter.sh/nodepool
	// and by the labels of a pool's template, as in Karpenter.
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
	// Types counts the instance types (per class) it selected.
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
	// Classes has the keys of Input.Classes. A class no overlay changed
	// keeps its slice; otherwise the slice is new, and so is each changed
	// type (offerings, capacity and allocatable copied), while unchanged
	// types are shared with the input.
	Classes map[string][]*scheduling.InstanceType
	// Overlays maps each overlay's name to its outcome.
	Overlays map[string]Outcome
	// Changes maps a class and a type name to what overlays changed on it.
	Changes map[string]map[string]*Changes
}

// PriceOverlay names the overlay that set the price of an offering, or "".
func (r Result) PriceOverlay(class, instanceType, zone, capacityType string) string {
	if c := r.Changes[class][instanceType]; c != nil {
		return c.Price[OfferingKey(zone, capacityType)]
	}
	return ""
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

// claimKey names what an overlay may claim: an offering's price or an
// extended resource of one instance type of one class.
type claimKey struct{ class, typ, what string }

// match is one instance type an overlay selects, with the offerings it selects.
type match struct {
	class string
	typ   int
	offs  []int
}

// Apply applies the overlays as Karpenter's nodeoverlay controller and
// instance type store do: in weight order, the first overlay to set an
// offering's price or an extended resource of a type wins it; an overlay
// that would set one that an overlay of the same weight already set
// conflicts and is applied nowhere; an invalid overlay is applied nowhere.
// Apply is pure and never modifies its input.
func Apply(in Input) Result {
	res := Result{Classes: map[string][]*scheduling.InstanceType{}, Overlays: map[string]Outcome{}, Changes: map[string]map[string]*Changes{}}
	poolsOf := map[string][]*karpv1.NodePool{}
	for _, np := range in.Pools {
		if np != nil && np.Spec.Template.Spec.NodeClassRef != nil {
			poolsOf[np.Spec.Template.Spec.NodeClassRef.Name] = append(poolsOf[np.Spec.Template.Spec.NodeClassRef.Name], np)
		}
	}
	classNames := make([]string, 0, len(in.Classes))
	for name := range in.Classes {
		classNames = append(classNames, name)
	}
	sort.Strings(classNames)

	// claimed records, per claim, the weights of the overlays that claimed
	// it, whether or not they won it: two overlays of one weight that claim
	// the same thing conflict even when a heavier one wins it (Karpenter).
	claimed := map[claimKey]map[int32]bool{}
	type priceWin struct{ overlay, change string }
	type capWin struct {
		overlay string
		q       corev1.ResourceList
	}
	prices := map[claimKey]priceWin{}
	caps := map[claimKey]capWin{}

	for _, o := range Order(in.Overlays) {
		if err := Validate(o); err != nil {
			res.Overlays[o.Name] = Outcome{Reason: v1alpha1.ReasonRuntimeValidation, Message: err.Error()}
			continue
		}
		reqs := requirementsOf(o)
		var matches []match
		shared := ""
		for _, class := range classNames {
			for ti, it := range in.Classes[class] {
				offs, disagree := selectOfferings(it, reqs, poolsOf[class])
				if disagree != "" {
					shared = fmt.Sprintf("selects %s but not every NodePool of EC2NodeClass %s, whose instance types they share (type %s); give the pools it selects their own EC2NodeClass", disagree, class, it.Name)
					break
				}
				if len(offs) > 0 {
					matches = append(matches, match{class: class, typ: ti, offs: offs})
				}
			}
			if shared != "" {
				break
			}
		}
		if shared != "" {
			res.Overlays[o.Name] = Outcome{Reason: ReasonSharedNodeClass, Message: shared}
			continue
		}
		w := weight(o)
		change := priceChange(o)
		keys := claims(o, change, matches, in.Classes)
		if conflict := slices.ContainsFunc(keys, func(k claimKey) bool { return claimed[k][w] }); conflict {
			res.Overlays[o.Name] = Outcome{Reason: v1alpha1.ReasonConflict, Message: "conflict with another overlay"}
			continue
		}
		for _, k := range keys {
			if claimed[k] == nil {
				claimed[k] = map[int32]bool{}
			}
			claimed[k][w] = true
			if strings.HasPrefix(k.what, "price:") {
				if _, won := prices[k]; !won {
					prices[k] = priceWin{o.Name, change}
				}
				continue
			}
			if _, won := caps[k]; !won {
				name := corev1.ResourceName(strings.TrimPrefix(k.what, "resource:"))
				caps[k] = capWin{o.Name, corev1.ResourceList{name: o.Spec.Capacity[name]}}
			}
		}
		res.Overlays[o.Name] = Outcome{Applied: true, Types: len(matches)}
	}

	// Copy-on-write: only the types something was won on are copied.
	type typeKey struct{ class, typ string }
	touched := map[typeKey]bool{}
	for k := range prices {
		touched[typeKey{k.class, k.typ}] = true
	}
	for k := range caps {
		touched[typeKey{k.class, k.typ}] = true
	}
	for _, class := range classNames {
		types := in.Classes[class]
		var out []*scheduling.InstanceType
		for i, it := range types {
			if !touched[typeKey{class, it.Name}] {
				continue
			}
			if out == nil {
				out = slices.Clone(types)
			}
			cp := *it
			ch := &Changes{}
			cp.Offerings = slices.Clone(it.Offerings)
			for j := range cp.Offerings {
				off := &cp.Offerings[j]
				k := claimKey{class, it.Name, "price:" + OfferingKey(off.Zone, off.CapacityType)}
				if win, ok := prices[k]; ok {
					off.Price = AdjustedPrice(off.Price, win.change)
					if ch.Price == nil {
						ch.Price = map[string]string{}
					}
					ch.Price[OfferingKey(off.Zone, off.CapacityType)] = win.overlay
				}
			}
			for k, win := range caps {
				if k.class != class || k.typ != it.Name {
					continue
				}
				if ch.Capacity == nil {
					ch.Capacity = map[corev1.ResourceName]string{}
					cp.Capacity, cp.Allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
					if cp.Capacity == nil {
						cp.Capacity = corev1.ResourceList{}
					}
					if cp.Allocatable == nil {
						cp.Allocatable = corev1.ResourceList{}
					}
				}
				// Extended resources have no kubelet overhead: what the node
				// has, pods may use.
				for name, q := range win.q {
					cp.Capacity[name], cp.Allocatable[name] = q.DeepCopy(), q.DeepCopy()
					ch.Capacity[name] = win.overlay
				}
			}
			out[i] = &cp
			if res.Changes[class] == nil {
				res.Changes[class] = map[string]*Changes{}
			}
			res.Changes[class][it.Name] = ch
		}
		if out == nil {
			out = types
		}
		res.Classes[class] = out
	}
	return res
}

// claims lists what an overlay would set on its matches: each selected
// offering's price when it has a price or an adjustment, and each of its
// extended resources on each selected type.
func claims(o *v1alpha1.NodeOverlay, change string, matches []match, classes map[string][]*scheduling.InstanceType) []claimKey {
	var out []claimKey
	resources := make([]string, 0, len(o.Spec.Capacity))
	for name := range o.Spec.Capacity {
		resources = append(resources, string(name))
	}
	sort.Strings(resources)
	for _, m := range matches {
		it := classes[m.class][m.typ]
		if change != "" {
			for _, oi := range m.offs {
				off := it.Offerings[oi]
				out = append(out, claimKey{m.class, it.Name, "price:" + OfferingKey(off.Zone, off.CapacityType)})
			}
		}
		for _, r := range resources {
			out = append(out, claimKey{m.class, it.Name, "resource:" + r})
		}
	}
	return out
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

// selectOfferings returns the offerings of it the overlay's requirements
// select, seen as Karpenter sees a type through each NodePool that may use
// it (its labels, the pool's name and template labels, the zones and
// capacity types of its offerings). When the pools of the class disagree,
// it names the pools that are selected instead.
func selectOfferings(it *scheduling.InstanceType, reqs scheduling.Requirements, pools []*karpv1.NodePool) ([]int, string) {
	if !poolSensitive(reqs, pools) {
		return offeringsFor(it, reqs, nil), ""
	}
	var first []int
	var selected []string
	seen, differ := false, false
	for _, np := range pools {
		if !poolMayUse(np, it) {
			continue
		}
		offs := offeringsFor(it, reqs, np)
		if len(offs) > 0 {
			selected = append(selected, np.Name)
		}
		if !seen {
			first, seen = offs, true
		} else if !slices.Equal(first, offs) {
			differ = true
		}
	}
	if !seen {
		return offeringsFor(it, reqs, nil), ""
	}
	if differ {
		return nil, "NodePool " + strings.Join(selected, ", ")
	}
	return first, ""
}

// poolSensitive reports whether the requirements name a key whose value
// depends on the NodePool: karpenter.sh/nodepool or a template label.
func poolSensitive(reqs scheduling.Requirements, pools []*karpv1.NodePool) bool {
	if reqs.Has(wellknown.NodePoolLabel) {
		return true
	}
	for _, np := range pools {
		for k := range np.Spec.Template.Labels {
			if reqs.Has(k) {
				return true
			}
		}
	}
	return false
}

// poolMayUse reports whether a pool's template labels leave the type
// possible at all (a label the type has with another value rules it out).
func poolMayUse(np *karpv1.NodePool, it *scheduling.InstanceType) bool {
	for k, v := range np.Spec.Template.Labels {
		if have, ok := it.Labels[k]; ok && have != v {
			return false
		}
	}
	return true
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
		v, ok := it.Labels[k]
		if np != nil {
			if k == wellknown.NodePoolLabel {
				v, ok = np.Name, true
			} else if lv, set := np.Spec.Template.Labels[k]; set {
				v, ok = lv, true
			}
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
