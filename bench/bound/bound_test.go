package bound

import (
	"fmt"
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func pod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		}}}}},
	}
}

func antiPod(name, cpu, mem string) *corev1.Pod {
	p := pod(name, cpu, mem)
	p.Labels = map[string]string{"app": "nginx"}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
	}}}}
	return p
}

func itype(name, family, size string, cpu, mem string, pods int, price float64) *scheduling.InstanceType {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	return &scheduling.InstanceType{
		Name: name,
		Labels: map[string]string{wellknown.InstanceTypeLabel: name, wellknown.ArchLabel: "amd64", wellknown.OSLabel: "linux",
			wellknown.InstanceFamilyLabel: family, wellknown.InstanceSizeLabel: size},
		Capacity:    alloc.DeepCopy(),
		Allocatable: alloc,
		Offerings:   []scheduling.Offering{{Zone: "z1", CapacityType: wellknown.CapacityTypeOnDemand, Price: price, Available: true}},
	}
}

func pool(name string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}
	return np
}

func daemonSet(cpu string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "kube-system", UID: "ds"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "d", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}}}}
}

func n(count int, mk func(i int) *corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range count {
		out = append(out, mk(i))
	}
	return out
}

// TestHandComputed checks small cases whose LP optimum is known.
func TestHandComputed(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want float64
	}{{
		name: "4 pods of 1 cpu on a 2-cpu type at $1: 2 nodes",
		in: Input{Pods: n(4, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 2,
	}, {
		name: "the root volume is paid per node",
		in: Input{Pods: n(4, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}, VolumeHourly: 0.5},
		want: 3,
	}, {
		name: "DaemonSets take room: 1.5 cpu left per node",
		in: Input{Pods: n(3, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}, DaemonSets: []*appsv1.DaemonSet{daemonSet("500m")}},
		want: 2,
	}, {
		name: "memory binds: 4 pods of 3Gi on 8Gi nodes",
		in: Input{Pods: n(4, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "100m", "3Gi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 1.5,
	}, {
		name: "pod slots bind: 10 pods, 4 slots a node",
		in: Input{Pods: n(10, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "10m", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 4, 1)}},
		want: 2.5,
	}, {
		name: "hostname anti-affinity: 3 small pods need 3 nodes",
		in: Input{Pods: n(3, func(i int) *corev1.Pod { return antiPod(fmt.Sprint("p", i), "100m", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 3,
	}, {
		name: "anti-affinity pods share nodes with other pods: 2 anti + 2 plain of 1 cpu on 2-cpu nodes",
		in: Input{Pods: append(n(2, func(i int) *corev1.Pod { return antiPod(fmt.Sprint("a", i), "1", "1Mi") }), n(2, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") })...),
			NodePools: []*karpv1.NodePool{pool("a")}, Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1)}},
		want: 2,
	}, {
		name: "the cheaper type per cpu is used: $1 for 2 cpu, $3 for 8 cpu, 8 pods of 1 cpu",
		in: Input{Pods: n(8, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "1", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("x.large", "x", "large", "2", "8Gi", 100, 1), itype("x.2xlarge", "x", "2xlarge", "8", "32Gi", 100, 3)}},
		want: 3,
	}, {
		// t3.large: 2 vCPU, baseline 30% = 600m, $0.05/vCPU-h. 2 pods of
		// 900m: 0.9 node (the LP's fractional node), whose baseline is
		// 540m, so 1260m above it: $0.063 of credits.
		name: "burstable credits above baseline",
		in: Input{Pods: n(2, func(i int) *corev1.Pod { return pod(fmt.Sprint("p", i), "900m", "1Mi") }), NodePools: []*karpv1.NodePool{pool("a")},
			Types: []*scheduling.InstanceType{itype("t3.large", "t3", "large", "2", "8Gi", 100, 1)}},
		want: 0.9 + 0.05*(1.8-0.6*0.9),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.Hourly-tc.want) > 1e-6 {
				t.Fatalf("bound %.6f, want %.6f (%+v)", got.Hourly, tc.want, got)
			}
		})
	}
}
