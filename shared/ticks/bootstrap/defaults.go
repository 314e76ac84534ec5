package bootstrap

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// DefaultName is the name of the default NodePool and EC2NodeClass.
const DefaultName = "default"

// DefaultEC2NodeClass is the EC2NodeClass the bootstrap creates when asked:
// AL2023 at its latest AMI, the node role, and the subnets and security
// groups tagged karpenter.sh/discovery=<cluster>, as in Karpenter's
// getting-started guide.
func DefaultEC2NodeClass(cluster, nodeRole string) *awsv1.EC2NodeClass {
	discovery := map[string]string{wellknown.DiscoveryTagKey: cluster}
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Labels: ownedLabels()},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       nodeRole,
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
		},
	}
}

// DefaultNodePool is the NodePool the bootstrap creates when asked: Linux
// on amd64 and arm64, on-demand and spot, c/m/r instances newer than
// generation 2, at most 1000 CPUs, consolidated when empty or
// underutilized after a minute (Karpenter's getting-started NodePool).
func DefaultNodePool() *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Labels: ownedLabels()},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				Spec: karpv1.NodeClaimTemplateSpec{
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
						{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
						{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot}},
						{Key: wellknown.InstanceCategoryLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
						{Key: wellknown.InstanceGenerationLabel, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
					},
					NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.SchemeGroupVersion.Group, Kind: "EC2NodeClass", Name: DefaultName},
				},
			},
			Limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1000")},
			Disruption: karpv1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter:    karpv1.MustParseNillableDuration("1m"),
			},
		},
	}
}
