package launchtemplate

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestBuildPlacement: a class with a resolved placement group launches
// into it through the template's Placement (by id, the targeted partition
// of a partition group), as Karpenter v1.14.1; other classes' templates are
// untouched, so their names do not change.
func TestBuildPlacement(t *testing.T) {
	partition := func(vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.PlacementGroupPartitionLabel, Operator: "In", Values: vals}
	}
	for _, tc := range []struct {
		name      string
		pg        *awsv1.PlacementGroup
		selector  bool
		reqs      []karpv1.NodeSelectorRequirementWithMinValues
		wantID    string
		wantPart  int32
		unchanged bool
	}{
		{name: "no selector", unchanged: true},
		{name: "selector not resolved", selector: true, unchanged: true},
		{name: "cluster group", selector: true, pg: &awsv1.PlacementGroup{ID: "pg-0c1", Strategy: "cluster"}, wantID: "pg-0c1"},
		{name: "partition group, EC2 chooses", selector: true, pg: &awsv1.PlacementGroup{ID: "pg-0a2", Strategy: "partition", PartitionCount: 3}, wantID: "pg-0a2"},
		{name: "partition group, lowest targeted", selector: true, pg: &awsv1.PlacementGroup{ID: "pg-0a2", Strategy: "partition", PartitionCount: 3},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{partition("3", "2", "9")}, wantID: "pg-0a2", wantPart: 2},
		{name: "partition requirement on a cluster group", selector: true, pg: &awsv1.PlacementGroup{ID: "pg-0c1", Strategy: "cluster"},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{partition("1")}, wantID: "pg-0c1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := Build(request())
			if err != nil {
				t.Fatal(err)
			}
			r := request()
			if tc.selector {
				r.NodeClass.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: aws.String("g")}
			}
			if tc.pg != nil {
				r.NodeClass.Status.PlacementGroups = []awsv1.PlacementGroup{*tc.pg}
			}
			r.NodeClaim.Spec.Requirements = append(r.NodeClaim.Spec.Requirements, tc.reqs...)
			res, err := Build(r)
			if err != nil {
				t.Fatal(err)
			}
			for i, got := range res {
				p := got.Input.LaunchTemplateData.Placement
				if tc.unchanged {
					if p != nil || aws.ToString(got.Input.LaunchTemplateName) != aws.ToString(plain[i].Input.LaunchTemplateName) {
						t.Errorf("template changed without a group: placement %+v", p)
					}
					continue
				}
				if p == nil || aws.ToString(p.GroupId) != tc.wantID || aws.ToInt32(p.PartitionNumber) != tc.wantPart || p.GroupName != nil {
					t.Errorf("placement = %+v, want group %s partition %d", p, tc.wantID, tc.wantPart)
				}
				if aws.ToString(got.Input.LaunchTemplateName) == aws.ToString(plain[i].Input.LaunchTemplateName) {
					t.Error("a template with a placement group has the name of one without")
				}
			}
		})
	}
}

// TestBuildTenancy: a claim that allows dedicated tenancy only is launched
// through a template with Placement.Tenancy dedicated, as Karpenter
// v1.14.1's (beside the class's placement group, if any); any other claim
// gets default tenancy, and without a group its template has no Placement
// and keeps its name.
func TestBuildTenancy(t *testing.T) {
	tenancy := func(op corev1.NodeSelectorOperator, vals ...string) []karpv1.NodeSelectorRequirementWithMinValues {
		return []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.InstanceTenancyLabel, Operator: op, Values: vals}}
	}
	for _, tc := range []struct {
		name      string
		reqs      []karpv1.NodeSelectorRequirementWithMinValues
		pg        *awsv1.PlacementGroup
		want      ec2types.Tenancy
		wantGroup string
	}{
		{name: "no requirement"},
		{name: "default", reqs: tenancy(corev1.NodeSelectorOpIn, "default")},
		{name: "default or dedicated", reqs: tenancy(corev1.NodeSelectorOpIn, "default", "dedicated")},
		{name: "dedicated", reqs: tenancy(corev1.NodeSelectorOpIn, "dedicated"), want: ec2types.TenancyDedicated},
		{name: "not default", reqs: tenancy(corev1.NodeSelectorOpNotIn, "default"), want: ec2types.TenancyDedicated},
		{name: "dedicated in a group", reqs: tenancy(corev1.NodeSelectorOpIn, "dedicated"), pg: &awsv1.PlacementGroup{ID: "pg-0c1", Strategy: "cluster"},
			want: ec2types.TenancyDedicated, wantGroup: "pg-0c1"},
		{name: "default in a group", pg: &awsv1.PlacementGroup{ID: "pg-0c1", Strategy: "cluster"}, wantGroup: "pg-0c1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := Build(request())
			if err != nil {
				t.Fatal(err)
			}
			r := request()
			if tc.pg != nil {
				r.NodeClass.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: aws.String("g")}
				r.NodeClass.Status.PlacementGroups = []awsv1.PlacementGroup{*tc.pg}
			}
			r.NodeClaim.Spec.Requirements = append(r.NodeClaim.Spec.Requirements, tc.reqs...)
			res, err := Build(r)
			if err != nil {
				t.Fatal(err)
			}
			for i, got := range res {
				p := got.Input.LaunchTemplateData.Placement
				same := aws.ToString(got.Input.LaunchTemplateName) == aws.ToString(plain[i].Input.LaunchTemplateName)
				if tc.want == "" && tc.wantGroup == "" {
					if p != nil || !same {
						t.Errorf("default tenancy changed the template: placement %+v", p)
					}
					continue
				}
				if p == nil || p.Tenancy != tc.want || aws.ToString(p.GroupId) != tc.wantGroup {
					t.Fatalf("placement = %+v, want tenancy %q group %q", p, tc.want, tc.wantGroup)
				}
				if same {
					t.Error("a dedicated or grouped template has the name of a plain one")
				}
			}
		})
	}
}
