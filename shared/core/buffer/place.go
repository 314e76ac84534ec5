package buffer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/core/scheduling"
)

// Place tallies, per buffer key, where a simulation's results put the
// virtual pods.
func Place(r *scheduling.Results) map[string]*Placement {
	var t Tally
	t.Add(r)
	return t.Placements()
}

// Tally gathers where the simulations of one pass put the virtual pods; a
// later simulation's word on a pod replaces an earlier one's (a pod left
// for reserved capacity in one round is placed by the next).
type Tally struct {
	where map[types.UID]where
}

type where struct {
	key, why string
	at       int // 0 existing, 1 new claim, 2 nowhere
}

// Add records a simulation's results.
func (t *Tally) Add(r *scheduling.Results) {
	if t.where == nil {
		t.where = map[types.UID]where{}
	}
	put := func(p *corev1.Pod, at int, why string) {
		if k := KeyOf(p); k != "" {
			t.where[p.UID] = where{key: k, at: at, why: why}
		}
	}
	for _, pods := range r.Existing {
		for _, p := range pods {
			put(p, 0, "")
		}
	}
	for _, n := range r.NewNodeClaims {
		for _, p := range n.Pods {
			put(p, 1, "")
		}
	}
	for _, e := range r.Unschedulable {
		put(e.Pod, 2, e.Reason)
	}
}

// Empty reports that no simulation was added.
func (t *Tally) Empty() bool { return t == nil || t.where == nil }

// Placements are the tallies per buffer key.
func (t *Tally) Placements() map[string]*Placement {
	out := map[string]*Placement{}
	uids := make([]types.UID, 0, len(t.where))
	for uid := range t.where {
		uids = append(uids, uid)
	}
	slices.Sort(uids) // the first reason is the same from tick to tick
	for _, uid := range uids {
		w := t.where[uid]
		pl := out[w.key]
		if pl == nil {
			pl = &Placement{}
			out[w.key] = pl
		}
		switch w.at {
		case 0:
			pl.Existing++
		case 1:
			pl.NewClaims++
		default:
			pl.Failed++
			if pl.Why == "" {
				pl.Why = w.why
			}
		}
	}
	return out
}

// Hosts are the nodes (by simulation node name) a simulation put virtual
// pods on: the room the buffers hold now, which emptiness must not take.
func Hosts(r *scheduling.Results) map[string]int {
	out := map[string]int{}
	for node, pods := range r.Existing {
		for _, p := range pods {
			if IsVirtual(p) {
				out[node]++
			}
		}
	}
	return out
}
