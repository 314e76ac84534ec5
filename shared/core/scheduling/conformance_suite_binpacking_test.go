package scheduling

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// Describe "Binpacking", ported whole (one pass each, through Solve), and
// "Dynamic Resource Allocation (DRA)": Karpless, as Karpenter by default
// (--ignore-dra-requests), launches nothing for a pod with resource claims
// and leaves a DaemonSet's claims out of a node's overhead.
func TestConformanceBinpacking(t *testing.T) {
	bp := "Scheduling > Binpacking > "
	times := func(n int, opts ...podOpt) [][]podOpt {
		out := make([][]podOpt, n)
		for i := range out {
			out[i] = opts
		}
		return out
	}
	// on expects every pod on type it, on n nodes in all.
	on := func(it string, n int) func(*testing.T, *Snapshot, *Results, []*corev1.Pod) {
		return func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
			t.Helper()
			scheduledWith(wellknown.InstanceTypeLabel, it)(t, s, r, pods)
			nodes := map[string]bool{}
			for _, p := range pods {
				nodes[placementOf(r, p)] = true
			}
			if len(nodes) != n {
				t.Fatalf("pods on %d nodes, want %d", len(nodes), n)
			}
		}
	}
	amd := nodeSelector(wellknown.ArchLabel, "amd64")
	initContainer := func(kv ...string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl(kv...)}})
		}
	}
	// The RuntimeClass admission sets a pod's overhead from its class.
	runtimeOverhead := func(p *corev1.Pod) {
		name := "my-runtime-class"
		p.Spec.RuntimeClassName = &name
		p.Spec.Overhead = rl("cpu", "2")
	}
	odOnly := func(name string, cpu, mem string, price float64) *InstanceType {
		return fakeType(name, fakeTypeOpts{resources: rl("cpu", cpu, "memory", mem), offerings: []Offering{fakeOffer(wellknown.CapacityTypeOnDemand, "test-zone-1a", price)}})
	}
	runConstraintCases(t, []constraintCase{
		{spec: bp + "should schedule a small pod on the smallest instance", pods: pods1(requests("memory", "100M")), check: on("small-instance-type", 1)},
		{spec: bp + "should schedule a small pod on the smallest possible instance type", pods: pods1(requests("memory", "2000M")), check: on("small-instance-type", 1)},
		{spec: bp + "should take pod runtime class into consideration", pods: pods1(requests("cpu", "1"), runtimeOverhead), check: on("default-instance-type", 1)},
		{spec: bp + "should schedule multiple small pods on the smallest possible instance type", pods: times(5, requests("memory", "10M")), check: on("small-instance-type", 1)},
		{spec: bp + "should create new nodes when a node is at capacity", pods: times(40, amd, requests("memory", "1.8G")), check: on("default-instance-type", 20)},
		{spec: bp + "should pack small and large pods together", pods: append(times(40, amd, requests("memory", "1.8G")), times(20, amd, requests("memory", "400M"))...),
			check: on("default-instance-type", 20)},
		{spec: bp + "should pack nodes tightly", types: func() []*InstanceType { return fakeInstanceTypes(5) },
			pods: [][]podOpt{{requests("cpu", "4.5")}, {requests("cpu", "1")}},
			check: func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
				_, a := expectScheduled(t, s, r, pods[0])
				_, b := expectScheduled(t, s, r, pods[1])
				if a[wellknown.InstanceTypeLabel] == b[wellknown.InstanceTypeLabel] {
					t.Fatalf("both pods on %s, want the small one on a smaller type", a[wellknown.InstanceTypeLabel])
				}
			}},
		{spec: bp + "should handle zero-quantity resource requests", pods: pods1(requests("foo.com/weird-resources", "0")), check: scheduledWith()},
		{spec: bp + "should not schedule pods that exceed every instance type's capacity", pods: pods1(requests("memory", "2Ti")), check: notScheduled},
		{spec: bp + "should create new nodes when a node is at capacity due to pod limits per node", pods: times(25, amd, requests("memory", "1m", "cpu", "1m")),
			check: on("small-instance-type", 5)},
		{spec: bp + "should take into account initContainer resource requests when binpacking",
			pods: pods1(requests("memory", "1Gi", "cpu", "1"), initContainer("memory", "1Gi", "cpu", "2")), check: on("default-instance-type", 1)},
		{spec: bp + "should not schedule pods when initContainer resource requests are greater than available instance types",
			pods: pods1(requests("memory", "1Gi", "cpu", "1"), initContainer("memory", "1Ti", "cpu", "2")), check: notScheduled},
		{spec: bp + "should select for valid instance types, regardless of price",
			types: func() []*InstanceType {
				return []*InstanceType{odOnly("medium", "2", "2Gi", 3), odOnly("small", "1", "1Gi", 2), odOnly("large", "4", "4Gi", 1)}
			},
			pods: pods1(requests("cpu", "1m", "memory", "1Mi")),
			check: func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
				on("large", 1)(t, s, r, pods)
				got := reqOf(claimOf(r, pods[0]), wellknown.InstanceTypeLabel)
				for _, it := range []string{"small", "medium", "large"} {
					if !got.Has(it) {
						t.Fatalf("claim's types %s, want small, medium and large", got)
					}
				}
			}},
	})
}

func TestConformanceDRA(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/provisioning/scheduling", File: schedulingSuiteFile, Spec: "Scheduling > Dynamic Resource Allocation (DRA) > " + spec}
	}
	claim := func(name string) []corev1.ResourceClaim { return []corev1.ResourceClaim{{Name: name}} }
	containerClaim := func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Claims = claim("gpu-claim") }
	initClaim := func(kv ...string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl(kv...), Claims: claim("init-claim")}})
		}
	}
	base := requests("cpu", "1", "memory", "1Gi")
	for _, e := range []struct {
		entry string
		opts  []podOpt
		dra   bool
	}{
		{"container with resource claims", []podOpt{base, containerClaim}, true},
		{"init container with resource claims", []podOpt{base, initClaim("cpu", "500m", "memory", "512Mi")}, true},
		{"pod with both container and init container resource claims", []podOpt{base, containerClaim, initClaim("cpu", "250m", "memory", "256Mi")}, true},
		{"non-DRA pod without resource claims", []podOpt{base}, false},
	} {
		conformance.Run(t, c("should handle DRA pods correctly > "+e.entry), func(t *testing.T) {
			p := fakePod(e.opts...)
			s := fakeSnapshot(nil, []*karpv1.NodePool{mkPool("default")}, p)
			r := solve(t, s)
			if !e.dra {
				if len(r.NewNodeClaims) != 1 || len(r.Unschedulable) != 0 {
					t.Fatalf("%d claims, %d errors, want one claim", len(r.NewNodeClaims), len(r.Unschedulable))
				}
				return
			}
			if len(r.NewNodeClaims) != 0 {
				t.Fatalf("%d claims for a pod with resource claims, want none", len(r.NewNodeClaims))
			}
			if why := reasonOf(r, p); why != draReason {
				t.Fatalf("pod error %q, want %q", why, draReason)
			}
		})
	}
	conformance.Run(t, conformance.Case{Suite: "core/provisioning/scheduling", File: schedulingSuiteFile,
		Spec:    "Scheduling > Dynamic Resource Allocation (DRA) > should handle DaemonSet pods with DRA requirements based on IgnoreDRARequests flag value",
		Differs: "Karpless always ignores DRA requests (Karpenter's default, --ignore-dra-requests=true: a DaemonSet's pod with resource claims is left out of a node's overhead) and has no switch to count them"}, func(*testing.T) {})
}

// A DaemonSet whose pods claim devices is left out of a new node's
// overhead, as Karpenter does by default: the half of "should handle
// DaemonSet pods with DRA requirements based on IgnoreDRARequests flag
// value" Karpless has.
func TestDaemonSetDRAIgnored(t *testing.T) {
	app := fakePod(requests("cpu", "1"))
	ds := fakeDaemonSet(requests("cpu", "3"), func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu-claim"}} })
	s := fakeSnapshot(nil, []*karpv1.NodePool{mkPool("default")}, app)
	s.DaemonSets = append(s.DaemonSets, ds)
	r := solve(t, s)
	_, labels := expectScheduled(t, s, r, app)
	if got := labels[wellknown.InstanceTypeLabel]; got != "small-instance-type" {
		t.Fatalf("pod on %s, want small-instance-type (the DaemonSet's 3 CPU not counted)", got)
	}
	if q := r.NewNodeClaims[0].Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Fatalf("claim requests %s CPU, want 1", q.String())
	}
}

// fakeDaemonSet is test.DaemonSet with the pod options given.
func fakeDaemonSet(opts ...podOpt) *appsv1.DaemonSet {
	p := fakePod(opts...)
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds-" + p.Name, Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: p.Spec}}}
}
