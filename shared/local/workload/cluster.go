package workload

import (
	appsv1 "k8s.io/api/apps/v1"
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

// daemonContainer is one container of an EKS DaemonSet and its requests.
type daemonContainer struct {
	name     string
	cpu, mem string // "" when the manifest requests none
}

// eksDaemonSets are the DaemonSets of an EKS cluster with its default
// add-ons and a log agent, with the requests their manifests set (sources
// in docs/bench.md):
//
//	aws-node (VPC CNI add-on)       aws-node 25m, aws-eks-nodeagent 25m
//	kube-proxy (add-on)             100m
//	ebs-csi-node (EBS CSI add-on)   ebs-plugin, node-driver-registrar and
//	                                liveness-probe 10m / 40Mi each
//	eks-pod-identity-agent (add-on) none (chart default resources: {})
//	aws-for-fluent-bit (eks-charts) 50m / 50Mi
//
// All tolerate every taint (operator Exists) and run on linux amd64 and
// arm64, as the add-ons do; the log agent is given the same tolerations.
var eksDaemonSets = []struct {
	namespace, name string
	containers      []daemonContainer
}{
	{"kube-system", "aws-node", []daemonContainer{{"aws-node", "25m", ""}, {"aws-eks-nodeagent", "25m", ""}}},
	{"kube-system", "kube-proxy", []daemonContainer{{"kube-proxy", "100m", ""}}},
	{"kube-system", "ebs-csi-node", []daemonContainer{{"ebs-plugin", "10m", "40Mi"}, {"node-driver-registrar", "10m", "40Mi"}, {"liveness-probe", "10m", "40Mi"}}},
	{"kube-system", "eks-pod-identity-agent", []daemonContainer{{"eks-pod-identity-agent", "", ""}}},
	{"amazon-cloudwatch", "aws-for-fluent-bit", []daemonContainer{{"aws-for-fluent-bit", "50m", "50Mi"}}},
}

// DaemonSets are the DaemonSets every benchmark cluster runs: 230m of cpu,
// 170Mi of memory and five pods on every node.
func DaemonSets() []*appsv1.DaemonSet {
	out := make([]*appsv1.DaemonSet, 0, len(eksDaemonSets))
	for _, d := range eksDaemonSets {
		labels := map[string]string{"app.kubernetes.io/name": d.name}
		spec := corev1.PodSpec{
			PriorityClassName: "system-node-critical",
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
					{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
				}}},
			}}},
		}
		for _, c := range d.containers {
			req := corev1.ResourceList{}
			if c.cpu != "" {
				req[corev1.ResourceCPU] = resource.MustParse(c.cpu)
			}
			if c.mem != "" {
				req[corev1.ResourceMemory] = resource.MustParse(c.mem)
			}
			spec.Containers = append(spec.Containers, corev1.Container{Name: c.name, Resources: corev1.ResourceRequirements{Requests: req}})
		}
		out = append(out, &appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: d.namespace, UID: types.UID("ds-" + d.name)},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			},
		})
	}
	return out
}

// DaemonOverhead is the sum of the DaemonSets' requests, the room each
// node gives them (every one runs on every benchmark node).
func DaemonOverhead() corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, ds := range DaemonSets() {
		for _, c := range ds.Spec.Template.Spec.Containers {
			for name, q := range c.Resources.Requests {
				v := total[name]
				v.Add(q)
				total[name] = v
			}
		}
	}
	total[corev1.ResourcePods] = *resource.NewQuantity(int64(len(eksDaemonSets)), resource.DecimalSI)
	return total
}

// Case is a NodePool setup of the benchmark.
type Case string

const (
	// GettingStarted is the NodePool of Karpenter's getting-started guide:
	// linux amd64, on-demand, categories c, m and r, generation above 2.
	GettingStarted Case = "getting-started"
	// Burstable widens it to burstable t types (t3, t3a, t4g: generation
	// above 2), arm64 and spot, so CPU credits and spot markets matter.
	Burstable Case = "burstable"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func nodePool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("np-" + name)}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = reqs
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "10%"}}
	return np
}

// NodePools are the NodePools of a case, the main one first. The
// getting-started NodePool is the guide's (step12-add-nodepool.sh of the
// AWS provider v1.14.1) without its cpu limit of 1000, which the larger
// batches would reach. With extra (the batch mix) two more NodePools come
// along, as the Karpenter docs write them: one for arm64 (the main one
// with arch arm64) and one for GPUs (category g, tainted nvidia.com/gpu).
func NodePools(c Case, extra bool) []*karpv1.NodePool {
	gen := req(wellknown.InstanceGenerationLabel, corev1.NodeSelectorOpGt, "2")
	linux := req(wellknown.OSLabel, corev1.NodeSelectorOpIn, "linux")
	var main *karpv1.NodePool
	switch c {
	case Burstable:
		main = nodePool("default",
			req(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "amd64", "arm64"), linux,
			req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand),
			req(wellknown.InstanceCategoryLabel, corev1.NodeSelectorOpIn, "c", "m", "r", "t"), gen)
	default:
		main = nodePool("default",
			req(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "amd64"), linux,
			req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeOnDemand),
			req(wellknown.InstanceCategoryLabel, corev1.NodeSelectorOpIn, "c", "m", "r"), gen)
	}
	out := []*karpv1.NodePool{main}
	if !extra {
		return out
	}
	arm := nodePool("arm64")
	for _, r := range main.Spec.Template.Spec.Requirements {
		if r.Key == wellknown.ArchLabel {
			r = req(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "arm64")
		}
		arm.Spec.Template.Spec.Requirements = append(arm.Spec.Template.Spec.Requirements, r)
	}
	gpu := nodePool("gpu", linux,
		req(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "amd64"),
		req(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeOnDemand),
		req(wellknown.InstanceCategoryLabel, corev1.NodeSelectorOpIn, "g"), gen)
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: string(wellknown.ResourceNVIDIAGPU), Effect: corev1.TaintEffectNoSchedule}}
	return append(out, arm, gpu)
}

// CatalogTypes is the catalog for an AL2023 EC2NodeClass with default
// kubelet settings in the six zones: on-demand everywhere, spot only for
// types with a spot market (HasSpotMarket) at the estimated spot price.
func CatalogTypes() ([]*scheduling.InstanceType, error) {
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	spot := map[string]map[string]float64{}
	for _, t := range cat.All() {
		if !HasSpotMarket(t.Name) || t.OnDemandPrice <= 0 {
			continue
		}
		spot[t.Name] = map[string]float64{}
		for _, z := range Zones {
			spot[t.Name][z] = instancetype.SpotEstimate(t.Name, z, t.OnDemandPrice)
		}
	}
	return instancetype.Build(cat, catalog.NodeConfig{Family: catalog.FamilyAL2023}, Zones, instancetype.Prices{Spot: spot}, nil)
}
