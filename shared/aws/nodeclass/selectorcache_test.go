package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/timing"
)

// expectFromCache is Karpenter's "should resolve ... from cache" through a
// warm container: resolve finds want with some op calls and leaves one
// cache entry; forget empties EC2, yet a second resolution just within the
// TTL still finds want, without a call; at the TTL the entry has expired
// and EC2 (now empty) is read again.
func expectFromCache(t *testing.T, api *fakeEC2, op string, forget func(), resolve func(*Resolver) ([]string, outcome), want []string) {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	warm := &SelectorCache{}
	r := &Resolver{EC2: api, SSM: &fakeSSM{}, Selectors: warm, Now: func() time.Time { return now }}
	got, o := resolve(r)
	calls := api.calls[op]
	if !o.ok || !reflect.DeepEqual(got, want) || calls == 0 {
		t.Fatalf("first resolution: %v (%+v) in %d %s, want %v", got, o, calls, op, want)
	}
	if n := warm.len(now); n != 1 {
		t.Errorf("%d cache entries after one resolution, want 1", n)
	}
	forget()
	now = now.Add(timing.SelectorCacheTTL - time.Second)
	if got, o := resolve(r); !o.ok || !reflect.DeepEqual(got, want) || api.calls[op] != calls {
		t.Errorf("within the TTL: %v (%+v) in %d %s, want %v from the cache in %d", got, o, api.calls[op], op, want, calls)
	}
	now = now.Add(time.Second)
	// Each query of the selector is one call, EC2 having nothing.
	if got, o := resolve(r); o.ok || len(got) != 0 || api.calls[op] <= calls {
		t.Errorf("at the TTL: %v (%+v) in %d %s, want EC2's nothing read anew", got, o, api.calls[op], op)
	}
}

func TestSelectorCacheKeys(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	warm := &SelectorCache{}
	api := &fakeEC2{subnets: karpenterSubnets()}
	r := &Resolver{EC2: api, Selectors: warm, Now: func() time.Time { return now }}
	resolve := func(name string, terms ...awsv1.SubnetSelectorTerm) []string {
		nc := selectorClass()
		nc.Name, nc.UID = name, types.UID("uid-"+name)
		nc.Spec.SubnetSelectorTerms = terms
		got, o := r.subnets(ctx, nc)
		if o.err != nil {
			t.Fatal(o.err)
		}
		return subnetIDs(got)
	}
	byName1 := awsv1.SubnetSelectorTerm{Tags: map[string]string{"Name": "test-subnet-1"}}
	byName2 := awsv1.SubnetSelectorTerm{Tags: map[string]string{"Name": "test-subnet-2"}}
	steps := []struct {
		what  string
		class string
		terms []awsv1.SubnetSelectorTerm
		calls int
		want  []string
	}{
		{"first resolution reads EC2", "a", []awsv1.SubnetSelectorTerm{byName1}, 1, []string{"subnet-test1@test-zone-1a/tstz1-1a"}},
		{"the same selector is answered from the cache", "a", []awsv1.SubnetSelectorTerm{byName1}, 1, []string{"subnet-test1@test-zone-1a/tstz1-1a"}},
		{"a changed selector reads EC2", "a", []awsv1.SubnetSelectorTerm{byName2}, 2, []string{"subnet-test2@test-zone-1b/tstz1-1b"}},
		{"another class with a cached selector is answered from the cache", "b", []awsv1.SubnetSelectorTerm{byName1}, 2, []string{"subnet-test1@test-zone-1a/tstz1-1a"}},
		{"two terms are another query than either", "a", []awsv1.SubnetSelectorTerm{byName1, byName2}, 4, []string{"subnet-test1@test-zone-1a/tstz1-1a", "subnet-test2@test-zone-1b/tstz1-1b"}},
	}
	for _, s := range steps {
		got := resolve(s.class, s.terms...)
		if !reflect.DeepEqual(got, s.want) || api.calls["DescribeSubnets"] != s.calls {
			t.Errorf("%s: %v after %d calls, want %v after %d", s.what, got, api.calls["DescribeSubnets"], s.want, s.calls)
		}
	}
	// Kinds do not share keys: security groups by the same tags are
	// described, not answered with subnets.
	nc := selectorClass()
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"Name": "test-subnet-1"}}}
	api.groups = []ec2types.SecurityGroup{{GroupId: aws.String("sg-1"), GroupName: aws.String("g"), Tags: ec2Tags("Name", "test-subnet-1")}}
	if got, _ := r.securityGroups(ctx, nc); len(got) != 1 || got[0].ID != "sg-1" || api.calls["DescribeSecurityGroups"] != 1 {
		t.Errorf("security groups %+v in %d calls", got, api.calls["DescribeSecurityGroups"])
	}
}

// A newly published AMI changes the alias's SSM parameter, hence the
// DescribeImages query: the status follows it at once, cache or not.
func TestSelectorCacheFollowsAliasRelease(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	img := func(id string, created time.Time) ec2types.Image {
		return ec2types.Image{Name: aws.String(id), ImageId: aws.String(id), Architecture: "x86_64",
			CreationDate: aws.String(created.Format(time.RFC3339)), State: ec2types.ImageStateAvailable}
	}
	api := &fakeEC2{images: []ec2types.Image{img("ami-old", now.Add(-48*time.Hour)), img("ami-new", now.Add(-time.Hour))}}
	params, err := AliasParameters(Alias{Family: "AL2023", Version: AliasVersionLatest}, "1.32")
	if err != nil {
		t.Fatal(err)
	}
	ssm := &fakeSSM{params: map[string]string{params[0].Path: "ami-old"}}
	r := &Resolver{EC2: api, SSM: ssm, Selectors: &SelectorCache{}, Now: func() time.Time { return now }}
	nc := amiClass(awsv1.AMISelectorTerm{Alias: "al2023@latest"})
	cl := cluster
	cl.KubernetesVersion = "1.32"
	ids := func() []string {
		amis, o := r.amis(context.Background(), nc, cl, now)
		if o.err != nil {
			t.Fatal(o.err)
		}
		return amiIDs(amis)
	}
	if got := ids(); !reflect.DeepEqual(got, []string{"ami-old"}) || api.calls["DescribeImages"] != 1 {
		t.Fatalf("before the release: %v in %d calls", got, api.calls["DescribeImages"])
	}
	if got := ids(); !reflect.DeepEqual(got, []string{"ami-old"}) || api.calls["DescribeImages"] != 1 {
		t.Errorf("again: %v in %d calls, want the cache", got, api.calls["DescribeImages"])
	}
	ssm.params[params[0].Path] = "ami-new"
	now = now.Add(time.Second)
	if got := ids(); !reflect.DeepEqual(got, []string{"ami-new"}) || api.calls["DescribeImages"] != 2 {
		t.Errorf("after the release: %v in %d calls, want ami-new described", got, api.calls["DescribeImages"])
	}
}

// An image remembered past its deprecation time is deprecated: the cache
// holds what EC2 said, not what was concluded from it then.
func TestSelectorCacheJudgesDeprecationOnUse(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	api := &fakeEC2{images: []ec2types.Image{{Name: aws.String("a"), ImageId: aws.String("ami-1"), Architecture: "x86_64", Tags: ec2Tags("k", "v"),
		CreationDate: aws.String("2025-01-01T00:00:00Z"), DeprecationTime: aws.String(now.Add(30 * time.Second).Format(time.RFC3339)), State: ec2types.ImageStateAvailable}}}
	r := &Resolver{EC2: api, Selectors: &SelectorCache{}, Now: func() time.Time { return now }}
	nc := amiClass(awsv1.AMISelectorTerm{Tags: map[string]string{"k": "v"}})
	amis, _ := r.amis(context.Background(), nc, cluster, now)
	if len(amis) != 1 || amis[0].Deprecated {
		t.Fatalf("amis %+v", amis)
	}
	now = now.Add(45 * time.Second)
	amis, _ = r.amis(context.Background(), nc, cluster, now)
	if len(amis) != 1 || !amis[0].Deprecated || api.calls["DescribeImages"] != 1 {
		t.Errorf("amis %+v in %d calls, want ami-1 deprecated from the cache", amis, api.calls["DescribeImages"])
	}
}

// A failed query is not remembered, and a nil cache remembers nothing.
func TestSelectorCacheErrorsAndNil(t *testing.T) {
	ctx := context.Background()
	api := &fakeEC2{subnets: karpenterSubnets(), err: apiErr("RequestLimitExceeded")}
	r := &Resolver{EC2: api, Selectors: &SelectorCache{}}
	if _, o := r.subnets(ctx, selectorClass()); !o.keep {
		t.Fatalf("outcome %+v, want a transient failure", o)
	}
	api.err = nil
	failedCalls := api.calls["DescribeSubnets"]
	if got, o := r.subnets(ctx, selectorClass()); !o.ok || len(got) != 4 || api.calls["DescribeSubnets"] == failedCalls {
		t.Errorf("after the failure: %d subnets (%+v) in %d calls, want EC2 read again", len(got), o, api.calls["DescribeSubnets"])
	}
	// The fake pages one subnet at a time: a resolution is four calls.
	cold := &Resolver{EC2: api}
	before := api.calls["DescribeSubnets"]
	for range 2 {
		cold.subnets(ctx, selectorClass())
	}
	if n := api.calls["DescribeSubnets"] - before; n != 8 {
		t.Errorf("%d calls, want every resolution without a cache to describe", n)
	}
}

// A warm container's invocations may resolve at once: they share the
// entries, and what one reads is not changed by another's sorting.
func TestSelectorCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	api := &fakeEC2{subnets: karpenterSubnets(), groups: karpenterSecurityGroups()}
	r := &Resolver{EC2: api, Selectors: &SelectorCache{}}
	want := []string{"subnet-test1@test-zone-1a/tstz1-1a", "subnet-test2@test-zone-1b/tstz1-1b", "subnet-test3@test-zone-1c/tstz1-1c", "subnet-test4@test-zone-1a-local/tstz1-1alocal"}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			nc := selectorClass()
			nc.UID = "uid" // same terms, any class
			got, o := r.subnets(ctx, nc)
			if ids := subnetIDs(got); o.err != nil || !reflect.DeepEqual(ids, want) {
				errs <- fmt.Errorf("resolution %d: %v %v", i, ids, o.err)
			}
			if _, o := r.securityGroups(ctx, nc); !o.ok {
				errs <- fmt.Errorf("resolution %d: security groups %+v", i, o)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Expired entries are dropped when another is stored, so a container that
// lives for hours does not keep every selector it ever saw.
func TestSelectorCacheSweeps(t *testing.T) {
	c := &SelectorCache{}
	now := time.Now()
	c.put("a", []int{1}, now)
	c.put("b", []int{2}, now.Add(timing.SelectorCacheTTL))
	if len(c.entries) != 1 {
		t.Errorf("%d entries, want the expired one dropped", len(c.entries))
	}
	if _, ok := c.get("a", now.Add(timing.SelectorCacheTTL)); ok {
		t.Error("an expired entry answered")
	}
	got, err := cached(c, "b", now.Add(timing.SelectorCacheTTL), func() ([]int, error) { return nil, errors.New("not called") })
	if err != nil || !reflect.DeepEqual(got, []int{2}) {
		t.Errorf("%v %v", got, err)
	}
	got[0] = 9
	if again, _ := cached(c, "b", now.Add(timing.SelectorCacheTTL), func() ([]int, error) { return nil, errors.New("not called") }); again[0] != 2 {
		t.Error("a caller's copy aliases the cache")
	}
}
