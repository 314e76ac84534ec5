package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/utils/resources/suite_test.go's Resource
// Calculations and UseStatusResources, ported through PodRequests (what
// Karpenter's resources.Ceiling(pod).Requests is). Ceiling's Limits are
// not asserted: Karpenter keeps them only as bookkeeping on its in-memory
// state nodes, and no Karpless decision reads a pod's limits. MaxResources
// and MinResources (helpers of Karpenter's scheduler for its daemon
// overhead) have no Karpless counterpart to call and are not ported.
func TestConformanceResources(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/utils/resources", File: "pkg/utils/resources/suite_test.go", Spec: "Resources > " + spec}
	}
	// ctr is a container asking cpu cores and mem GiB; sidecar marks a
	// restartable init container.
	type ctr struct {
		cpu, mem string
		sidecar  bool
	}
	req := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	mkPod := func(main ctr, inits ...ctr) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: req(main.cpu, main.mem), Limits: req(main.cpu, main.mem)}}}}}
		for i, in := range inits {
			ic := corev1.Container{Name: fmt.Sprintf("init-%d", i), Resources: corev1.ResourceRequirements{Requests: req(in.cpu, in.mem), Limits: req(in.cpu, in.mem)}}
			if in.sidecar {
				ic.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
		}
		return p
	}
	expect := func(t *testing.T, p *corev1.Pod, cpu, mem string) {
		t.Helper()
		got := PodRequests(p)
		for name, want := range req(cpu, mem) {
			if q := got[name]; q.Cmp(want) != 0 {
				t.Errorf("%s requests %s, want %s", name, q.String(), want.String())
			}
		}
	}
	S := func(cpu, mem string) ctr { return ctr{cpu, mem, true} }
	I := func(cpu, mem string) ctr { return ctr{cpu, mem, false} }
	M := func(cpu, mem string) ctr { return ctr{cpu, mem, false} }
	cases := []struct {
		spec      string
		pod       *corev1.Pod
		cpu, mem  string
		modifyPod func(*corev1.Pod)
	}{
		{spec: "should calculate resource requests based off of the sum of containers and sidecarContainers",
			pod: mkPod(M("2", "1Gi"), S("1", "2Gi")), cpu: "3", mem: "3Gi"},
		{spec: "should calculate resource requests based off of containers, sidecarContainers, initContainers, and overhead",
			pod: mkPod(M("2", "1Gi"), I("4", "2Gi"), S("3", "3Gi")), cpu: "10", mem: "5Gi",
			modifyPod: func(p *corev1.Pod) { p.Spec.Overhead = req("5", "1Gi") }},
		{spec: "should calculate resource requests when there is an initContainer after a sidecarContainer that exceeds container resource requests",
			pod: mkPod(M("2", "1Gi"), S("4", "2Gi"), I("10", "2Gi")), cpu: "14", mem: "4Gi"},
		{spec: "should calculate resource requests when there is an initContainer after a sidecarContainer that doesn't exceed container resource requests",
			pod: mkPod(M("2", "2Gi"), S("4", "2Gi"), I("1", "1Gi")), cpu: "6", mem: "4Gi"},
		{spec: "Multiple SidecarContainers > should calculate resource requests when there is an initContainer after multiple sidecarContainers that exceeds container resource requests",
			pod: mkPod(M("3", "3Gi"), S("2", "2Gi"), S("1", "1Gi"), S("3", "3Gi"), S("5", "5Gi"), I("20", "20Gi")), cpu: "31", mem: "31Gi"},
		{spec: "Multiple SidecarContainers > should calculate resource requests when there is an initContainer after multiple sidecarContainers that doesn't exceed container resource requests",
			pod: mkPod(M("3", "3Gi"), S("2", "2Gi"), S("1", "1Gi"), S("3", "3Gi"), S("5", "5Gi"), I("1", "1Gi")), cpu: "14", mem: "14Gi"},
		{spec: "Multiple SidecarContainers > should calculate resource requests with multiple sidecarContainers when the first initContainer exceeds the sum of all sidecarContainers and container resource requests",
			pod: mkPod(M("3", "3Gi"), I("25", "25Gi"), S("1", "1Gi"), I("3", "3Gi"), I("1", "1Gi"), S("5", "5Gi"), I("1", "1Gi"), I("1", "1Gi"), S("1", "1Gi")), cpu: "25", mem: "25Gi"},
		{spec: "Multiple SidecarContainers > should calculate resource requests with multiple interspersed sidecarContainers and initContainers",
			pod: mkPod(M("3", "3Gi"), I("2", "2Gi"), S("1", "1Gi"), I("3", "3Gi"), I("1", "1Gi"), S("5", "5Gi"), I("1", "1Gi"), I("1", "1Gi"), S("1", "1Gi"), I("2", "1Gi")), cpu: "10", mem: "10Gi"},
		{spec: "Unequal Resource Requests > should calculate resource requests when the first initContainer exceeds cpu for sidecarContainers and containers but not memory",
			pod: mkPod(M("3", "3Gi"), I("25", "4Gi"), S("1", "1Gi"), S("5", "5Gi")), cpu: "25", mem: "9Gi"},
		{spec: "Unequal Resource Requests > should calculate resource requests when the first initContainer exceeds memory for sidecarContainers and containers but not cpu",
			pod: mkPod(M("3", "3Gi"), I("4", "25Gi"), S("1", "1Gi"), S("5", "5Gi")), cpu: "9", mem: "25Gi"},
		{spec: "Unequal Resource Requests > should calculate resource requests when there is an initContainer after a sidecarContainer that exceeds cpu for containers but not memory",
			pod: mkPod(M("2", "4Gi"), S("4", "2Gi"), I("10", "2Gi")), cpu: "14", mem: "6Gi"},
		{spec: "Unequal Resource Requests > should calculate resource requests when there is an initContainer after a sidecarContainer that exceeds memory for containers but not cpu",
			pod: mkPod(M("10", "2Gi"), S("4", "2Gi"), I("2", "4Gi")), cpu: "14", mem: "6Gi"},
		{spec: "Pod Level Resources > should calculate resource requests when the pod level resources is specified",
			pod: mkPod(M("1", "1Gi")), cpu: "2", mem: "2Gi",
			modifyPod: func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Limits = req("3", "3Gi")
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: req("2", "2Gi"), Limits: req("4", "4Gi")}
			}},
		{spec: "Pod Level Resources > should calculate resource requests when only the pod level resources request is specified",
			pod: mkPod(M("1", "1Gi"), S("1", "1Gi")), cpu: "2", mem: "2Gi",
			modifyPod: func(p *corev1.Pod) { p.Spec.Resources = &corev1.ResourceRequirements{Requests: req("2", "2Gi")} }},
		{spec: "Pod Level Resources > should calculate resource requests when the pod level resources requests is defaulted from limits",
			pod: mkPod(M("1", "1Gi"), S("1", "1Gi")), cpu: "10", mem: "10Gi",
			modifyPod: func(p *corev1.Pod) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: req("10", "10Gi"), Limits: req("10", "10Gi")}
			}},
	}
	for _, tc := range cases {
		conformance.Run(t, c("Resource Calculations > "+tc.spec), func(t *testing.T) {
			if tc.modifyPod != nil {
				tc.modifyPod(tc.pod)
			}
			expect(t, tc.pod, tc.cpu, tc.mem)
		})
	}

	// A resize in progress: the kubelet holds the larger of the spec and
	// what it allocated.
	resizing := func(spec, allocated corev1.ResourceList) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: spec}}}}}
		if allocated != nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", AllocatedResources: allocated, Resources: &corev1.ResourceRequirements{Requests: spec}}}
		}
		return p
	}
	conformance.Run(t, c("UseStatusResources > should use allocatedResources when higher than spec requests (resize-down in progress)"), func(t *testing.T) {
		expect(t, resizing(req("2", "512Mi"), req("6", "2Gi")), "6", "2Gi")
	})
	conformance.Run(t, c("UseStatusResources > should use spec requests when higher than allocatedResources (resize-up in progress)"), func(t *testing.T) {
		expect(t, resizing(req("8", "4Gi"), req("2", "1Gi")), "8", "4Gi")
	})
	conformance.Run(t, c("UseStatusResources > should use spec requests when allocatedResources is not set (no resize)"), func(t *testing.T) {
		expect(t, resizing(req("4", "2Gi"), nil), "4", "2Gi")
	})
}
