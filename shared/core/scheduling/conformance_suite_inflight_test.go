package scheduling_test

import (
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// Describes "In-Flight Nodes", "Existing Nodes" and "No Pre-Binding",
// ported whole through a small cluster (conformance_suite_world_test.go):
// a NodeClaim launched by an earlier pass is in flight until initialized,
// as Karpless's lifecycle initializes it (the claim's Initialized
// condition and the node's karpenter.sh/initialized label). A pod's CPU
// limit without a request is its request (the API server's defaulting).

var in = corev1.NodeSelectorOpIn

func cpu(q string) func(*corev1.Pod) { return scheduling.Requests("cpu", q) }

func TestConformanceInFlightNodes(t *testing.T) {
	c := func(spec string) conformance.Case { return suiteCase("In-Flight Nodes > " + spec) }
	pool := func() *karpv1.NodePool { return scheduling.FakePool("default") }
	zoneReq := func(zones ...string) func(*corev1.Pod) {
		return scheduling.NodeRequirements(scheduling.Expr(wellknown.ZoneLabel, in, zones...))
	}

	conformance.Run(t, c("should not launch a second node if there is an in-flight node that can support the pod"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("10m")), scheduling.FakePod(cpu("10m"))
		n1 := expectNode(t, w.provision(p1), p1)
		expectSameNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("should not launch a second node if there is an in-flight node that can support the pod (node selectors)"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1 := scheduling.FakePod(cpu("10m"), zoneReq(scheduling.FakeZone2))
		p2 := scheduling.FakePod(cpu("10m"), zoneReq(scheduling.FakeZone1, scheduling.FakeZone2))
		p3 := scheduling.FakePod(cpu("10m"), zoneReq(scheduling.FakeZone1, scheduling.FakeZone3))
		n1 := expectNode(t, w.provision(p1), p1)
		expectSameNode(t, n1, expectNode(t, w.provision(p2), p2))
		expectOtherNode(t, n1, expectNode(t, w.provision(p3), p3))
	})
	conformance.Run(t, c("should launch a second node if a pod won't fit on the existingNodes node"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("1001m")), scheduling.FakePod(cpu("1"))
		n1 := expectNode(t, w.provision(p1), p1)
		expectOtherNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("should launch a second node if a pod isn't compatible with the existingNodes node (node selector)"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("10m")), scheduling.FakePod(scheduling.NodeSelector(wellknown.ArchLabel, "arm64"))
		n1 := expectNode(t, w.provision(p1), p1)
		expectOtherNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("should launch a second node if an in-flight node is terminating"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("10m")), scheduling.FakePod(cpu("10m"))
		b := w.provision(p1)[p1]
		// Karpenter deletes both without finalizers (gone at once); here
		// they stay, terminating, which the pass must see the same way.
		now := metav1.NewTime(worldNow)
		b.claim.DeletionTimestamp, b.node.DeletionTimestamp = &now, &now
		expectOtherNode(t, b.node, expectNode(t, w.provision(p2), p2))
	})

	// skew counts the bound pods with the labels per value of key.
	skew := func(w *world, key string) []int {
		nodes := map[string]*corev1.Node{}
		for _, n := range w.snap.Nodes {
			nodes[n.Name] = n
		}
		counts := map[string]int{}
		for _, p := range w.snap.Pods {
			if n := nodes[p.Spec.NodeName]; n != nil && p.Labels["foo"] == "bar" {
				counts[n.Labels[key]]++
			}
		}
		var out []int
		for _, v := range counts {
			out = append(out, v)
		}
		return out
	}
	expectCounts := func(t *testing.T, got []int, want ...int) {
		t.Helper()
		m := map[int]int{}
		for _, g := range got {
			m[g]++
		}
		for _, v := range want {
			m[v]--
		}
		for _, v := range m {
			if v != 0 {
				t.Fatalf("pods per domain %v, want %v", got, want)
			}
		}
	}
	spreadPods := func(key string, n int) []*corev1.Pod {
		var out []*corev1.Pod
		for range n {
			out = append(out, scheduling.FakePod(scheduling.PodLabels("foo", "bar"), scheduling.Spread(key, 1, corev1.DoNotSchedule, map[string]string{"foo": "bar"})))
		}
		return out
	}
	conformance.Run(t, c("Topology > should balance pods across zones with in-flight nodes"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		w.provision(spreadPods(wellknown.ZoneLabel, 4)...)
		expectCounts(t, skew(w, wellknown.ZoneLabel), 1, 1, 2)
		nodes := w.nodeCount()
		w.provision(spreadPods(wellknown.ZoneLabel, 5)...)
		expectCounts(t, skew(w, wellknown.ZoneLabel), 3, 3, 3)
		if w.nodeCount() != nodes {
			t.Fatalf("%d nodes, want the %d in flight to take the pods", w.nodeCount(), nodes)
		}
	})
	conformance.Run(t, c("Topology > should balance pods across hostnames with in-flight nodes"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		w.provision(spreadPods(wellknown.HostnameLabel, 4)...)
		expectCounts(t, skew(w, wellknown.HostnameLabel), 1, 1, 1, 1)
		w.provision(spreadPods(wellknown.HostnameLabel, 5)...)
		expectCounts(t, skew(w, wellknown.HostnameLabel), 1, 1, 1, 1, 1, 1, 1, 1, 1)
	})

	taint := corev1.Taint{Key: "foo.com/taint", Value: "tainted", Effect: corev1.TaintEffectNoSchedule}
	conformance.Run(t, c("Taints > should assume pod will schedule to a tainted node with no taints"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("8")), scheduling.FakePod()
		n1 := expectNode(t, w.provision(p1), p1)
		w.deletePod(p1)
		n1.Spec.Taints = nil
		expectSameNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("Taints > should assume pod will schedule to a node with ephemeral taint node.kubernetes.io/not-ready:NoExecute when the node is uninitialized"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2, p3 := scheduling.FakePod(), scheduling.FakePod(), scheduling.FakePod()
		b := w.provision(p1)[p1]
		w.deletePod(p1)
		b.node.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}
		expectSameNode(t, b.node, expectNode(t, w.provision(p2), p2))
		w.deletePod(p2)
		w.initialize(b)
		expectOtherNode(t, b.node, expectNode(t, w.provision(p3), p3))
	})
	conformance.Run(t, c("Taints > should not assume pod will schedule to a tainted node"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("8")), scheduling.FakePod()
		b := w.provision(p1)[p1]
		w.initialize(b)
		w.deletePod(p1)
		b.node.Spec.Taints = append(b.node.Spec.Taints, taint)
		expectOtherNode(t, b.node, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("Taints > should assume pod will schedule to a tainted node with a custom startup taint"), func(t *testing.T) {
		np := pool()
		np.Spec.Template.Spec.StartupTaints = append(np.Spec.Template.Spec.StartupTaints, taint)
		w := newWorld(t, nil, np)
		p1, p2 := scheduling.FakePod(cpu("8")), scheduling.FakePod()
		n1 := expectNode(t, w.provision(p1), p1)
		w.deletePod(p1)
		if len(n1.Spec.Taints) == 0 || !n1.Spec.Taints[0].MatchTaint(&taint) {
			t.Fatalf("node taints %v, want the startup taint", n1.Spec.Taints)
		}
		expectSameNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("Taints > should not assume pod will schedule to a node with startup taints after initialization"), func(t *testing.T) {
		startup := corev1.Taint{Key: "ignore-me", Value: "nothing-to-see-here", Effect: corev1.TaintEffectNoSchedule}
		np := pool()
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{startup}
		w := newWorld(t, nil, np)
		p1, p2 := scheduling.FakePod(), scheduling.FakePod()
		b := w.provision(p1)[p1]
		w.deletePod(p1)
		w.initialize(b)
		b.node.Spec.Taints = []corev1.Taint{startup}
		b.node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}
		expectOtherNode(t, b.node, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("Taints > should consider a tainted NotReady node as in-flight even if initialized"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(cpu("10m")), scheduling.FakePod(cpu("10m"))
		n1 := expectNode(t, w.provision(p1), p1)
		// The node only is labelled initialized (its NodeClaim is not):
		// it is still in flight, its not-ready taints expected to go.
		n1.Labels[wellknown.InitializedLabel] = "true"
		n1.Spec.Taints = []corev1.Taint{
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: corev1.TaintEffectNoSchedule, Value: "true"},
		}
		expectSameNode(t, n1, expectNode(t, w.provision(p2), p2))
	})

	conformance.Run(t, c("Daemonsets > should track daemonset usage separately so we know how many DS resources are remaining to be scheduled"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		ds := daemonSet("ds", scheduling.Requests("cpu", "1", "memory", "1Gi"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, ds)
		p1 := scheduling.FakePod(cpu("8"))
		n1 := expectNode(t, w.provision(p1), p1)
		w.deletePod(p1)
		w.bindPod(scheduling.FakePod(scheduling.Requests("cpu", "1", "memory", "2Gi"), ownedBy(ds)), n1)
		// The DaemonSet's pod is bound: 16 CPU less 100m and its 1 leave 14.9.
		p2 := scheduling.FakePod(cpu("14.9"))
		expectSameNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("Daemonsets > should handle unexpected daemonset pods binding to the node"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		ds1 := daemonSet("ds1", scheduling.NodeSelector("my-node-label", "value"), scheduling.Requests("cpu", "1", "memory", "1Gi"))
		ds2 := daemonSet("ds2", scheduling.Requests("cpu", "1m"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, ds1, ds2)
		p1 := scheduling.FakePod(cpu("8"))
		n1 := expectNode(t, w.provision(p1), p1)
		n1.Labels["my-node-label"] = "value"
		w.deletePod(p1)
		w.bindPod(scheduling.FakePod(scheduling.NodeSelector("my-node-label", "value"), scheduling.Requests("cpu", "1", "memory", "2Gi"), ownedBy(ds1)), n1)
		p2 := scheduling.FakePod(cpu("15.5"))
		expectOtherNode(t, n1, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("Daemonsets > Should properly handle DaemonSet resources with Node Affinity for `karpenter.sh/initialized` and `karpenter.sh/registered`"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		ds1 := daemonSet("ds1", scheduling.NodeRequirements(scheduling.Expr(wellknown.InitializedLabel, in, "true")), scheduling.Requests("cpu", "1"))
		ds2 := daemonSet("ds2", scheduling.NodeRequirements(scheduling.Expr(wellknown.RegisteredLabel, in, "true")), scheduling.Requests("cpu", "1"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, ds1, ds2)
		p1 := scheduling.FakePod(cpu("2"))
		b := w.provision(p1)[p1]
		// Both DaemonSets count: 2 + 1 + 1 CPU take the 16 CPU type.
		if got := b.node.Labels[wellknown.InstanceTypeLabel]; got != "arm-instance-type" {
			t.Fatalf("node of type %s, want arm-instance-type (16 CPU)", got)
		}
		for _, r := range b.claim.Spec.Requirements {
			if r.Key == wellknown.InitializedLabel || r.Key == wellknown.RegisteredLabel {
				t.Fatalf("NodeClaim requirement %s leaked from the simulation", r.Key)
			}
		}
		for _, r := range w.results.NewNodeClaims[0].Requirements {
			if r.Key == wellknown.InitializedLabel || r.Key == wellknown.RegisteredLabel {
				t.Fatalf("NodeClaim requirement %s leaked from the simulation", r.Key)
			}
		}
		for _, k := range []string{wellknown.InitializedLabel, wellknown.RegisteredLabel} {
			if _, ok := w.results.NewNodeClaims[0].Labels[k]; ok {
				t.Fatalf("NodeClaim label %s leaked from the simulation", k)
			}
		}
		w.deletePod(p1)
		w.bindPod(scheduling.FakePod(scheduling.Requests("cpu", "1"), ownedBy(ds1)), b.node)
		w.bindPod(scheduling.FakePod(scheduling.Requests("cpu", "1"), ownedBy(ds2)), b.node)
		// Both DaemonSet pods bound: 13.9 CPU are left.
		p2 := scheduling.FakePod(cpu("13.9"))
		expectSameNode(t, b.node, expectNode(t, w.provision(p2), p2))
	})
	conformance.Run(t, c("should pack in-flight nodes before launching new nodes"), func(t *testing.T) {
		medium := scheduling.FakeType("medium", "", scheduling.RL("cpu", "4.25", "pods", "4"))
		w := newWorld(t, []*scheduling.InstanceType{medium}, pool())
		rnd := rand.New(rand.NewSource(1))
		for range 10 {
			var pods []*corev1.Pod
			for range rnd.Intn(10) {
				pods = append(pods, scheduling.FakePod(cpu("1")))
			}
			got := w.provision(pods...)
			for _, p := range pods {
				expectNode(t, got, p)
			}
		}
		free := 0
		for _, n := range w.snap.Nodes {
			left := n.Status.Allocatable.Cpu().MilliValue()
			for _, p := range w.snap.Pods {
				if p.Spec.NodeName == n.Name {
					left -= p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
				}
			}
			if left >= 1000 {
				free++
			}
		}
		if free > 1 {
			t.Fatalf("%d nodes with a CPU free, want at most 1", free)
		}
	})
	conformance.Run(t, c("should not launch a second node if there is an in-flight node that can support the pod (#2011)"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p := scheduling.FakePod(cpu("10m"))
		w.provisionNoBinding(p)
		w.provisionNoBinding(p)
		if w.nodeCount() != 1 {
			t.Fatalf("%d nodes, want 1", w.nodeCount())
		}
	})
	conformance.Run(t, c("should order initialized nodes for scheduling uninitialized nodes when all other nodes are inflight"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		elem := rand.New(rand.NewSource(2)).Intn(100)
		var ready binding
		for i := range 100 {
			b := w.addClaimAndNode(scheduling.RL("cpu", "1900m", "memory", "2038Mi", "pods", "5"), map[string]string{wellknown.NodePoolLabel: "default"})
			if i == elem {
				ready = b
				continue
			}
			// Launched, no node yet.
			w.snap.Nodes = w.snap.Nodes[:len(w.snap.Nodes)-1]
			b.claim.Status.NodeName = ""
		}
		w.initialize(ready)
		p := scheduling.FakePod()
		expectSameNode(t, ready.node, expectNode(t, w.provision(p), p))
	})
	conformance.Run(t, c("should schedule pods with the same host port to different nodes"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		p1, p2 := scheduling.FakePod(scheduling.HostPort(8080)), scheduling.FakePod(scheduling.HostPort(8080))
		got := w.provision(p1, p2)
		expectOtherNode(t, expectNode(t, got, p1), expectNode(t, got, p2))
	})
}

func TestConformanceExistingNodes(t *testing.T) {
	c := func(spec string) conformance.Case { return suiteCase("Existing Nodes > " + spec) }
	pool := func() *karpv1.NodePool { return scheduling.FakePool("default") }
	conformance.Run(t, c("should schedule a pod to an existing node unowned by Karpenter"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		n := w.addNode("unowned", scheduling.RL("cpu", "10", "memory", "10Gi", "pods", "110"), nil)
		p := scheduling.FakePod(cpu("10m"))
		expectSameNode(t, n, expectNode(t, w.provision(p), p))
	})
	conformance.Run(t, c("should schedule multiple pods to an existing node unowned by Karpenter"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		n := w.addNode("unowned", scheduling.RL("cpu", "10", "memory", "100Gi", "pods", "110"), nil)
		var pods []*corev1.Pod
		for range 100 {
			pods = append(pods, scheduling.FakePod(cpu("10m")))
		}
		got := w.provision(pods...)
		for _, p := range pods {
			expectSameNode(t, n, expectNode(t, got, p))
		}
	})
	conformance.Run(t, c("should order initialized nodes for scheduling uninitialized nodes"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		var bs []binding
		for range 100 {
			bs = append(bs, w.addClaimAndNode(scheduling.RL("cpu", "1900m", "memory", "2038Mi", "pods", "5"), map[string]string{wellknown.NodePoolLabel: "default"}))
		}
		ready := bs[rand.New(rand.NewSource(3)).Intn(100)]
		w.initialize(ready)
		p := scheduling.FakePod()
		expectSameNode(t, ready.node, expectNode(t, w.provision(p), p))
	})
	conformance.Run(t, c("should consider a pod incompatible with an existing node but compatible with NodePool"), func(t *testing.T) {
		w := newWorld(t, nil)
		w.initialize(w.addClaimAndNode(scheduling.RL("cpu", "10", "memory", "10Gi", "pods", "110"), nil))
		p := scheduling.FakePod(scheduling.NodeRequirements(scheduling.Expr(wellknown.ZoneLabel, in, scheduling.FakeZone1)))
		if _, ok := w.provision(p)[p]; ok {
			t.Fatalf("pod scheduled without a NodePool")
		}
		w.snap.NodePools = append(w.snap.NodePools, pool())
		expectNode(t, w.provision(p), p)
	})
	conformance.Run(t, c("Daemonsets > should not subtract daemonset overhead that is not strictly compatible with an existing node"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		b := w.addClaimAndNode(scheduling.RL("cpu", "1", "memory", "1Gi", "pods", "110"), nil)
		w.initialize(b)
		w.snap.DaemonSets = append(w.snap.DaemonSets, daemonSet("ds", scheduling.Requests("cpu", "100", "memory", "100Gi"),
			scheduling.NodeRequirements(scheduling.Expr(wellknown.ZoneLabel, in, scheduling.FakeZone1))))
		p1 := scheduling.FakePod(scheduling.Requests("cpu", "1", "memory", "1Gi"))
		expectSameNode(t, b.node, expectNode(t, w.provision(p1), p1))
		// A new node of the NodePool is modelled with the DaemonSet, whose
		// overhead no instance type can hold.
		p2 := scheduling.FakePod(scheduling.Requests("cpu", "1", "memory", "1Gi"))
		if where, ok := w.provision(p2)[p2]; ok {
			t.Fatalf("pod scheduled on %s, want it pending", where.node.Name)
		}
	})
}

func TestConformanceNoPreBinding(t *testing.T) {
	c := func(spec string) conformance.Case { return suiteCase("No Pre-Binding > " + spec) }
	pool := func() *karpv1.NodePool { return scheduling.FakePool("default") }
	oneNode := func(t *testing.T, w *world) {
		t.Helper()
		if w.nodeCount() != 1 {
			t.Fatalf("%d nodes, want 1", w.nodeCount())
		}
	}
	conformance.Run(t, c("should not bind pods to nodes"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		w.provisionNoBinding(scheduling.FakePod(cpu("10m")))
		oneNode(t, w)
		w.provisionNoBinding(scheduling.FakePod(cpu("10m")))
		oneNode(t, w)
	})
	conformance.Run(t, c("should handle resource zeroing of extended resources by kubelet"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		opts := []func(*corev1.Pod){scheduling.Requests("cpu", "10m", scheduling.FakeVendorA, "1")}
		w.provisionNoBinding(scheduling.FakePod(opts[0]))
		oneNode(t, w)
		// The kubelet reports the extended resources as zero at startup.
		n := w.snap.Nodes[0]
		n.Status.Capacity = corev1.ResourceList{scheduling.FakeVendorA: resource.MustParse("0")}
		n.Status.Allocatable = corev1.ResourceList{"fake.com/vendor-b": resource.MustParse("0")}
		w.provisionNoBinding(scheduling.FakePod(opts[0]))
		oneNode(t, w)
	})
	conformance.Run(t, c("should respect self pod affinity without pod binding (zone)"), func(t *testing.T) {
		w := newWorld(t, nil, pool())
		aff := map[string]string{"security": "s2"}
		mk := func() *corev1.Pod {
			return scheduling.FakePod(scheduling.PodLabels("security", "s2"), scheduling.PodAffinity(wellknown.ZoneLabel, aff))
		}
		p1, p2 := mk(), mk()
		w.provisionNoBinding(p1)
		w.provisionNoBinding(p2)
		oneNode(t, w)
	})
}
