package disruption

import (
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// room is a cheap, optimistic picture of where pods could go, used to skip
// single-node simulations that cannot succeed. It only ever rules a
// candidate out when even ignoring taints, affinity, topology, pending pods
// and DaemonSet overhead its pods could not fit: a pruned candidate would
// also have failed the simulation.
type room struct {
	// free is (cpu milli, memory bytes, pod slots) left on each node that
	// stays and accepts pods.
	free []res
	name []string
	// types are every launchable type with its cheapest available
	// offerings, merged over NodePools (the cheapest of each: optimistic).
	types []pricedType
	// spotToSpot is Options.SpotToSpotConsolidation.
	spotToSpot bool
}

type res struct{ cpu, mem, pods int64 }

func (r res) fitsIn(o res) bool { return r.cpu <= o.cpu && r.mem <= o.mem && r.pods <= o.pods }

func (r res) plus(o res) res { return res{r.cpu + o.cpu, r.mem + o.mem, r.pods + o.pods} }

type pricedType struct {
	// spot and other are the cheapest allowed spot and non-spot offerings,
	// +Inf when there is none.
	spot, other float64
	alloc       res
}

// cheapestBy is the price of the type's cheapest available spot and
// non-spot offerings in an allowed zone and capacity type.
func cheapestBy(it *scheduling.InstanceType, zone, ct *scheduling.Requirement) (spot, other float64) {
	spot, other = math.Inf(1), math.Inf(1)
	for _, o := range it.Offerings {
		if !o.Available || !zone.Has(o.Zone) || !ct.Has(o.CapacityType) {
			continue
		}
		if o.CapacityType == wellknown.CapacityTypeSpot {
			spot = min(spot, o.Price)
		} else {
			other = min(other, o.Price)
		}
	}
	return spot, other
}

func resOf(l corev1.ResourceList) res {
	return res{cpu: l.Cpu().MilliValue(), mem: l.Memory().Value(), pods: l.Pods().Value()}
}

func podRes(p *corev1.Pod) res { return resOf(scheduling.PodRequests(p)) }

func (w *world) room() *room {
	r := &room{spotToSpot: w.c.in.Options.SpotToSpotConsolidation}
	for _, n := range w.nodes {
		if n.MarkedForDeletion {
			continue
		}
		free := resOf(n.Allocatable)
		for _, p := range n.Pods {
			free = res{free.cpu - podRes(p).cpu, free.mem - podRes(p).mem, free.pods - 1}
		}
		r.free = append(r.free, free)
		r.name = append(r.name, n.Name)
	}
	// Types a NodePool may launch: well-known label requirements the type
	// defines must hold, and the offering's zone and capacity type must be
	// allowed (custom labels are left out: optimistic, so still sound).
	byName := map[string]int{}
	for _, np := range w.c.in.Cluster.NodePools {
		ref := np.Spec.Template.Spec.NodeClassRef
		if np.DeletionTimestamp != nil || ref == nil || w.c.in.Classes[ref.Name] == nil || !w.c.in.Classes[ref.Name].Ready {
			continue
		}
		reqs := scheduling.RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)
		zone, ct := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	types:
		for _, it := range w.c.in.Classes[ref.Name].InstanceTypes {
			for _, k := range reqs.Keys() {
				if k == wellknown.ZoneLabel || k == wellknown.CapacityTypeLabel || !scheduling.IsWellKnown(k) {
					continue
				}
				if _, choice := it.LabelChoices[k]; choice {
					// The launch picks one of the values (tenancy).
					if !it.LabelMatches(reqs[k]) {
						continue types
					}
					continue
				}
				v, ok := it.Labels[k]
				if k == wellknown.InstanceTypeLabel {
					v, ok = it.Name, true
				}
				if ok && !reqs[k].Has(v) {
					continue types
				}
			}
			t := pricedType{alloc: resOf(it.Allocatable)}
			t.spot, t.other = cheapestBy(it, zone, ct)
			if math.IsInf(min(t.spot, t.other), 1) {
				continue
			}
			if i, ok := byName[it.Name]; ok {
				r.types[i].spot = min(r.types[i].spot, t.spot)
				r.types[i].other = min(r.types[i].other, t.other)
				continue
			}
			byName[it.Name] = len(r.types)
			r.types = append(r.types, t)
		}
	}
	return r
}

// hopeless says why cand certainly cannot be consolidated on its own ("" if
// it might). Whatever of its pods the other nodes cannot take must go to one
// new node, of one instance type that holds it and costs less than cand. A
// lower bound on that share: every pod that fits in no other node's free
// room, plus whatever of the rest exceeds the free room of the nodes that
// could take any of its pods at all. A spot candidate whose replacement
// would be spot also needs spot-to-spot consolidation enabled and
// minSpotToSpotOptions such types (Karpenter's rule), and otherwise a
// cheaper on-demand type. When no type passes even this optimistic test,
// the simulation would fail too.
func (r *room) hopeless(cand *Candidate) string {
	var alone, rest, usable res
	pods := make([]res, len(cand.Reschedulable))
	for i, p := range cand.Reschedulable {
		pods[i] = podRes(p)
	}
	for i, f := range r.free {
		if r.name[i] != cand.Node.Name && slices.ContainsFunc(pods, func(p res) bool { return p.fitsIn(f) }) {
			usable = usable.plus(f)
		}
	}
	for _, need := range pods {
		fits := false
		for i, f := range r.free {
			if r.name[i] != cand.Node.Name && need.fitsIn(f) {
				fits = true
				break
			}
		}
		if fits {
			rest = rest.plus(need)
		} else {
			alone = alone.plus(need)
		}
	}
	need := alone.plus(res{max(0, rest.cpu-usable.cpu), max(0, rest.mem-usable.mem), max(0, rest.pods-usable.pods)})
	if need == (res{}) {
		return ""
	}
	spot := cand.CapacityType == wellknown.CapacityTypeSpot
	spotOptions := 0
	for _, t := range r.types {
		if !need.fitsIn(t.alloc) {
			continue
		}
		if t.other < cand.Price || (!spot && t.spot < cand.Price) {
			// Any cheaper offering may replace a non-spot node; a cheaper
			// non-spot one may replace a spot node whose pods rule spot out.
			return ""
		}
		if t.spot < cand.Price {
			spotOptions++
		}
	}
	switch {
	case spot && spotOptions > 0 && !r.spotToSpot:
		return "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
	case spot && spotOptions >= minSpotToSpotOptions:
		return ""
	case spot && spotOptions > 0:
		return fmt.Sprintf(SpotToSpotRule+" %d cheaper instance type options than the current candidate to consolidate, got %d",
			minSpotToSpotOptions, spotOptions)
	}
	return "Can't replace with a cheaper node (the room left on other nodes cannot take all its pods, and no cheaper instance type holds the rest)"
}
