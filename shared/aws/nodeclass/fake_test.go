package nodeclass

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
)

func apiErr(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: code}
}

// fakeEC2 answers Describe{Subnets,SecurityGroups,Images} with filter
// semantics close to EC2's, one item per page to exercise pagination.
type fakeEC2 struct {
	subnets []ec2types.Subnet
	groups  []ec2types.SecurityGroup
	images  []ec2types.Image
	owners  map[string]string // image id -> "self" | "amazon" | account
	pgs     []ec2types.PlacementGroup
	crs     []ec2types.CapacityReservation
	// pgErr, when set, answers DescribePlacementGroups alone.
	pgErr error
	err   error
	// opErr, by operation name, fails that Describe call alone.
	opErr map[string]error
	// mu guards calls: resolutions may run concurrently.
	mu    sync.Mutex
	calls map[string]int
}

func (f *fakeEC2) count(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
}

func tagsOf(tags []ec2types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// matchFilters applies EC2 filter semantics: filters ANDed, values ORed,
// * and ? wildcards.
func matchFilters(filters []ec2types.Filter, attr func(name string) []string) bool {
	for _, fl := range filters {
		got := attr(aws.ToString(fl.Name))
		ok := false
		for _, want := range fl.Values {
			for _, g := range got {
				if ec2Match(want, g) {
					ok = true
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// ec2Match is EC2's filter wildcard match: * is any run of characters
// (slashes included, unlike path.Match), ? any one character.
func ec2Match(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if ec2Match(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && ec2Match(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && ec2Match(pattern[1:], s[1:])
}

func tagAttr(tags map[string]string, name string) ([]string, bool) {
	if name == "tag-key" {
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		return keys, true
	}
	if k, ok := strings.CutPrefix(name, "tag:"); ok {
		if v, ok := tags[k]; ok {
			return []string{v}, true
		}
		return nil, true
	}
	return nil, false
}

func page[T any](items []T, token *string) ([]T, *string) {
	start := 0
	if token != nil {
		fmt.Sscan(*token, &start)
	}
	if start >= len(items) {
		return nil, nil
	}
	var next *string
	if start+1 < len(items) {
		next = aws.String(fmt.Sprint(start + 1))
	}
	return items[start : start+1], next
}

func (f *fakeEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.count("DescribeSubnets")
	if f.err != nil {
		return nil, f.err
	}
	if err := f.opErr["DescribeSubnets"]; err != nil {
		return nil, err
	}
	var out []ec2types.Subnet
	for _, s := range f.subnets {
		tags := tagsOf(s.Tags)
		if matchFilters(in.Filters, func(n string) []string {
			if v, ok := tagAttr(tags, n); ok {
				return v
			}
			if n == "subnet-id" {
				return []string{aws.ToString(s.SubnetId)}
			}
			panic("unsupported subnet filter " + n)
		}) {
			out = append(out, s)
		}
	}
	items, next := page(out, in.NextToken)
	return &ec2.DescribeSubnetsOutput{Subnets: items, NextToken: next}, nil
}

func (f *fakeEC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	f.count("DescribeSecurityGroups")
	if f.err != nil {
		return nil, f.err
	}
	if err := f.opErr["DescribeSecurityGroups"]; err != nil {
		return nil, err
	}
	var out []ec2types.SecurityGroup
	for _, g := range f.groups {
		tags := tagsOf(g.Tags)
		if matchFilters(in.Filters, func(n string) []string {
			if v, ok := tagAttr(tags, n); ok {
				return v
			}
			switch n {
			case "group-id":
				return []string{aws.ToString(g.GroupId)}
			case "group-name":
				return []string{aws.ToString(g.GroupName)}
			}
			panic("unsupported security group filter " + n)
		}) {
			out = append(out, g)
		}
	}
	items, next := page(out, in.NextToken)
	return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: items, NextToken: next}, nil
}

func (f *fakeEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	f.count("DescribeImages")
	if f.err != nil {
		return nil, f.err
	}
	if err := f.opErr["DescribeImages"]; err != nil {
		return nil, err
	}
	var out []ec2types.Image
	for _, img := range f.images {
		if len(in.Owners) > 0 {
			owner := f.owners[aws.ToString(img.ImageId)]
			if owner == "" {
				owner = "amazon"
			}
			found := false
			for _, o := range in.Owners {
				found = found || o == owner
			}
			if !found {
				continue
			}
		}
		tags := tagsOf(img.Tags)
		if matchFilters(in.Filters, func(n string) []string {
			if v, ok := tagAttr(tags, n); ok {
				return v
			}
			switch n {
			case "image-id":
				return []string{aws.ToString(img.ImageId)}
			case "name":
				return []string{aws.ToString(img.Name)}
			case "state":
				return []string{string(img.State)}
			}
			panic("unsupported image filter " + n)
		}) {
			out = append(out, img)
		}
	}
	items, next := page(out, in.NextToken)
	return &ec2.DescribeImagesOutput{Images: items, NextToken: next}, nil
}

type fakeSSM struct {
	params map[string]string
	err    error
	reads  []string
}

func (f *fakeSSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.reads = append(f.reads, aws.ToString(in.Name))
	if f.err != nil {
		return nil, f.err
	}
	v, ok := f.params[aws.ToString(in.Name)]
	if !ok {
		return nil, apiErr("ParameterNotFound")
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: aws.String(v)}}, nil
}

// fakeIAM keeps instance profiles and roles. failAt makes the n-th call
// (1-based, counting every call) fail; lostResponse makes that call take
// effect before failing, like a Lambda killed after AWS answered.
type fakeIAM struct {
	mu           sync.Mutex
	profiles     map[string]*iamtypes.InstanceProfile
	roles        map[string]bool
	calls        int
	log          []string
	failAt       int
	lostResponse bool
	now          time.Time
	// getErr fails every GetInstanceProfile.
	getErr error
}

func newFakeIAM(roles ...string) *fakeIAM {
	f := &fakeIAM{profiles: map[string]*iamtypes.InstanceProfile{}, roles: map[string]bool{}, now: time.Unix(1_700_000_000, 0)}
	for _, r := range roles {
		f.roles[r] = true
	}
	return f
}

// step counts a call; it returns (fail before acting, fail after acting).
func (f *fakeIAM) step(op string) (bool, bool) {
	f.calls++
	f.log = append(f.log, op)
	if f.failAt != 0 && f.calls == f.failAt {
		return !f.lostResponse, f.lostResponse
	}
	return false, false
}

var errKilled = apiErr("InternalFailure")

func copyProfile(p *iamtypes.InstanceProfile) *iamtypes.InstanceProfile {
	c := *p
	c.Roles = append([]iamtypes.Role(nil), p.Roles...)
	c.Tags = append([]iamtypes.Tag(nil), p.Tags...)
	return &c
}

func (f *fakeIAM) GetInstanceProfile(_ context.Context, in *iam.GetInstanceProfileInput, _ ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if before, after := f.step("Get"); before || after {
		return nil, errKilled
	}
	if f.getErr != nil {
		return nil, f.getErr
	}
	p, ok := f.profiles[aws.ToString(in.InstanceProfileName)]
	if !ok {
		return nil, apiErr("NoSuchEntity")
	}
	return &iam.GetInstanceProfileOutput{InstanceProfile: copyProfile(p)}, nil
}

func (f *fakeIAM) CreateInstanceProfile(_ context.Context, in *iam.CreateInstanceProfileInput, _ ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.step("Create")
	if before {
		return nil, errKilled
	}
	name := aws.ToString(in.InstanceProfileName)
	if _, ok := f.profiles[name]; ok {
		return nil, apiErr("EntityAlreadyExists")
	}
	p := &iamtypes.InstanceProfile{InstanceProfileName: in.InstanceProfileName, Path: in.Path, Tags: in.Tags, CreateDate: aws.Time(f.now)}
	f.profiles[name] = p
	if after {
		return nil, errKilled
	}
	return &iam.CreateInstanceProfileOutput{InstanceProfile: copyProfile(p)}, nil
}

func (f *fakeIAM) TagInstanceProfile(_ context.Context, in *iam.TagInstanceProfileInput, _ ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.step("Tag")
	if before {
		return nil, errKilled
	}
	p, ok := f.profiles[aws.ToString(in.InstanceProfileName)]
	if !ok {
		return nil, apiErr("NoSuchEntity")
	}
	m := map[string]string{}
	for _, t := range p.Tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, t := range in.Tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	p.Tags = iamTags(m)
	if after {
		return nil, errKilled
	}
	return &iam.TagInstanceProfileOutput{}, nil
}

func (f *fakeIAM) AddRoleToInstanceProfile(_ context.Context, in *iam.AddRoleToInstanceProfileInput, _ ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.step("AddRole")
	if before {
		return nil, errKilled
	}
	p, ok := f.profiles[aws.ToString(in.InstanceProfileName)]
	if !ok || !f.roles[aws.ToString(in.RoleName)] {
		return nil, apiErr("NoSuchEntity")
	}
	if len(p.Roles) > 0 {
		return nil, apiErr("LimitExceeded")
	}
	p.Roles = append(p.Roles, iamtypes.Role{RoleName: in.RoleName})
	if after {
		return nil, errKilled
	}
	return &iam.AddRoleToInstanceProfileOutput{}, nil
}

func (f *fakeIAM) RemoveRoleFromInstanceProfile(_ context.Context, in *iam.RemoveRoleFromInstanceProfileInput, _ ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.step("RemoveRole")
	if before {
		return nil, errKilled
	}
	p, ok := f.profiles[aws.ToString(in.InstanceProfileName)]
	if !ok {
		return nil, apiErr("NoSuchEntity")
	}
	var kept []iamtypes.Role
	for _, r := range p.Roles {
		if aws.ToString(r.RoleName) != aws.ToString(in.RoleName) {
			kept = append(kept, r)
		}
	}
	p.Roles = kept
	if after {
		return nil, errKilled
	}
	return &iam.RemoveRoleFromInstanceProfileOutput{}, nil
}

func (f *fakeIAM) ListInstanceProfiles(_ context.Context, in *iam.ListInstanceProfilesInput, _ ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step("List")
	var names []string
	for n, p := range f.profiles {
		if strings.HasPrefix(aws.ToString(p.Path), aws.ToString(in.PathPrefix)) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := &iam.ListInstanceProfilesOutput{}
	for _, n := range names {
		out.InstanceProfiles = append(out.InstanceProfiles, *copyProfile(f.profiles[n]))
	}
	return out, nil
}

func (f *fakeIAM) DeleteInstanceProfile(_ context.Context, in *iam.DeleteInstanceProfileInput, _ ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step("Delete")
	name := aws.ToString(in.InstanceProfileName)
	p, ok := f.profiles[name]
	if !ok {
		return nil, apiErr("NoSuchEntity")
	}
	if len(p.Roles) > 0 {
		return nil, apiErr("DeleteConflict")
	}
	delete(f.profiles, name)
	return &iam.DeleteInstanceProfileOutput{}, nil
}

// state is a comparable summary of the profiles.
func (f *fakeIAM) state() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		p := f.profiles[n]
		var roles []string
		for _, r := range p.Roles {
			roles = append(roles, aws.ToString(r.RoleName))
		}
		fmt.Fprintf(&b, "%s path=%s roles=%v tags=%v\n", n, aws.ToString(p.Path), roles, tagsString(p.Tags))
	}
	return b.String()
}

func tagsString(tags []iamtypes.Tag) string {
	var kv []string
	for _, t := range tags {
		kv = append(kv, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// DescribePlacementGroups answers as EC2 does: a name or id it does not
// have is InvalidPlacementGroup.Unknown; filters state and strategy.
func (f *fakeEC2) DescribePlacementGroups(_ context.Context, in *ec2.DescribePlacementGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error) {
	f.count("DescribePlacementGroups")
	if f.err != nil {
		return nil, f.err
	}
	if f.pgErr != nil {
		return nil, f.pgErr
	}
	named := func(want []string, got string) bool {
		for _, w := range want {
			if w == got {
				return true
			}
		}
		return len(want) == 0
	}
	for _, want := range append(append([]string(nil), in.GroupNames...), in.GroupIds...) {
		found := false
		for _, g := range f.pgs {
			found = found || aws.ToString(g.GroupName) == want || aws.ToString(g.GroupId) == want
		}
		if !found {
			return nil, apiErr("InvalidPlacementGroup.Unknown")
		}
	}
	out := &ec2.DescribePlacementGroupsOutput{}
	for _, g := range f.pgs {
		if !named(in.GroupNames, aws.ToString(g.GroupName)) || !named(in.GroupIds, aws.ToString(g.GroupId)) {
			continue
		}
		if matchFilters(in.Filters, func(n string) []string {
			switch n {
			case "state":
				return []string{string(g.State)}
			case "strategy":
				return []string{string(g.Strategy)}
			}
			panic("unsupported placement group filter " + n)
		}) {
			out.PlacementGroups = append(out.PlacementGroups, g)
		}
	}
	return out, nil
}

// DescribeCapacityReservations answers as EC2 does: an id it does not have
// is InvalidCapacityReservationId.NotFound; filters state, owner-id,
// instance-match-criteria and tags; one reservation per page.
func (f *fakeEC2) DescribeCapacityReservations(_ context.Context, in *ec2.DescribeCapacityReservationsInput, _ ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	f.count("DescribeCapacityReservations")
	if f.err != nil {
		return nil, f.err
	}
	for _, id := range in.CapacityReservationIds {
		found := false
		for _, r := range f.crs {
			found = found || aws.ToString(r.CapacityReservationId) == id
		}
		if !found {
			return nil, apiErr("InvalidCapacityReservationId.NotFound")
		}
	}
	var matched []ec2types.CapacityReservation
	for _, r := range f.crs {
		if len(in.CapacityReservationIds) > 0 && !slices.Contains(in.CapacityReservationIds, aws.ToString(r.CapacityReservationId)) {
			continue
		}
		tags := tagsOf(r.Tags)
		if matchFilters(in.Filters, func(n string) []string {
			switch n {
			case "state":
				return []string{string(r.State)}
			case "owner-id":
				return []string{aws.ToString(r.OwnerId)}
			case "instance-match-criteria":
				return []string{string(r.InstanceMatchCriteria)}
			}
			if v, ok := tagAttr(tags, n); ok {
				return v
			}
			panic("unsupported capacity reservation filter " + n)
		}) {
			matched = append(matched, r)
		}
	}
	items, next := page(matched, in.NextToken)
	return &ec2.DescribeCapacityReservationsOutput{CapacityReservations: items, NextToken: next}, nil
}
