package planning_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/state/suite_test.go: what its
// cluster state (an informer-fed mirror) says of nodes, NodeClaims and
// the pods on them is, here, what planning.SimulationInput makes of a
// snapshot, and what scheduling.Solve then does with it. Each of
// Karpenter's informer events is a new snapshot. (Its NodePool resource
// cases are ported in shared/core/poolstatus, its consolidated-state
// and nomination cases in shared/core/disruption.)

const stateFile = "pkg/controllers/state/suite_test.go"

func stateCase(spec string) conformance.Case {
	return conformance.Case{Suite: "core/state", File: stateFile, Spec: spec}
}

// stateNode is the simulation's node named name, nil when there is none.
func stateNode(snap *cluster.Snapshot, name string) *scheduling.Node {
	sim := planning.SimulationInput(snap, nil, map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: fakeTypes()}})
	for _, n := range sim.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func mustStateNode(t *testing.T, snap *cluster.Snapshot, name string) *scheduling.Node {
	t.Helper()
	n := stateNode(snap, name)
	if n == nil {
		t.Fatalf("no node %s in the simulation", name)
	}
	return n
}

// available is StateNode.Available: allocatable less the pods' requests.
func available(n *scheduling.Node) corev1.ResourceList {
	out := n.Allocatable.DeepCopy()
	for name, q := range n.Requested {
		a := out[name]
		a.Sub(q)
		out[name] = a
	}
	return out
}

// stateTestNode is test.Node of the suite: labelled with the NodePool and
// the first instance type, allocatable as given, with a provider ID.
func stateTestNode(name string, alloc corev1.ResourceList) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		wellknown.NodePoolLabel: "default", wellknown.InstanceTypeLabel: "default-instance-type", wellknown.HostnameLabel: name, wellknown.ZoneLabel: fakeZone1}},
		Spec:   corev1.NodeSpec{ProviderID: "fake:///" + name},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
}

// claimAndNode is test.NodeClaimAndNode: a launched, registered NodeClaim
// of the default NodePool and its Node, neither initialized.
func claimAndNode(name string, capacity corev1.ResourceList) (*karpv1.NodeClaim, *corev1.Node) {
	n := stateTestNode(name, capacity)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: "default", wellknown.InstanceTypeLabel: "default-instance-type"}},
		Spec:   karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		Status: karpv1.NodeClaimStatus{ProviderID: n.Spec.ProviderID, NodeName: name, Capacity: capacity, Allocatable: capacity}}
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(fixtureNow))
	nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(fixtureNow))
	return nc, n
}

// initialized is ExpectMakeNodesInitialized and ExpectMakeNodeClaimsInitialized.
func initialized(nc *karpv1.NodeClaim, n *corev1.Node) {
	if nc != nil {
		nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(fixtureNow))
	}
	n.Labels[wellknown.InitializedLabel] = "true"
	n.Labels[wellknown.RegisteredLabel] = "true"
}

func bound(p *corev1.Pod, n *corev1.Node) *corev1.Pod {
	p.Spec.NodeName = n.Name
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	return p
}

func TestConformanceState(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, stateCase(spec), body) }
	cpu := func(q string) corev1.ResourceList { return rl("cpu", q) }

	t.Run("Volume Usage/Limits", func(t *testing.T) { testStateVolumes(t) })
	t.Run("HostPort Usage", func(t *testing.T) { testStateHostPorts(t) })

	run("Node Deletion > should not leak a state node when the NodeClaim and Node names match", func(t *testing.T) {
		nc, n := claimAndNode("same-name", cpu("4"))
		snap := &cluster.Snapshot{NodeClaims: []*karpv1.NodeClaim{nc}, Nodes: []*corev1.Node{n}}
		count := func() int {
			return len(planning.SimulationInput(snap, nil, nil).Nodes)
		}
		if got := count(); got != 1 {
			t.Fatalf("%d nodes, want 1", got)
		}
		snap.NodeClaims = nil // the NodeClaim is deleted; its Node is not yet
		if got := count(); got != 1 {
			t.Fatalf("%d nodes after the NodeClaim went, want 1", got)
		}
		snap.Nodes = nil
		if got := count(); got != 0 {
			t.Fatalf("%d nodes after the Node went, want 0", got)
		}
	})

	nodeLevel := func(spec string, body func(t *testing.T)) { run("Node Resource Level > "+spec, body) }
	twoPods := func() (*corev1.Pod, *corev1.Pod) {
		return fakePod(requests("cpu", "1.5")), fakePod(requests("cpu", "2"))
	}
	nodeLevel("should not count pods not bound to nodes", func(t *testing.T) {
		p1, p2 := twoPods()
		n := stateTestNode("node", cpu("4"))
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{p1, p2}, Nodes: []*corev1.Node{n}}
		expectResources(t, cpu("0"), mustStateNode(t, snap, "node").Requested)
	})
	nodeLevel("should count new pods bound to nodes", func(t *testing.T) {
		p1, p2 := twoPods()
		n := stateTestNode("node", cpu("4"))
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{p1, p2}, Nodes: []*corev1.Node{n}}
		bound(p1, n)
		expectResources(t, cpu("1.5"), mustStateNode(t, snap, "node").Requested)
		bound(p2, n)
		expectResources(t, cpu("3.5"), mustStateNode(t, snap, "node").Requested)
	})
	nodeLevel("should count existing pods bound to nodes", func(t *testing.T) {
		p1, p2 := twoPods()
		n := stateTestNode("node", cpu("4"))
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{bound(p1, n), bound(p2, n)}, Nodes: []*corev1.Node{n}}
		expectResources(t, cpu("3.5"), mustStateNode(t, snap, "node").Requested)
	})
	nodeLevel("should subtract requests if the pod is deleted", func(t *testing.T) {
		p1, p2 := twoPods()
		n := stateTestNode("node", cpu("4"))
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{bound(p1, n), bound(p2, n)}, Nodes: []*corev1.Node{n}}
		expectResources(t, cpu("3.5"), mustStateNode(t, snap, "node").Requested)
		snap.Pods = []*corev1.Pod{p1}
		expectResources(t, cpu("1.5"), mustStateNode(t, snap, "node").Requested)
		snap.Pods = nil
		expectResources(t, cpu("0"), mustStateNode(t, snap, "node").Requested)
	})
	nodeLevel("should not add requests if the pod is terminal", func(t *testing.T) {
		p1, p2 := twoPods()
		n := stateTestNode("node", cpu("4"))
		bound(p1, n).Status.Phase = corev1.PodFailed
		bound(p2, n).Status.Phase = corev1.PodSucceeded
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{p1, p2}, Nodes: []*corev1.Node{n}}
		expectResources(t, cpu("0"), mustStateNode(t, snap, "node").Requested)
	})
	nodeLevel("should stop tracking nodes that are deleted", func(t *testing.T) {
		p1, _ := twoPods()
		n := stateTestNode("node", cpu("4"))
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{bound(p1, n)}, Nodes: []*corev1.Node{n}}
		sn := mustStateNode(t, snap, "node")
		expectResources(t, cpu("2.5"), available(sn))
		expectResources(t, cpu("1.5"), sn.Requested)
		snap.Nodes = nil
		if sim := planning.SimulationInput(snap, nil, nil); len(sim.Nodes) != 0 {
			t.Fatalf("%d nodes after the node went, want none", len(sim.Nodes))
		}
	})
	nodeLevel("should track pods correctly if we miss events or they are consolidated", func(t *testing.T) {
		n1 := stateTestNode("node-1", cpu("4"))
		p1 := bound(fakePod(requests("cpu", "1.5")), n1)
		p1.Name = "stateful-set-pod"
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{p1}, Nodes: []*corev1.Node{n1}}
		sn := mustStateNode(t, snap, "node-1")
		expectResources(t, cpu("2.5"), available(sn))
		expectResources(t, cpu("1.5"), sn.Requested)
		// The pod is deleted and made again on a second, larger node.
		n2 := stateTestNode("node-2", cpu("8"))
		p2 := bound(fakePod(requests("cpu", "5.0")), n2)
		p2.Name = "stateful-set-pod"
		snap = &cluster.Snapshot{Pods: []*corev1.Pod{p2}, Nodes: []*corev1.Node{n1, n2}}
		sn1, sn2 := mustStateNode(t, snap, "node-1"), mustStateNode(t, snap, "node-2")
		expectResources(t, cpu("4"), available(sn1))
		expectResources(t, cpu("0"), sn1.Requested)
		expectResources(t, cpu("3"), available(sn2))
		expectResources(t, cpu("5"), sn2.Requested)
	})
	nodeLevel("should maintain a correct count of resource usage as pods are deleted/added", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		n := stateTestNode("node", rl("cpu", "200", "pods", "500"))
		var pods []*corev1.Pod
		for range 100 {
			pods = append(pods, fakePod(requests("cpu", fmt.Sprintf("%1.1f", r.Float64()*2))))
		}
		snap := &cluster.Snapshot{Nodes: []*corev1.Node{n}}
		expectResources(t, rl("cpu", "0", "pods", "0"), mustStateNode(t, snap, "node").Requested)
		sum := resource.MustParse("0")
		for i, p := range pods {
			snap.Pods = append(snap.Pods, bound(p, n))
			sum.Add(p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
			expectResources(t, corev1.ResourceList{corev1.ResourceCPU: sum, corev1.ResourcePods: *resource.NewQuantity(int64(i+1), resource.DecimalSI)}, mustStateNode(t, snap, "node").Requested)
		}
		for i, p := range pods {
			snap.Pods = snap.Pods[1:]
			sum.Sub(p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
			expectResources(t, corev1.ResourceList{corev1.ResourceCPU: sum, corev1.ResourcePods: *resource.NewQuantity(int64(len(pods)-i-1), resource.DecimalSI)}, mustStateNode(t, snap, "node").Requested)
		}
		expectResources(t, rl("cpu", "0", "pods", "0"), mustStateNode(t, snap, "node").Requested)
	})
	nodeLevel("should track daemonset requested resources separately", func(t *testing.T) {
		// Karpenter keeps a node's DaemonSet requests apart so that a
		// DaemonSet already running there is not counted again as
		// overhead: here a pending pod that fits only if it is not.
		ds := daemonSet("ds", requests("cpu", "1", "memory", "2Gi"))
		n := stateTestNode("node", rl("cpu", "4", "memory", "8Gi", "pods", "10"))
		p1 := bound(fakePod(requests("cpu", "1.5")), n)
		snap := &cluster.Snapshot{Pods: []*corev1.Pod{p1}, Nodes: []*corev1.Node{n}, DaemonSets: []*appsv1.DaemonSet{ds}}
		expectResources(t, cpu("1.5"), mustStateNode(t, snap, "node").Requested)
		fits := func() bool {
			pending := fakePod(requests("cpu", "1.5"))
			r := scheduling.Solve(planning.SimulationInput(snap, []*corev1.Pod{pending}, nil), scheduling.Provisioning())
			return len(r.Existing["node"]) == 1
		}
		if !fits() {
			t.Fatal("a 1.5 CPU pod does not fit beside the pod and the DaemonSet's overhead")
		}
		dsPod := bound(fakePod(ownedBy(ds), requests("cpu", "1", "memory", "2Gi")), n)
		snap.Pods = append(snap.Pods, dsPod)
		expectResources(t, rl("cpu", "2.5", "memory", "2Gi"), mustStateNode(t, snap, "node").Requested)
		if !fits() {
			t.Fatal("the DaemonSet's running pod is counted twice: a 1.5 CPU pod no longer fits")
		}
	})
	nodeLevel("should mark node for deletion when node is deleted", func(t *testing.T) {
		n := stateTestNode("node", cpu("4"))
		n.Finalizers = []string{wellknown.TerminationFinalizer}
		snap := &cluster.Snapshot{Nodes: []*corev1.Node{n}}
		if mustStateNode(t, snap, "node").MarkedForDeletion {
			t.Fatal("marked for deletion before it was deleted")
		}
		n.DeletionTimestamp = &metav1.Time{Time: fixtureNow}
		if !mustStateNode(t, snap, "node").MarkedForDeletion {
			t.Fatal("not marked for deletion")
		}
	})
	nodeLevel("should mark node for deletion when nodeclaim is deleted", func(t *testing.T) {
		nc, n := claimAndNode("node", rl("cpu", "2", "memory", "32Gi", "ephemeral-storage", "20Gi"))
		nc.Finalizers = []string{wellknown.TerminationFinalizer}
		snap := &cluster.Snapshot{NodeClaims: []*karpv1.NodeClaim{nc}, Nodes: []*corev1.Node{n}}
		if mustStateNode(t, snap, "node").MarkedForDeletion {
			t.Fatal("marked for deletion before its NodeClaim was deleted")
		}
		nc.DeletionTimestamp = &metav1.Time{Time: fixtureNow}
		if !mustStateNode(t, snap, "node").MarkedForDeletion {
			t.Fatal("not marked for deletion")
		}
	})
	nodeLevel("should handle a node changing from no providerID to registering a providerID", func(t *testing.T) {
		n := stateTestNode("node", cpu("4"))
		n.Spec.ProviderID = ""
		snap := &cluster.Snapshot{Nodes: []*corev1.Node{n}}
		if got := len(planning.SimulationInput(snap, nil, nil).Nodes); got != 1 {
			t.Fatalf("%d nodes, want 1", got)
		}
		n.Spec.ProviderID = "fake://node"
		if got := len(planning.SimulationInput(snap, nil, nil).Nodes); got != 1 {
			t.Fatalf("%d nodes after the provider ID, want 1", got)
		}
		mustStateNode(t, snap, "node")
	})

	t.Run("Pod Anti-Affinity", func(t *testing.T) { testStateAntiAffinity(t) })
	t.Run("DaemonSet Controller", func(t *testing.T) { testStateDaemonSets(t) })
	t.Run("Taints", func(t *testing.T) { testStateTaints(t) })

	capacity := func(spec string, build func() *cluster.Snapshot, name string) {
		run("StateNode Capacity > "+spec, func(t *testing.T) {
			// resources.Node counts one per node against a NodePool's
			// nodes limit: a limit of 1 leaves no room for another.
			snap := build()
			np := fakePool("default", withPoolLimits(string(wellknown.ResourceNodes), "1"))
			snap.NodePools = []*karpv1.NodePool{np}
			mustStateNode(t, snap, name)
			pending := fakePod(requests("cpu", "100"))
			r := scheduling.Solve(planning.SimulationInput(snap, []*corev1.Pod{pending}, map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: []*scheduling.InstanceType{fakeType("big", "", rl("cpu", "128", "memory", "128Gi"))}}}), scheduling.Provisioning())
			if len(r.NewNodeClaims) != 0 {
				t.Fatal("the node does not count against the NodePool's nodes limit")
			}
		})
	}
	capacity("should include resources.Node in capacity for an initialized node", func() *cluster.Snapshot {
		nc, n := claimAndNode("node", cpu("4"))
		initialized(nc, n)
		return &cluster.Snapshot{NodeClaims: []*karpv1.NodeClaim{nc}, Nodes: []*corev1.Node{n}}
	}, "node")
	capacity("should include resources.Node in capacity for a NodeClaim without a Node", func() *cluster.Snapshot {
		nc, _ := claimAndNode("claim", cpu("4"))
		nc.Status.NodeName = ""
		return &cluster.Snapshot{NodeClaims: []*karpv1.NodeClaim{nc}}
	}, "claim")
	capacity("should include resources.Node in capacity for uninitialized node with NodeClaim", func() *cluster.Snapshot {
		nc, n := claimAndNode("node", cpu("4"))
		return &cluster.Snapshot{NodeClaims: []*karpv1.NodeClaim{nc}, Nodes: []*corev1.Node{n}}
	}, "node")
}

// csiDriver is the suite's fake CSI provisioner.
const csiDriver = "fake.csi.provider"

func testStateVolumes(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, stateCase("Volume Usage/Limits > "+spec), body)
	}
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "my-storage-class"}, Provisioner: csiDriver, VolumeBindingMode: &wait,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.ZoneLabel, Values: []string{fakeZone1}}}}}}
	// world is a node whose CSI driver attaches 10 volumes, with 10 pods
	// each mounting a claim of the driver's class.
	world := func(withClaim bool) (*cluster.Snapshot, []*corev1.PersistentVolumeClaim) {
		nc, n := claimAndNode("node", rl("cpu", "4", "memory", "4Gi", "pods", "100"))
		initialized(nc, n)
		count := int32(10)
		snap := &cluster.Snapshot{Nodes: []*corev1.Node{n}, StorageClasses: []*storagev1.StorageClass{sc},
			CSINodes: []*storagev1.CSINode{{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
				{Name: csiDriver, NodeID: "fake-node-id", Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}}}}
		if withClaim {
			snap.NodeClaims = []*karpv1.NodeClaim{nc}
		}
		var pvcs []*corev1.PersistentVolumeClaim
		for i := range 10 {
			pvc := pvcOf(fmt.Sprintf("pvc-%d", i), sc.Name)
			pvcs = append(pvcs, pvc)
			snap.PVCs = append(snap.PVCs, pvc)
			snap.Pods = append(snap.Pods, bound(fakePod(mounting(pvc.Name)), n))
		}
		return snap, pvcs
	}
	// onNode says whether a pending pod mounting claim goes on the node.
	onNode := func(snap *cluster.Snapshot, claim string) bool {
		if claim == "test" {
			snap.PVCs = append(snap.PVCs, pvcOf("test", sc.Name))
		}
		pending := fakePod(mounting(claim))
		r := scheduling.Solve(planning.SimulationInput(snap, []*corev1.Pod{pending}, nil), scheduling.Provisioning())
		return len(r.Existing["node"]) == 1
	}
	run("should hydrate the volume usage on a Node update", func(t *testing.T) {
		snap, _ := world(false)
		if onNode(snap, "test") {
			t.Fatal("an 11th volume went on a node whose driver attaches 10")
		}
	})
	run("should maintain the volume usage state when receiving NodeClaim updates", func(t *testing.T) {
		snap, _ := world(true)
		if onNode(snap, "test") {
			t.Fatal("an 11th volume went on a node whose driver attaches 10")
		}
	})
	run("should ignore the volume usage limits breach if the pod update is for an already tracked pod", func(t *testing.T) {
		snap, pvcs := world(true)
		if !onNode(snap, pvcs[5].Name) {
			t.Fatalf("a pod mounting %s, attached there already, does not go on the node: %v", pvcs[5].Name, snap.Pods[5].Spec.Volumes)
		}
	})
}

func pvcOf(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}
}

func mounting(claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: claim, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func testStateHostPorts(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, stateCase("HostPort Usage > "+spec), body)
	}
	conflicts := func(t *testing.T, withClaim bool) {
		nc, n := claimAndNode("node", rl("cpu", "4", "memory", "4Gi", "pods", "100"))
		initialized(nc, n)
		snap := &cluster.Snapshot{Nodes: []*corev1.Node{n}}
		if withClaim {
			snap.NodeClaims = []*karpv1.NodeClaim{nc}
		}
		for i := range 10 {
			snap.Pods = append(snap.Pods, bound(fakePod(hostPort(int32(i))), n))
		}
		pending := fakePod(hostPort(5))
		r := scheduling.Solve(planning.SimulationInput(snap, []*corev1.Pod{pending}, nil), scheduling.Provisioning())
		if len(r.Existing["node"]) != 0 {
			t.Fatal("a pod asking host port 5 went on a node where it is taken")
		}
	}
	run("should hydrate the HostPort usage on a Node update", func(t *testing.T) { conflicts(t, false) })
	run("should maintain the host port usage state when receiving NodeClaim updates", func(t *testing.T) { conflicts(t, true) })
}

func testStateAntiAffinity(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, stateCase("Pod Anti-Affinity > "+spec), body)
	}
	// A node in zone 1 and one in zone 2; a pod on the first keeps pods
	// labelled foo=bar out of its zone when its anti-affinity is required.
	world := func(preferred bool) (*cluster.Snapshot, *corev1.Pod) {
		n1 := stateTestNode("node-1", rl("cpu", "4", "pods", "10"))
		n2 := stateTestNode("node-2", rl("cpu", "4", "pods", "10"))
		n2.Labels[wellknown.ZoneLabel] = fakeZone2
		pod := bound(fakePod(requests("cpu", "1.5"), podAntiAffinity(preferred, wellknown.ZoneLabel, map[string]string{"foo": "bar"})), n1)
		return &cluster.Snapshot{Pods: []*corev1.Pod{pod}, Nodes: []*corev1.Node{n1, n2}}, pod
	}
	// keptOut says whether a foo=bar pod that must go to zone 1 is refused.
	keptOut := func(snap *cluster.Snapshot) bool {
		pending := fakePod(labelled("foo", "bar"), selector(wellknown.ZoneLabel, fakeZone1))
		r := scheduling.Solve(planning.SimulationInput(snap, []*corev1.Pod{pending}, nil), scheduling.Provisioning())
		return len(r.Existing["node-1"]) == 0
	}
	run("should track pods with required anti-affinity", func(t *testing.T) {
		snap, _ := world(false)
		if !keptOut(snap) {
			t.Fatal("the pod's required anti-affinity is not honoured")
		}
	})
	run("should not track pods with preferred anti-affinity", func(t *testing.T) {
		snap, _ := world(true)
		if keptOut(snap) {
			t.Fatal("another pod's preferred anti-affinity kept a pod out")
		}
	})
	run("should stop tracking pods with required anti-affinity if the pod is deleted", func(t *testing.T) {
		snap, _ := world(false)
		if !keptOut(snap) {
			t.Fatal("the pod's required anti-affinity is not honoured")
		}
		snap.Pods = nil
		if keptOut(snap) {
			t.Fatal("a deleted pod's anti-affinity still counts")
		}
	})
	run("should handle events out of order", func(t *testing.T) {
		// The node goes before its pod does: the pod counts no more.
		snap, _ := world(false)
		snap.Nodes = snap.Nodes[1:]
		n1 := stateTestNode("node-1b", rl("cpu", "4", "pods", "10"))
		snap.Nodes = append(snap.Nodes, n1)
		pending := fakePod(labelled("foo", "bar"), selector(wellknown.ZoneLabel, fakeZone1))
		r := scheduling.Solve(planning.SimulationInput(snap, []*corev1.Pod{pending}, nil), scheduling.Provisioning())
		if len(r.Existing["node-1b"]) != 1 {
			t.Fatal("the anti-affinity of a pod whose node is gone still counts")
		}
	})
}

func testStateDaemonSets(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, stateCase("DaemonSet Controller > "+spec), body)
	}
	// dsPods is what stands for each DaemonSet in the simulation.
	dsPods := func(snap *cluster.Snapshot) []*corev1.Pod {
		return planning.SimulationInput(snap, nil, nil).DaemonSetPods
	}
	run("should not update daemonsetCache when daemonset pod is not present", func(t *testing.T) {
		snap := &cluster.Snapshot{DaemonSets: []*appsv1.DaemonSet{daemonSet("ds", requests("cpu", "1", "memory", "1Gi"))}}
		if got := dsPods(snap); len(got) != 0 {
			t.Fatalf("DaemonSet pods %v, want none", got)
		}
	})
	run("should update daemonsetCache when daemonset pod is created", func(t *testing.T) {
		ds := daemonSet("ds", requests("cpu", "1", "memory", "1Gi"))
		p := fakePod(ownedBy(ds))
		p.Spec = ds.Spec.Template.Spec
		snap := &cluster.Snapshot{DaemonSets: []*appsv1.DaemonSet{ds}, Pods: []*corev1.Pod{p}}
		if got := dsPods(snap); len(got) != 1 || got[0] != p {
			t.Fatalf("DaemonSet pods %v, want %s", got, p.Name)
		}
	})
	run("should update daemonsetCache with the newest created pod", func(t *testing.T) {
		ds := daemonSet("ds", requests("cpu", "1", "memory", "1Gi"))
		p1, p2 := fakePod(ownedBy(ds)), fakePod(ownedBy(ds))
		p2.CreationTimestamp = metav1.NewTime(p1.CreationTimestamp.Add(time.Second))
		snap := &cluster.Snapshot{DaemonSets: []*appsv1.DaemonSet{ds}, Pods: []*corev1.Pod{p1}}
		if got := dsPods(snap); len(got) != 1 || got[0] != p1 {
			t.Fatalf("DaemonSet pods %v, want %s", got, p1.Name)
		}
		snap.Pods = []*corev1.Pod{p2, p1}
		if got := dsPods(snap); len(got) != 1 || got[0] != p2 {
			t.Fatalf("DaemonSet pods %v, want the newer %s", got, p2.Name)
		}
	})
	run("should delete daemonset in cache when daemonset is deleted", func(t *testing.T) {
		ds := daemonSet("ds", requests("cpu", "1", "memory", "1Gi"))
		p := fakePod(ownedBy(ds))
		snap := &cluster.Snapshot{DaemonSets: []*appsv1.DaemonSet{ds}, Pods: []*corev1.Pod{p}}
		if got := dsPods(snap); len(got) != 1 {
			t.Fatalf("DaemonSet pods %v, want %s", got, p.Name)
		}
		snap.DaemonSets, snap.Pods = nil, nil
		if got := dsPods(snap); len(got) != 0 {
			t.Fatalf("DaemonSet pods %v, want none", got)
		}
	})
	run("should only return daemonset pods from the daemonset cache", func(t *testing.T) {
		ds := daemonSet("ds", requests("cpu", "1", "memory", "1Gi"))
		snap := &cluster.Snapshot{DaemonSets: []*appsv1.DaemonSet{ds}}
		for range 1000 {
			snap.Pods = append(snap.Pods, fakePod())
		}
		if got := dsPods(snap); len(got) != 0 {
			t.Fatalf("%d DaemonSet pods, want none", len(got))
		}
	})
}

func testStateTaints(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, stateCase("Taints > "+spec), body) }
	ephemeral := []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: corev1.TaintEffectNoSchedule, Value: "true"},
	}
	startup := []corev1.Taint{
		{Key: "taint-key", Value: "taint-value", Effect: corev1.TaintEffectNoSchedule},
		{Key: "taint-key2", Value: "taint-value2", Effect: corev1.TaintEffectNoExecute},
	}
	// taintsOf is StateNode.Taints of the node.
	taintsOf := func(t *testing.T, managed, init bool, nodeTaints, startupTaints []corev1.Taint) []corev1.Taint {
		t.Helper()
		nc, n := claimAndNode("node", rl("cpu", "4"))
		delete(n.Labels, wellknown.NodePoolLabel)
		delete(nc.Labels, wellknown.NodePoolLabel)
		nc.Spec.StartupTaints = startupTaints
		n.Spec.Taints = nodeTaints
		snap := &cluster.Snapshot{Nodes: []*corev1.Node{n}}
		if managed {
			snap.NodeClaims = []*karpv1.NodeClaim{nc}
		}
		if init {
			initialized(nc, n)
		}
		return mustStateNode(t, snap, "node").Taints
	}
	expectTaints := func(t *testing.T, got, want []corev1.Taint) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("taints %v, want %v", got, want)
		}
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g.MatchTaint(&w) && g.Value == w.Value
			}
			if !found {
				t.Fatalf("taints %v, want %v among them", got, w)
			}
		}
	}
	run("Managed > should not consider ephemeral taints on a managed node that isn't initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, true, false, ephemeral, nil), nil)
	})
	run("Managed > should not consider NodeReadinessController taints on a managed node that isn't initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, true, false, []corev1.Taint{
			{Key: "readiness.k8s.io/some-rule", Effect: corev1.TaintEffectNoSchedule},
			{Key: "readiness.k8s.io/another-rule", Effect: corev1.TaintEffectNoExecute},
		}, nil), nil)
	})
	run("Managed > should consider ephemeral taints on a managed node after the node is initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, true, true, ephemeral, nil), ephemeral)
	})
	run("Managed > should consider startup taints on a managed node that isn't initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, true, false, startup, startup), nil)
	})
	run("Managed > should consider startup taints on a managed node after the node is initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, true, true, startup, startup), startup)
	})
	run("Unmanaged > should consider ephemeral taints on an unmanaged node that isn't initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, false, false, ephemeral, nil), ephemeral)
	})
	run("Unmanaged > should consider ephemeral taints on an unmanaged node after the node is initialized", func(t *testing.T) {
		expectTaints(t, taintsOf(t, false, true, ephemeral, nil), ephemeral)
	})
}
