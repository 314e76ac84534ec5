package scheduling

import (
	"fmt"
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// topoWorld is the cluster Karpenter's topology suite builds up with
// ExpectProvisioned, in Karpless's inputs. Each provision solves every pod
// still pending (as Karpenter's provisioner lists all unschedulable pods,
// not only those passed), launches every new claim as the fake cloud
// provider does and binds only the pods passed; the nodes it leaves are
// existing nodes of the next solve.
type topoWorld struct {
	t          *testing.T
	types      []*InstanceType
	pools      []*karpv1.NodePool
	nodes      []*Node
	pending    []*corev1.Pod
	namespaces []*corev1.Namespace
	pvcs       []*corev1.PersistentVolumeClaim
	pvs        []*corev1.PersistentVolume
	launched   int
}

func newTopoWorld(t *testing.T, pools ...*karpv1.NodePool) *topoWorld {
	return &topoWorld{t: t, types: fakeTypes(), pools: pools}
}

// topoPool is the topology suite's NodePool: any capacity type.
func topoPool(opts ...poolOpt) *karpv1.NodePool {
	np := mkPool("default", withReq(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpExists))
	for _, o := range opts {
		o(np)
	}
	return np
}

// provision is ExpectProvisioned: it returns the solve's results.
func (w *topoWorld) provision(pods ...*corev1.Pod) *Results {
	w.t.Helper()
	for _, p := range pods {
		if p.Spec.NodeName == "" && !slices.Contains(w.pending, p) {
			w.pending = append(w.pending, p)
		}
	}
	s := &Snapshot{
		Pods:                   slices.Clone(w.pending),
		Nodes:                  w.nodes,
		NodePools:              w.pools,
		NodeClasses:            map[string]*NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: w.types}},
		Namespaces:             w.namespaces,
		PersistentVolumeClaims: w.pvcs,
		PersistentVolumes:      w.pvs,
	}
	r := solve(w.t, s)
	passed := map[*corev1.Pod]bool{}
	for _, p := range pods {
		passed[p] = true
	}
	for name, ps := range r.Existing {
		for _, p := range ps {
			if passed[p] {
				w.bind(p, w.node(name))
			}
		}
	}
	for _, c := range r.NewNodeClaims {
		n := w.launch(c)
		for _, p := range c.Pods {
			if passed[p] {
				w.bind(p, n)
			}
		}
	}
	return r
}

func (w *topoWorld) node(name string) *Node {
	for _, n := range w.nodes {
		if n.Name == name {
			return n
		}
	}
	w.t.Fatalf("no node %s", name)
	return nil
}

func (w *topoWorld) bind(p *corev1.Pod, n *Node) {
	p.Spec.NodeName = n.Name
	n.Pods = append(n.Pods, p)
	w.pending = slices.DeleteFunc(w.pending, func(q *corev1.Pod) bool { return q == p })
}

// launch is the fake cloud provider's Create, then the node: the
// cheapest type with an offering the claim allows, its first such
// offering (a reserved one first), the claim's labels and taints. The
// node counts as initialized, as Karpenter's state sees a registered node.
func (w *topoWorld) launch(c *NewNodeClaim) *Node {
	var best *InstanceType
	var off Offering
	price := math.Inf(1)
	for _, it := range c.InstanceTypes {
		var allowed []Offering
		for i := range it.Offerings {
			if c.allows(&it.Offerings[i]) {
				allowed = append(allowed, it.Offerings[i])
			}
		}
		if len(allowed) == 0 {
			continue
		}
		cheapest := math.Inf(1)
		for _, o := range allowed {
			cheapest = min(cheapest, o.Price)
		}
		if cheapest < price {
			best, price, off = it, cheapest, allowed[0]
			for _, o := range allowed {
				if o.CapacityType == wellknown.CapacityTypeReserved {
					off = o
					break
				}
			}
		}
	}
	if best == nil {
		w.t.Fatalf("claim of %s has no offering to launch", c.NodePool)
	}
	w.launched++
	name := fmt.Sprintf("node-%03d", w.launched)
	l := map[string]string{}
	for k, v := range c.Labels {
		l[k] = v
	}
	for k, v := range best.Labels {
		l[k] = v
	}
	l[wellknown.ZoneLabel] = off.Zone
	l[wellknown.CapacityTypeLabel] = off.CapacityType
	l[wellknown.HostnameLabel] = name
	l[wellknown.NodePoolLabel] = c.NodePool
	l[wellknown.InitializedLabel] = "true"
	n := &Node{Name: name, NodeClaim: name, NodePool: c.NodePool, Labels: l, Taints: slices.Clone(c.Taints),
		Allocatable: best.Allocatable.DeepCopy(), Capacity: best.Capacity.DeepCopy()}
	w.nodes = append(w.nodes, n)
	return n
}

// addNode is an existing node of Karpenter's test.Node: the labels,
// taints and allocatable given, pods bound to it.
func (w *topoWorld) addNode(name string, l map[string]string, taints []corev1.Taint, alloc corev1.ResourceList, pods ...*corev1.Pod) *Node {
	n := &Node{Name: name, Labels: l, Taints: taints, Allocatable: alloc}
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	n.Pods = pods
	w.nodes = append(w.nodes, n)
	return n
}

// deletePod is ExpectDeleted.
func (w *topoWorld) deletePod(p *corev1.Pod) {
	for _, n := range w.nodes {
		n.Pods = slices.DeleteFunc(n.Pods, func(q *corev1.Pod) bool { return q == p })
	}
	w.pending = slices.DeleteFunc(w.pending, func(q *corev1.Pod) bool { return q == p })
}

// deleteUnscheduled is ExpectDeleteAllUnscheduledPods.
func (w *topoWorld) deleteUnscheduled() { w.pending = nil }

// nodeOf is ExpectScheduled: the node a pod is bound to.
func (w *topoWorld) nodeOf(p *corev1.Pod) *Node {
	w.t.Helper()
	if p.Spec.NodeName == "" {
		w.t.Fatalf("pod %s not scheduled", p.Name)
	}
	return w.node(p.Spec.NodeName)
}

func (w *topoWorld) expectNotBound(p *corev1.Pod) {
	w.t.Helper()
	if p.Spec.NodeName != "" {
		w.t.Fatalf("pod %s bound to %s, want it pending", p.Name, p.Spec.NodeName)
	}
}

// skew is ExpectSkew: per domain of the key, the bound pods of the
// namespace ("" any) the selector lists (nil: all), on nodes with the key
// (the node's name for the hostname).
func (w *topoWorld) skew(ns, key string, sel *metav1.LabelSelector) map[string]int {
	w.t.Helper()
	s := labels.Everything()
	if sel != nil {
		var err error
		if s, err = metav1.LabelSelectorAsSelector(sel); err != nil {
			s = labels.Nothing()
		}
	}
	out := map[string]int{}
	for _, n := range w.nodes {
		for _, p := range n.Pods {
			if (ns != "" && p.Namespace != ns) || ignoredForTopology(p) || !s.Matches(labels.Set(p.Labels)) {
				continue
			}
			if key == wellknown.HostnameLabel {
				out[n.Name]++
			} else if v, ok := n.Labels[key]; ok {
				out[v]++
			}
		}
	}
	return out
}

// expectSkew is ExpectSkew(...).To(ConsistOf(want...)).
func (w *topoWorld) expectSkew(ns string, c corev1.TopologySpreadConstraint, want ...int) {
	w.t.Helper()
	got := w.skew(ns, c.TopologyKey, c.LabelSelector)
	var counts []int
	for _, n := range got {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(counts, want) {
		w.t.Fatalf("skew on %s = %v, want counts %v", c.TopologyKey, got, want)
	}
}

// expectSkewAtMost is ExpectSkew(...).ToNot(ContainElements(BeNumerically(">", most))).
func (w *topoWorld) expectSkewAtMost(ns string, c corev1.TopologySpreadConstraint, most int) {
	w.t.Helper()
	for d, n := range w.skew(ns, c.TopologyKey, c.LabelSelector) {
		if n > most {
			w.t.Fatalf("skew on %s: %s has %d, want at most %d", c.TopologyKey, d, n, most)
		}
	}
}

// expectMaxSkew is ExpectMaxSkew(...).To(BeNumerically("<=", most)): the
// spread between the fullest and emptiest domain holding pods.
func (w *topoWorld) expectMaxSkew(ns string, c corev1.TopologySpreadConstraint, most int) {
	w.t.Helper()
	got := w.skew(ns, c.TopologyKey, c.LabelSelector)
	lo, hi := math.MaxInt, math.MinInt
	for _, n := range got {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(got) > 0 && hi-lo > most {
		w.t.Fatalf("max skew on %s = %d (%v), want at most %d", c.TopologyKey, hi-lo, got, most)
	}
}

// Pod options of Karpenter's test.PodOptions the topology suite uses.

func withPodLabels(l map[string]string) podOpt {
	return func(p *corev1.Pod) {
		for k, v := range l {
			p.Labels[k] = v
		}
	}
}

func podNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

func withTSC(cs ...corev1.TopologySpreadConstraint) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, cs...)
	}
}

func withTolerations(ts ...corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

// withPodAffinityTerms is PodRequirements and PodPreferences.
func withPodAffinityTerms(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: req, PreferredDuringSchedulingIgnoredDuringExecution: pref}
	}
}

// withPodAntiAffinityTerms is PodAntiRequirements and PodAntiPreferences.
func withPodAntiAffinityTerms(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: req, PreferredDuringSchedulingIgnoredDuringExecution: pref}
	}
}

// affinityTerm is a PodAffinityTerm selecting the labels given.
func affinityTerm(key string, sel map[string]string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
}

func weightedTerm(w int32, term corev1.PodAffinityTerm) corev1.WeightedPodAffinityTerm {
	return corev1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: term}
}

// topoPods is test.UnschedulablePods: n pods of the same options.
func topoPods(n int, opts ...podOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, fakePod(opts...))
	}
	return out
}

// tsc is a spread constraint on key of the labels given (nil: no selector).
func spreadConstraint(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, sel map[string]string) corev1.TopologySpreadConstraint {
	c := corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: when}
	if sel != nil {
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return c
}
