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
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's subnet provider suite (aws/karpenter-provider-aws
// pkg/providers/subnet/suite_test.go), through the resolver's subnets: the
// subnets an EC2NodeClass's subnetSelectorTerms resolve to, as
// status.subnets lists them.
func subnetCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/subnet", File: "pkg/providers/subnet/suite_test.go", Spec: "SubnetProvider > " + spec}
}

// karpenterSubnets are the subnets of Karpenter's fake EC2 API.
func karpenterSubnets() []ec2types.Subnet {
	sn := func(id, zone, zoneID string, tags ...string) ec2types.Subnet {
		return ec2types.Subnet{SubnetId: aws.String(id), AvailabilityZone: aws.String(zone), AvailabilityZoneId: aws.String(zoneID),
			AvailableIpAddressCount: aws.Int32(100), VpcId: aws.String("vpc-test1"), Tags: ec2Tags(tags...)}
	}
	return []ec2types.Subnet{
		sn("subnet-test1", "test-zone-1a", "tstz1-1a", "Name", "test-subnet-1", "foo", "bar"),
		sn("subnet-test2", "test-zone-1b", "tstz1-1b", "Name", "test-subnet-2", "foo", "bar"),
		sn("subnet-test3", "test-zone-1c", "tstz1-1c", "Name", "test-subnet-3", "TestTag", "", "foo", "bar"),
		sn("subnet-test4", "test-zone-1a-local", "tstz1-1alocal", "Name", "test-subnet-4"),
	}
}

// selectorClass is the suites' BeforeEach class: every tagged subnet and
// security group.
func selectorClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "selector-uid", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"*": "*"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"*": "*"}}},
		},
	}
}

// pagedEC2 answers DescribeSubnets and DescribeSecurityGroups with fixed
// pages, whatever the filters, as Karpenter's OutputPages does.
type pagedEC2 struct {
	*fakeEC2
	subnetPages [][]ec2types.Subnet
	groupPages  [][]ec2types.SecurityGroup
}

func nextPage(token *string, n int) (int, *string) {
	i := 0
	if token != nil {
		fmt.Sscan(*token, &i)
	}
	if i+1 < n {
		return i, aws.String(fmt.Sprint(i + 1))
	}
	return i, nil
}

func (p *pagedEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	p.count("DescribeSubnets")
	i, next := nextPage(in.NextToken, len(p.subnetPages))
	return &ec2.DescribeSubnetsOutput{Subnets: p.subnetPages[i], NextToken: next}, nil
}

func (p *pagedEC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	p.count("DescribeSecurityGroups")
	i, next := nextPage(in.NextToken, len(p.groupPages))
	return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: p.groupPages[i], NextToken: next}, nil
}

func subnetIDs(ss []awsv1.Subnet) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.ID+"@"+s.Zone+"/"+s.ZoneID)
	}
	sort.Strings(out)
	return out
}

func TestConformanceSubnets(t *testing.T) {
	ctx := context.Background()
	resolve := func(t *testing.T, api EC2API, terms []awsv1.SubnetSelectorTerm) []awsv1.Subnet {
		t.Helper()
		nc := selectorClass()
		if terms != nil {
			nc.Spec.SubnetSelectorTerms = terms
		}
		got, o := (&Resolver{EC2: api}).subnets(ctx, nc)
		if o.err != nil {
			t.Fatal(o.err)
		}
		return got
	}
	const (
		s1 = "subnet-test1@test-zone-1a/tstz1-1a"
		s2 = "subnet-test2@test-zone-1b/tstz1-1b"
	)
	for _, tc := range []struct {
		spec  string
		terms []awsv1.SubnetSelectorTerm
		want  []string
	}{
		{"should discover subnet by ID", []awsv1.SubnetSelectorTerm{{ID: "subnet-test1"}}, []string{s1}},
		{"should discover subnets by IDs", []awsv1.SubnetSelectorTerm{{ID: "subnet-test1"}, {ID: "subnet-test2"}}, []string{s1, s2}},
		// An id term ignores its tags (the CRD refuses both in one term).
		{"should discover subnets by IDs and tags", []awsv1.SubnetSelectorTerm{{ID: "subnet-test1", Tags: map[string]string{"foo": "bar"}}, {ID: "subnet-test2", Tags: map[string]string{"foo": "bar"}}}, []string{s1, s2}},
		{"should discover subnets by a single tag", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"Name": "test-subnet-1"}}}, []string{s1}},
		{"should discover subnets by multiple tag values", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"Name": "test-subnet-1"}}, {Tags: map[string]string{"Name": "test-subnet-2"}}}, []string{s1, s2}},
		{"should discover subnets by IDs intersected with tags", []awsv1.SubnetSelectorTerm{{ID: "subnet-test2", Tags: map[string]string{"foo": "bar"}}}, []string{s2}},
	} {
		conformance.Run(t, subnetCase("List > "+tc.spec), func(t *testing.T) {
			got := subnetIDs(resolve(t, &fakeEC2{subnets: karpenterSubnets()}, tc.terms))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("subnets %v, want %v", got, tc.want)
			}
		})
	}

	conformance.Run(t, subnetCase("List > should handle empty pages when describing subnets"), func(t *testing.T) {
		api := &pagedEC2{fakeEC2: &fakeEC2{}, subnetPages: [][]ec2types.Subnet{{}, {
			{SubnetId: aws.String("test-subnet-1000"), AvailabilityZone: aws.String("test-zone-1a"), AvailabilityZoneId: aws.String("tstz1-1a"), AvailableIpAddressCount: aws.Int32(10)},
		}}}
		got := subnetIDs(resolve(t, api, nil))
		if want := []string{"test-subnet-1000@test-zone-1a/tstz1-1a"}; !reflect.DeepEqual(got, want) || api.calls["DescribeSubnets"] != 2 {
			t.Errorf("subnets %v in %d calls, want %v in 2", got, api.calls["DescribeSubnets"], want)
		}
	})
	conformance.Run(t, subnetCase("List > should not overwrite found values when handling multiple pages of subnets"), func(t *testing.T) {
		sn := func(id string) []ec2types.Subnet {
			return []ec2types.Subnet{{SubnetId: aws.String(id), AvailabilityZone: aws.String("test-zone-1a"), AvailabilityZoneId: aws.String("tstz1-1a"), AvailableIpAddressCount: aws.Int32(10)}}
		}
		api := &pagedEC2{fakeEC2: &fakeEC2{}, subnetPages: [][]ec2types.Subnet{sn("test-subnet-1"), sn("test-subnet-2"), sn("test-subnet-3")}}
		got := subnetIDs(resolve(t, api, nil))
		want := []string{"test-subnet-1@test-zone-1a/tstz1-1a", "test-subnet-2@test-zone-1a/tstz1-1a", "test-subnet-3@test-zone-1a/tstz1-1a"}
		if !reflect.DeepEqual(got, want) || api.calls["DescribeSubnets"] != 3 {
			t.Errorf("subnets %v in %d calls, want %v in 3", got, api.calls["DescribeSubnets"], want)
		}
	})

	// Karpenter's cases resolve a class once and find its one subnet in
	// the cache; here a warm container resolves it again within the TTL,
	// after EC2 has forgotten the subnet, and must answer from the cache.
	for _, tc := range []struct {
		spec  string
		terms []awsv1.SubnetSelectorTerm
	}{
		{"should resolve subnets from cache that are filtered by id", []awsv1.SubnetSelectorTerm{{ID: "test-subnet-id-1"}}},
		{"should resolve subnets from cache that are filtered by tags", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"Name": "test-subnet-1"}}}},
	} {
		conformance.Run(t, subnetCase("Provider Cache > "+tc.spec), func(t *testing.T) {
			api := &fakeEC2{subnets: []ec2types.Subnet{{SubnetId: aws.String("test-subnet-id-1"), SubnetArn: aws.String("test-subnet-arn-1"), Tags: ec2Tags("Name", "test-subnet-1")}}}
			nc := selectorClass()
			nc.Spec.SubnetSelectorTerms = tc.terms
			expectFromCache(t, api, "DescribeSubnets", func() { api.subnets = nil }, func(r *Resolver) ([]string, outcome) {
				got, o := r.subnets(ctx, nc)
				return subnetIDs(got), o
			}, []string{"test-subnet-id-1@/"})
		})
	}
	conformance.Run(t, subnetCase("Provider Cache > should correctly disambiguate AND vs OR semantics for tags"), func(t *testing.T) {
		// One term's tags are ANDed in one query, two terms are two queries
		// whose results are ORed; each selector is its own cache entry.
		warm := &SelectorCache{}
		now := time.Now()
		resolveWarm := func(api *fakeEC2, terms []awsv1.SubnetSelectorTerm) []string {
			nc := selectorClass()
			nc.Spec.SubnetSelectorTerms = terms
			got, o := (&Resolver{EC2: api, Selectors: warm, Now: func() time.Time { return now }}).subnets(ctx, nc)
			if o.err != nil {
				t.Fatal(o.err)
			}
			return subnetIDs(got)
		}
		api := &fakeEC2{subnets: []ec2types.Subnet{
			{SubnetId: aws.String("test-subnet-id-3"), Tags: ec2Tags("tag-key-1", "tag-value-1", "tag-key-2", "tag-value-2")},
			{SubnetId: aws.String("test-subnet-id-4"), Tags: ec2Tags("tag-key-1", "tag-value-1")},
		}}
		and := resolveWarm(api, []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"}}})
		if !reflect.DeepEqual(and, []string{"test-subnet-id-3@/"}) || api.calls["DescribeSubnets"] != 1 {
			t.Errorf("AND: %v in %d calls", and, api.calls["DescribeSubnets"])
		}
		api = &fakeEC2{subnets: []ec2types.Subnet{
			{SubnetId: aws.String("test-subnet-id-1"), Tags: ec2Tags("tag-key-1", "tag-value-1")},
			{SubnetId: aws.String("test-subnet-id-2"), Tags: ec2Tags("tag-key-2", "tag-value-2")},
		}}
		or := resolveWarm(api, []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"tag-key-1": "tag-value-1"}}, {Tags: map[string]string{"tag-key-2": "tag-value-2"}}})
		if !reflect.DeepEqual(or, []string{"test-subnet-id-1@/", "test-subnet-id-2@/"}) || api.calls["DescribeSubnets"] != 2 {
			t.Errorf("OR: %v in %d calls", or, api.calls["DescribeSubnets"])
		}
		if n := warm.len(now); n != 2 {
			t.Errorf("%d cache entries, want one for each semantic", n)
		}
	})

	conformance.Run(t, subnetCase("should not cause data races when calling List() simultaneously"), func(t *testing.T) {
		api := &fakeEC2{subnets: karpenterSubnets()}
		want := []string{s1, s2, "subnet-test3@test-zone-1c/tstz1-1c", "subnet-test4@test-zone-1a-local/tstz1-1alocal"}
		var wg sync.WaitGroup
		errs := make(chan string, 100)
		for range 100 {
			wg.Go(func() {
				nc := selectorClass()
				got, o := (&Resolver{EC2: api}).subnets(ctx, nc)
				if ids := subnetIDs(got); o.err != nil || !reflect.DeepEqual(ids, want) {
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
}
