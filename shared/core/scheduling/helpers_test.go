package scheduling

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

var testZones = []string{"test-1a", "test-1b", "test-1c"}

// mkType is a small instance type: cpu cores, memory GiB, max pods, arch and
// on-demand price; spot is 40% of on-demand in every zone.
func mkType(name string, cpu, memGi, pods int64, arch string, od float64, extra ...string) *InstanceType {
	family, size, _ := strings.Cut(name, ".")
	it := &InstanceType{
		Name: name,
		Labels: map[string]string{
			wellknown.InstanceTypeLabel:     name,
			wellknown.ArchLabel:             arch,
			wellknown.OSLabel:               "linux",
			wellknown.InstanceFamilyLabel:   family,
			wellknown.InstanceSizeLabel:     size,
			wellknown.InstanceCPULabel:      fmt.Sprint(cpu),
			wellknown.InstanceMemoryLabel:   fmt.Sprint(memGi * 1024),
			wellknown.InstanceCategoryLabel: family[:1],
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(memGi<<30, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		it.Capacity[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
		if extra[i] == string(wellknown.ResourceNVIDIAGPU) {
			it.Labels[wellknown.InstanceGPUCountLabel] = extra[i+1]
			it.Labels[wellknown.InstanceGPUManufacturerLabel] = "nvidia"
		}
	}
	it.Allocatable = it.Capacity.DeepCopy()
	for _, z := range testZones {
		it.Offerings = append(it.Offerings,
			Offering{Zone: z, CapacityType: wellknown.CapacityTypeOnDemand, Price: od, Available: true},
			Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: od * 0.4, Available: true})
	}
	return it
}

func testTypes() []*InstanceType {
	return []*InstanceType{
		mkType("c.large", 2, 4, 30, "amd64", 0.085),
		mkType("c.xlarge", 4, 8, 60, "amd64", 0.17),
		mkType("c.2xlarge", 8, 16, 60, "amd64", 0.34),
		mkType("m.large", 2, 8, 30, "amd64", 0.096),
		mkType("m.xlarge", 4, 16, 60, "amd64", 0.192),
		mkType("m.4xlarge", 16, 64, 200, "amd64", 0.768),
		mkType("g.large", 2, 8, 30, "arm64", 0.077),
		mkType("g.xlarge", 4, 16, 60, "arm64", 0.154),
		mkType("p.2xlarge", 8, 61, 60, "amd64", 3.06, string(wellknown.ResourceNVIDIAGPU), "1"),
	}
}

type poolOpt func(*karpv1.NodePool)

func mkPool(name string, opts ...poolOpt) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Kind: "EC2NodeClass", Name: "default", Group: "karpenter.k8s.aws"}
	for _, o := range opts {
		o(np)
	}
	return np
}

func withReq(key string, op corev1.NodeSelectorOperator, vals ...string) poolOpt {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals})
	}
}

func withMinValues(key string, n int, op corev1.NodeSelectorOperator, vals ...string) poolOpt {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals, MinValues: &n})
	}
}

func withTaint(key, value string, effect corev1.TaintEffect) poolOpt {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withWeight(w int32) poolOpt { return func(np *karpv1.NodePool) { np.Spec.Weight = &w } }

func withLimit(kv ...string) poolOpt {
	return func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits(rl(kv...))
	}
}

func withLabel(k, v string) poolOpt {
	return func(np *karpv1.NodePool) {
		if np.Spec.Template.Labels == nil {
			np.Spec.Template.Labels = map[string]string{}
		}
		np.Spec.Template.Labels[k] = v
	}
}

type podOpt func(*corev1.Pod)

var podSeq int

func mkPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	podSeq++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%s-%06d", name, podSeq)), Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu, "memory", mem)}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func podLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func requiredAffinity(terms ...[]corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}
	}
}

func preferredAffinity(weight int32, exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		if p.Spec.Affinity.NodeAffinity == nil {
			p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func expr(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

func tolerate(key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

func extended(name, qty string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(name)] = resource.MustParse(qty)
	}
}

func spread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, sel map[string]string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
		})
	}
}

func podAffinity(key string, sel map[string]string) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}})
	}
}

func podAntiAffinity(key string, sel map[string]string) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		if p.Spec.Affinity.PodAntiAffinity == nil {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}})
	}
}

func preferredAntiAffinity(weight int32, key string, sel map[string]string) podOpt {
	return func(p *corev1.Pod) {
		ensureAffinity(p)
		if p.Spec.Affinity.PodAntiAffinity == nil {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}})
	}
}

func hostPortOpt(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func ensureAffinity(p *corev1.Pod) {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
}

func snapshot(pools []*karpv1.NodePool, pods ...*corev1.Pod) *Snapshot {
	return &Snapshot{
		Pods:        pods,
		NodePools:   pools,
		NodeClasses: map[string]*NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: testTypes()}},
	}
}

// mkNode is an existing node of a test type.
func mkNode(name, typ, zone string, pods ...*corev1.Pod) *Node {
	var it *InstanceType
	for _, t := range testTypes() {
		if t.Name == typ {
			it = t
		}
	}
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[wellknown.ZoneLabel] = zone
	labels[wellknown.CapacityTypeLabel] = wellknown.CapacityTypeOnDemand
	labels[wellknown.HostnameLabel] = name
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	return &Node{Name: name, Labels: labels, Allocatable: it.Allocatable.DeepCopy(), Pods: pods}
}

func solve(t *testing.T, s *Snapshot) *Results {
	t.Helper()
	r := Solve(s, Provisioning())
	checkInvariants(t, s, r)
	return r
}

// placement finds where a pod went: a node name, "claim#i", or "".
func placementOf(r *Results, p *corev1.Pod) string {
	for n, ps := range r.Existing {
		for _, q := range ps {
			if q == p {
				return n
			}
		}
	}
	for i, c := range r.NewNodeClaims {
		for _, q := range c.Pods {
			if q == p {
				return fmt.Sprintf("claim#%d", i)
			}
		}
	}
	return ""
}

func claimOf(r *Results, p *corev1.Pod) *NewNodeClaim {
	for _, c := range r.NewNodeClaims {
		for _, q := range c.Pods {
			if q == p {
				return c
			}
		}
	}
	return nil
}

func reqOf(c *NewNodeClaim, key string) *Requirement {
	r := RequirementsFromNodePool(c.Requirements)
	return r.Get(key)
}

func reasonOf(r *Results, p *corev1.Pod) string {
	for _, e := range r.Unschedulable {
		if e.Pod == p {
			return e.Reason
		}
	}
	return ""
}
