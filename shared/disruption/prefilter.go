package disruption

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/scheduling"
	"github.com/karpless/karpless/shared/wellknown"
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
	// priced are every launchable type's cheapest available offering and
	// allocatable, cheapest first.
	priced []pricedType
}

type res struct{ cpu, mem, pods int64 }

func (r res) fitsIn(o res) bool { return r.cpu <= o.cpu && r.mem <= o.mem && r.pods <= o.pods }

func (r res) plus(o res) res { return res{r.cpu + o.cpu, r.mem + o.mem, r.pods + o.pods} }

type pricedType struct {
	price float64
	alloc res
}

func resOf(l corev1.ResourceList) res {
	return res{cpu: l.Cpu().MilliValue(), mem: l.Memory().Value(), pods: l.Pods().Value()}
}

func podRes(p *corev1.Pod) res { return resOf(scheduling.PodRequests(p)) }

func (w *world) room() *room {
	r := &room{}
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
				v, ok := it.Labels[k]
				if k == wellknown.InstanceTypeLabel {
					v, ok = it.Name, true
				}
				if ok && !reqs[k].Has(v) {
					continue types
				}
			}
			if p := cheapestAllowed(it, zone, ct); !math.IsInf(p, 1) {
				r.priced = append(r.priced, pricedType{price: p, alloc: resOf(it.Allocatable)})
			}
		}
	}
	sort.Slice(r.priced, func(i, j int) bool { return r.priced[i].price < r.priced[j].price })
	return r
}

// hopeless says why cand certainly cannot be consolidated on its own ("" if
// it might): the pods that fit on no other node's free room must all go to
// one new node, which must cost less than cand; if no type that cheap is
// large enough for them (dimension by dimension, the best of all such
// types), the simulation would fail.
func (r *room) hopeless(cand *Candidate) string {
	var alone res
	n := 0
	for _, p := range cand.Reschedulable {
		need := podRes(p)
		fits := false
		for i, f := range r.free {
			if r.name[i] != cand.Node.Name && need.fitsIn(f) {
				fits = true
				break
			}
		}
		if !fits {
			alone = alone.plus(need)
			n++
		}
	}
	if n == 0 {
		return ""
	}
	var best res
	for _, t := range r.priced {
		if t.price >= cand.Price {
			break
		}
		best = res{max(best.cpu, t.alloc.cpu), max(best.mem, t.alloc.mem), max(best.pods, t.alloc.pods)}
	}
	if alone.fitsIn(best) {
		return ""
	}
	return fmt.Sprintf("Can't replace with a cheaper node (%d pods fit on no other node, and no cheaper instance type holds them)", n)
}
