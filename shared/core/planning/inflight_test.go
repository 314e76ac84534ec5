package planning_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// claimStage is how far a NodeClaim made by a pass has got when the next
// pass runs.
type claimStage int

const (
	// unlaunched: created, its launch not done yet (EC2 refused it, or the
	// tick that made it ended first); labels are the template's and the
	// custom keys' only.
	unlaunched claimStage = iota
	// launched: EC2 answered; the claim is labelled with its instance
	// type, zone and capacity type, and has a provider ID; no Node yet.
	launched
	// joined: its Node is up with the labels its kubelet may give itself
	// (NodeRestriction refuses kubernetes.io and k8s.io keys but its own),
	// not registered yet.
	joined
	// registered: the Node has its claim's labels and karpenter.sh/registered.
	registered
)

func (s claimStage) String() string {
	return [...]string{"unlaunched", "launched", "joined", "registered"}[s]
}

// inflightTypes have the instance attributes the AWS provider's e2e
// scheduling cases select: local NVMe, encryption in transit, a GPU, an
// Inferentia accelerator; the plain type is the cheapest.
func inflightTypes() []*scheduling.InstanceType {
	with := func(it *scheduling.InstanceType, kv ...string) *scheduling.InstanceType {
		for i := 0; i+1 < len(kv); i += 2 {
			it.Labels[kv[i]] = kv[i+1]
		}
		return it
	}
	return []*scheduling.InstanceType{
		with(fakeType("plain", "", rl("cpu", "2", "memory", "2Gi")), wellknown.InstanceEncryptionInTransitSupportedLabel, "false"),
		with(fakeType("nvme", "", rl("cpu", "4", "memory", "4Gi")), wellknown.InstanceLocalNVMeLabel, "75", wellknown.InstanceEncryptionInTransitSupportedLabel, "true"),
		with(fakeType("nvme-large", "", rl("cpu", "8", "memory", "16Gi")), wellknown.InstanceLocalNVMeLabel, "300", wellknown.InstanceEncryptionInTransitSupportedLabel, "true"),
		with(fakeType("gpu", "", rl("cpu", "4", "memory", "16Gi")), wellknown.InstanceGPUNameLabel, "t4", wellknown.InstanceGPUManufacturerLabel, "nvidia",
			wellknown.InstanceGPUCountLabel, "1", wellknown.InstanceGPUMemoryLabel, "16384", wellknown.InstanceLocalNVMeLabel, "125",
			wellknown.InstanceEncryptionInTransitSupportedLabel, "false"),
		with(fakeType("inf", "", rl("cpu", "4", "memory", "16Gi")), wellknown.InstanceAcceleratorNameLabel, "inferentia",
			wellknown.InstanceAcceleratorManufacturerLabel, "aws", wellknown.InstanceAcceleratorCountLabel, "1"),
	}
}

// restrictedPool is the e2e's NodePool for restricted label domain
// exceptions: each key Exists, the pod chooses the value.
func restrictedPool(domain string) *karpv1.NodePool {
	return fakePool("default",
		withPoolReq(domain+"/team", corev1.NodeSelectorOpExists),
		withPoolReq("subdomain."+domain+"/custom-label", corev1.NodeSelectorOpExists))
}

// passTo runs a provisioning pass for the pending pods and creates its
// NodeClaims, taken to stage (each launched on the type and offering the
// AWS launch would pick); it returns the claims created.
func (w *world) passTo(stage claimStage, pods ...*corev1.Pod) []*karpv1.NodeClaim {
	w.t.Helper()
	w.addPods(pods...)
	pending := planning.PodsToProvision(&w.snap, fixtureNow)
	r := scheduling.Solve(planning.SimulationInput(&w.snap, pending, map[string]*scheduling.NodeClass{w.class.Name: w.class}), w.opts)
	w.results = r
	var out []*karpv1.NodeClaim
	for _, c := range r.NewNodeClaims {
		w.seq++
		nc := planning.NodeClaimFor(w.pool(c.NodePool), &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: c.NodeClass}}, c)
		nc.Name = fmt.Sprintf("nodeclaim-%d", w.seq)
		w.snap.NodeClaims = append(w.snap.NodeClaims, nc)
		out = append(out, nc)
		if stage == unlaunched {
			continue
		}
		it, o := c.CheapestOffering()
		// As the launch records it: the type's labels, zone and capacity
		// type on the claim, then its provider ID and resources.
		maps.Copy(nc.Labels, it.Labels)
		nc.Labels[wellknown.ZoneLabel], nc.Labels[wellknown.CapacityTypeLabel] = o.Zone, o.CapacityType
		nc.Labels[wellknown.TopologyZoneIDLabel] = o.Zone + "-id"
		nc.Status = karpv1.NodeClaimStatus{ProviderID: fmt.Sprintf("fake:///%d", w.seq), Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable.DeepCopy()}
		nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(fixtureNow))
		if stage == launched {
			continue
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", w.seq), Labels: map[string]string{}},
			Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: []corev1.Taint{wellknown.UnregisteredNoExecuteTaint}},
			Status:     corev1.NodeStatus{Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable.DeepCopy()},
		}
		for k, v := range nc.Labels {
			if !kubeletRefused(k) {
				node.Labels[k] = v
			}
		}
		// What the kubelet and the cloud provider set themselves.
		maps.Copy(node.Labels, map[string]string{
			wellknown.HostnameLabel: node.Name, wellknown.InstanceTypeLabel: it.Name, wellknown.ArchLabel: it.Labels[wellknown.ArchLabel],
			wellknown.OSLabel: "linux", wellknown.ZoneLabel: o.Zone, wellknown.RegionLabel: "test-region",
		})
		nc.Status.NodeName = node.Name
		if stage == registered {
			maps.Copy(node.Labels, nc.Labels)
			node.Labels[wellknown.RegisteredLabel] = "true"
			node.Spec.Taints = nil
			nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(fixtureNow))
		}
		w.snap.Nodes = append(w.snap.Nodes, node)
	}
	return out
}

// kubeletRefused is a label the NodeRestriction admission plugin does not
// let a kubelet set on its own Node (kubernetes.io and k8s.io domains).
func kubeletRefused(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	return ok && (domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || domain == "k8s.io" || strings.HasSuffix(domain, ".k8s.io"))
}

// TestInFlightClaimTakesItsPod: a pass makes a NodeClaim for a pending
// pod; while that claim waits (to launch, for its Node, for its Node's
// registration), the next pass finds the pod's capacity in it and makes
// no second claim, whatever label the pod selects: an instance attribute
// the claim has only as a requirement until the launch names its type,
// or a NodePool key with operator Exists whose value the claim chose and
// its kubelet could not set. Karpenter launches one node for each of the
// AWS provider's e2e scheduling label cases.
func TestInFlightClaimTakesItsPod(t *testing.T) {
	in, gt := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpGt
	for _, tc := range []struct {
		name string
		pool *karpv1.NodePool
		pod  func() *corev1.Pod
	}{
		{"local NVMe", fakePool("default"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), nodeReqs(expr(wellknown.InstanceLocalNVMeLabel, gt, "0")))
		}},
		{"encryption in transit", fakePool("default"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), nodeReqs(expr(wellknown.InstanceEncryptionInTransitSupportedLabel, in, "true")))
		}},
		{"a GPU's labels", fakePool("default"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), selector(wellknown.InstanceGPUNameLabel, "t4", wellknown.InstanceGPUManufacturerLabel, "nvidia",
				wellknown.InstanceGPUCountLabel, "1", wellknown.InstanceGPUMemoryLabel, "16384"))
		}},
		{"an accelerator's labels", fakePool("default"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), selector(wellknown.InstanceAcceleratorNameLabel, "inferentia",
				wellknown.InstanceAcceleratorManufacturerLabel, "aws", wellknown.InstanceAcceleratorCountLabel, "1"))
		}},
		{"instance type and size", fakePool("default"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), selector(wellknown.InstanceTypeLabel, "nvme", wellknown.InstanceCPULabel, "4"))
		}},
		{"node.kubernetes.io keys a NodePool lets exist", restrictedPool("node.kubernetes.io"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), selector("node.kubernetes.io/team", "team-1", "subdomain.node.kubernetes.io/custom-label", "custom-value"))
		}},
		{"kops.k8s.io keys a NodePool lets exist", restrictedPool("kops.k8s.io"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), selector("kops.k8s.io/team", "team-1", "subdomain.kops.k8s.io/custom-label", "custom-value"))
		}},
		{"the region and zone ID, which every node gets", fakePool("default"), func() *corev1.Pod {
			return fakePod(requests("cpu", "100m"), selector(wellknown.RegionLabel, "test-region"),
				nodeReqs(expr(wellknown.InstanceLocalNVMeLabel, gt, "0"), expr(wellknown.TopologyZoneIDLabel, corev1.NodeSelectorOpExists)))
		}},
	} {
		for _, stage := range []claimStage{unlaunched, launched, joined, registered} {
			t.Run(tc.name+"/"+stage.String(), func(t *testing.T) {
				w := newWorld(t, inflightTypes(), tc.pool)
				pod := tc.pod()
				first := w.passTo(stage, pod)
				if len(first) != 1 {
					t.Fatalf("first pass made %d NodeClaims, want 1 (%s)", len(first), reasonOf(w.results, pod))
				}
				if again := w.passTo(stage); len(again) != 0 {
					t.Fatalf("second pass made %d more NodeClaims for the pod, want none; first %s: labels %v, requirements %v",
						len(again), first[0].Name, first[0].Labels, first[0].Spec.Requirements)
				}
				if len(w.results.Unschedulable) != 0 {
					t.Fatalf("second pass: %s", reasonOf(w.results, pod))
				}
			})
		}
	}
}

// TestInFlightClaimOthersPods: a NodeClaim not launched yet takes another
// pod only if some launch it allows would meet the pod, and, once it has
// taken one, only pods compatible with that one too; the others get a
// claim of their own.
func TestInFlightClaimOthersPods(t *testing.T) {
	in, gt := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpGt
	small := requests("cpu", "100m")
	for _, tc := range []struct {
		name  string
		first *corev1.Pod   // the pod the waiting claim is made for
		then  []*corev1.Pod // pending in the next pass
		// onClaim are the indexes of then placed on the waiting claim;
		// the others must get new claims.
		onClaim []int
	}{
		{"a larger disk one of its types has", fakePod(small, nodeReqs(expr(wellknown.InstanceLocalNVMeLabel, gt, "0"))),
			[]*corev1.Pod{fakePod(small, nodeReqs(expr(wellknown.InstanceLocalNVMeLabel, gt, "100")))}, []int{0}},
		{"an attribute none of its types has", fakePod(small, nodeReqs(expr(wellknown.InstanceLocalNVMeLabel, gt, "0"))),
			[]*corev1.Pod{fakePod(small, selector(wellknown.InstanceAcceleratorNameLabel, "inferentia"))}, nil},
		{"an attribute value none of its types has", fakePod(small, selector(wellknown.InstanceEncryptionInTransitSupportedLabel, "true")),
			[]*corev1.Pod{fakePod(small, selector(wellknown.InstanceEncryptionInTransitSupportedLabel, "false"))}, nil},
		{"two attributes no one of its types has together", fakePod(small, selector(wellknown.InstanceEncryptionInTransitSupportedLabel, "true")),
			[]*corev1.Pod{fakePod(small, selector(wellknown.InstanceCPULabel, "4"), nodeReqs(expr(wellknown.InstanceLocalNVMeLabel, gt, "100")))}, nil},
		{"a zone it does not allow", fakePod(small, nodeReqs(expr(wellknown.ZoneLabel, in, fakeZone1, fakeZone2))),
			[]*corev1.Pod{fakePod(small, selector(wellknown.ZoneLabel, fakeZone3))}, nil},
		{"a value of a custom key other than the one it chose", fakePod(small),
			[]*corev1.Pod{fakePod(small, selector("example.com/team", "a"))}, nil},
		{"two zones it leaves open, one pod each", fakePod(small),
			[]*corev1.Pod{fakePod(small, selector(wellknown.ZoneLabel, fakeZone1)), fakePod(small, selector(wellknown.ZoneLabel, fakeZone2))}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, inflightTypes(), fakePool("default", withPoolReq("example.com/team", corev1.NodeSelectorOpExists)))
			first := w.passTo(unlaunched, tc.first)
			if len(first) != 1 {
				t.Fatalf("first pass made %d NodeClaims, want 1", len(first))
			}
			// The pod the claim was made for stays on it; each later pod
			// is judged against it.
			created := w.passTo(unlaunched, tc.then...)
			got := map[*corev1.Pod]bool{}
			for _, p := range w.results.Existing[first[0].Name] {
				got[p] = true
			}
			if !got[tc.first] {
				t.Errorf("the pod the claim was made for is not on it")
			}
			want := map[*corev1.Pod]bool{}
			for _, i := range tc.onClaim {
				want[tc.then[i]] = true
			}
			for i, p := range tc.then {
				if got[p] != want[p] {
					t.Errorf("pod %d on the waiting claim: %v, want %v", i, got[p], want[p])
				}
			}
			if n := len(tc.then) - len(tc.onClaim); len(created) != n {
				t.Errorf("%d new NodeClaims, want %d", len(created), n)
			}
		})
	}
}
