package cloud

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestForPlacementGroupAndLabels(t *testing.T) {
	it := func(name, category, family string) *scheduling.InstanceType {
		return &scheduling.InstanceType{Name: name, Labels: map[string]string{wellknown.InstanceCategoryLabel: category, wellknown.InstanceFamilyLabel: family}}
	}
	types := []*scheduling.InstanceType{it("m5.large", "m", "m5"), it("t3.large", "t", "t3"), it("m7i-flex.large", "m", "m7i-flex"), it("mac1.metal", "mac", "mac1")}
	class := func(strategy string) *awsv1.EC2NodeClass {
		nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{PlacementGroupSelector: &awsv1.PlacementGroupSelector{Name: aws.String("g")}}}
		if strategy != "" {
			nc.Status.PlacementGroups = []awsv1.PlacementGroup{{ID: "pg-01", Strategy: strategy, PartitionCount: 3}}
		}
		return nc
	}
	names := func(ts []*scheduling.InstanceType) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	for _, tc := range []struct {
		strategy string
		want     []string
		labelled bool
	}{
		{strategy: "", want: []string{"m5.large", "t3.large", "m7i-flex.large", "mac1.metal"}},
		{strategy: "cluster", want: []string{"m5.large"}, labelled: true},
		{strategy: "spread", want: []string{"m5.large", "t3.large", "m7i-flex.large", "mac1.metal"}, labelled: true},
		{strategy: "partition", want: []string{"m5.large", "t3.large", "m7i-flex.large", "mac1.metal"}, labelled: true},
	} {
		got := ForPlacementGroup(types, class(tc.strategy))
		if !reflect.DeepEqual(names(got), tc.want) {
			t.Errorf("%q: types %v, want %v", tc.strategy, names(got), tc.want)
		}
		for _, g := range got {
			if v, ok := g.Labels[wellknown.PlacementGroupIDLabel]; ok != tc.labelled || tc.labelled && v != "pg-01" {
				t.Errorf("%q: %s labels %v", tc.strategy, g.Name, g.Labels)
			}
		}
	}
	for _, orig := range types {
		if _, ok := orig.Labels[wellknown.PlacementGroupIDLabel]; ok {
			t.Fatal("the shared instance types were changed in place")
		}
	}

	claim := &karpv1.NodeClaim{}
	claim.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.PlacementGroupPartitionLabel, Operator: "In", Values: []string{"2", "3"}}}
	if got := placementLabels(claim, class("partition")); !reflect.DeepEqual(got, map[string]string{wellknown.PlacementGroupIDLabel: "pg-01", wellknown.PlacementGroupPartitionLabel: "2"}) {
		t.Errorf("partition labels %v", got)
	}
	if got := placementLabels(&karpv1.NodeClaim{}, class("cluster")); !reflect.DeepEqual(got, map[string]string{wellknown.PlacementGroupIDLabel: "pg-01"}) {
		t.Errorf("cluster labels %v", got)
	}
	if got := placementLabels(claim, class("")); got != nil {
		t.Errorf("labels without a resolved group %v", got)
	}
}
