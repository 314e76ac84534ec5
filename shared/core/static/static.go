// Package static keeps static NodePools (spec.replicas) at their size, as Karpenter
// v1.14 does: how many NodeClaims to create from the template, which to delete, within limits.nodes.
package static

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Input is what a decision reads.
type Input struct {
	Cluster *cluster.Snapshot
	// Classes are the launchable instance types per EC2NodeClass name.
	Classes map[string]*scheduling.NodeClass
	// Disrupting are the candidates of disruption commands being carried
	// out (disruption.ExecutingClaims): Karpenter's "pending disruption".
	Disrupting map[string]bool
	// Replacements are the replacement NodeClaims those commands named:
	// their command decides their fate, scale-down leaves them alone.
	Replacements map[string]bool
	Now          time.Time
}

// Count is a static NodePool's NodeClaims by state, as Karpenter's
// NodePoolState counts them.
type Count struct {
	// Active are the claims neither deleting nor leaving in a disruption
	// command, launched or not: a claim not launched yet is a node on its
	// way, and counting it is what keeps a rerun from creating it again.
	Active int
	// Deleting are the claims being deleted, or whose node is.
	Deleting int
	// Disrupting are the candidates of a disruption command being carried
	// out: their replacements are among Active (or about to be), and they
	// go once those are ready.
	Disrupting int
}

// Nodes is what limits.nodes caps: every claim the pool has, going or not.
func (c Count) Nodes() int { return c.Active + c.Deleting + c.Disrupting }

// Pool is what one static NodePool does now.
type Pool struct {
	NodePool *karpv1.NodePool
	Replicas int64
	Count    Count
	// NodeLimit is limits.nodes, -1 when unset.
	NodeLimit int64
	// Create is how many NodeClaims to create now, each asking for Claim.
	Create int
	Claim  *scheduling.NewNodeClaim
	// Delete are the NodeClaims scale-down deletes now, in the order chosen.
	Delete []*karpv1.NodeClaim
	// Why says, for people, what the pool does and, when it cannot reach
	// its replicas, why not.
	Why string
}

// IsStatic reports a static NodePool.
func IsStatic(np *karpv1.NodePool) bool { return np != nil && np.Spec.Replicas != nil }

// NodeLimit is the pool's limits.nodes, -1 when it has none.
func NodeLimit(np *karpv1.NodePool) int64 {
	if q, ok := np.Spec.Limits[wellknown.ResourceNodes]; ok {
		return q.Value()
	}
	return -1
}

// Counts counts the NodeClaims of every static NodePool, by name.
func Counts(in *Input) map[string]Count {
	statics := map[string]bool{}
	for _, np := range in.Cluster.NodePools {
		if IsStatic(np) {
			statics[np.Name] = true
		}
	}
	nodes := nodesByProvider(in.Cluster)
	out := map[string]Count{}
	for _, nc := range in.Cluster.NodeClaims {
		pool := nc.Labels[wellknown.NodePoolLabel]
		if !statics[pool] {
			continue
		}
		c := out[pool]
		switch n := nodes[nc.Status.ProviderID]; {
		case nc.DeletionTimestamp != nil || (n != nil && n.DeletionTimestamp != nil):
			c.Deleting++
		case in.Disrupting[nc.Name]:
			c.Disrupting++
		default:
			c.Active++
		}
		out[pool] = c
	}
	return out
}

// Plan decides, for every static NodePool Karpless manages (by name; another
// provider's is its own Karpenter's), what to create and
// what to delete. Like Karpenter, it creates up to replicas less the claims
// that are active or being replaced, never past limits.nodes (which counts
// every claim, deleting ones too), and deletes the active claims beyond
// replicas: scale-down is not a voluntary disruption, so neither budgets
// nor do-not-disrupt hold it back (do-not-disrupt only orders it). A pool
// being deleted does neither.
func Plan(in *Input) []Pool {
	counts := Counts(in)
	var pools []*karpv1.NodePool
	for _, np := range in.Cluster.NodePools {
		// Another provider's pool is its own Karpenter's to size, up or
		// down.
		if IsStatic(np) && poolstatus.Managed(np) {
			pools = append(pools, np)
		}
	}
	slices.SortFunc(pools, func(a, b *karpv1.NodePool) int { return cmp.Compare(a.Name, b.Name) })
	var idx *index
	var out []Pool
	for _, np := range pools {
		p := Pool{NodePool: np, Replicas: *np.Spec.Replicas, Count: counts[np.Name], NodeLimit: NodeLimit(np)}
		c := p.Count
		var notes []string
		switch {
		case np.DeletionTimestamp != nil:
			notes = append(notes, "being deleted: neither creates nor deletes")
		case int64(c.Active+c.Disrupting) < p.Replicas:
			want := p.Replicas - int64(c.Active+c.Disrupting)
			if p.NodeLimit >= 0 {
				want = min(want, p.NodeLimit-int64(c.Nodes()))
			}
			if want <= 0 {
				notes = append(notes, fmt.Sprintf("node limit %d reached", p.NodeLimit))
				break
			}
			claim, why := Template(np, in.Classes)
			if claim == nil {
				notes = append(notes, "cannot create: "+why)
				break
			}
			p.Create, p.Claim = int(want), claim
			notes = append(notes, fmt.Sprintf("creating %d", want))
		case int64(c.Active) > p.Replicas:
			if idx == nil {
				idx = newIndex(in)
			}
			p.Delete = idx.scaleDown(in, np.Name, int(int64(c.Active)-p.Replicas))
			notes = append(notes, fmt.Sprintf("deleting %d", len(p.Delete)))
		}
		p.Why = describe(p, notes)
		out = append(out, p)
	}
	return out
}

// describe is the pool's line, e.g. "static nodepool web: 3 of 5
// replicas, creating 2".
func describe(p Pool, notes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "static nodepool %s: %d of %d replicas", p.NodePool.Name, p.Count.Active, p.Replicas)
	if p.Count.Disrupting > 0 {
		fmt.Fprintf(&b, " (%d being replaced)", p.Count.Disrupting)
	}
	if p.Count.Deleting > 0 {
		fmt.Fprintf(&b, " (%d deleting)", p.Count.Deleting)
	}
	for _, n := range notes {
		b.WriteString(", " + n)
	}
	return b.String()
}

// LifetimeRemaining is the share of the claim's expireAfter still ahead,
// in [0, 1] (1 when it never expires): Karpenter scales a node's
// disruption cost by it, so that a node about to expire anyway is the
// cheaper one to take.
func LifetimeRemaining(nc *karpv1.NodeClaim, now time.Time) float64 {
	d := nc.Spec.ExpireAfter.Duration
	if d == nil || *d <= 0 {
		return 1
	}
	left := d.Seconds() - now.Sub(nc.CreationTimestamp.Time).Seconds()
	return math.Min(math.Max(left/d.Seconds(), 0), 1)
}

// index finds a claim's node and the pods bound to a node.
type index struct {
	nodes map[string]*corev1.Node // by provider ID
	pods  map[string][]*corev1.Pod
}

func newIndex(in *Input) *index {
	x := &index{nodes: nodesByProvider(in.Cluster), pods: map[string][]*corev1.Pod{}}
	for _, p := range in.Cluster.Pods {
		if p.Spec.NodeName != "" && !podutil.IsTerminal(p) {
			x.pods[p.Spec.NodeName] = append(x.pods[p.Spec.NodeName], p)
		}
	}
	return x
}

func nodesByProvider(snap *cluster.Snapshot) map[string]*corev1.Node {
	out := map[string]*corev1.Node{}
	for _, n := range snap.Nodes {
		if n.Spec.ProviderID != "" {
			out[n.Spec.ProviderID] = n
		}
	}
	return out
}

// scaleDown picks n of the pool's active claims to delete, in Karpenter's
// order: claims not launched yet (newest first: the least work lost), then
// nodes with no pod but DaemonSet pods (none of them do-not-disrupt) or no
// node yet, then the others, those without a do-not-disrupt pod first and
// by the cost of evicting their pods scaled by the lifetime they have left.
// Replacements of a command in flight are not taken.
func (x *index) scaleDown(in *Input, pool string, n int) []*karpv1.NodeClaim {
	type ranked struct {
		nc   *karpv1.NodeClaim
		tier int // 0 not launched, 1 empty, 2 with pods, 3 with a do-not-disrupt pod
		cost float64
	}
	var all []ranked
	for _, nc := range in.Cluster.NodeClaims {
		if nc.Labels[wellknown.NodePoolLabel] != pool || nc.DeletionTimestamp != nil || in.Disrupting[nc.Name] || in.Replacements[nc.Name] {
			continue
		}
		r := ranked{nc: nc}
		node := x.nodes[nc.Status.ProviderID]
		switch {
		case nc.Status.ProviderID == "":
			r.tier = 0
		case node == nil:
			r.tier = 1
		case node.DeletionTimestamp != nil:
			continue
		default:
			pods := x.pods[node.Name]
			r.tier = 1
			for _, p := range pods {
				if blocked, _ := podutil.DoNotDisrupt(p, in.Now); blocked {
					r.tier = 3
				} else if r.tier == 1 && !podutil.IsOwnedByDaemonSet(p) {
					r.tier = 2
				}
				r.cost += podutil.EvictionCost(p)
			}
			r.cost *= LifetimeRemaining(nc, in.Now)
		}
		all = append(all, r)
	}
	slices.SortFunc(all, func(a, b ranked) int {
		if a.tier != b.tier {
			return cmp.Compare(a.tier, b.tier)
		}
		if a.tier == 0 {
			if c := b.nc.CreationTimestamp.Compare(a.nc.CreationTimestamp.Time); c != 0 {
				return c
			}
		}
		if a.tier >= 2 && a.cost != b.cost {
			return cmp.Compare(a.cost, b.cost)
		}
		return cmp.Compare(a.nc.Name, b.nc.Name)
	})
	var out []*karpv1.NodeClaim
	for _, r := range all[:min(n, len(all))] {
		out = append(out, r.nc)
	}
	return out
}
