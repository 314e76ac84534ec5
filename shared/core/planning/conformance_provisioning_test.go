package planning_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go, Describe
// "Provisioning" (but its Labels, Volume Topology Requirements and
// MinValuesPolicy contexts, ported in shared/core/scheduling, and its
// Batcher, ported in shared/ticks/provision): each ExpectProvisioned is a
// provisioning pass of the world in conformance_fixture_test.go.

const provisioningFile = "pkg/controllers/provisioning/suite_test.go"

func provCase(spec string) conformance.Case {
	return conformance.Case{Suite: "core/provisioning", File: provisioningFile, Spec: "Provisioning > " + spec}
}

func TestConformanceProvisioning(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, provCase(spec), body) }
	gpuA := corev1.ResourceName(fakeVendorA)

	run("should provision nodes", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		pod := fakePod()
		p := w.provision(pod)
		if len(w.snap.Nodes) != 1 {
			t.Fatalf("%d nodes, want 1", len(w.snap.Nodes))
		}
		expectScheduled(t, w, p, pod)
	})
	run("Should provision nodes for multiple pods", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		var pods []*corev1.Pod
		for range 100 {
			pods = append(pods, fakePod())
		}
		p := w.provision(pods...)
		if len(w.snap.Nodes) == 0 {
			t.Fatal("no nodes")
		}
		for _, pod := range pods {
			expectScheduled(t, w, p, pod)
		}
	})
	conformance.Run(t, conformance.Case{Suite: "core/provisioning", File: provisioningFile,
		Spec:    "Provisioning > should expect nodeclaim terminationGracePeriod to be the global value when the nodepool terminationGracePeriod is not set",
		Differs: "Karpless has no cluster-wide default terminationGracePeriod (Karpenter's is a package variable that neither its chart nor the AWS provider sets): a NodeClaim gets its NodePool's, else none"}, func(*testing.T) {})
	run("should expect nodeclaim terminationGracePeriod to be the nil when the nodepool terminationGracePeriod and global terminationGracePeriod is not set", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		pod := fakePod()
		expectScheduled(t, w, w.provision(pod), pod)
		if len(w.created) != 1 || w.created[0].Spec.TerminationGracePeriod != nil {
			t.Fatalf("%d NodeClaims, terminationGracePeriod %v; want 1 with none", len(w.created), w.created[0].Spec.TerminationGracePeriod)
		}
	})
	run("should respect terminationGracePeriod value set on the nodePool over global terminationGracePeriod", func(t *testing.T) {
		np := fakePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 223 * time.Hour}
		})
		w := newWorld(t, nil, np)
		pod := fakePod()
		expectScheduled(t, w, w.provision(pod), pod)
		if len(w.created) != 1 || w.created[0].Spec.TerminationGracePeriod == nil || w.created[0].Spec.TerminationGracePeriod.Duration != 223*time.Hour {
			t.Fatalf("terminationGracePeriod %v, want 223h", w.created[0].Spec.TerminationGracePeriod)
		}
	})
	deleting := func() *karpv1.NodePool {
		return fakePool("default", func(np *karpv1.NodePool) {
			np.DeletionTimestamp = &metav1.Time{Time: fixtureNow}
			np.Finalizers = []string{"test"}
		})
	}
	run("should ignore NodePools that are deleting", func(t *testing.T) {
		w := newWorld(t, nil, deleting())
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
		if len(w.snap.Nodes) != 0 {
			t.Fatalf("%d nodes, want none", len(w.snap.Nodes))
		}
	})
	run("should mark pod as unschedulable if there are no valid nodepools", func(t *testing.T) {
		// Karpenter records a scheduling decision (and no success) for the
		// pod: here the pass's result says why it was not placed.
		w := newWorld(t, nil, deleting())
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
		if reasonOf(w.results, pod) == "no reason given" {
			t.Fatal("the pass decided nothing about the pod")
		}
	})
	schedulableAndNot := func(t *testing.T, mk func(key, value string) *corev1.Pod) {
		w := newWorld(t, nil, fakePool("default"))
		schedulable := []*corev1.Pod{
			mk(wellknown.NodePoolLabel, "default"),
			mk(wellknown.ZoneLabel, fakeZone1),
			mk(wellknown.InstanceTypeLabel, "default-instance-type"),
			mk(wellknown.ArchLabel, "arm64"),
			mk(wellknown.OSLabel, "linux"),
		}
		unschedulable := []*corev1.Pod{
			mk(wellknown.NodePoolLabel, "unknown"),
			mk(wellknown.ZoneLabel, "unknown"),
			mk(wellknown.InstanceTypeLabel, "unknown"),
			mk(wellknown.ArchLabel, "unknown"),
			mk(wellknown.OSLabel, "unknown"),
			mk(wellknown.CapacityTypeLabel, "unknown"),
			mk("foo", "bar"),
		}
		p := w.provision(schedulable...)
		for _, pod := range schedulable {
			expectScheduled(t, w, p, pod)
		}
		p = w.provision(unschedulable...)
		for _, pod := range unschedulable {
			expectNotScheduled(t, p, pod)
		}
	}
	run("should provision nodes for pods with supported node selectors", func(t *testing.T) {
		schedulableAndNot(t, func(k, v string) *corev1.Pod { return fakePod(selector(k, v)) })
	})
	run("should provision nodes for pods with supported node affinities", func(t *testing.T) {
		schedulableAndNot(t, func(k, v string) *corev1.Pod { return fakePod(nodeReqs(expr(k, corev1.NodeSelectorOpIn, v))) })
	})
	run("should provision nodes for accelerators", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		pods := []*corev1.Pod{fakePod(limited(fakeVendorA, "1")), fakePod(limited(fakeVendorB, "1"))}
		p := w.provision(pods...)
		for _, pod := range pods {
			expectScheduled(t, w, p, pod)
		}
	})
	run("should provision multiple nodes when maxPods is set", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolReq(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "single-pod-instance-type")))
		pods := []*corev1.Pod{fakePod(), fakePod(), fakePod()}
		p := w.provision(pods...)
		if len(w.snap.Nodes) != 3 {
			t.Fatalf("%d nodes, want 3", len(w.snap.Nodes))
		}
		for _, pod := range pods {
			expectScheduled(t, w, p, pod)
		}
	})
	run("should not use a different NodePool hash on the NodeClaim if the NodePool changes during scheduling", func(t *testing.T) {
		// The NodeClaim is written from the NodePool the solve read, not
		// from one read again after it.
		np := fakePool("default")
		hash := np.Hash()
		w := newWorld(t, nil, np)
		pending := planning.PodsToProvision(&w.snap, fixtureNow)
		r := scheduling.Solve(planning.SimulationInput(&w.snap, append(pending, fakePod()), map[string]*scheduling.NodeClass{"default": w.class}), scheduling.Provisioning())
		if len(r.NewNodeClaims) != 1 {
			t.Fatalf("%d new NodeClaims, want 1", len(r.NewNodeClaims))
		}
		applied := np.DeepCopy()
		applied.Spec.Template.Labels = map[string]string{"new-label": "new-value"}
		if applied.Hash() == hash {
			t.Fatal("the changed NodePool has the same hash")
		}
		nc := planning.NodeClaimFor(np, &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, r.NewNodeClaims[0])
		if got := nc.Annotations[wellknown.NodePoolHashAnnotation]; got != hash {
			t.Fatalf("hash annotation %q, want %q", got, hash)
		}
	})
	run("should schedule all pods on one inflight node when node is in deleting state", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", Finalizers: []string{wellknown.TerminationFinalizer},
			Labels: map[string]string{wellknown.NodePoolLabel: "default", wellknown.InstanceTypeLabel: "default-instance-type", wellknown.HostnameLabel: "old"}},
			Spec:   corev1.NodeSpec{ProviderID: "fake:///old"},
			Status: corev1.NodeStatus{Allocatable: rl("cpu", "4", "memory", "4Gi", "pods", "5"), Capacity: rl("cpu", "4", "memory", "4Gi", "pods", "5")}}
		w.snap.Nodes = append(w.snap.Nodes, old)
		for range 3 {
			w.bindPod(fakePod(), old)
		}
		old.DeletionTimestamp = &metav1.Time{Time: fixtureNow}
		p := w.provisionNoBinding(fakePod(), fakePod())
		if len(w.snap.Nodes) != 2 {
			t.Fatalf("%d nodes, want 2", len(w.snap.Nodes))
		}
		if len(p) != 5 {
			t.Fatalf("%d pods placed, want 5", len(p))
		}
		for pod, b := range p {
			if b.node.Name == old.Name {
				t.Fatalf("pod %s placed on the deleting node", pod.Name)
			}
		}
	})
	// The three sidecar cases and the pod-level one: three types only, of
	// 10, 11 and 12 CPU; a miscount lands the pod on the wrong one.
	sized := func(t *testing.T, pod *corev1.Pod, cpu, mem string) {
		w := newWorld(t, []*scheduling.InstanceType{exampleType("10", "4Gi"), exampleType("11", "5Gi"), exampleType("12", "6Gi")}, fakePool("default"))
		expectCapacity(t, w, expectScheduled(t, w, w.provision(pod), pod), cpu, mem)
	}
	run("should schedule based on the max resource requests of containers and initContainers with sidecar containers when initcontainer comes first", func(t *testing.T) {
		sized(t, fakePod(limited("cpu", "6", "memory", "2Gi"), initContainer(false, "cpu", "10", "memory", "4Gi"), initContainer(true, "cpu", "4.9", "memory", "2.9Gi")), "11", "5Gi")
	})
	run("should schedule based on the max resource requests of containers and initContainers with sidecar containers when sidecar container comes first and init container resources are smaller than container resources", func(t *testing.T) {
		sized(t, fakePod(limited("cpu", "6", "memory", "2Gi"), initContainer(true, "cpu", "4.9", "memory", "2.9Gi"), initContainer(false, "cpu", "5", "memory", "1Gi")), "11", "5Gi")
	})
	run("should schedule based on the max resource requests of containers and initContainers with sidecar containers when sidecar container comes first and init container resources are bigger than container resources", func(t *testing.T) {
		sized(t, fakePod(limited("cpu", "5", "memory", "1Gi"), initContainer(true, "cpu", "4.9", "memory", "2.9Gi"), initContainer(false, "cpu", "6", "memory", "2Gi")), "11", "5Gi")
	})
	run("should schedule based on the pod level resources requests", func(t *testing.T) {
		pod := fakePod(limited("cpu", "5", "memory", "1Gi"), initContainer(false, "cpu", "6", "memory", "2Gi"), initContainer(true, "cpu", "4", "memory", "2Gi"), func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: rl("cpu", "10", "memory", "4Gi"), Requests: rl("cpu", "9.9", "memory", "3.9Gi")}
		})
		sized(t, pod, "10", "4Gi")
	})

	t.Run("Resource Limits", func(t *testing.T) { testResourceLimits(t) })
	t.Run("Daemonsets", func(t *testing.T) { testDaemonsets(t) })

	run("Annotations > should annotate nodes", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}))
		pod := fakePod()
		expectScheduled(t, w, w.provision(pod), pod)
		// The NodeClaim carries the template's annotations, which the
		// node gets at registration.
		if got := w.created[0].Annotations[wellknown.DoNotDisruptAnnotation]; got != "true" {
			t.Fatalf("annotation %s = %q, want true", wellknown.DoNotDisruptAnnotation, got)
		}
	})
	run("Taints > should schedule pods that tolerate taints", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolTaint(corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})))
		pods := []*corev1.Pod{
			fakePod(tolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule})),
			fakePod(tolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			fakePod(tolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})),
			fakePod(tolerations(corev1.Toleration{Operator: corev1.TolerationOpExists})),
		}
		p := w.provision(pods...)
		for _, pod := range pods {
			expectScheduled(t, w, p, pod)
		}
	})

	t.Run("NodeClaim Creation", func(t *testing.T) { testNodeClaimCreation(t, gpuA) })
	t.Run("Preferential Fallback", func(t *testing.T) { testPreferentialFallback(t) })
	t.Run("Multiple NodePools", func(t *testing.T) { testMultipleNodePools(t) })

	run("StaticNodePool > should not create NodeClaims for StaticNodePool", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("static", func(np *karpv1.NodePool) { np.Spec.Replicas = new(int64(2)) }))
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("StaticNodePool > should still provision dynamic NodeClaims when there are both Static and Dynamic NodePools", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"), fakePool("static", func(np *karpv1.NodePool) { np.Spec.Replicas = new(int64(1)) }))
		pod := fakePod()
		n := expectScheduled(t, w, w.provision(pod), pod)
		if n.Labels[wellknown.NodePoolLabel] != "default" {
			t.Fatalf("node of %s, want default", n.Labels[wellknown.NodePoolLabel])
		}
	})
}

func testResourceLimits(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, provCase("Resource Limits > "+spec), body)
	}
	antiOpts := func(p *corev1.Pod) {
		labelled("app", "foo")(p)
		podAntiAffinity(false, wellknown.HostnameLabel, map[string]string{"app": "foo"})(p)
		requests("cpu", "1.5")(p)
	}
	run("should not schedule when limits are exceeded", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits("cpu", "20")))
		// A NodeClaim the cluster knows of, of the NodePool, with 100 CPU.
		w.snap.NodeClaims = append(w.snap.NodeClaims, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
			Status: karpv1.NodeClaimStatus{Capacity: rl("cpu", "100")}})
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should schedule if limits would be met", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits("cpu", "2")))
		pod := fakePod(requests("cpu", "1.75"))
		expectScheduled(t, w, w.provision(pod), pod)
	})
	run("should partially schedule if limits would be exceeded", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits("cpu", "3")))
		pods := []*corev1.Pod{fakePod(antiOpts), fakePod(antiOpts)}
		if p := w.provision(pods...); len(p) != 1 {
			t.Fatalf("%d pods scheduled, want 1", len(p))
		}
	})
	run("should not schedule if limits would be exceeded", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits("cpu", "2")))
		pod := fakePod(requests("cpu", "2.1"))
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should not schedule if limits would be exceeded (GPU)", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits("pods", "1")))
		pod := fakePod(limited(fakeVendorA, "1"))
		// The one type with the GPU has 5 pods, over the limit.
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should not schedule to a nodepool after a scheduling round if limits would be exceeded", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits("cpu", "2")))
		pod := fakePod(requests("cpu", "1.75"))
		expectScheduled(t, w, w.provision(pod), pod)
		pod = fakePod(requests("cpu", "1.75"))
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should not schedule if limits would be exceeded (node)", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLimits(string(wellknown.ResourceNodes), "2")))
		for range 2 {
			pod := fakePod(antiOpts)
			expectScheduled(t, w, w.provision(pod), pod)
		}
		pod := fakePod(antiOpts)
		expectNotScheduled(t, w.provision(pod), pod)
	})
}

func testDaemonsets(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, provCase("Daemonsets > "+spec), body) }
	small := func(p *corev1.Pod) { requests("cpu", "1", "memory", "1Gi")(p) }
	// expectSized provisions a 1 CPU, 1Gi pod (with opts) and checks the
	// size of its node: 4 CPU and 4Gi when the DaemonSets' overhead was
	// counted, 2 and 2Gi when not.
	expectSized := func(t *testing.T, w *world, cpu, mem string, opts ...func(*corev1.Pod)) *corev1.Node {
		t.Helper()
		pod := fakePod(append([]func(*corev1.Pod){small}, opts...)...)
		n := expectScheduled(t, w, w.provision(pod), pod)
		expectCapacity(t, w, n, cpu, mem)
		return n
	}
	dsOf := func(opts ...func(*corev1.Pod)) func(w *world) {
		return func(w *world) {
			w.snap.DaemonSets = append(w.snap.DaemonSets, daemonSet("ds-"+string(rune('a'+len(w.snap.DaemonSets))), opts...))
		}
	}
	worldWith := func(t *testing.T, np *karpv1.NodePool, ds ...func(*world)) *world {
		w := newWorld(t, nil, np)
		for _, d := range ds {
			d(w)
		}
		return w
	}
	run("should account for daemonsets", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi")
	})
	run("should account for daemonset hostports", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(requests("cpu", "2", "memory", "2Gi"), hostPort(8080)))
		pod := fakePod(small, hostPort(8080))
		expectNotScheduled(t, w.provision(pod), pod)
		if len(w.snap.Nodes) != 0 {
			t.Fatalf("%d nodes, want none", len(w.snap.Nodes))
		}
	})
	run("should account for daemonsets (with startup taint)", func(t *testing.T) {
		np := fakePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "foo.com/taint", Effect: corev1.TaintEffectNoSchedule}}
		})
		w := worldWith(t, np, dsOf(requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi")
	})
	run("should not schedule if daemonset overhead is too large", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(requests("cpu", "10000", "memory", "10000Gi")))
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should account for overhead using daemonset pod spec instead of daemonset spec", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		ds := daemonSet("ds", requests("cpu", "4", "memory", "4Gi"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, ds)
		// Its pod, pending, asks less than its template (a LimitRange).
		w.addPods(fakePod(ownedBy(ds), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi", selector(wellknown.NodePoolLabel, "default"))
	})
	run("should not schedule if resource requests are not defined and limits (requests) are too large", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl("cpu", "10000", "memory", "10000Gi"), Requests: rl("cpu", "1")}
		}))
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should schedule based on the max resource requests of containers and initContainers", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl("cpu", "10000", "memory", "1Gi"), Requests: rl("cpu", "1")}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Limits: rl("cpu", "10000", "memory", "3Gi"), Requests: rl("cpu", "3")}}}
		}))
		pod := fakePod()
		expectCapacity(t, w, expectScheduled(t, w, w.provision(pod), pod), "4", "4Gi")
	})
	run("should not schedule if combined max resources are too large for any node", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl("cpu", "10000", "memory", "1Gi"), Requests: rl("cpu", "1")}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Limits: rl("cpu", "10000", "memory", "10000Gi"), Requests: rl("cpu", "1")}}}
		}))
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should not schedule if initContainer resources are too large", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "10000", "memory", "10000Gi")}}}
		}))
		pod := fakePod()
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("should be able to schedule pods if resource requests and limits are not defined", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf())
		pod := fakePod()
		expectScheduled(t, w, w.provision(pod), pod)
	})
	run("should ignore daemonsets without matching tolerations", func(t *testing.T) {
		w := worldWith(t, fakePool("default", withPoolTaint(corev1.Taint{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoSchedule})), dsOf(requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "2", "2Gi", tolerations(corev1.Toleration{Operator: corev1.TolerationOpExists}))
	})
	run("should ignore daemonsets with an invalid selector", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(selector("node", "invalid"), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "2", "2Gi")
	})
	run("should ignore daemonsets when no instance types meet the daemonset requirements", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(nodeReqs(expr(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "non-existent-instance-type")), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "2", "2Gi")
	})
	run("should account for daemonsets with a custom label nodeSelector that matches the nodepool", func(t *testing.T) {
		w := worldWith(t, fakePool("default", withPoolLabel("purpose", "monitoring")), dsOf(selector("purpose", "monitoring"), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi")
	})
	run("should filter out daemonsets based on instance type requirements", func(t *testing.T) {
		w := worldWith(t, fakePool("default"),
			dsOf(nodeReqs(expr(fakeSizeKey, corev1.NodeSelectorOpIn, "small")), requests("cpu", "1")),
			dsOf(nodeReqs(expr(fakeSizeKey, corev1.NodeSelectorOpIn, "large")), requests("cpu", "10")))
		expectSized(t, w, "4", "4Gi")
	})
	run("should account daemonsets with NotIn operator and unspecified key", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(nodeReqs(expr("foo", corev1.NodeSelectorOpNotIn, "bar")), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi", nodeReqs(expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, fakeZone2)))
	})
	run("should remove daemonset node hostname affinity when considering daemonset schedulability", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolLabel("foo", "bar")))
		ds := daemonSet("ds", nodeReqs(expr("foo", corev1.NodeSelectorOpIn, "bar")), requests("cpu", "4", "memory", "4Gi"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, ds)
		// Its pod, pinned to a node by name and asking less (a
		// LimitRange): its requests count, with the template's affinity.
		w.addPods(fakePod(ownedBy(ds), nodeReqs(expr("metadata.name", corev1.NodeSelectorOpIn, "node-name")), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi", selector("foo", "bar"))
	})
	run("should consider a daemonset schedulable with multiple node affinity terms", func(t *testing.T) {
		w := worldWith(t, fakePool("default", withPoolLabel("foo", "bar")), dsOf(requests("cpu", "2", "memory", "2Gi"),
			nodeTerms([]corev1.NodeSelectorRequirement{expr("foo", corev1.NodeSelectorOpIn, "voo")}, []corev1.NodeSelectorRequirement{expr("foo", corev1.NodeSelectorOpIn, "bar")})))
		expectSized(t, w, "4", "4Gi")
	})
	run("should consider a daemonset schedulable with an incompatible node affinity preference", func(t *testing.T) {
		w := worldWith(t, fakePool("default"), dsOf(nodePref(1, expr("node", corev1.NodeSelectorOpIn, "invalid")), requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi")
	})
	run("should consider a daemonset schedulable with a PreferNoSchedule taint", func(t *testing.T) {
		w := worldWith(t, fakePool("default", withPoolTaint(corev1.Taint{Key: "test", Effect: corev1.TaintEffectPreferNoSchedule})), dsOf(requests("cpu", "2", "memory", "2Gi")))
		expectSized(t, w, "4", "4Gi")
	})
	run("should not account for daemonset hostports when daemonset would not schedule on selected node", func(t *testing.T) {
		w := worldWith(t, fakePool("default"),
			dsOf(requests("cpu", "4", "memory", "4Gi"), nodeReqs(expr(fakeSizeKey, corev1.NodeSelectorOpIn, "large")), hostPort(8080)),
			dsOf(requests("cpu", "2", "memory", "2Gi"), nodeReqs(expr(fakeSizeKey, corev1.NodeSelectorOpIn, "small")), hostPort(8081)))
		n := expectSized(t, w, "4", "4Gi", nodeReqs(expr(fakeSizeKey, corev1.NodeSelectorOpIn, "small")), hostPort(8080))
		if n.Labels[fakeSizeKey] != "small" {
			t.Fatalf("node of size %q, want small", n.Labels[fakeSizeKey])
		}
	})
}

func testNodeClaimCreation(t *testing.T, gpuA corev1.ResourceName) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, provCase("NodeClaim Creation > "+spec), body)
	}
	allTypes := []string{"default-instance-type", "small-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type", "arm-instance-type", "single-pod-instance-type"}
	// created provisions one pod and returns the one NodeClaim created.
	created := func(t *testing.T, w *world, opts ...func(*corev1.Pod)) *karpv1.NodeClaim {
		t.Helper()
		pod := fakePod(opts...)
		expectScheduled(t, w, w.provision(pod), pod)
		if len(w.created) != 1 {
			t.Fatalf("%d NodeClaims created, want 1", len(w.created))
		}
		return w.created[0]
	}
	run("should create a nodeclaim request with expected requirements", func(t *testing.T) {
		nc := created(t, newWorld(t, nil, fakePool("default")))
		expectRequirement(t, nc, wellknown.InstanceTypeLabel, allTypes...)
		expectRequirement(t, nc, wellknown.NodePoolLabel, "default")
	})
	run("should create a nodeclaim request with additional expected requirements", func(t *testing.T) {
		nc := created(t, newWorld(t, nil, fakePool("default", withPoolReq("custom-requirement-key", corev1.NodeSelectorOpIn, "value"), withPoolReq("custom-requirement-key2", corev1.NodeSelectorOpIn, "value"))))
		expectRequirement(t, nc, wellknown.InstanceTypeLabel, allTypes...)
		expectRequirement(t, nc, wellknown.NodePoolLabel, "default")
		expectRequirement(t, nc, "custom-requirement-key", "value")
		expectRequirement(t, nc, "custom-requirement-key2", "value")
	})
	run("should create a nodeclaim request restricting instance types on architecture", func(t *testing.T) {
		nc := created(t, newWorld(t, nil, fakePool("default", withPoolReq(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "arm64"))))
		expectRequirement(t, nc, wellknown.ArchLabel, "arm64")
		expectRequirement(t, nc, wellknown.InstanceTypeLabel, "arm-instance-type")
	})
	run("should create a nodeclaim request restricting instance types on operating system", func(t *testing.T) {
		// Of the fake's types only arm-instance-type runs "ios"; a type
		// here has one operating system, so it is that one's.
		types := fakeTypes()
		for _, it := range types {
			if it.Name == "arm-instance-type" {
				it.Labels[wellknown.OSLabel] = "ios"
			}
		}
		nc := created(t, newWorld(t, types, fakePool("default", withPoolReq(wellknown.OSLabel, corev1.NodeSelectorOpIn, "ios"))))
		expectRequirement(t, nc, wellknown.OSLabel, "ios")
		expectRequirement(t, nc, wellknown.InstanceTypeLabel, "arm-instance-type")
	})
	run("should create a nodeclaim request restricting instance types based on pod resource requests", func(t *testing.T) {
		nc := created(t, newWorld(t, nil, fakePool("default")), limited(fakeVendorA, "1"))
		expectRequirement(t, nc, wellknown.InstanceTypeLabel, "gpu-vendor-instance-type")
	})
	run("should create a nodeclaim request with the correct owner reference", func(t *testing.T) {
		np := fakePool("default")
		nc := created(t, newWorld(t, nil, np))
		want := metav1.OwnerReference{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: np.Name, UID: np.UID, BlockOwnerDeletion: new(true)}
		found := false
		for _, o := range nc.OwnerReferences {
			found = found || (o.APIVersion == want.APIVersion && o.Kind == want.Kind && o.Name == want.Name && o.UID == want.UID &&
				o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion && o.Controller == nil)
		}
		if !found {
			t.Fatalf("owner references %v, want %v", nc.OwnerReferences, want)
		}
	})
	run("should create a nodeclaim request propagating the nodeClass reference", func(t *testing.T) {
		// Karpless knows one kind of node class, the EC2NodeClass: the
		// reference names one other than "default".
		ref := &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "test"}
		w := newWorld(t, nil, fakePool("default", func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef = ref }))
		w.class.Name = "test"
		nc := created(t, w)
		if got := nc.Spec.NodeClassRef; got == nil || *got != *ref {
			t.Fatalf("nodeClassRef %v, want %v", got, ref)
		}
	})
	run("should create a nodeclaim with resource requests", func(t *testing.T) {
		nc := created(t, newWorld(t, nil, fakePool("default")), requests("cpu", "1", "memory", "1Mi", fakeVendorA, "1"), limited(fakeVendorA, "1"))
		if len(nc.Spec.Resources.Requests) != 4 {
			t.Fatalf("requests %v, want 4 resources", nc.Spec.Resources.Requests)
		}
		expectResources(t, corev1.ResourceList{corev1.ResourceCPU: rl("cpu", "1")["cpu"], corev1.ResourceMemory: rl("m", "1Mi")["m"], gpuA: rl("g", "1")["g"], corev1.ResourcePods: rl("p", "1")["p"]}, nc.Spec.Resources.Requests)
	})
	run("should create a nodeclaim with resource requests with daemon overhead", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, daemonSet("ds", requests("cpu", "1", "memory", "1Mi")))
		nc := created(t, w, requests("cpu", "1", "memory", "1Mi"))
		expectResources(t, rl("cpu", "2", "memory", "2Mi", "pods", "2"), nc.Spec.Resources.Requests)
	})
	run("should not double-count daemon overhead when multiple pods are scheduled to the same nodeclaim", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		w.snap.DaemonSets = append(w.snap.DaemonSets, daemonSet("ds", requests("cpu", "1", "memory", "1Mi")))
		pods := []*corev1.Pod{fakePod(requests("cpu", "1", "memory", "1Mi")), fakePod(requests("cpu", "1", "memory", "1Mi"))}
		p := w.provision(pods...)
		for _, pod := range pods {
			expectScheduled(t, w, p, pod)
		}
		if len(w.created) != 1 {
			t.Fatalf("%d NodeClaims created, want 1", len(w.created))
		}
		expectResources(t, rl("cpu", "3", "memory", "3Mi", "pods", "3"), w.created[0].Spec.Resources.Requests)
	})
}

// expectRequirement is ExpectNodeClaimRequirements for one In requirement:
// the claim has it on key with exactly these values.
func expectRequirement(t *testing.T, nc *karpv1.NodeClaim, key string, values ...string) {
	t.Helper()
	for _, r := range nc.Spec.Requirements {
		if r.Key != key || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		want := map[string]bool{}
		for _, v := range values {
			want[v] = true
		}
		ok := len(r.Values) == len(want)
		for _, v := range r.Values {
			ok = ok && want[v]
		}
		if !ok {
			t.Fatalf("requirement %s In %v, want %v", key, r.Values, values)
		}
		return
	}
	t.Fatalf("no requirement %s In %v among %v", key, values, nc.Spec.Requirements)
}

func testPreferentialFallback(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, provCase("Preferential Fallback > "+spec), body)
	}
	zoneOf := func(t *testing.T, w *world, pod *corev1.Pod) string {
		t.Helper()
		return expectScheduled(t, w, w.provision(pod), pod).Labels[wellknown.ZoneLabel]
	}
	in := func(key string, vals ...string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{expr(key, corev1.NodeSelectorOpIn, vals...)}
	}
	run("Required > should not relax the final term", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolReq(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, fakeZone1)))
		pod := fakePod(nodeTerms(in(wellknown.ZoneLabel, "invalid")))
		expectNotScheduled(t, w.provision(pod), pod)
	})
	run("Required > should relax multiple terms", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		pod := fakePod(nodeTerms(in(wellknown.ZoneLabel, "invalid"), in(wellknown.ZoneLabel, "invalid"), in(wellknown.ZoneLabel, fakeZone1), in(wellknown.ZoneLabel, fakeZone2)))
		if z := zoneOf(t, w, pod); z != fakeZone1 {
			t.Fatalf("zone %s, want %s", z, fakeZone1)
		}
	})
	run("Preferences > should relax all node affinity terms", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default"))
		pod := fakePod(nodePref(1, expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "invalid")), nodePref(1, expr(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "invalid")))
		expectScheduled(t, w, w.provision(pod), pod)
	})
	run("Preferences > should relax to use lighter weights", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("default", withPoolReq(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, fakeZone1, fakeZone2)))
		pod := fakePod(nodePref(100, expr(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, fakeZone3)),
			nodePref(50, expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, fakeZone2)),
			nodePref(1, expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, fakeZone1)))
		if z := zoneOf(t, w, pod); z != fakeZone2 {
			t.Fatalf("zone %s, want %s", z, fakeZone2)
		}
	})
	run("Preferences > should tolerate PreferNoSchedule taint only after trying to relax Affinity terms", func(t *testing.T) {
		taint := corev1.Taint{Key: "foo", Value: "bar", Effect: corev1.TaintEffectPreferNoSchedule}
		w := newWorld(t, nil, fakePool("default", withPoolTaint(taint)))
		pod := fakePod(nodePref(1, expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "invalid")), nodePref(1, expr(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, "invalid")))
		n := expectScheduled(t, w, w.provision(pod), pod)
		found := false
		for _, tt := range n.Spec.Taints {
			found = found || tt.MatchTaint(&taint) && tt.Value == taint.Value
		}
		if !found {
			t.Fatalf("node taints %v, want %v among them", n.Spec.Taints, taint)
		}
	})
	for _, key := range []string{wellknown.ZoneLabel, wellknown.HostnameLabel} {
		run("Preferences > should ignore node preferredDuringSchedulingIgnoredDuringExecution affinity > "+key, func(t *testing.T) {
			w := newWorld(t, nil, fakePool("default"))
			pod1 := fakePod(labelled("app", "foo"), requests("cpu", "2"))
			pref := fakePod(labelled("app", "baz"), requests("cpu", "1"), nodePref(1, expr(key, corev1.NodeSelectorOpIn, "value-1")))
			p := w.provision(pod1, pref)
			if a, b := expectScheduled(t, w, p, pod1), expectScheduled(t, w, p, pref); a.Name != b.Name {
				t.Fatalf("pods on %s and %s, want the same node", a.Name, b.Name)
			}
		})
	}
	ignoring := func(t *testing.T) *world {
		w := newWorld(t, nil, fakePool("default"))
		w.opts.Preferences = scheduling.PreferencesIgnore
		return w
	}
	// zonal is the node affinity and pod affinity cases: a pod that
	// prefers zone 2's pods' place goes where it fits best, zone 1's node.
	zonal := func(t *testing.T, opt func(*corev1.Pod)) {
		w := ignoring(t)
		zone1 := fakePod(labelled("app", "foo"), selector(wellknown.ZoneLabel, fakeZone1), requests("cpu", "2"))
		zone2 := []*corev1.Pod{
			fakePod(labelled("app", "bar"), selector(wellknown.ZoneLabel, fakeZone2), requests("cpu", "3")),
			fakePod(labelled("app", "bar"), selector(wellknown.ZoneLabel, fakeZone2), requests("cpu", "3")),
		}
		aff := fakePod(labelled("app", "baz"), requests("cpu", "1"), opt)
		p := w.provision(zone1, zone2[0], zone2[1], aff)
		n1, n2 := expectScheduled(t, w, p, zone1), expectScheduled(t, w, p, zone2[0])
		expectScheduled(t, w, p, zone2[1])
		na := expectScheduled(t, w, p, aff)
		if na.Name != n1.Name || na.Name == n2.Name {
			t.Fatalf("the pod is on %s; zone 1's pod on %s, zone 2's on %s", na.Name, n1.Name, n2.Name)
		}
	}
	run("Ignore Preferences > should ignore node affinity preferences", func(t *testing.T) {
		zonal(t, nodePref(1, expr(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, fakeZone2)))
	})
	// oneNode is the spread and anti-affinity cases: five pods that would
	// prefer apart share one node.
	oneNode := func(t *testing.T, opt func(*corev1.Pod)) {
		w := ignoring(t)
		var pods []*corev1.Pod
		for range 5 {
			pods = append(pods, fakePod(labelled("app", "foo"), opt))
		}
		p := w.provision(pods...)
		names := map[string]bool{}
		for _, pod := range pods {
			names[expectScheduled(t, w, p, pod).Name] = true
		}
		if len(names) != 1 {
			t.Fatalf("pods on %d nodes, want 1", len(names))
		}
	}
	// Karpenter names both entries of these tables after the zone key
	// (the second passes the hostname key).
	for _, key := range []string{wellknown.ZoneLabel, wellknown.HostnameLabel} {
		run("Ignore Preferences > should ignore topologySpreadConstraint preferences > "+wellknown.ZoneLabel, func(t *testing.T) {
			oneNode(t, spreadAnyway(key, map[string]string{"app": "foo"}))
		})
	}
	for _, key := range []string{wellknown.ZoneLabel, wellknown.HostnameLabel} {
		run("Ignore Preferences > should ignore pod anti-affinity preferences > "+wellknown.ZoneLabel, func(t *testing.T) {
			oneNode(t, podAntiAffinity(true, key, map[string]string{"app": "foo"}))
		})
	}
	for _, key := range []string{wellknown.ZoneLabel, wellknown.HostnameLabel} {
		run("Ignore Preferences > should ignore pod affinity preferences > "+wellknown.ZoneLabel, func(t *testing.T) {
			zonal(t, podAffinityPref(key, map[string]string{"app": "bar"}))
		})
	}
}

func testMultipleNodePools(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, provCase("Multiple NodePools > "+spec), body)
	}
	poolOf := func(t *testing.T, w *world, pod *corev1.Pod) string {
		t.Helper()
		return expectScheduled(t, w, w.provision(pod), pod).Labels[wellknown.NodePoolLabel]
	}
	run("should schedule to an explicitly selected NodePool", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("a"), fakePool("b"))
		if got := poolOf(t, w, fakePod(selector(wellknown.NodePoolLabel, "a"))); got != "a" {
			t.Fatalf("NodePool %s, want a", got)
		}
	})
	run("should schedule to a NodePool by labels", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("a", withPoolLabel("foo", "bar")), fakePool("b"))
		if got := poolOf(t, w, fakePod(selector("foo", "bar"))); got != "a" {
			t.Fatalf("NodePool %s, want a", got)
		}
	})
	run("should not match NodePool with PreferNoSchedule taint when other NodePool match", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("a", withPoolTaint(corev1.Taint{Key: "foo", Value: "bar", Effect: corev1.TaintEffectPreferNoSchedule})), fakePool("b"))
		if got := poolOf(t, w, fakePod()); got == "a" {
			t.Fatal("NodePool a, want the one without the taint")
		}
	})
	run("Weighted NodePools > should schedule to the nodepool with the highest priority always", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("a"), fakePool("b", withPoolWeight(20)), fakePool("c", withPoolWeight(100)))
		pods := []*corev1.Pod{fakePod(), fakePod(), fakePod()}
		p := w.provision(pods...)
		for _, pod := range pods {
			if got := expectScheduled(t, w, p, pod).Labels[wellknown.NodePoolLabel]; got != "c" {
				t.Fatalf("NodePool %s, want c", got)
			}
		}
	})
	run("Weighted NodePools > should schedule to explicitly selected nodepool even if other nodePools are higher priority", func(t *testing.T) {
		w := newWorld(t, nil, fakePool("a"), fakePool("b", withPoolWeight(20)), fakePool("c", withPoolWeight(100)))
		if got := poolOf(t, w, fakePod(selector(wellknown.NodePoolLabel, "a"))); got != "a" {
			t.Fatalf("NodePool %s, want a", got)
		}
	})
}
