package launchtemplate

import (
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// PlacementGroup is the placement group a class's status resolved its
// placementGroupSelector to, or nil (no selector, or not resolved).
func PlacementGroup(nc *awsv1.EC2NodeClass) *awsv1.PlacementGroup {
	if nc == nil || nc.Spec.PlacementGroupSelector == nil || len(nc.Status.PlacementGroups) == 0 {
		return nil
	}
	return &nc.Status.PlacementGroups[0]
}

// TargetedPartition is the partition of a partition group a claim asks
// for through the karpenter.k8s.aws/placement-group-partition requirement:
// the lowest of its values within the group, as Karpenter picks (EC2 takes
// one); 0 when the claim asks for none and EC2 chooses.
func TargetedPartition(claim *karpv1.NodeClaim, pg *awsv1.PlacementGroup) int32 {
	if claim == nil || pg == nil || pg.Strategy != string(ec2types.PlacementStrategyPartition) {
		return 0
	}
	for _, r := range claim.Spec.Requirements {
		if r.Key != wellknown.PlacementGroupPartitionLabel || r.Operator != "In" {
			continue
		}
		var parts []int
		for _, v := range r.Values {
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= int(pg.PartitionCount) {
				parts = append(parts, n)
			}
		}
		if len(parts) > 0 {
			sort.Ints(parts)
			return int32(parts[0])
		}
	}
	return 0
}

// placement is the launch template's Placement, as Karpenter v1.14.1
// writes it: the tenancy the claim is launched with (instancetype.Tenancy:
// dedicated when it allows nothing else), and the class's group by id
// (names can be reused after a delete, ids cannot) with the targeted
// partition. A default-tenancy launch without a group has none (default
// is what EC2 assumes in a default-tenancy VPC), so the templates that
// need no placement keep their names.
func placement(nc *awsv1.EC2NodeClass, claim *karpv1.NodeClaim) *ec2types.LaunchTemplatePlacementRequest {
	pg := PlacementGroup(nc)
	dedicated := claim != nil && instancetype.Tenancy(claim.Spec.Requirements) == instancetype.TenancyDedicated
	if pg == nil && !dedicated {
		return nil
	}
	p := &ec2types.LaunchTemplatePlacementRequest{}
	if dedicated {
		p.Tenancy = ec2types.TenancyDedicated
	}
	if pg != nil {
		p.GroupId = aws.String(pg.ID)
		if n := TargetedPartition(claim, pg); n > 0 {
			p.PartitionNumber = aws.Int32(n)
		}
	}
	return p
}
