// Package workload generates the benchmark batches of the scheduling simulator:
// Karpenter's benchmark pod mix, the full catalog as offerings, existing nodes.
package workload

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Zones are the six zones of the benchmark region.
var Zones = []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"}

// Spec says what a batch contains besides Karpenter's mix.
type Spec struct {
	Pods int
	Seed int64
	// ARM64 and GPU turn some plain pods into pods with required node
	// affinity to arm64, and pods requesting one nvidia.com/gpu.
	ARM64, GPU bool
	// Namespace of the pods; "default" when empty.
	Namespace string
	// NoAntiAffinity makes the hostname anti-affinity fifth plain pods.
	NoAntiAffinity bool
}

// Pods builds the batch. The mix is Karpenter's benchmark mix in fifths:
// plain pods, zone spread, hostname spread (both maxSkew 1 over a random
// label), zone self-affinity and hostname anti-affinity, with cpu from
// 100m to 1500m and memory from 100Mi to 4Gi. With ARM64 one plain pod in
// four requires arm64; with GPU one plain pod in forty requests a GPU.
func Pods(spec Spec) []*corev1.Pod {
	r := rand.New(rand.NewSource(spec.Seed))
	ns := spec.Namespace
	if ns == "" {
		ns = "default"
	}
	n := spec.Pods
	fifth := n / 5
	var pods []*corev1.Pod
	seq := 0
	mk := func(kind string, labels map[string]string) *corev1.Pod {
		seq++
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%05d", kind, seq), Namespace: ns, Labels: labels,
				UID:               types.UID(fmt.Sprintf("%08d-%s", spec.Seed, fmt.Sprintf("%05d", seq))),
				CreationTimestamp: metav1.Unix(1700000000, 0),
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    randomCPU(r),
				corev1.ResourceMemory: randomMemory(r),
			}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		return p
	}
	for i := 0; i < fifth; i++ {
		pods = append(pods, mk("plain", map[string]string{"my-label": randomValue(r)}))
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		for i := 0; i < fifth; i++ {
			p := mk("spread", map[string]string{"my-label": randomValue(r)})
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"my-label": randomValue(r)}},
			}}
			pods = append(pods, p)
		}
	}
	for i := 0; i < fifth; i++ {
		labels := map[string]string{"my-affininity": randomValue(r)}
		p := mk("affinity", labels)
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		}}}}
		pods = append(pods, p)
	}
	for i := 0; i < fifth && spec.NoAntiAffinity; i++ {
		pods = append(pods, mk("plain", map[string]string{"my-label": randomValue(r)}))
	}
	for i := 0; i < fifth && !spec.NoAntiAffinity; i++ {
		labels := map[string]string{"app": "nginx"}
		p := mk("anti", labels)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		}}}}
		pods = append(pods, p)
	}
	for len(pods) < n {
		pods = append(pods, mk("plain", map[string]string{"my-label": randomValue(r)}))
	}
	plain := 0
	for _, p := range pods {
		if p.Spec.Affinity != nil || len(p.Spec.TopologySpreadConstraints) > 0 {
			continue
		}
		plain++
		switch {
		case spec.GPU && plain%40 == 0:
			p.Spec.Containers[0].Resources.Requests[wellknown.ResourceNVIDIAGPU] = resource.MustParse("1")
			p.Spec.Tolerations = []corev1.Toleration{{Key: string(wellknown.ResourceNVIDIAGPU), Operator: corev1.TolerationOpExists}}
		case spec.ARM64 && plain%4 == 1:
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}},
			}}}
		}
	}
	return pods
}

func randomValue(r *rand.Rand) string {
	return []string{"a", "b", "c", "d", "e", "f", "g"}[r.Intn(7)]
}

func randomMemory(r *rand.Rand) resource.Quantity {
	mem := []int{100, 256, 512, 1024, 2048, 4096}
	return resource.MustParse(fmt.Sprintf("%dMi", mem[r.Intn(len(mem))]))
}

func randomCPU(r *rand.Rand) resource.Quantity {
	cpu := []int{100, 250, 500, 1000, 1500}
	return resource.MustParse(fmt.Sprintf("%dm", cpu[r.Intn(len(cpu))]))
}

// InstanceTypes is the whole catalog for an AL2023 EC2NodeClass with default
// kubelet settings, spot and on-demand in every zone, spot prices estimated.
func InstanceTypes() ([]*scheduling.InstanceType, error) {
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	return instancetype.Build(cat, catalog.NodeConfig{Family: catalog.FamilyAL2023}, Zones, instancetype.Prices{}, nil)
}

// NodePool is one NodePool allowing every instance type, spot and
// on-demand, without limits.
func NodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand}},
	}
	return np
}

// Nodes are existing nodes of common types spread over the zones, each
// with a few bound pods of the mix's labels, leaving some room.
func Nodes(count int, its []*scheduling.InstanceType, seed int64) []*scheduling.Node {
	r := rand.New(rand.NewSource(seed))
	byName := map[string]*scheduling.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	kinds := []string{"m5.xlarge", "c5.2xlarge", "r5.large", "m6g.xlarge", "c6g.2xlarge"}
	var out []*scheduling.Node
	for i := 0; i < count; i++ {
		it := byName[kinds[i%len(kinds)]]
		zone := Zones[i%len(Zones)]
		name := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250)
		labels := map[string]string{}
		for k, v := range it.Labels {
			labels[k] = v
		}
		labels[wellknown.ZoneLabel] = zone
		labels[wellknown.CapacityTypeLabel] = wellknown.CapacityTypeOnDemand
		labels[wellknown.HostnameLabel] = name
		labels[wellknown.NodePoolLabel] = "default"
		labels[wellknown.InitializedLabel] = "true"
		n := &scheduling.Node{Name: name, NodeClaim: "default-" + fmt.Sprint(i), NodePool: "default", Labels: labels, Allocatable: it.Allocatable.DeepCopy(), Capacity: it.Capacity.DeepCopy()}
		used := int64(0)
		cpu := it.Allocatable[corev1.ResourceCPU]
		for j := 0; used < cpu.MilliValue()*7/10; j++ {
			c := randomCPU(r)
			used += c.MilliValue()
			n.Pods = append(n.Pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bound-%d-%d", i, j), Namespace: "default", UID: types.UID(fmt.Sprintf("bound-%d-%d", i, j)), Labels: map[string]string{"my-label": randomValue(r)}},
				Spec:       corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: c, corev1.ResourceMemory: randomMemory(r)}}}}},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
		out = append(out, n)
	}
	return out
}

// Snapshot assembles a benchmark snapshot.
func Snapshot(spec Spec, types []*scheduling.InstanceType, existing int) *scheduling.Snapshot {
	return &scheduling.Snapshot{
		Pods:        Pods(spec),
		Nodes:       Nodes(existing, types, spec.Seed+1),
		NodePools:   []*karpv1.NodePool{NodePool()},
		NodeClasses: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: types}},
	}
}

// LowerBound is a floor on the $/h of any placement of the pods on new
// nodes: the LP relaxation that buys fractional instances of any type to
// cover the total cpu and memory requested (it ignores bin packing, pod
// slots and constraints). The optimum of a two-constraint LP uses at most
// two types, so every single type and pair is tried.
func LowerBound(pods []*corev1.Pod, types []*scheduling.InstanceType) float64 {
	var C, M float64
	for _, p := range pods {
		r := scheduling.PodRequests(p)
		C += float64(r.Cpu().MilliValue())
		M += float64(r.Memory().Value())
	}
	type tv struct{ c, m, p float64 }
	var ts []tv
	for _, it := range types {
		price := -1.0
		for _, o := range it.Offerings {
			if o.Available && (price < 0 || o.Price < price) {
				price = o.Price
			}
		}
		c, m := it.Allocatable[corev1.ResourceCPU], it.Allocatable[corev1.ResourceMemory]
		if price <= 0 || c.MilliValue() <= 0 || m.Value() <= 0 {
			continue
		}
		ts = append(ts, tv{float64(c.MilliValue()), float64(m.Value()), price})
	}
	best := -1.0
	for i, a := range ts {
		if v := max(C/a.c, M/a.m) * a.p; best < 0 || v < best {
			best = v
		}
		for _, b := range ts[i+1:] {
			det := a.c*b.m - b.c*a.m
			if det == 0 {
				continue
			}
			x := (C*b.m - b.c*M) / det
			y := (a.c*M - C*a.m) / det
			if x < 0 || y < 0 {
				continue
			}
			if v := x*a.p + y*b.p; v < best {
				best = v
			}
		}
	}
	return best
}
