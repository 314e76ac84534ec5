// Package bound computes a lower bound on the $/h of any set of new nodes
// that places a batch of pods: the linear-programming relaxation of the packing.
package bound

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Input is what every plan the bound covers has in common: the pods, the
// NodePools and the instance types their one EC2NodeClass offers, the
// DaemonSets, and the fixed hourly cost of each node's root volume.
type Input struct {
	Pods       []*corev1.Pod
	NodePools  []*karpv1.NodePool
	Types      []*scheduling.InstanceType
	DaemonSets []*appsv1.DaemonSet
	// VolumeHourly is the $/h every node adds (its root volume).
	VolumeHourly float64
}

// Result is the bound and the size of the linear program behind it.
type Result struct {
	// Hourly is the bound in $/h over the pods some node can take.
	Hourly float64
	// Unplaceable counts the pods no instance type of any NodePool can
	// take: they are left out of the bound (no plan places them either).
	Unplaceable int
	// Groups, Columns and Rows are the LP's size: pod groups, node kinds
	// (NodePool and instance type) left after dominated ones are dropped,
	// and constraints, summed over the independent parts solved.
	Groups, Columns, Rows, Parts int
}

// column is a kind of node: one instance type launched by one NodePool.
type column struct {
	pool string
	it   *scheduling.InstanceType
	// price is the cheapest available offering the NodePool allows, plus
	// the root volume.
	price float64
	// room is allocatable minus the DaemonSets certain to run on it, per
	// resource row.
	room []float64
	// rate ($ per vCPU-hour /1000, i.e. per millicore-hour) and baseMinusDaemon
	// (baseline millicores minus DaemonSet millicores) model CPU credits:
	// credits >= rate * (pods' cpu - baseMinusDaemon), and >= 0.
	rate, baseMinusDaemon float64
	taints                []corev1.Taint
	view                  nodeView
}

// group is pods with the same requests, the same node kinds allowed and
// the same hostname anti-affinity set.
type group struct {
	req     []float64
	count   float64
	allowed []int // column indexes
	anti    int   // anti-affinity set, -1 for none
}

// Compute returns the LP bound. Its constraints are documented in
// docs/bench.md ("The lower bound").
func Compute(in Input) (Result, error) {
	resNames := resourceRows(in.Pods)
	cols := columns(in, resNames)
	groups, unplaceable := groupPods(in.Pods, cols, resNames)
	res := Result{Unplaceable: unplaceable}
	if len(groups) == 0 {
		return res, nil
	}
	keep := undominated(cols, groups)
	// Re-index columns to the kept ones.
	idx := make([]int, len(cols))
	var kept []*column
	for i, c := range cols {
		idx[i] = -1
		if keep[i] {
			idx[i] = len(kept)
			kept = append(kept, c)
		}
	}
	for _, g := range groups {
		var a []int
		for _, o := range g.allowed {
			if idx[o] >= 0 {
				a = append(a, idx[o])
			}
		}
		g.allowed = a
	}
	for _, part := range components(groups, len(kept)) {
		v, rows, ncols, err := solve(part, kept, resNames)
		if err != nil {
			return res, err
		}
		res.Hourly += v
		res.Groups += len(part)
		res.Columns += ncols
		res.Rows += rows
		res.Parts++
	}
	return res, nil
}

// resourceRows are the resources the pods request, "pods" first: the
// rows of every node kind.
func resourceRows(pods []*corev1.Pod) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{corev1.ResourcePods: true}
	names := []corev1.ResourceName{corev1.ResourcePods}
	var rest []corev1.ResourceName
	for _, p := range pods {
		for n, q := range scheduling.PodRequests(p) {
			if !seen[n] && !q.IsZero() {
				seen[n] = true
				rest = append(rest, n)
			}
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

func amount(l corev1.ResourceList, n corev1.ResourceName) float64 {
	q, ok := l[n]
	if !ok {
		return 0
	}
	if n == corev1.ResourceCPU {
		return float64(q.MilliValue())
	}
	return q.AsApproximateFloat64()
}

// nodeView answers what a node of a kind may carry as a label: the
// values it can have, or unknown (then every selector is taken to hold).
type nodeView struct {
	it     *scheduling.InstanceType
	fixed  map[string]string // NodePool template labels
	pool   scheduling.Requirements
	zones  []string
	cts    []string
	poolNm string
}

func (v nodeView) values(key string) (vals []string, known bool) {
	switch key {
	case wellknown.ZoneLabel:
		return v.zones, true
	case wellknown.CapacityTypeLabel:
		return v.cts, true
	case wellknown.NodePoolLabel:
		return []string{v.poolNm}, true
	case corev1.LabelHostname:
		return nil, false
	}
	if val, ok := v.fixed[key]; ok {
		return []string{val}, true
	}
	if vs := v.it.LabelValues(key); len(vs) > 0 {
		return vs, true
	}
	if r := v.pool.Get(key); r != nil && r.Operator() == corev1.NodeSelectorOpIn {
		return r.Values(), true
	}
	// A label that neither the type, the template nor the requirements
	// give is unknown, well-known or not: the node may still get it, and
	// refusing a pod a kind it could use might raise the bound.
	return nil, false
}

// holds reports whether a node of the kind can meet the expression; an
// unknown label is taken to meet it, which only lowers the bound.
func (v nodeView) holds(key string, op corev1.NodeSelectorOperator, vals []string) bool {
	return v.meets(key, op, vals, false)
}

// certain reports whether every node of the kind meets the expression
// (used for DaemonSets: only those certain to run are counted); an
// unknown label is not.
func (v nodeView) certain(key string, op corev1.NodeSelectorOperator, vals []string) bool {
	return v.meets(key, op, vals, true)
}

// meets matches the kind's values of key against the expression: one
// value matching is enough, or, with every, all of them must.
func (v nodeView) meets(key string, op corev1.NodeSelectorOperator, vals []string, every bool) bool {
	have, known := v.values(key)
	if !known {
		return !every
	}
	r := scheduling.NewRequirement(key, op, vals...)
	if len(have) == 0 {
		return r.Matches("", false)
	}
	for _, h := range have {
		if r.Matches(h, true) != every {
			return !every
		}
	}
	return every
}

// columns are the node kinds: every (NodePool, instance type) the pool's
// requirements allow with an available offering in a zone and capacity
// type it allows, priced at its cheapest such offering.
func columns(in Input, resNames []corev1.ResourceName) []*column {
	var out []*column
	for _, np := range in.NodePools {
		reqs := scheduling.RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)
		zoneReq, ctReq := reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel)
	types:
		for _, it := range in.Types {
			for _, k := range reqs.Keys() {
				if k == wellknown.ZoneLabel || k == wellknown.CapacityTypeLabel {
					continue
				}
				if vs := it.LabelValues(k); len(vs) > 0 && !it.LabelMatches(reqs.Get(k)) {
					continue types
				}
			}
			price := math.Inf(1)
			zones, cts := map[string]bool{}, map[string]bool{}
			for _, o := range it.Offerings {
				if !o.Available || (zoneReq != nil && !zoneReq.Has(o.Zone)) || (ctReq != nil && !ctReq.Has(o.CapacityType)) {
					continue
				}
				price = min(price, o.Price)
				zones[o.Zone], cts[o.CapacityType] = true, true
			}
			if math.IsInf(price, 1) {
				continue
			}
			c := &column{pool: np.Name, it: it, price: price + in.VolumeHourly, taints: np.Spec.Template.Spec.Taints,
				view: nodeView{it: it, fixed: np.Spec.Template.Labels, pool: reqs, zones: sortedKeys(zones), cts: sortedKeys(cts), poolNm: np.Name}}
			overhead := corev1.ResourceList{}
			for _, ds := range in.DaemonSets {
				if daemonCertain(ds, c) {
					for n, q := range scheduling.PodRequests(&corev1.Pod{Spec: ds.Spec.Template.Spec}) {
						cur := overhead[n]
						cur.Add(q)
						overhead[n] = cur
					}
				}
			}
			for _, n := range resNames {
				c.room = append(c.room, amount(it.Allocatable, n)-amount(overhead, n))
			}
			if cr, ok := catalog.Burstable(it.Labels[wellknown.InstanceFamilyLabel], it.Labels[wellknown.InstanceSizeLabel]); ok {
				vcpus := it.Capacity[corev1.ResourceCPU]
				c.rate = cr.Rate / 1000
				c.baseMinusDaemon = float64(cr.BaselineMilli(vcpus.Value())) - amount(overhead, corev1.ResourceCPU)
			}
			out = append(out, c)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// daemonCertain reports whether the DaemonSet certainly runs a pod on
// every node of the kind: it tolerates the NodePool's taints and its
// node selector and every expression of one required term hold for all
// values the node may have.
func daemonCertain(ds *appsv1.DaemonSet, c *column) bool {
	spec := ds.Spec.Template.Spec
	if untolerated(c.taints, spec.Tolerations) {
		return false
	}
	for k, v := range spec.NodeSelector {
		if !c.view.certain(k, corev1.NodeSelectorOpIn, []string{v}) {
			return false
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			ok := len(t.MatchFields) == 0
			for _, e := range t.MatchExpressions {
				ok = ok && c.view.certain(e.Key, e.Operator, e.Values)
			}
			if ok {
				return true
			}
		}
		return false
	}
	return true
}

func untolerated(taints []corev1.Taint, tols []corev1.Toleration) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(tols, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), t, true) }) {
			return true
		}
	}
	return false
}

// podAllowed reports whether a node of the kind may take the pod: it
// tolerates the NodePool's taints, its node selector and one of its
// required node-affinity terms may hold, and its requests fit the room.
func podAllowed(p *corev1.Pod, req []float64, c *column) bool {
	for i := range req {
		if req[i] > c.room[i] {
			return false
		}
	}
	if untolerated(c.taints, p.Spec.Tolerations) {
		return false
	}
	for k, v := range p.Spec.NodeSelector {
		if !c.view.holds(k, corev1.NodeSelectorOpIn, []string{v}) {
			return false
		}
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) == 0 {
			return true
		}
		for _, t := range terms {
			ok := true
			for _, e := range t.MatchExpressions {
				ok = ok && c.view.holds(e.Key, e.Operator, e.Values)
			}
			if ok {
				return true
			}
		}
		return false
	}
	return true
}

// antiKey names the set of pods that must be on distinct nodes: a pod
// whose required anti-affinity term on the hostname selects its own
// labels excludes every pod with the same term and namespace, since that
// term selects their labels too. "" when the pod has no such term.
func antiKey(p *corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return ""
	}
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey != corev1.LabelHostname || t.LabelSelector == nil || t.NamespaceSelector != nil {
			continue
		}
		if len(t.Namespaces) > 0 && !slices.Contains(t.Namespaces, p.Namespace) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		ns := slices.Clone(t.Namespaces)
		slices.Sort(ns)
		return p.Namespace + "|" + strings.Join(ns, ",") + "|" + sel.String()
	}
	return ""
}

// groupPods groups the pods; pods no kind can take are counted apart.
func groupPods(pods []*corev1.Pod, cols []*column, resNames []corev1.ResourceName) ([]*group, int) {
	bySig := map[string][]int{} // scheduling signature -> allowed columns
	groups := map[string]*group{}
	antiIDs := map[string]int{}
	var order []string
	unplaceable := 0
	for _, p := range pods {
		rl := scheduling.PodRequests(p)
		req := make([]float64, len(resNames))
		req[0] = 1
		for i, n := range resNames[1:] {
			req[i+1] = amount(rl, n)
		}
		sig := fmt.Sprint(req, p.Spec.NodeSelector, p.Spec.Tolerations)
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			sig += a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.String()
		}
		allowed, ok := bySig[sig]
		if !ok {
			for i, c := range cols {
				if podAllowed(p, req, c) {
					allowed = append(allowed, i)
				}
			}
			bySig[sig] = allowed
		}
		if len(allowed) == 0 {
			unplaceable++
			continue
		}
		anti := -1
		if k := antiKey(p); k != "" {
			id, ok := antiIDs[k]
			if !ok {
				id = len(antiIDs)
				antiIDs[k] = id
			}
			anti = id
		}
		key := fmt.Sprint(sig, anti)
		g, ok := groups[key]
		if !ok {
			g = &group{req: req, allowed: allowed, anti: anti}
			groups[key] = g
			order = append(order, key)
		}
		g.count++
	}
	out := make([]*group, 0, len(order))
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out, unplaceable
}

// undominated drops node kinds another kind beats: kind j dominates kind
// o when j takes every group o takes, and lambda nodes of j, lambda the
// largest ratio of o's room to j's over the rows, cost no more than one
// node of o. Replacing each node of o by lambda nodes of j then keeps
// every row and does not raise the cost, so the LP's optimum is the same
// without o (o's credits, if any, are not negative). A burstable j must match o one for one. When some hostname
// anti-affinity set may use o, its node count matters (the anti row), so
// lambda is at least 1 there. The relation is transitive; among kinds
// that dominate each other the first listed stays.
func undominated(cols []*column, groups []*group) []bool {
	words := (len(groups) + 63) / 64
	takes := make([][]uint64, len(cols))
	counted := make([]bool, len(cols))
	for i := range cols {
		takes[i] = make([]uint64, words)
	}
	for gi, g := range groups {
		for _, o := range g.allowed {
			takes[o][gi/64] |= 1 << (gi % 64)
			if g.anti >= 0 {
				counted[o] = true
			}
		}
	}
	var live []int
	for i := range cols {
		for _, w := range takes[i] {
			if w != 0 {
				live = append(live, i)
				break
			}
		}
	}
	subset := func(a, b []uint64) bool { // b within a
		for i := range a {
			if b[i]&^a[i] != 0 {
				return false
			}
		}
		return true
	}
	dom := func(j, o int) bool {
		return subset(takes[j], takes[o]) && dominates(cols[j], cols[o], counted[o])
	}
	keep := make([]bool, len(cols))
	for _, o := range live {
		keep[o] = true
		for _, j := range live {
			if j != o && dom(j, o) && (j < o || !dom(o, j)) {
				keep[o] = false
				break
			}
		}
	}
	return keep
}

func dominates(a, b *column, counted bool) bool {
	if a.rate > 0 {
		// a's credits, rate*(load - base*y), are no more than b's at any
		// load and node count.
		if a.rate > b.rate || a.rate*a.baseMinusDaemon < b.rate*b.baseMinusDaemon {
			return false
		}
		if a.price > b.price {
			return false
		}
		for i := range a.room {
			if a.room[i] < b.room[i] {
				return false
			}
		}
		return true
	}
	lambda := 0.0
	if counted {
		lambda = 1
	}
	for i := range a.room {
		if b.room[i] <= 0 {
			continue
		}
		if a.room[i] <= 0 {
			return false
		}
		lambda = max(lambda, b.room[i]/a.room[i])
	}
	return lambda*a.price <= b.price
}

// components splits the groups into parts that share no node kind: each
// part is an LP of its own, and the bound is the sum of their optima.
func components(groups []*group, ncols int) [][]*group {
	parent := make([]int, len(groups))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := make([]int, ncols)
	for i := range owner {
		owner[i] = -1
	}
	anti := map[int]int{}
	for gi, g := range groups {
		for _, o := range g.allowed {
			if owner[o] < 0 {
				owner[o] = gi
			} else {
				parent[find(gi)] = find(owner[o])
			}
		}
		if g.anti >= 0 {
			if o, ok := anti[g.anti]; ok {
				parent[find(gi)] = find(o)
			} else {
				anti[g.anti] = gi
			}
		}
	}
	byRoot := map[int][]*group{}
	var roots []int
	for gi, g := range groups {
		r := find(gi)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], g)
	}
	out := make([][]*group, 0, len(roots))
	for _, r := range roots {
		out = append(out, byRoot[r])
	}
	return out
}
