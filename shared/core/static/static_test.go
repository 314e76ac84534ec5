package static

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

var now = time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC)

// mkType is an instance type with on-demand offerings at od $/h in zones
// a and b, and spot ones at 30% of it.
func mkType(name, arch string, cpu int64, od float64) *scheduling.InstanceType {
	family, _, _ := strings.Cut(name, ".")
	it := &scheduling.InstanceType{
		Name: name,
		Labels: map[string]string{
			wellknown.InstanceTypeLabel: name, wellknown.ArchLabel: arch, wellknown.OSLabel: "linux",
			wellknown.InstanceFamilyLabel: family, wellknown.InstanceCategoryLabel: family[:1], wellknown.InstanceCPULabel: fmt.Sprint(cpu),
		},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)},
	}
	it.Allocatable = it.Capacity
	for _, z := range []string{"a", "b"} {
		it.Offerings = append(it.Offerings,
			scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeOnDemand, Price: od, Available: true},
			scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: od * 0.3, Available: true})
	}
	return it
}

func classes() map[string]*scheduling.NodeClass {
	only := func(it *scheduling.InstanceType, zone, ct string) *scheduling.InstanceType {
		it.Offerings = slices.DeleteFunc(it.Offerings, func(o scheduling.Offering) bool { return o.Zone != zone || o.CapacityType != ct })
		return it
	}
	return map[string]*scheduling.NodeClass{
		"default": {Name: "default", Ready: true, InstanceTypes: []*scheduling.InstanceType{
			mkType("m5.large", "amd64", 2, 0.096),
			mkType("m5.xlarge", "amd64", 4, 0.192),
			mkType("c5.large", "amd64", 2, 0.085),
			mkType("r5.large", "amd64", 2, 0.126),
			mkType("m6g.large", "arm64", 2, 0.077),
			only(mkType("c6i.large", "amd64", 2, 0.080), "b", wellknown.CapacityTypeOnDemand),
		}},
		"broken": {Name: "broken", Ready: false},
	}
}

func staticPool(name string, replicas int64, mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	np.Spec.Replicas = &replicas
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func nodeLimit(n string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{wellknown.ResourceNodes: resource.MustParse(n)}
	}
}

// world builds a snapshot claim by claim.
type world struct {
	snap         *cluster.Snapshot
	disrupting   map[string]bool
	replacements map[string]bool
	seq          int
}

func newWorld(pools ...*karpv1.NodePool) *world {
	return &world{snap: &cluster.Snapshot{NodePools: pools}, disrupting: map[string]bool{}, replacements: map[string]bool{}}
}

func (w *world) input() *Input {
	return &Input{Cluster: w.snap, Classes: classes(), Disrupting: w.disrupting, Replacements: w.replacements, Now: now}
}

// claim adds a NodeClaim of pool; state is "unlaunched" (no provider ID),
// "launched" (no node yet), "node" (with a Ready node), "deleting" or
// "nodedeleting".
func (w *world) claim(pool, state string) *karpv1.NodeClaim {
	w.seq++
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("%s-%02d", pool, w.seq), Labels: map[string]string{wellknown.NodePoolLabel: pool},
		CreationTimestamp: metav1.NewTime(now.Add(time.Duration(w.seq) * time.Minute)),
	}}
	if state != "unlaunched" {
		nc.Status.ProviderID = fmt.Sprintf("aws:///a/i-%d", w.seq)
	}
	if state == "deleting" {
		nc.DeletionTimestamp = &metav1.Time{Time: now}
	}
	if state == "node" || state == "deleting" || state == "nodedeleting" {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + nc.Name}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
		if state == "nodedeleting" {
			n.DeletionTimestamp = &metav1.Time{Time: now}
		}
		nc.Status.NodeName = n.Name
		w.snap.Nodes = append(w.snap.Nodes, n)
	}
	w.snap.NodeClaims = append(w.snap.NodeClaims, nc)
	return nc
}

func (w *world) claims(pool, state string, n int) []*karpv1.NodeClaim {
	var out []*karpv1.NodeClaim
	for range n {
		out = append(out, w.claim(pool, state))
	}
	return out
}

// pod binds a pod to the claim's node.
func (w *world) pod(nc *karpv1.NodeClaim, mutate func(*corev1.Pod)) {
	w.seq++
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", w.seq), Namespace: "default"}, Spec: corev1.PodSpec{NodeName: nc.Status.NodeName}}
	p.Status.Phase = corev1.PodRunning
	if mutate != nil {
		mutate(p)
	}
	w.snap.Pods = append(w.snap.Pods, p)
}

func daemon(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds", Controller: new(true)}}
}

func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
}

func names(claims []*karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range claims {
		out = append(out, nc.Name)
	}
	return out
}

// Ported from Karpenter v1.14.1's static provisioning and deprovisioning
// suites (pkg/controllers/static/*/suite_test.go), on the counts.
func TestPlanCounts(t *testing.T) {
	cases := []struct {
		name       string
		pool       *karpv1.NodePool
		setup      func(w *world)
		create     int
		delete     int
		why        string
		wantClaims bool
	}{
		{name: "creates replicas from nothing", pool: staticPool("s", 2), create: 2, why: "static nodepool s: 0 of 2 replicas, creating 2", wantClaims: true},
		{name: "creates what is missing", pool: staticPool("s", 3), setup: func(w *world) { w.claim("s", "node") }, create: 2, wantClaims: true},
		{name: "zero replicas, nothing there", pool: staticPool("s", 0), why: "static nodepool s: 0 of 0 replicas"},
		{
			// Claims not launched, launched without a node, and with a
			// node all count: a rerun creates none of them again.
			name: "claims on their way count", pool: staticPool("s", 3),
			setup: func(w *world) { w.claim("s", "unlaunched"); w.claim("s", "launched"); w.claim("s", "node") },
		},
		{name: "more than replicas deletes the excess", pool: staticPool("s", 1), setup: func(w *world) { w.claims("s", "node", 2) }, delete: 1, why: "static nodepool s: 2 of 1 replicas, deleting 1"},
		{name: "zero replicas deletes all", pool: staticPool("s", 0), setup: func(w *world) { w.claims("s", "node", 3) }, delete: 3},
		{
			name: "deleting claims are not active: they are replaced", pool: staticPool("s", 3),
			setup: func(w *world) { w.claims("s", "node", 2); w.claim("s", "deleting"); w.claim("s", "nodedeleting") }, create: 1,
			why: "static nodepool s: 2 of 3 replicas (2 deleting), creating 1", wantClaims: true,
		},
		{
			name: "only active claims are deleted on scale-down", pool: staticPool("s", 1),
			setup: func(w *world) { w.claims("s", "node", 2); w.claims("s", "deleting", 2) }, delete: 1,
		},
		{
			name: "node limit reached", pool: staticPool("s", 3, nodeLimit("1")),
			setup: func(w *world) { w.claim("s", "node") }, why: "static nodepool s: 1 of 3 replicas, node limit 1 reached",
		},
		{name: "node limit caps the creation", pool: staticPool("s", 15, nodeLimit("10")), setup: func(w *world) { w.claims("s", "node", 3) }, create: 7, wantClaims: true},
		{
			// Karpenter counts deleting nodes against limits.nodes: an
			// expired node's replacement waits for it to go.
			name: "deleting claims count against the node limit", pool: staticPool("s", 3, nodeLimit("3")),
			setup: func(w *world) { w.claims("s", "node", 2); w.claim("s", "deleting") }, why: "static nodepool s: 2 of 3 replicas (1 deleting), node limit 3 reached",
		},
		{
			// A drift command in flight: its candidate leaves once its
			// replacement (active already) is ready; nothing to do.
			name: "a node being replaced is neither replaced again nor excess", pool: staticPool("s", 3),
			setup: func(w *world) {
				c := w.claims("s", "node", 3)
				w.disrupting[c[0].Name] = true
				r := w.claim("s", "unlaunched")
				w.replacements[r.Name] = true
			},
			why: "static nodepool s: 3 of 3 replicas (1 being replaced)",
		},
		{
			// The candidate is tainted before its replacement exists: the
			// replacement is on its way, the pool must not make another.
			name: "a candidate whose replacement is not created yet", pool: staticPool("s", 3),
			setup: func(w *world) { c := w.claims("s", "node", 3); w.disrupting[c[0].Name] = true },
		},
		{
			name: "a pool being deleted does nothing", pool: staticPool("s", 3, func(np *karpv1.NodePool) { np.DeletionTimestamp = &metav1.Time{Time: now} }),
			why: "static nodepool s: 0 of 3 replicas, being deleted: neither creates nor deletes",
		},
		{
			name: "a class not ready creates nothing", pool: staticPool("s", 2, func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "broken" }),
			why: "static nodepool s: 0 of 2 replicas, cannot create: EC2NodeClass broken is not ready",
		},
		{
			name: "claims of other pools do not count", pool: staticPool("s", 2),
			setup: func(w *world) { w.claims("other", "node", 3) }, create: 2, wantClaims: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dynamic := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
			w := newWorld(tc.pool, dynamic)
			if tc.setup != nil {
				tc.setup(w)
			}
			plan := Plan(w.input())
			if len(plan) != 1 {
				t.Fatalf("%d pools planned, want the static one only", len(plan))
			}
			p := plan[0]
			if p.Create != tc.create || len(p.Delete) != tc.delete {
				t.Errorf("create %d, delete %d (%v); want %d and %d", p.Create, len(p.Delete), names(p.Delete), tc.create, tc.delete)
			}
			if (p.Claim != nil) != tc.wantClaims {
				t.Errorf("claim %v, want one: %v", p.Claim, tc.wantClaims)
			}
			if tc.why != "" && p.Why != tc.why {
				t.Errorf("why %q\nwant %q", p.Why, tc.why)
			}
			for _, nc := range p.Delete {
				if nc.DeletionTimestamp != nil || w.disrupting[nc.Name] || w.replacements[nc.Name] {
					t.Errorf("scale-down chose %s, which is not active", nc.Name)
				}
			}
		})
	}
}

// The scale-down order, ported from Karpenter's deprovisioning suite:
// claims not launched first, then nodes with only DaemonSet pods, then by
// disruption cost, nodes with a do-not-disrupt pod last.
func TestScaleDownOrder(t *testing.T) {
	t.Run("not launched first", func(t *testing.T) {
		w := newWorld(staticPool("s", 2))
		w.claims("s", "node", 2)
		a, b := w.claim("s", "unlaunched"), w.claim("s", "unlaunched")
		got := names(Plan(w.input())[0].Delete)
		if want := []string{b.Name, a.Name}; !slices.Equal(got, want) {
			t.Errorf("deleted %v, want the unlaunched ones, newest first %v", got, want)
		}
	})
	// Two nodes each of: one ordinary pod (low), two (high), a
	// do-not-disrupt pod (dnd), DaemonSet pods only (ds).
	kinds := []string{"low", "high", "dnd", "ds"}
	build := func(replicas int64) (*world, []*karpv1.NodeClaim) {
		w := newWorld(staticPool("s", replicas))
		var all []*karpv1.NodeClaim
		for range 2 {
			for _, k := range kinds {
				nc := w.claim("s", "node")
				switch k {
				case "low":
					w.pod(nc, nil)
				case "high":
					w.pod(nc, nil)
					w.pod(nc, nil)
				case "dnd":
					w.pod(nc, doNotDisrupt)
				case "ds":
					w.pod(nc, daemon)
				}
				all = append(all, nc)
			}
		}
		return w, all
	}
	for _, tc := range []struct {
		replicas int64
		keep     []int
	}{
		{6, []int{0, 1, 2, 4, 5, 6}}, // DaemonSet-only nodes go first
		{4, []int{1, 2, 5, 6}},       // then the cheapest to evict
		{2, []int{2, 6}},             // then the dearer
		{0, nil},                     // do-not-disrupt last, but it goes
	} {
		t.Run(fmt.Sprintf("to %d", tc.replicas), func(t *testing.T) {
			w, all := build(tc.replicas)
			deleted := map[string]bool{}
			for _, nc := range Plan(w.input())[0].Delete {
				deleted[nc.Name] = true
			}
			var kept []int
			for i, nc := range all {
				if !deleted[nc.Name] {
					kept = append(kept, i)
				}
			}
			if !slices.Equal(kept, tc.keep) {
				t.Errorf("kept %v, want %v", kept, tc.keep)
			}
		})
	}
	t.Run("a node closer to expiry costs less", func(t *testing.T) {
		w := newWorld(staticPool("s", 1))
		young, old := w.claim("s", "node"), w.claim("s", "node")
		for _, nc := range []*karpv1.NodeClaim{young, old} {
			nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("10h")
			w.pod(nc, nil)
		}
		old.CreationTimestamp = metav1.NewTime(now.Add(-9 * time.Hour))
		if got := names(Plan(w.input())[0].Delete); !slices.Equal(got, []string{old.Name}) {
			t.Errorf("deleted %v, want %s (one hour of life left)", got, old.Name)
		}
	})
	t.Run("a replacement in flight is not taken", func(t *testing.T) {
		w := newWorld(staticPool("s", 1))
		w.claims("s", "node", 2)
		r := w.claim("s", "unlaunched")
		w.replacements[r.Name] = true
		for _, nc := range Plan(w.input())[0].Delete {
			if nc.Name == r.Name {
				t.Errorf("scale-down took replacement %s", r.Name)
			}
		}
	})
}

func TestTemplate(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
	}
	cases := []struct {
		name     string
		reqs     []karpv1.NodeSelectorRequirementWithMinValues
		types    []string // the claim's types, cheapest first
		cheapest string   // type/zone/capacity type the launch would pick
		why      string
	}{
		{
			name:  "no requirement: every type, cheapest first, spot preferred",
			types: []string{"m6g.large", "c5.large", "m5.large", "r5.large", "m5.xlarge", "c6i.large"}, cheapest: "m6g.large/a/spot",
		},
		{
			name:  "category and arch narrow the types",
			reqs:  []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.InstanceCategoryLabel, corev1.NodeSelectorOpIn, "c", "r"), req(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "amd64")},
			types: []string{"c5.large", "r5.large", "c6i.large"}, cheapest: "c5.large/a/spot",
		},
		{
			name:  "a zone its offerings lack leaves a type out",
			reqs:  []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "a"), req(wellknown.InstanceCPULabel, corev1.NodeSelectorOpLt, "3")},
			types: []string{"m6g.large", "c5.large", "m5.large", "r5.large"}, cheapest: "m6g.large/a/spot",
		},
		{
			name:  "on-demand only",
			reqs:  []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeOnDemand), req(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "amd64")},
			types: []string{"c6i.large", "c5.large", "m5.large", "r5.large", "m5.xlarge"}, cheapest: "c6i.large/b/on-demand",
		},
		{
			name: "a GPU requirement no type meets",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(wellknown.InstanceGPUCountLabel, corev1.NodeSelectorOpGt, "0")},
			why:  "no instance type of EC2NodeClass default meets its requirements",
		},
		{
			name: "minValues the types cannot meet",
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.InstanceFamilyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "c5", "x9"}, MinValues: new(3)}},
			why:  "requirement karpenter.k8s.aws/instance-family asks for 3 distinct values (minValues) and the allowed instance types have 2",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := staticPool("s", 1, func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = tc.reqs
				np.Spec.Template.Labels = map[string]string{"team": "a"}
				np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
			})
			c, why := Template(np, classes())
			if tc.why != "" {
				if c != nil || !strings.HasPrefix(why, tc.why) {
					t.Fatalf("claim %v, why %q; want none because %q", c, why, tc.why)
				}
				return
			}
			if c == nil {
				t.Fatalf("no claim: %s", why)
			}
			var got []string
			for _, it := range c.InstanceTypes {
				got = append(got, it.Name)
			}
			if !slices.Equal(got, tc.types) {
				t.Errorf("types %v, want %v", got, tc.types)
			}
			it, o := c.CheapestOffering()
			if it == nil || it.Name+"/"+o.Zone+"/"+o.CapacityType != tc.cheapest {
				t.Errorf("cheapest offering %v %+v, want %s", it, o, tc.cheapest)
			}
			// The claim names its types, keeps the template's other
			// requirements, labels and taints.
			var itReq *karpv1.NodeSelectorRequirementWithMinValues
			for i, r := range c.Requirements {
				if r.Key == wellknown.InstanceTypeLabel {
					itReq = &c.Requirements[i]
				}
			}
			if itReq == nil || len(itReq.Values) != len(tc.types) {
				t.Errorf("instance-type requirement %v, want the %d types", itReq, len(tc.types))
			}
			for _, r := range tc.reqs {
				if !slices.ContainsFunc(c.Requirements, func(q karpv1.NodeSelectorRequirementWithMinValues) bool { return q.Key == r.Key }) {
					t.Errorf("requirement on %s lost: %v", r.Key, c.Requirements)
				}
			}
			if c.Labels["team"] != "a" || c.Labels[wellknown.NodePoolLabel] != "s" || len(c.Taints) != 1 || len(c.Pods) != 0 {
				t.Errorf("labels %v, taints %v, pods %d", c.Labels, c.Taints, len(c.Pods))
			}
		})
	}
}
