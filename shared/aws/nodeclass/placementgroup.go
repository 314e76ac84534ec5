package nodeclass

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
)

// Condition reasons of PlacementGroupReady, as Karpenter v1.14.1 writes them.
const (
	ReasonPlacementGroupNotFound = "PlacementGroupNotFound"
)

// placementGroupUnknown is EC2's answer to DescribePlacementGroups naming a
// group (by name or id) it does not have: the selector matches nothing,
// which is not a transient failure.
const placementGroupUnknown = "InvalidPlacementGroup.Unknown"

// PlacementGroupInput is the DescribePlacementGroups request for a
// selector, as Karpenter sends it: by id when given, else by name, and only
// groups in the available state (a group being created or deleted cannot
// be launched into).
func PlacementGroupInput(sel *awsv1.PlacementGroupSelector) *ec2.DescribePlacementGroupsInput {
	in := &ec2.DescribePlacementGroupsInput{
		Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}},
	}
	if id := aws.ToString(sel.ID); id != "" {
		in.GroupIds = []string{id}
	} else if name := aws.ToString(sel.Name); name != "" {
		in.GroupNames = []string{name}
	}
	return in
}

// placementGroups resolves spec.placementGroupSelector into at most one
// group. No selector is ready with nothing resolved (Karpenter sets the
// condition true then too); a selector EC2 matches nothing for is not
// ready, which keeps the class (and every launch from it) not ready, as in
// Karpenter: launching without the group would break what the group is for.
func (r *Resolver) placementGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.PlacementGroup, outcome) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		return nil, ready()
	}
	what := selectorString(sel)
	out, err := r.EC2.DescribePlacementGroups(ctx, PlacementGroupInput(sel))
	switch {
	case awserr.Code(err) == placementGroupUnknown:
		return nil, notReady(ReasonPlacementGroupNotFound, "placement group %s not found; create it or fix placementGroupSelector", what)
	case err != nil:
		return nil, failed("describing placement groups", err)
	}
	for _, g := range out.PlacementGroups {
		if g.State != ec2types.PlacementGroupStateAvailable {
			continue // EC2 applies the filter; this guards a caller that does not
		}
		return []awsv1.PlacementGroup{{
			ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy),
			PartitionCount: aws.ToInt32(g.PartitionCount), SpreadLevel: string(g.SpreadLevel),
		}}, ready()
	}
	return nil, notReady(ReasonPlacementGroupNotFound, "placement group %s not found (or not available); create it or fix placementGroupSelector", what)
}

func selectorString(sel *awsv1.PlacementGroupSelector) string {
	if id := aws.ToString(sel.ID); id != "" {
		return fmt.Sprintf("id %q", id)
	}
	return fmt.Sprintf("name %q", aws.ToString(sel.Name))
}
