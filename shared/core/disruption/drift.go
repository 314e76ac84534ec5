package disruption

import (
	"slices"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Drift reasons, as Karpenter v1 and its AWS provider name them (the
// Drifted condition's reason).
const (
	NodePoolDrifted      = "NodePoolDrifted"
	RequirementsDrifted  = "RequirementsDrifted"
	InstanceTypeNotFound = "InstanceTypeNotFound"
	NodeClassDrift       = "NodeClassDrift"
	AMIDrift             = "AMIDrift"
	SecurityGroupDrift   = "SecurityGroupDrift"
	SubnetDrift          = "SubnetDrift"
)

// driftReason says why a launched claim no longer matches its NodePool or
// EC2NodeClass, "" when it does (or when it cannot tell). The checks run in
// Karpenter's order: NodePool static fields (hash), NodePool requirements,
// instance type no longer offered (after an hour), EC2NodeClass static
// fields (hash), AMI, security groups, subnet.
func (c *view) driftReason(nc *karpv1.NodeClaim) string {
	if !nc.IsTrue(karpv1.ConditionTypeLaunched) {
		return ""
	}
	np := c.pool(nc)
	if np == nil {
		return ""
	}
	if h, v := nc.Annotations[wellknown.NodePoolHashAnnotation], nc.Annotations[wellknown.NodePoolHashVersionAnnotation]; h != "" && v == wellknown.NodePoolHashVersion && h != np.Hash() {
		return NodePoolDrifted
	}
	want := scheduling.RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)
	if scheduling.RequirementsFromLabels(nc.Labels).Compatible(want, nil) != nil {
		return RequirementsDrifted
	}
	if nc.Spec.NodeClassRef == nil {
		return ""
	}
	class := c.classes[nc.Spec.NodeClassRef.Name]
	types := c.typeByName[nc.Spec.NodeClassRef.Name]
	it := c.instanceType(nc)
	if len(types) > 0 && c.in.Now.Sub(nc.CreationTimestamp.Time) > timing.InstanceTypeNotFoundDelay && !offered(it, nc) {
		return InstanceTypeNotFound
	}
	if class == nil {
		return ""
	}
	ch, cv := class.Annotations[wellknown.EC2NodeClassHashAnnotation], class.Annotations[wellknown.EC2NodeClassHashVersionAnnotation]
	if h, v := nc.Annotations[wellknown.EC2NodeClassHashAnnotation], nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation]; ch != "" && h != "" && cv != "" && v == cv && h != ch {
		return NodeClassDrift
	}
	if it != nil && len(class.Status.AMIs) > 0 && nc.Status.ImageID != "" && amiFor(it, class.Status.AMIs) != nc.Status.ImageID {
		return AMIDrift
	}
	facts, ok := c.in.Instances[wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)]
	if !ok {
		return ""
	}
	if len(class.Status.SecurityGroups) > 0 && !sameNames(securityGroupIDs(class), facts.SecurityGroupIDs) {
		return SecurityGroupDrift
	}
	if len(class.Status.Subnets) > 0 && facts.SubnetID != "" && !slices.ContainsFunc(class.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == facts.SubnetID }) {
		return SubnetDrift
	}
	return ""
}

// offered reports whether the claim's instance type is still offered in its
// zone and capacity type (available or not): Karpenter's
// InstanceTypeNotFound check. A reserved claim may also fall back to
// on-demand.
func offered(it *scheduling.InstanceType, nc *karpv1.NodeClaim) bool {
	if it == nil {
		return false
	}
	zone, ct := nc.Labels[wellknown.ZoneLabel], nc.Labels[wellknown.CapacityTypeLabel]
	for _, o := range it.Offerings {
		if (zone == "" || o.Zone == zone) && (ct == "" || o.CapacityType == ct || (ct == wellknown.CapacityTypeReserved && o.CapacityType == wellknown.CapacityTypeOnDemand)) {
			return true
		}
	}
	return false
}

// amiFor is the AMI a new node of this type would boot: the first of the
// class's resolved AMIs (newest first) whose requirements the type meets.
func amiFor(it *scheduling.InstanceType, amis []awsv1.AMI) string {
	for _, a := range amis {
		if scheduling.RequirementsFromNodeSelector(a.Requirements).MatchesLabels(it.Labels) == nil {
			return a.ID
		}
	}
	return ""
}

func securityGroupIDs(class *awsv1.EC2NodeClass) []string {
	out := make([]string, 0, len(class.Status.SecurityGroups))
	for _, sg := range class.Status.SecurityGroups {
		out = append(out, sg.ID)
	}
	return out
}
