package cloud

import (
	"maps"
	"strconv"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// ForPlacementGroup is what Karpenter v1.14.1 does to a class's instance
// types when it has a placement group: types the group's strategy cannot
// hold are dropped (a cluster group takes no burstable, Mac1 or M7i-flex
// types, as EC2 documents; Karpenter reads the same from
// DescribeInstanceTypes), and the rest carry the group's id as the label
// karpenter.k8s.aws/placement-group-id, so a pod selecting the group
// schedules only on this class. Zones are not narrowed, as in Karpenter: a
// cluster group's zone is EC2's to enforce (a launch into another zone
// fails with a capacity error and the offering is marked unavailable).
// Types are copied, never changed in place: they may be shared.
func ForPlacementGroup(types []*scheduling.InstanceType, nc *awsv1.EC2NodeClass) []*scheduling.InstanceType {
	pg := launchtemplate.PlacementGroup(nc)
	if pg == nil {
		return types
	}
	out := make([]*scheduling.InstanceType, 0, len(types))
	for _, it := range types {
		if !StrategyHolds(pg.Strategy, it) {
			continue
		}
		cp := *it
		cp.Labels = maps.Clone(it.Labels)
		if cp.Labels == nil {
			cp.Labels = map[string]string{}
		}
		cp.Labels[wellknown.PlacementGroupIDLabel] = pg.ID
		out = append(out, &cp)
	}
	return out
}

// StrategyHolds reports whether a placement group of this strategy can
// hold an instance of the type.
func StrategyHolds(strategy string, it *scheduling.InstanceType) bool {
	if strategy != "cluster" {
		return true
	}
	family := it.Labels[wellknown.InstanceFamilyLabel]
	return it.Labels[wellknown.InstanceCategoryLabel] != "t" && family != "mac1" && family != "m7i-flex"
}

// placementLabels are the labels Karpenter sets on a claim launched into
// the class's placement group: its id, and for a partition group the
// partition when the claim asked for one.
func placementLabels(nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass) map[string]string {
	pg := launchtemplate.PlacementGroup(class)
	if pg == nil {
		return nil
	}
	out := map[string]string{wellknown.PlacementGroupIDLabel: pg.ID}
	if p := launchtemplate.TargetedPartition(nc, pg); p > 0 {
		out[wellknown.PlacementGroupPartitionLabel] = strconv.Itoa(int(p))
	}
	return out
}
