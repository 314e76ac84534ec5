package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// minValuesType is one of Karpenter's fake instance types in its minValues
// tests: 4 cpu, 4 GiB, spot only, in the zones given.
func minValuesType(name, arch string, price float64, zones ...string) *InstanceType {
	it := mkType(name, 4, 4, 30, arch, price)
	it.Offerings = nil
	for _, z := range zones {
		it.Offerings = append(it.Offerings, Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: price, Available: true})
	}
	return it
}

// TestMinValues ports the cases of Karpenter v1.14.1's MinValuesPolicy
// suite (pkg/controllers/provisioning/suite_test.go) and instance-selection
// minValues tests (pkg/controllers/provisioning/scheduling), plus the zone
// and cut cases Karpless got wrong before.
func TestMinValues(t *testing.T) {
	two := []*InstanceType{
		minValuesType("instance-type-1", "arm64", 0.52, "test-1a"),
		minValuesType("instance-type-2", "arm64", 0.52, "test-1b"),
	}
	twoZones := []*InstanceType{minValuesType("instance-type-1", "arm64", 0.52, "test-1a", "test-1b")}
	itIn := func(n int) poolOpt {
		return withMinValues(wellknown.InstanceTypeLabel, n, opIn, "instance-type-1", "instance-type-2", "instance-type-3")
	}
	zoneIn := func(n int) poolOpt { return withMinValues(wellknown.ZoneLabel, n, opIn, testZones...) }
	type want struct {
		pool    string
		relaxed bool
		min     map[string]int // key -> minValues written
		values  map[string]int // key -> number of values listed, when checked
	}
	for _, tc := range []struct {
		name    string
		types   []*InstanceType // nil: testTypes()
		pools   []*karpv1.NodePool
		policy  MinValuesPolicy
		maxIT   int
		pods    int
		want    *want  // nil: not scheduled
		because string // part of the reason when not scheduled
	}{
		{name: "Strict: instance types short of minValues do not schedule", types: two,
			pools: []*karpv1.NodePool{mkPool("default", withWeight(100), itIn(3))}, because: "minValues"},
		{name: "BestEffort: relaxed to the types there are", types: two, policy: MinValuesBestEffort,
			pools: []*karpv1.NodePool{mkPool("default", withWeight(100), itIn(3))},
			want:  &want{pool: "default", relaxed: true, min: map[string]int{wellknown.InstanceTypeLabel: 2}, values: map[string]int{wellknown.InstanceTypeLabel: 2}}},
		{name: "BestEffort: relaxes before falling back to a lighter NodePool", types: two, policy: MinValuesBestEffort,
			pools: []*karpv1.NodePool{mkPool("default", withWeight(100), itIn(3)), mkPool("nomin", withWeight(10),
				withReq(wellknown.InstanceTypeLabel, opIn, "instance-type-1", "instance-type-2", "instance-type-3"))},
			want: &want{pool: "default", relaxed: true, min: map[string]int{wellknown.InstanceTypeLabel: 2}}},
		{name: "BestEffort: the heavier of two NodePools that both relax", types: two, policy: MinValuesBestEffort,
			pools: []*karpv1.NodePool{mkPool("default", withWeight(100), itIn(3)), mkPool("light", withWeight(10), itIn(3))},
			want:  &want{pool: "default", relaxed: true, min: map[string]int{wellknown.InstanceTypeLabel: 2}}},
		{name: "Strict: zones short of minValues do not schedule", types: twoZones,
			pools: []*karpv1.NodePool{mkPool("default", zoneIn(3))}, because: "minValues"},
		{name: "BestEffort: zone minValues relaxed to the zones offered", types: twoZones, policy: MinValuesBestEffort,
			pools: []*karpv1.NodePool{mkPool("default", zoneIn(3))},
			want:  &want{pool: "default", relaxed: true, min: map[string]int{wellknown.ZoneLabel: 2}}},
		{name: "BestEffort: instance type and zone both relaxed", types: twoZones, policy: MinValuesBestEffort,
			pools: []*karpv1.NodePool{mkPool("default", withWeight(100), itIn(3), zoneIn(3))},
			want: &want{pool: "default", relaxed: true, min: map[string]int{wellknown.InstanceTypeLabel: 1, wellknown.ZoneLabel: 2},
				values: map[string]int{wellknown.InstanceTypeLabel: 1}}},
		{name: "Strict: zone minValues met by offerings (zones are no label)",
			pools: []*karpv1.NodePool{mkPool("default", zoneIn(3))},
			want:  &want{pool: "default", min: map[string]int{wellknown.ZoneLabel: 3}, values: map[string]int{wellknown.ZoneLabel: 3}}},
		{name: "Strict: capacity-type minValues met by offerings",
			pools: []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.CapacityTypeLabel, 2, opIn, "spot", "on-demand"))},
			want:  &want{pool: "default", min: map[string]int{wellknown.CapacityTypeLabel: 2}, values: map[string]int{wellknown.CapacityTypeLabel: 2}}},
		{name: "Strict: zone minValues counts only the zones the pod allows",
			pools: []*karpv1.NodePool{mkPool("default", zoneIn(2))}, pods: -1, because: "minValues"},
		{name: "Strict: more minValues than types exist", pools: []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.InstanceTypeLabel, 11, opExists))},
			because: "minValues"},
		{name: "Strict: minValues met before the cut and not after it fails the pods", types: []*InstanceType{
			minValuesType("instance-type-1", "arm64", 0.52, "test-1a"), minValuesType("instance-type-2", "arm64", 1.0, "test-1a")},
			maxIT: 1, pods: 2, pools: []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.InstanceTypeLabel, 2, opIn, "instance-type-1", "instance-type-2"))},
			because: "fewer than its minValues 2"},
		{name: "BestEffort: minValues lowered after the cut", types: []*InstanceType{
			minValuesType("instance-type-1", "arm64", 0.52, "test-1a"), minValuesType("instance-type-2", "arm64", 1.0, "test-1a")},
			maxIT: 1, pods: 2, policy: MinValuesBestEffort, pools: []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.InstanceTypeLabel, 2, opIn, "instance-type-1", "instance-type-2"))},
			want: &want{pool: "default", relaxed: true, min: map[string]int{wellknown.InstanceTypeLabel: 1}, values: map[string]int{wellknown.InstanceTypeLabel: 1}}},
		{name: "multiple keys with minValues", types: []*InstanceType{
			minValuesType("instance-type-1", "arm64", 0.52, "test-1a"), minValuesType("instance-type-2", "amd64", 1.0, "test-1a")},
			pools: []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.ArchLabel, 2, opExists),
				withMinValues(wellknown.InstanceTypeLabel, 1, opIn, "instance-type-1", "instance-type-2"))},
			want: &want{pool: "default", min: map[string]int{wellknown.ArchLabel: 2, wellknown.InstanceTypeLabel: 1}, values: map[string]int{wellknown.InstanceTypeLabel: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*corev1.Pod
			switch {
			case tc.pods < 0: // one pod pinned to a zone
				pods = append(pods, mkPod("p", "900m", "900Mi", nodeSelector(wellknown.ZoneLabel, "test-1a")))
			default:
				for range max(tc.pods, 1) {
					pods = append(pods, mkPod("p", "900m", "900Mi"))
				}
			}
			s := snapshot(tc.pools, pods...)
			if tc.types != nil {
				s.NodeClasses["default"].InstanceTypes = tc.types
			}
			opts := Provisioning()
			opts.MinValues, opts.MaxInstanceTypes = tc.policy, tc.maxIT
			r := Solve(s, opts)
			checkInvariants(t, s, r)
			if tc.want == nil {
				for _, p := range pods {
					if got := reasonOf(r, p); !strings.Contains(got, tc.because) {
						t.Fatalf("pod %s: reason %q, want it to contain %q (claims %d)", p.Name, got, tc.because, len(r.NewNodeClaims))
					}
				}
				return
			}
			c := claimOf(r, pods[0])
			if c == nil {
				t.Fatalf("not placed: %v", r.Unschedulable)
			}
			if c.NodePool != tc.want.pool || c.MinValuesRelaxed != tc.want.relaxed {
				t.Fatalf("pool %s relaxed %v, want %s %v", c.NodePool, c.MinValuesRelaxed, tc.want.pool, tc.want.relaxed)
			}
			for _, q := range c.Requirements {
				w, ok := tc.want.min[q.Key]
				if !ok {
					continue
				}
				if q.MinValues == nil || *q.MinValues != w {
					t.Fatalf("%s minValues %v, want %d (%v)", q.Key, q.MinValues, w, q.Values)
				}
				if n, ok := tc.want.values[q.Key]; ok && len(q.Values) != n {
					t.Fatalf("%s lists %v, want %d values", q.Key, q.Values, n)
				}
				delete(tc.want.min, q.Key)
			}
			if len(tc.want.min) > 0 {
				t.Fatalf("no requirement with minValues on %v: %v", tc.want.min, c.Requirements)
			}
		})
	}
}

// TestMinValuesKeptOnLaterPods: under BestEffort, a NodeClaim is relaxed
// when it opens; a pod added later must keep what it was relaxed to, as
// Karpenter adds to in-flight NodeClaims without relaxing. Two pods fit
// together only on instance-type-2: the second opens its own claim rather
// than cutting the first to one type.
func TestMinValuesKeptOnLaterPods(t *testing.T) {
	small := mkType("instance-type-1", 2, 4, 30, "arm64", 0.52)
	small.Offerings = []Offering{{Zone: "test-1a", CapacityType: wellknown.CapacityTypeSpot, Price: 0.52, Available: true}}
	types := []*InstanceType{small, minValuesType("instance-type-2", "arm64", 1.0, "test-1a")}
	pool := mkPool("default", withMinValues(wellknown.InstanceTypeLabel, 3, opIn, "instance-type-1", "instance-type-2", "instance-type-3"))
	a, b := mkPod("a", "1500m", "1Gi"), mkPod("b", "1500m", "1Gi")
	s := snapshot([]*karpv1.NodePool{pool}, a, b)
	s.NodeClasses["default"].InstanceTypes = types
	opts := Provisioning()
	opts.MinValues = MinValuesBestEffort
	r := Solve(s, opts)
	checkInvariants(t, s, r)
	if len(r.NewNodeClaims) != 2 {
		t.Fatalf("want two claims, got %d", len(r.NewNodeClaims))
	}
	for _, c := range r.NewNodeClaims {
		if q := reqOf(c, wellknown.InstanceTypeLabel); q.MinValues == nil || *q.MinValues != 2 || !c.MinValuesRelaxed {
			t.Fatalf("instance-type %s relaxed %v, want minValues 2, relaxed", q, c.MinValuesRelaxed)
		}
	}
}
