package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		{"containers sum", corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "1Gi")}},
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "200m")}},
		}}, rl("cpu", "300m", "memory", "1Gi", "pods", "1")},
		{"init container larger", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "1Gi")}}},
		}, rl("cpu", "2", "memory", "1Gi", "pods", "1")},
		{"sidecar adds", corev1.PodSpec{
			InitContainers: []corev1.Container{{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}}},
		}, rl("cpu", "750m", "pods", "1")},
		{"overhead", corev1.PodSpec{
			Overhead:   rl("cpu", "50m", "memory", "64Mi"),
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
		}, rl("cpu", "1050m", "memory", "64Mi", "pods", "1")},
		{"extended", corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: rl(string(wellknown.ResourceNVIDIAGPU), "2", string(wellknown.ResourceAWSPodENI), "1", "ephemeral-storage", "10Gi")}},
		}}, rl(string(wellknown.ResourceNVIDIAGPU), "2", string(wellknown.ResourceAWSPodENI), "1", "ephemeral-storage", "10Gi", "pods", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequests(&corev1.Pod{Spec: tc.spec})
			for k, v := range tc.want {
				if q := got[k]; q.Cmp(v) != 0 {
					t.Fatalf("%s = %s, want %s (all %v)", k, q.String(), v.String(), got)
				}
			}
		})
	}
}

// TestContainerRequestsMatchesHelper checks the fast path of PodRequests
// against the Kubernetes helper on the pods it takes, and that it declines
// the pods only the helper handles.
func TestContainerRequestsMatchesHelper(t *testing.T) {
	for _, spec := range []corev1.PodSpec{
		{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "1Gi")}}}},
		{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "0.0005", "memory", "1.5")}},
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "0.0005", "memory", "1.5", "ephemeral-storage", "1Gi", "pods", "3")}},
			{},
		}},
		{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: rl("cpu", "1")}}}},
	} {
		pod := &corev1.Pod{Spec: spec}
		got := containerRequests(pod)
		want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true})
		want[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		if len(got) != len(want) {
			t.Fatalf("%v, want %v", got, want)
		}
		for k, v := range want {
			if q, ok := got[k]; !ok || q.Cmp(v) != 0 || q.MilliValue() != v.MilliValue() || q.Value() != v.Value() {
				t.Fatalf("%s = %s, want %s", k, q.String(), v.String())
			}
		}
	}
	for _, pod := range []*corev1.Pod{
		{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{}}}},
		{Spec: corev1.PodSpec{Overhead: rl("cpu", "1")}},
		{Spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{}}},
		{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{}}}},
		{Status: corev1.PodStatus{AllocatedResources: rl("cpu", "1")}},
		{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}}},
	} {
		if containerRequests(pod) != nil {
			t.Fatalf("fast path taken for %+v", pod)
		}
	}
}

func TestDimsRoundTrip(t *testing.T) {
	d := newDims()
	d.add(wellknown.ResourceNVIDIAGPU)
	v := d.vec(rl("cpu", "1500m", "memory", "2Gi", "pods", "3", string(wellknown.ResourceNVIDIAGPU), "1"))
	if v[dimCPU] != 1500 || v[dimMemory] != 2<<30 || v[dimPods] != 3 || v[4] != 1 {
		t.Fatalf("vec = %v", v)
	}
	if !fits(v, []int64{1500, 2 << 30, 3, 0, 1}) || fits(v, []int64{1499, 2 << 30, 3, 0, 1}) {
		t.Fatal("fits wrong")
	}
	if s := d.format(v); s != "cpu=1500m memory=2Gi nvidia.com/gpu=1 pods=3" {
		t.Fatalf("format = %q", s)
	}
	if humanBytes(600<<30) != "600Gi" || humanBytes(1536<<20) != "1.5Gi" {
		t.Fatalf("humanBytes: %s %s", humanBytes(600<<30), humanBytes(1536<<20))
	}
}

func TestTaints(t *testing.T) {
	noSched := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}
	for _, tc := range []struct {
		name string
		tol  []corev1.Toleration
		ts   []corev1.Taint
		ok   bool
	}{
		{"no taints", nil, nil, true},
		{"untolerated", nil, []corev1.Taint{noSched}, false},
		{"equal", []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true"}}, []corev1.Taint{noSched}, true},
		{"wrong value", []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "false"}}, []corev1.Taint{noSched}, false},
		{"exists all", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Taint{noSched, soft}, true},
		{"effect mismatch", []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}, []corev1.Taint{noSched}, false},
		{"soft taint counts", nil, []corev1.Taint{soft}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := untolerated(tc.ts, tc.tol) == nil; got != tc.ok {
				t.Fatalf("tolerated = %v, want %v", got, tc.ok)
			}
		})
	}
}

// Node.Requested is a shortcut for summing Pods; a Solve must not tell the
// two apart, and finished or terminating pods hold nothing either way.
func TestRequestedMatchesPods(t *testing.T) {
	done := mkPod("done", "3", "1Gi")
	done.Status.Phase = corev1.PodSucceeded
	bound := []*corev1.Pod{mkPod("a", "1", "2Gi"), mkPod("b", "500m", "1Gi", hostPortOpt(8080)), done}
	pending := []*corev1.Pod{mkPod("p1", "1", "1Gi"), mkPod("p2", "1", "1Gi"), mkPod("p3", "2", "1Gi", hostPortOpt(8080))}
	run := func(precomputed bool) map[string]string {
		n := mkNode("n1", "m.xlarge", "z1", bound...)
		if precomputed {
			n.Requested = SumRequests(n.Pods)
		}
		s := snapshot([]*karpv1.NodePool{mkPool("default")}, pending...)
		s.Nodes = []*Node{n}
		r := solve(t, s)
		out := map[string]string{}
		for _, p := range pending {
			out[p.Name] = placementOf(r, p)
		}
		return out
	}
	plain, pre := run(false), run(true)
	if fmt.Sprint(plain) != fmt.Sprint(pre) {
		t.Fatalf("placements differ: summed %v, precomputed %v", plain, pre)
	}
	if got := SumRequests([]*corev1.Pod{done}); !got.Cpu().IsZero() {
		t.Fatalf("a finished pod counted: %v", got)
	}
	if got := SumRequests(bound); got.Cpu().MilliValue() != 1500 || got.Pods().Value() != 2 {
		t.Fatalf("sum %v, want 1500m cpu and 2 pods", got)
	}
}
