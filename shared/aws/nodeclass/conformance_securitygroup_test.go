package nodeclass

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's security group provider suite (aws/karpenter-provider-aws
// pkg/providers/securitygroup/suite_test.go), through the resolver's
// securityGroups: status.securityGroups of the selector terms.
func securityGroupCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/securitygroup", File: "pkg/providers/securitygroup/suite_test.go", Spec: "SecurityGroupProvider > " + spec}
}

// karpenterSecurityGroups are the security groups of Karpenter's fake EC2 API.
func karpenterSecurityGroups() []ec2types.SecurityGroup {
	sg := func(n int, tags ...string) ec2types.SecurityGroup {
		return ec2types.SecurityGroup{GroupId: aws.String(fmt.Sprintf("sg-test%d", n)), GroupName: aws.String(fmt.Sprintf("securityGroup-test%d", n)),
			Tags: ec2Tags(append([]string{"Name", fmt.Sprintf("test-security-group-%d", n)}, tags...)...)}
	}
	return []ec2types.SecurityGroup{sg(1, "foo", "bar"), sg(2, "foo", "bar"), sg(3, "TestTag", "", "foo", "bar")}
}

func groupIDs(gs []awsv1.SecurityGroup) []string {
	out := make([]string, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.ID+"/"+g.Name)
	}
	sort.Strings(out)
	return out
}

func TestConformanceSecurityGroups(t *testing.T) {
	ctx := context.Background()
	resolve := func(t *testing.T, api EC2API, terms []awsv1.SecurityGroupSelectorTerm) []awsv1.SecurityGroup {
		t.Helper()
		nc := selectorClass()
		if terms != nil {
			nc.Spec.SecurityGroupSelectorTerms = terms
		}
		got, o := (&Resolver{EC2: api}).securityGroups(ctx, nc)
		if o.err != nil {
			t.Fatal(o.err)
		}
		return got
	}
	const (
		g1 = "sg-test1/securityGroup-test1"
		g2 = "sg-test2/securityGroup-test2"
		g3 = "sg-test3/securityGroup-test3"
	)
	for _, tc := range []struct {
		spec   string
		groups []ec2types.SecurityGroup
		terms  []awsv1.SecurityGroupSelectorTerm
		want   []string
	}{
		{spec: "should default to the clusters security groups", want: []string{g1, g2, g3}},
		{spec: "should discover security groups by tag", groups: []ec2types.SecurityGroup{
			{GroupName: aws.String("test-sgName-1"), GroupId: aws.String("test-sg-1"), Tags: ec2Tags("kubernetes.io/cluster/test-cluster", "test-sg-1")},
			{GroupName: aws.String("test-sgName-2"), GroupId: aws.String("test-sg-2"), Tags: ec2Tags("kubernetes.io/cluster/test-cluster", "test-sg-2")},
		}, want: []string{"test-sg-1/test-sgName-1", "test-sg-2/test-sgName-2"}},
		{spec: "should discover security groups by multiple tag values", terms: []awsv1.SecurityGroupSelectorTerm{
			{Tags: map[string]string{"Name": "test-security-group-1"}}, {Tags: map[string]string{"Name": "test-security-group-2"}}}, want: []string{g1, g2}},
		{spec: "should discover security groups by ID", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-test1"}}, want: []string{g1}},
		{spec: "should discover security groups by IDs", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-test1"}, {ID: "sg-test2"}}, want: []string{g1, g2}},
		{spec: "should discover security groups by IDs and tags", terms: []awsv1.SecurityGroupSelectorTerm{
			{ID: "sg-test1", Tags: map[string]string{"foo": "bar"}}, {ID: "sg-test2", Tags: map[string]string{"foo": "bar"}}}, want: []string{g1, g2}},
		{spec: "should discover security groups by IDs intersected with tags", terms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-test2", Tags: map[string]string{"foo": "bar"}}}, want: []string{g2}},
		{spec: "should discover security groups by names", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "securityGroup-test2"}, {Name: "securityGroup-test3"}}, want: []string{g2, g3}},
		{spec: "should discover security groups by names intersected with tags", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "securityGroup-test3", Tags: map[string]string{"TestTag": "*"}}}, want: []string{g3}},
	} {
		conformance.Run(t, securityGroupCase(tc.spec), func(t *testing.T) {
			groups := tc.groups
			if groups == nil {
				groups = karpenterSecurityGroups()
			}
			if got := groupIDs(resolve(t, &fakeEC2{groups: groups}, tc.terms)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("security groups %v, want %v", got, tc.want)
			}
		})
	}

	// As the subnet cases: resolved again within the TTL, after EC2 has
	// forgotten the group, a warm container answers from its cache.
	for _, tc := range []struct {
		spec  string
		terms []awsv1.SecurityGroupSelectorTerm
	}{
		{"should resolve security groups from cache that are filtered by id", []awsv1.SecurityGroupSelectorTerm{{ID: "test-sg-id-1"}}},
		{"should resolve security groups from cache that are filtered by Name", []awsv1.SecurityGroupSelectorTerm{{Name: "test-sg-name-1"}}},
		{"should resolve security groups from cache that are filtered by tags", []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"Name": "test-sg-1"}}}},
	} {
		conformance.Run(t, securityGroupCase("Provider Cache > "+tc.spec), func(t *testing.T) {
			api := &fakeEC2{groups: []ec2types.SecurityGroup{{GroupId: aws.String("test-sg-id-1"), GroupName: aws.String("test-sg-name-1"), Tags: ec2Tags("Name", "test-sg-1")}}}
			nc := selectorClass()
			nc.Spec.SecurityGroupSelectorTerms = tc.terms
			expectFromCache(t, api, "DescribeSecurityGroups", func() { api.groups = nil }, func(r *Resolver) ([]string, outcome) {
				got, o := r.securityGroups(ctx, nc)
				return groupIDs(got), o
			}, []string{"test-sg-id-1/test-sg-name-1"})
		})
	}
	conformance.Run(t, securityGroupCase("Provider Cache > should correctly disambiguate AND vs OR semantics for tags"), func(t *testing.T) {
		warm := &SelectorCache{}
		now := time.Now()
		resolveWarm := func(api *fakeEC2, terms []awsv1.SecurityGroupSelectorTerm) []string {
			nc := selectorClass()
			nc.Spec.SecurityGroupSelectorTerms = terms
			got, o := (&Resolver{EC2: api, Selectors: warm, Now: func() time.Time { return now }}).securityGroups(ctx, nc)
			if o.err != nil {
				t.Fatal(o.err)
			}
			return groupIDs(got)
		}
		api := &fakeEC2{groups: []ec2types.SecurityGroup{
			{GroupName: aws.String("test-sgName-3"), GroupId: aws.String("test-sg-3"), Tags: ec2Tags("tag-key-1", "tag-value-1", "tag-key-2", "tag-value-2")},
			{GroupName: aws.String("test-sgName-4"), GroupId: aws.String("test-sg-4"), Tags: ec2Tags("tag-key-2", "tag-value-2")},
		}}
		and := resolveWarm(api, []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"}}})
		if !reflect.DeepEqual(and, []string{"test-sg-3/test-sgName-3"}) || api.calls["DescribeSecurityGroups"] != 1 {
			t.Errorf("AND: %v in %d calls", and, api.calls["DescribeSecurityGroups"])
		}
		api = &fakeEC2{groups: []ec2types.SecurityGroup{
			{GroupName: aws.String("test-sgName-1"), GroupId: aws.String("test-sg-1"), Tags: ec2Tags("tag-key-1", "tag-value-1")},
			{GroupName: aws.String("test-sgName-2"), GroupId: aws.String("test-sg-2"), Tags: ec2Tags("tag-key-2", "tag-value-2")},
		}}
		or := resolveWarm(api, []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"tag-key-1": "tag-value-1"}}, {Tags: map[string]string{"tag-key-2": "tag-value-2"}}})
		if !reflect.DeepEqual(or, []string{"test-sg-1/test-sgName-1", "test-sg-2/test-sgName-2"}) || api.calls["DescribeSecurityGroups"] != 2 {
			t.Errorf("OR: %v in %d calls", or, api.calls["DescribeSecurityGroups"])
		}
		if n := warm.len(now); n != 2 {
			t.Errorf("%d cache entries, want one for each semantic", n)
		}
	})

	conformance.Run(t, securityGroupCase("should not cause data races when calling List() simultaneously"), func(t *testing.T) {
		api := &fakeEC2{groups: karpenterSecurityGroups()}
		var wg sync.WaitGroup
		errs := make(chan string, 100)
		for range 100 {
			wg.Go(func() {
				got, o := (&Resolver{EC2: api}).securityGroups(ctx, selectorClass())
				if ids := groupIDs(got); o.err != nil || !reflect.DeepEqual(ids, []string{g1, g2, g3}) {
					errs <- fmt.Sprintf("%v %v", ids, o.err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
	conformance.Run(t, securityGroupCase("should handle empty pages when describing security groups"), func(t *testing.T) {
		api := &pagedEC2{fakeEC2: &fakeEC2{}, groupPages: [][]ec2types.SecurityGroup{{}, {
			{GroupId: aws.String("test-sg-1000"), GroupName: aws.String("test-sgName-1000"), Tags: ec2Tags("Name", "test-security-group-1000")},
		}}}
		got := groupIDs(resolve(t, api, nil))
		if want := []string{"test-sg-1000/test-sgName-1000"}; !reflect.DeepEqual(got, want) || api.calls["DescribeSecurityGroups"] != 2 {
			t.Errorf("security groups %v in %d calls, want %v in 2", got, api.calls["DescribeSecurityGroups"], want)
		}
	})
	conformance.Run(t, securityGroupCase("should not overwrite found values when handling multiple pages of security groups"), func(t *testing.T) {
		sg := func(n int) []ec2types.SecurityGroup {
			return []ec2types.SecurityGroup{{GroupId: aws.String(fmt.Sprintf("test-sg-%d", n)), GroupName: aws.String(fmt.Sprintf("test-sgName-%d", n))}}
		}
		api := &pagedEC2{fakeEC2: &fakeEC2{}, groupPages: [][]ec2types.SecurityGroup{sg(1), sg(2), sg(3)}}
		got := groupIDs(resolve(t, api, nil))
		want := []string{"test-sg-1/test-sgName-1", "test-sg-2/test-sgName-2", "test-sg-3/test-sgName-3"}
		if !reflect.DeepEqual(got, want) || api.calls["DescribeSecurityGroups"] != 3 {
			t.Errorf("security groups %v in %d calls, want %v in 3", got, api.calls["DescribeSecurityGroups"], want)
		}
	})
}
