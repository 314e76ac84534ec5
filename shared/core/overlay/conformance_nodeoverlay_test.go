package overlay

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/nodeoverlay, ported: the controller's
// suite (an overlay's ValidationSucceeded and the instance types each
// NodePool then sees) and the instance type store's, through Apply. The
// fake cloud provider's NodePools all return the same instance types, as
// NodePools that share one EC2NodeClass do here.
const (
	nodeOverlaySuite = "core/nodeoverlay"
	suiteFile        = "pkg/controllers/nodeoverlay/suite_test.go"
	storeFile        = "pkg/controllers/nodeoverlay/store_test.go"
	sharedClass      = "default"
)

// fakeType is the fake cloud provider's NewInstanceType: 4 cpu, 4Gi and 5
// pods unless given, amd64, and five offerings priced by its resources
// unless given.
func fakeType(name string, arch, os string, res corev1.ResourceList, offs ...scheduling.Offering) *scheduling.InstanceType {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("5")}
	for k, v := range res {
		capacity[k] = v
	}
	if arch == "" {
		arch = "amd64"
	}
	if os == "" {
		os = "linux"
	}
	if len(offs) == 0 {
		p := priceFromResources(capacity)
		offs = []scheduling.Offering{
			offering("spot", "test-zone-1", p), offering("spot", "test-zone-2", p),
			offering("on-demand", "test-zone-1", p), offering("on-demand", "test-zone-2", p), offering("on-demand", "test-zone-3", p),
		}
	}
	return &scheduling.InstanceType{
		Name:        name,
		Labels:      map[string]string{wellknown.InstanceTypeLabel: name, wellknown.ArchLabel: arch, wellknown.OSLabel: os},
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Offerings:   offs,
	}
}

func priceFromResources(r corev1.ResourceList) float64 {
	p := 0.0
	for k, v := range r {
		switch k {
		case corev1.ResourceCPU:
			p += 0.1 * v.AsApproximateFloat64()
		case corev1.ResourceMemory:
			p += 0.1 * v.AsApproximateFloat64() / 1e9
		case "fake.com/vendor-a", "fake.com/vendor-b":
			p++
		}
	}
	return p
}

func offering(ct, zone string, price float64) scheduling.Offering {
	return scheduling.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
}

// defaultFakeTypes is what the fake cloud provider returns when its
// InstanceTypes are nil.
func defaultFakeTypes() []*scheduling.InstanceType {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	return []*scheduling.InstanceType{
		fakeType("default-instance-type", "", "", nil),
		fakeType("small-instance-type", "", "", rl("cpu", "2", "memory", "2Gi")),
		fakeType("gpu-vendor-instance-type", "", "", rl("fake.com/vendor-a", "2")),
		fakeType("gpu-vendor-b-instance-type", "", "", rl("fake.com/vendor-b", "2")),
		fakeType("arm-instance-type", "arm64", "linux", rl("cpu", "16", "memory", "128Gi")),
		fakeType("single-pod-instance-type", "", "", rl("pods", "1")),
	}
}

// world is the suite's BeforeEach: one instance type with one spot
// offering at 1.020 and one NodePool applied; nodePoolTwo shares its class
// and is added by the cases that apply it.
type world struct {
	types       []*scheduling.InstanceType
	nodePool    *karpv1.NodePool
	nodePoolTwo *karpv1.NodePool
	pools       []*karpv1.NodePool
}

func newWorld() *world {
	w := &world{
		types:       []*scheduling.InstanceType{fakeType("default-instance-type", "", "", nil, offering("spot", "test-zone-1", 1.020))},
		nodePool:    pool("nodepool-one", sharedClass, nil),
		nodePoolTwo: pool("nodepool-two", sharedClass, nil),
	}
	w.pools = []*karpv1.NodePool{w.nodePool}
	return w
}

func (w *world) withPoolTwo() *world {
	w.pools = append(w.pools, w.nodePoolTwo)
	return w
}

func (w *world) apply(overlays ...*v1alpha1.NodeOverlay) Result {
	return Apply(Input{Classes: map[string][]*scheduling.InstanceType{sharedClass: w.types}, Pools: w.pools, Overlays: overlays})
}

// nov builds an overlay; name "" gets a generated one, as test.NodeOverlay
// does.
func nov(name string, weight int32, reqs ...v1alpha1.NodeSelectorRequirement) *v1alpha1.NodeOverlay {
	if name == "" {
		name = fmt.Sprintf("overlay-%d", len(reqs)*1000+int(weight)+len(fmt.Sprint(reqs)))
	}
	o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}}
	o.Spec.Requirements = reqs
	o.Spec.Weight = &weight
	return o
}

// priceEntry is a table Entry's price or priceAdjustment.
type priceEntry struct{ price, adj string }

func (c priceEntry) on(o *v1alpha1.NodeOverlay) *v1alpha1.NodeOverlay {
	if c.price != "" {
		o.Spec.Price = &c.price
	}
	if c.adj != "" {
		o.Spec.PriceAdjustment = &c.adj
	}
	return o
}

func withCapacity(o *v1alpha1.NodeOverlay, kv ...string) *v1alpha1.NodeOverlay {
	o.Spec.Capacity = corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		o.Spec.Capacity[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return o
}

// expectValidation checks an overlay's ValidationSucceeded condition, as
// the provisioner writes it: reason "" wants True.
func expectValidation(t *testing.T, res Result, o *v1alpha1.NodeOverlay, reason string) {
	t.Helper()
	out, ok := res.Overlays[o.Name]
	if !ok {
		t.Fatalf("no outcome for %s", o.Name)
	}
	for _, c := range Conditions(out, time.Unix(0, 0)) {
		if c.Type != v1alpha1.ConditionTypeValidationSucceeded {
			continue
		}
		if want := map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[reason == ""]; c.Status != want {
			t.Errorf("%s: ValidationSucceeded=%s (%s: %s), want %s", o.Name, c.Status, c.Reason, c.Message, want)
		}
		if reason != "" && c.Reason != reason {
			t.Errorf("%s: reason %q, want %q", o.Name, c.Reason, reason)
		}
		return
	}
	t.Errorf("%s: no ValidationSucceeded condition", o.Name)
}

// typesOf is store.ApplyAll: the types a NodePool sees; it fails when the
// pool was not evaluated.
func typesOf(t *testing.T, res Result, np *karpv1.NodePool) []*scheduling.InstanceType {
	t.Helper()
	types, ok := res.Pools[np.Name]
	if !ok {
		t.Fatalf("NodePool %s was not evaluated", np.Name)
	}
	return types
}

func typeNamed(t *testing.T, types []*scheduling.InstanceType, name string) *scheduling.InstanceType {
	t.Helper()
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no type %s", name)
	return nil
}

// offeringPrice is the price of the one offering of it in that zone or of
// that capacity type ("" matches any).
func offeringPrice(t *testing.T, it *scheduling.InstanceType, zone, ct string) float64 {
	t.Helper()
	var found []float64
	for _, o := range it.Offerings {
		if (zone == "" || o.Zone == zone) && (ct == "" || o.CapacityType == ct) {
			found = append(found, o.Price)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d offerings in %q/%q, want 1", it.Name, len(found), zone, ct)
	}
	return found[0]
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func expectPrice(t *testing.T, it *scheduling.InstanceType, zone, ct string, want float64) {
	t.Helper()
	if got := offeringPrice(t, it, zone, ct); !near(got, want) {
		t.Errorf("%s %s/%s: price %v, want %v", it.Name, zone, ct, got, want)
	}
}

func expectCapacity(t *testing.T, it *scheduling.InstanceType, name, want string) {
	t.Helper()
	q, ok := it.Capacity[corev1.ResourceName(name)]
	switch {
	case want == "" && ok:
		t.Errorf("%s: %s is %s, want none", it.Name, name, q.String())
	case want != "" && (!ok || q.Cmp(resource.MustParse(want)) != 0):
		t.Errorf("%s: %s is %s (set %v), want %s", it.Name, name, q.String(), ok, want)
	}
}

// priceOverlaid and capacityOverlaid are IsPricingOverlayApplied and
// IsCapacityOverlayApplied: whether an overlay changed the type for the
// pool.
func priceOverlaid(res Result, np *karpv1.NodePool, typ string) bool {
	c := res.Changes[np.Name][typ]
	return c != nil && len(c.Price) > 0
}

func capacityOverlaid(res Result, np *karpv1.NodePool, typ string) bool {
	c := res.Changes[np.Name][typ]
	return c != nil && len(c.Capacity) > 0
}

func itIn(values ...string) v1alpha1.NodeSelectorRequirement {
	return r(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, values...)
}

// longKey fails runtime validation by its length.
var longKey = "test.com.test/test-" + strings.Repeat("a", 250)

var priceEntries = []struct {
	name string
	a, b priceEntry
}{
	{"Price", priceEntry{price: "1"}, priceEntry{price: "2"}},
	{"PriceAdjustment", priceEntry{adj: "+1"}, priceEntry{adj: "-1"}},
}

func TestConformanceNodeOverlayValidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: nodeOverlaySuite, File: suiteFile, Spec: "Validation > " + spec}
	}
	conformance.Run(t, c("should return the same instance type when zero overlay are applied"), func(t *testing.T) {
		w := newWorld()
		types := typesOf(t, w.apply(), w.nodePool)
		if len(types) != 1 || len(types[0].Offerings) != 1 {
			t.Fatalf("types %v", types)
		}
		expectPrice(t, types[0], "", "", 1.020)
	})
	conformance.Run(t, c("should pass with a single overlay"), func(t *testing.T) {
		o := nov("", 10, itIn("default-instance-type"))
		expectValidation(t, newWorld().apply(o), o, "")
	})
	conformance.Run(t, c("Runtime Validation > should fail validation for invalid requirements values"), func(t *testing.T) {
		o := nov("", 10, r(longKey, corev1.NodeSelectorOpExists))
		expectValidation(t, newWorld().apply(o), o, v1alpha1.ReasonRuntimeValidation)
	})
	conformance.Run(t, c("Runtime Validation > should fail validation for invalid capacity values"), func(t *testing.T) {
		// Karpenter adds testResource to its well-known resources for the
		// case; Karpless's are fixed, so a well-known one stands in.
		o := withCapacity(nov("", 10, itIn("default-instance-type")), "pods", "5")
		expectValidation(t, newWorld().apply(o), o, v1alpha1.ReasonRuntimeValidation)
	})

	rq := "Requirements Validations > "
	conformance.Run(t, c(rq+"Instance types Requirements > should fail when requirements overlays overlap"), func(t *testing.T) {
		w := newWorld()
		w.types = defaultFakeTypes()
		a := priceEntry{price: "1.03"}.on(nov("overlay-a", 10, r(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "arm64")))
		b := priceEntry{price: "23"}.on(nov("overlay-b", 10, r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpExists)))
		res := w.apply(a, b)
		expectValidation(t, res, a, v1alpha1.ReasonConflict)
		expectValidation(t, res, b, "")
	})
	conformance.Run(t, c(rq+"Instance types Requirements > should succeed with requirements overlays don't overlap"), func(t *testing.T) {
		w := newWorld()
		w.types = []*scheduling.InstanceType{fakeType("arm-instance-type", "arm64", "linux", nil), fakeType("amd-instance-type", "amd64", "ios", nil)}
		a := priceEntry{price: "1.03"}.on(nov("overlay-a", 10, r(wellknown.ArchLabel, corev1.NodeSelectorOpIn, "arm64")))
		b := priceEntry{price: "23"}.on(nov("overlay-b", 10, r(wellknown.OSLabel, corev1.NodeSelectorOpIn, "ios")))
		res := w.apply(a, b)
		expectValidation(t, res, a, "")
		expectValidation(t, res, b, "")
	})
	offeringWorld := func() *world {
		w := newWorld()
		w.types = []*scheduling.InstanceType{fakeType("default-instance-type", "", "", nil,
			offering("spot", "test-zone-1", 1.020), offering("on-demand", "test-zone-2", 2.020),
			offering("spot", "test-zone-3", 3.020), offering("reserved", "test-zone-4", 4.020))}
		return w
	}
	zoneIn := func(zones ...string) v1alpha1.NodeSelectorRequirement {
		return r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, zones...)
	}
	spot := r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot")
	anyCT := r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpExists)
	for _, tc := range []struct {
		spec      string
		a, b      v1alpha1.NodeSelectorRequirement
		conflictA bool
	}{
		{"should fail with requirements overlays overlap on zone", zoneIn("test-zone-1", "test-zone-4"), anyCT, true},
		{"should fail with requirements overlays overlap on capacity type", anyCT, spot, true},
		{"should succeed with requirements overlays don't overlap", zoneIn("test-zone-6", "test-zone-4"), spot, false},
		{"should fail with requirements overlays overlap", zoneIn("test-zone-1", "test-zone-4"), spot, true},
	} {
		conformance.Run(t, c(rq+"Offering Requirements > "+tc.spec), func(t *testing.T) {
			a := priceEntry{price: "1.03"}.on(nov("overlay-a", 10, tc.a))
			b := priceEntry{price: "23"}.on(nov("overlay-b", 10, tc.b))
			res := offeringWorld().apply(a, b)
			if tc.conflictA {
				expectValidation(t, res, a, v1alpha1.ReasonConflict)
			} else {
				expectValidation(t, res, a, "")
			}
			expectValidation(t, res, b, "")
		})
	}

	pu := "Pricing Updates > "
	for _, tc := range []struct {
		table      string
		reqA, reqB v1alpha1.NodeSelectorRequirement
		weightB    int32
		conflictA  bool
		entries    [2][2]priceEntry
	}{
		{"should fail with conflicting pricing updates overlays with overlapping requirements",
			itIn("default-instance-type", "small-instance-type"), itIn("default-instance-type", "gpu-vendor-instance-type"), 10, true,
			[2][2]priceEntry{{{price: "1.03"}, {price: "23"}}, {{adj: "+54"}, {adj: "-2"}}}},
		{"should fail with pricing updates are the same overlays with overlapping requirements",
			itIn("default-instance-type", "small-instance-type"), itIn("default-instance-type", "gpu-vendor-instance-type"), 10, true,
			[2][2]priceEntry{{{price: "100"}, {price: "100"}}, {{adj: "+100"}, {adj: "+100"}}}},
		{"should pass with conflicting pricing updates overlays with mutually exclusive requirements",
			itIn("default-instance-type"), r(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpNotIn, "default-instance-type"), 10, false,
			[2][2]priceEntry{{{price: "54"}, {price: "23"}}, {{adj: "+54"}, {adj: "-2"}}}},
		{"should pass with conflicting pricing update overlays with mutually exclusive weights",
			itIn("default-instance-type"), itIn("default-instance-type", "gpu-vendor-instance-type"), 20, false,
			[2][2]priceEntry{{{price: "34"}, {price: "2"}}, {{adj: "-4"}, {adj: "-2"}}}},
	} {
		for i, entry := range []string{"Price", "PriceAdjustment"} {
			conformance.Run(t, c(pu+tc.table+" > "+entry), func(t *testing.T) {
				a := tc.entries[i][0].on(nov("overlay-a", 10, tc.reqA))
				b := tc.entries[i][1].on(nov("overlay-b", tc.weightB, tc.reqB))
				res := newWorld().apply(a, b)
				if tc.conflictA {
					expectValidation(t, res, a, v1alpha1.ReasonConflict)
				} else {
					expectValidation(t, res, a, "")
				}
				expectValidation(t, res, b, "")
			})
		}
	}

	ca := "Capacity Adjustment > "
	conformance.Run(t, c(ca+"should fail with conflicting capacity overlays with overlapping requirements"), func(t *testing.T) {
		a := withCapacity(nov("overlay-a", 10, itIn("default-instance-type", "small-instance-type")), "smarter-devices/fuse", "1")
		b := withCapacity(nov("overlay-b", 10, itIn("default-instance-type", "gpu-vendor-instance-type")), "smarter-devices/fuse", "54")
		res := newWorld().apply(a, b)
		expectValidation(t, res, a, v1alpha1.ReasonConflict)
		expectValidation(t, res, b, "")
	})
	conformance.Run(t, c(ca+"should fail with conflicting capacity overlays with multiple overlays"), func(t *testing.T) {
		a := withCapacity(nov("conflicting-overlay-1", 10, itIn("default-instance-type", "small-instance-type")), "hugepage-1Gi", "2Gi")
		b := withCapacity(nov("good-overlay-1", 10, itIn("default-instance-type")), "smarter-devices/fuse", "1")
		cc := withCapacity(nov("conflicting-overlay-2", 10, itIn("default-instance-type")), "hugepage-1Gi", "3Gi")
		res := newWorld().apply(a, b, cc)
		expectValidation(t, res, a, v1alpha1.ReasonConflict)
		expectValidation(t, res, b, "")
		expectValidation(t, res, cc, "")
	})
	conformance.Run(t, c(ca+"should pass with capacity adjustment are the same overlays with overlapping requirements"), func(t *testing.T) {
		// Karpenter's title says pass; its expectation is a conflict.
		a := withCapacity(nov("overlay-a", 10, itIn("default-instance-type", "small-instance-type")), "smarter-devices/fuse", "54")
		b := withCapacity(nov("overlay-b", 10, itIn("default-instance-type", "gpu-vendor-instance-type")), "smarter-devices/fuse", "54")
		res := newWorld().apply(a, b)
		expectValidation(t, res, a, v1alpha1.ReasonConflict)
		expectValidation(t, res, b, "")
	})
	for _, tc := range []struct {
		spec       string
		reqB       v1alpha1.NodeSelectorRequirement
		weightB    int32
		resA, resB string
	}{
		{"should pass with conflicting capacity overlays with mutually exclusive requirements", r(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpNotIn, "default-instance-type"), 10, "smarter-devices/fuse", "smarter-devices/fuse"},
		{"should pass with conflicting capacity overlays with mutually exclusive weights", itIn("default-instance-type", "gpu-vendor-instance-type"), 20, "smarter-devices/fuse", "smarter-devices/fuse"},
		{"should pass with non conflicting capacity overlays with overlapping requirements", itIn("default-instance-type", "gpu-vendor-instance-type"), 20, "smarter-devices/fuse", "smarter-devices/buz"},
	} {
		conformance.Run(t, c(ca+tc.spec), func(t *testing.T) {
			a := withCapacity(nov("overlay-a", 10, itIn("default-instance-type")), tc.resA, "55")
			b := withCapacity(nov("overlay-b", tc.weightB, tc.reqB), tc.resB, "5")
			res := newWorld().apply(a, b)
			expectValidation(t, res, a, "")
			expectValidation(t, res, b, "")
		})
	}
}

func TestConformanceNodeOverlayInstanceTypes(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: nodeOverlaySuite, File: suiteFile, Spec: "Instance Type Controller > " + spec}
	}
	type entry struct {
		name string
		ch   priceEntry
		want float64
	}
	single := func(p string, pa string, wantP, wantPA float64) []entry {
		return []entry{{"Price", priceEntry{price: p}, wantP}, {"PriceAdjustment", priceEntry{adj: pa}, wantPA}}
	}
	onlyOne := func(t *testing.T, types []*scheduling.InstanceType) *scheduling.InstanceType {
		t.Helper()
		if len(types) != 1 || len(types[0].Offerings) != 1 {
			t.Fatalf("want one type with one offering, got %d types", len(types))
		}
		return types[0]
	}
	pr := "Price Updates > Requirements > "
	for _, e := range single("13234.223", "+1000", 13234.223, 1001.020) {
		conformance.Run(t, c(pr+"should pass with conflicting pricing update overlays with mutually exclusive weights > "+e.name), func(t *testing.T) {
			w := newWorld().withPoolTwo()
			o := e.ch.on(nov("", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, w.nodePool.Name)))
			res := w.apply(o)
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePool)), "", "", e.want)
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePoolTwo)), "", "", 1.020)
		})
	}
	for _, e := range []struct {
		name     string
		a, b     priceEntry
		one, two float64
	}{
		{"Price", priceEntry{price: "13234.223"}, priceEntry{price: "232.11"}, 13234.223, 232.11},
		{"PriceAdjustment", priceEntry{adj: "+1000"}, priceEntry{adj: "+2500"}, 1001.020, 2501.020},
	} {
		conformance.Run(t, c(pr+"should pass with conflicting pricing update overlays for all nodepools > "+e.name), func(t *testing.T) {
			w := newWorld().withPoolTwo()
			a := e.a.on(nov("overlay-one", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, w.nodePool.Name)))
			b := e.b.on(nov("overlay-two", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, w.nodePoolTwo.Name)))
			res := w.apply(a, b)
			expectValidation(t, res, a, "")
			expectValidation(t, res, b, "")
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePool)), "", "", e.one)
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePoolTwo)), "", "", e.two)
		})
	}
	for _, e := range single("13234.223", "+1000", 13234.223, 1001.020) {
		conformance.Run(t, c(pr+"should only apply pricing updates for nodeclaim spec labels that defined in the overlay requirements > "+e.name), func(t *testing.T) {
			w := newWorld().withPoolTwo()
			w.nodePoolTwo.Spec.Template.Labels = map[string]string{"test-label": "test-value"}
			res := w.apply(e.ch.on(nov("", 10, r("test-label", corev1.NodeSelectorOpIn, "test-value"))))
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePool)), "", "", 1.020)
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePoolTwo)), "", "", e.want)
		})
	}
	pu := "Price Updates > "
	for _, e := range single("13234.223", "+1000", 1.02, 1.02) {
		conformance.Run(t, c(pu+"should not apply pricing updates for invalid overlays > "+e.name), func(t *testing.T) {
			w := newWorld()
			o := e.ch.on(nov("", 10, r(longKey, corev1.NodeSelectorOpExists)))
			res := w.apply(o)
			if res.Overlays[o.Name].Applied {
				t.Error("the invalid overlay was applied")
			}
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePool)), "", "", e.want)
		})
	}
	for _, e := range single("13234.223", "+1000", 1.02, 1.02) {
		conformance.Run(t, c(pu+"should not apply adjustments for overlays that do not overlap with instance types requirements > "+e.name), func(t *testing.T) {
			w := newWorld()
			res := w.apply(e.ch.on(nov("", 10, itIn("default-instance-type-not-found"))))
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePool)), "", "", e.want)
		})
	}
	for _, e := range single("13234.223", "+1000", 13234.223, 1001.020) {
		conformance.Run(t, c(pu+"should apply pricing updates for instances types > "+e.name), func(t *testing.T) {
			w := newWorld()
			res := w.apply(e.ch.on(nov("", 10, itIn("default-instance-type"))))
			expectPrice(t, onlyOne(t, typesOf(t, res, w.nodePool)), "", "", e.want)
		})
	}
	for _, e := range single("12321.32", "+1000", 12321.32, 1005.020) {
		conformance.Run(t, c(pu+"should apply pricing updates for instances types for capacity type > "+e.name), func(t *testing.T) {
			w := newWorld()
			w.types = []*scheduling.InstanceType{fakeType("default-instance-type", "", "", nil, offering("spot", "test-zone-1", 1.020), offering("on-demand", "test-zone-1", 5.020))}
			res := w.apply(e.ch.on(nov("", 10, r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "on-demand"))))
			types := typesOf(t, res, w.nodePool)
			expectPrice(t, types[0], "", "on-demand", e.want)
			expectPrice(t, types[0], "", "spot", 1.020)
		})
	}
	for _, e := range single("121.421", "+1000", 121.421, 1001.020) {
		conformance.Run(t, c(pu+"should apply pricing updates for instances types for availability zone > "+e.name), func(t *testing.T) {
			w := newWorld()
			w.types = []*scheduling.InstanceType{fakeType("default-instance-type", "", "", nil, offering("spot", "test-zone-1", 1.020), offering("spot", "test-zone-2", 5.020))}
			res := w.apply(e.ch.on(nov("", 10, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-1"))))
			types := typesOf(t, res, w.nodePool)
			expectPrice(t, types[0], "test-zone-1", "", e.want)
			expectPrice(t, types[0], "test-zone-2", "", 5.020)
		})
	}
	threeOfferings := func() []*scheduling.InstanceType {
		return []*scheduling.InstanceType{fakeType("default-instance-type", "", "", nil,
			offering("spot", "test-zone-1", 1.020), offering("on-demand", "test-zone-2", 2.020), offering("reserved", "test-zone-4", 4.020))}
	}
	for _, e := range []struct {
		name            string
		a, b            priceEntry
		two, four, spot float64
	}{
		{"Price", priceEntry{price: "121.421"}, priceEntry{price: "165.421"}, 121.421, 121.421, 165.421},
		{"PriceAdjustment", priceEntry{adj: "+201"}, priceEntry{adj: "-0.5"}, 203.020, 205.020, 0.52},
	} {
		conformance.Run(t, c(pu+"should update price updates offerings instance types from multiple overlays > "+e.name), func(t *testing.T) {
			w := newWorld()
			w.types = threeOfferings()
			res := w.apply(e.a.on(nov("zones", 10, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-2", "test-zone-4"))),
				e.b.on(nov("spot", 10, r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot"))))
			it := typesOf(t, res, w.nodePool)[0]
			expectPrice(t, it, "test-zone-2", "", e.two)
			expectPrice(t, it, "test-zone-4", "", e.four)
			expectPrice(t, it, "", "spot", e.spot)
		})
	}
	for _, e := range []struct {
		name      string
		a, b      priceEntry
		two, four float64
	}{
		{"Price", priceEntry{price: "121.421"}, priceEntry{price: "165.421"}, 121.421, 165.421},
		{"PriceAdjustment", priceEntry{adj: "+201"}, priceEntry{adj: "-1.5"}, 203.020, 2.520},
	} {
		conformance.Run(t, c(pu+"should update price updates offerings instance types from multiple overlays with different weights > "+e.name), func(t *testing.T) {
			w := newWorld()
			w.types = threeOfferings()
			res := w.apply(e.a.on(nov("a-test-100", 20, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-2"))),
				e.b.on(nov("b-test-100", 10, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-2", "test-zone-4"))))
			it := typesOf(t, res, w.nodePool)[0]
			expectPrice(t, it, "test-zone-2", "", e.two)
			expectPrice(t, it, "test-zone-4", "", e.four)
		})
	}
	// The pools' requirements do not narrow the types overlays see: the
	// fake cloud provider returns every type to every pool.
	partial := func(t *testing.T, w *world, a, b *v1alpha1.NodeOverlay, overlaid func(Result, *karpv1.NodePool, string) bool, pools ...*karpv1.NodePool) {
		t.Helper()
		w.types = defaultFakeTypes()
		res := w.apply(a, b)
		expectValidation(t, res, a, v1alpha1.ReasonConflict)
		expectValidation(t, res, b, "")
		for _, np := range pools {
			if n := len(typesOf(t, res, np)); n != 6 {
				t.Errorf("%s: %d types, want 6", np.Name, n)
			}
			for typ, want := range map[string]bool{"default-instance-type": false, "gpu-vendor-instance-type": true, "gpu-vendor-b-instance-type": false, "small-instance-type": true} {
				if got := overlaid(res, np, typ); got != want {
					t.Errorf("%s %s: overlaid %v, want %v", np.Name, typ, got, want)
				}
			}
		}
	}
	withTypes := func(np *karpv1.NodePool, types ...string) *karpv1.NodePool {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: types}}
		return np
	}
	for _, e := range []struct {
		name string
		a, b priceEntry
	}{{"Price", priceEntry{price: "382"}, priceEntry{price: "100"}}, {"PriceAdjustment", priceEntry{adj: "-23"}, priceEntry{adj: "+10"}}} {
		conformance.Run(t, c(pu+"should not partial apply instance types in a nodepool > "+e.name), func(t *testing.T) {
			w := newWorld()
			partial(t, w, e.a.on(nov("overlay-a", 10, itIn("default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type"))),
				e.b.on(nov("overlay-b", 10, itIn("small-instance-type", "gpu-vendor-instance-type"))), priceOverlaid, w.nodePool)
		})
	}
	for _, e := range []struct {
		name string
		a, b priceEntry
	}{{"Price", priceEntry{price: "382"}, priceEntry{price: "100"}}, {"PriceAdjustment", priceEntry{adj: "+10"}, priceEntry{adj: "-23"}}} {
		conformance.Run(t, c(pu+"should not partial apply for a subset of nodepools > "+e.name), func(t *testing.T) {
			w := newWorld().withPoolTwo()
			withTypes(w.nodePool, "default-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type")
			withTypes(w.nodePoolTwo, "gpu-vendor-b-instance-type")
			partial(t, w, e.a.on(nov("overlay-a", 10, itIn("default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type"))),
				e.b.on(nov("overlay-b", 10, itIn("small-instance-type", "gpu-vendor-instance-type"))), priceOverlaid, w.nodePool, w.nodePoolTwo)
		})
	}

	cr := "Capacity > Requirements > "
	conformance.Run(t, c(cr+"should only apply override for nodepool that defined in the overlay requirements"), func(t *testing.T) {
		w := newWorld().withPoolTwo()
		res := w.apply(withCapacity(nov("", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, w.nodePool.Name)), "smarter-devices/fuse", "1"))
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePool)), "smarter-devices/fuse", "1")
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePoolTwo)), "smarter-devices/fuse", "")
	})
	conformance.Run(t, c(cr+"should pass with conflicting capcaity update overlays for all nodepools"), func(t *testing.T) {
		w := newWorld().withPoolTwo()
		a := withCapacity(nov("overlay-one", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, w.nodePool.Name)), "smarter-devices/fuse", "1")
		b := withCapacity(nov("overlay-two", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, w.nodePoolTwo.Name)), "dumb-devices/bar", "2")
		res := w.apply(a, b)
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePool)), "smarter-devices/fuse", "1")
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePoolTwo)), "dumb-devices/bar", "2")
	})
	conformance.Run(t, c(cr+"should only apply price adjustments for nodeclaim spec labels that defined in the overlay requirements"), func(t *testing.T) {
		w := newWorld().withPoolTwo()
		w.nodePoolTwo.Spec.Template.Labels = map[string]string{"test-label": "test-value"}
		res := w.apply(withCapacity(nov("", 10, r("test-label", corev1.NodeSelectorOpIn, "test-value")), "smarter-devices/fuse", "1"))
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePool)), "smarter-devices/fuse", "")
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePoolTwo)), "smarter-devices/fuse", "1")
	})
	cp := "Capacity > "
	for spec, req := range map[string]v1alpha1.NodeSelectorRequirement{
		"should not apply capacity adjustments for invalid overlay":                     r(longKey, corev1.NodeSelectorOpExists),
		"should not apply capacity adjustments for instances types that do not overlap": itIn("default-instance-type-not-found"),
	} {
		conformance.Run(t, c(cp+spec), func(t *testing.T) {
			w := newWorld()
			res := w.apply(withCapacity(nov("", 10, req), "smarter-devices/fuse", "1"))
			expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePool)), "smarter-devices/fuse", "")
		})
	}
	conformance.Run(t, c(cp+"should apply capacity adjustments for instances types"), func(t *testing.T) {
		w := newWorld()
		res := w.apply(withCapacity(nov("", 10, itIn("default-instance-type")), "smarter-devices/fuse", "1"))
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePool)), "smarter-devices/fuse", "1")
	})
	zoneTypes := func() []*scheduling.InstanceType {
		return []*scheduling.InstanceType{
			fakeType("default-instance-type-zone-one", "", "", nil, offering("spot", "test-zone-1", 1.020)),
			fakeType("default-instance-type-zone-two", "", "", nil, offering("on-demand", "test-zone-2", 2.020)),
			fakeType("default-instance-type-zone-four", "", "", nil, offering("reserved", "test-zone-4", 4.020)),
		}
	}
	conformance.Run(t, c(cp+"should update capacity for instance types from multiple overlays"), func(t *testing.T) {
		w := newWorld()
		w.types = zoneTypes()
		res := w.apply(withCapacity(nov("zones", 10, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-2", "test-zone-4")), "smarter-devices/fuse", "1"),
			withCapacity(nov("spot", 10, r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot")), "hugepages-1Gi", "2Gi"))
		types := typesOf(t, res, w.nodePool)
		one, two, four := typeNamed(t, types, "default-instance-type-zone-one"), typeNamed(t, types, "default-instance-type-zone-two"), typeNamed(t, types, "default-instance-type-zone-four")
		expectPrice(t, one, "", "", 1.020)
		expectCapacity(t, one, "hugepages-1Gi", "2Gi")
		expectPrice(t, two, "", "", 2.020)
		expectCapacity(t, two, "smarter-devices/fuse", "1")
		expectPrice(t, four, "", "", 4.020)
		expectCapacity(t, four, "smarter-devices/fuse", "1")
	})
	conformance.Run(t, c(cp+"should update capacity for one instance types from multiple overlays"), func(t *testing.T) {
		w := newWorld()
		w.types = zoneTypes()[:1]
		res := w.apply(withCapacity(nov("fuse", 10, itIn("default-instance-type-zone-one")), "smarter-devices/fuse", "1"),
			withCapacity(nov("hugepages", 10, itIn("default-instance-type-zone-one")), "hugepages-1Gi", "2Gi"))
		it := onlyOne(t, typesOf(t, res, w.nodePool))
		expectPrice(t, it, "", "", 1.020)
		expectCapacity(t, it, "hugepages-1Gi", "2Gi")
		expectCapacity(t, it, "smarter-devices/fuse", "1")
	})
	conformance.Run(t, c(cp+"should update price offerings instance types from multiple overlays with different weights"), func(t *testing.T) {
		w := newWorld()
		w.types = zoneTypes()
		res := w.apply(withCapacity(nov("a", 20, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-2")), "smarter-devices/fuse", "1"),
			withCapacity(nov("b", 10, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-2", "test-zone-4")), "hugepages-1Gi", "2Gi"))
		types := typesOf(t, res, w.nodePool)
		two, four := typeNamed(t, types, "default-instance-type-zone-two"), typeNamed(t, types, "default-instance-type-zone-four")
		expectPrice(t, two, "", "", 2.020)
		expectCapacity(t, two, "smarter-devices/fuse", "1")
		expectPrice(t, four, "", "", 4.020)
		expectCapacity(t, four, "hugepages-1Gi", "2Gi")
	})
	conformance.Run(t, c(cp+"should apply higher weight overlay when multiple overlays match the same instance type"), func(t *testing.T) {
		w := newWorld()
		a := withCapacity(nov("overlay-a", 10, itIn("default-instance-type")), "smarter-devices/fuse", "5")
		b := withCapacity(nov("overlay-b", 20, itIn("default-instance-type")), "smarter-devices/fuse", "99")
		res := w.apply(a, b)
		expectValidation(t, res, a, "")
		expectValidation(t, res, b, "")
		expectCapacity(t, onlyOne(t, typesOf(t, res, w.nodePool)), "smarter-devices/fuse", "99")
	})
	conformance.Run(t, c(cp+"should that there is not a partial application for instance types"), func(t *testing.T) {
		w := newWorld()
		partial(t, w, withCapacity(nov("overlay-a", 10, itIn("default-instance-type", "small-instance-type", "gpu-vendor-b-instance-type")), "smarter-devices/buz", "54"),
			withCapacity(nov("overlay-b", 10, itIn("small-instance-type", "gpu-vendor-instance-type")), "smarter-devices/buz", "21"), capacityOverlaid, w.nodePool)
	})
	conformance.Run(t, c(cp+"should that there is not a partial application for nodepools"), func(t *testing.T) {
		w := newWorld().withPoolTwo()
		withTypes(w.nodePool, "default-instance-type", "gpu-vendor-instance-type", "gpu-vendor-b-instance-type")
		withTypes(w.nodePoolTwo, "gpu-vendor-b-instance-type")
		partial(t, w, withCapacity(nov("overlay-a", 10, itIn("default-instance-type", "small-instance-type")), "smarter-devices/buz", "54"),
			withCapacity(nov("overlay-b", 10, itIn("small-instance-type", "gpu-vendor-instance-type")), "smarter-devices/buz", "21"), capacityOverlaid, w.nodePool, w.nodePoolTwo)
	})
	conformance.Run(t, c("should apply pricing and capacity adjustment from two overlays on the same instance type"), func(t *testing.T) {
		w := newWorld()
		res := w.apply(priceEntry{adj: "+1000.0"}.on(nov("price", 10, itIn("default-instance-type"))),
			withCapacity(nov("capacity", 10, itIn("default-instance-type")), "smarter-devices/fuse", "1"))
		it := onlyOne(t, typesOf(t, res, w.nodePool))
		expectPrice(t, it, "", "", 1001.020)
		expectCapacity(t, it, "smarter-devices/fuse", "1")
	})
	conformance.Run(t, c("should have an empty instance types set when cloudprovider does not return instance types"), func(t *testing.T) {
		w := newWorld()
		w.types = []*scheduling.InstanceType{}
		res := w.apply(withCapacity(nov("", 10, itIn("default-instance-type")), "smarter-devices/fuse", "1"))
		if n := len(typesOf(t, res, w.nodePool)); n != 0 {
			t.Errorf("%d types, want 0", n)
		}
	})
	conformance.Run(t, c("should have an empty instance types set when cloudprovider return an error"), func(t *testing.T) {
		// A NodePool whose instance types cannot be read: its EC2NodeClass
		// is missing.
		w := newWorld()
		w.nodePool.Spec.Template.Spec.NodeClassRef.Name = "missing"
		res := w.apply(withCapacity(nov("", 10, itIn("default-instance-type")), "smarter-devices/fuse", "1"))
		if types, evaluated := res.Pools[w.nodePool.Name]; evaluated || len(types) != 0 {
			t.Errorf("the pool was evaluated: %d types", len(types))
		}
	})
	conformance.Run(t, c("should not return instance type requirements with nodepool, nodeclass, and custom nodepool labels"), func(t *testing.T) {
		w := newWorld()
		w.nodePool.Spec.Template.Labels = map[string]string{"test-label": "test-value"}
		res := w.apply(withCapacity(nov("", 10, itIn("default-instance-type")), "smarter-devices/fuse", "1"))
		it := onlyOne(t, typesOf(t, res, w.nodePool))
		for _, k := range []string{wellknown.NodePoolLabel, wellknown.EC2NodeClassLabel, "test-label"} {
			if _, ok := it.Labels[k]; ok {
				t.Errorf("the overlaid type has label %s", k)
			}
		}
	})
}

func TestConformanceNodeOverlayFailureIsolation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: nodeOverlaySuite, File: suiteFile, Spec: "Failure Isolation > " + spec}
	}
	// A broken NodePool is one whose EC2NodeClass is missing, the case
	// Karpenter's names (its NodeClass not found).
	broken := func() *karpv1.NodePool { return pool("broken", "missing", nil) }
	conformance.Run(t, c("should evaluate healthy NodePools when one NodePool fails GetInstanceTypes"), func(t *testing.T) {
		w := newWorld()
		w.pools = append(w.pools, broken())
		res := w.apply()
		if n := len(typesOf(t, res, w.nodePool)); n != 1 {
			t.Errorf("healthy pool: %d types, want 1", n)
		}
		if _, evaluated := res.Pools["broken"]; evaluated {
			t.Error("the broken pool was evaluated")
		}
	})
	conformance.Run(t, c("should update the store even when one NodePool fails"), func(t *testing.T) {
		w := newWorld()
		w.pools = append(w.pools, broken())
		o := priceEntry{price: "2"}.on(nov("", 10, itIn("default-instance-type")))
		res := w.apply(o)
		expectValidation(t, res, o, "")
		expectPrice(t, typesOf(t, res, w.nodePool)[0], "", "", 2)
	})
	conformance.Run(t, conformance.Case{Suite: nodeOverlaySuite, File: suiteFile, Spec: "Failure Isolation > should use normal requeue interval when all NodePools succeed",
		Differs: "no requeue interval: Karpless applies NodeOverlays afresh in every provisioner pass (each minute and on every watched change), not in a controller requeued every 6 hours"}, func(t *testing.T) {})
	conformance.Run(t, c("should recover when a previously failing NodePool becomes healthy"), func(t *testing.T) {
		w := newWorld()
		np := broken()
		w.pools = append(w.pools, np)
		if _, evaluated := w.apply().Pools[np.Name]; evaluated {
			t.Fatal("the broken pool was evaluated")
		}
		np.Spec.Template.Spec.NodeClassRef.Name = sharedClass
		res := w.apply()
		if n := len(typesOf(t, res, np)); n != 1 {
			t.Errorf("recovered pool: %d types, want 1", n)
		}
		if n := len(typesOf(t, res, w.nodePool)); n != 1 {
			t.Errorf("healthy pool: %d types, want 1", n)
		}
	})
}

// TestConformanceNodeOverlayStore ports the store's own suite: what a
// NodePool's overlaid types share with the input, and pools kept apart.
func TestConformanceNodeOverlayStore(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: nodeOverlaySuite, File: storeFile, Spec: spec}
	}
	m5 := func(offs ...scheduling.Offering) *scheduling.InstanceType {
		return fakeType("m5.large", "", "", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}, offs...)
	}
	one := func(it *scheduling.InstanceType, overlays ...*v1alpha1.NodeOverlay) (*scheduling.InstanceType, Result) {
		np := pool("default", sharedClass, nil)
		res := Apply(Input{Classes: map[string][]*scheduling.InstanceType{sharedClass: {it}}, Pools: []*karpv1.NodePool{np}, Overlays: overlays})
		return res.Pools["default"][0], res
	}
	odA := offering("on-demand", "us-west-2a", 0.096)
	firstOffering := r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "test-zone-1")
	spotZone1 := r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot")
	for _, tc := range []struct {
		entry                  string
		it                     *scheduling.InstanceType
		overlays               []*v1alpha1.NodeOverlay
		sharedOffs, sharedCaps bool
	}{
		{"no overlays - everything shared", m5(odA), nil, true, true},
		{"price overlay only - offerings copied, others shared", m5(), []*v1alpha1.NodeOverlay{priceEntry{adj: "+0.01"}.on(nov("p", 10, firstOffering, spotZone1))}, false, true},
		{"capacity overlay only - capacity copied, others shared", m5(odA), []*v1alpha1.NodeOverlay{withCapacity(nov("c", 10), "hugepages-2Mi", "100Mi")}, true, false},
		{"both overlays - only modified fields copied", m5(), []*v1alpha1.NodeOverlay{priceEntry{adj: "+0.01"}.on(nov("p", 10, firstOffering, spotZone1)), withCapacity(nov("c", 10), "hugepages-2Mi", "100Mi")}, false, false},
	} {
		conformance.Run(t, c("Store Apply Selective Copy > should handle different overlay scenarios > "+tc.entry), func(t *testing.T) {
			got, _ := one(tc.it, tc.overlays...)
			if (&got.Offerings[0] == &tc.it.Offerings[0]) != tc.sharedOffs {
				t.Errorf("offerings shared: %v, want %v", !tc.sharedOffs, tc.sharedOffs)
			}
			capShared := fmt.Sprintf("%p", got.Capacity) == fmt.Sprintf("%p", tc.it.Capacity)
			if capShared != tc.sharedCaps {
				t.Errorf("capacity shared: %v, want %v", capShared, tc.sharedCaps)
			}
			if fmt.Sprintf("%p", got.Labels) != fmt.Sprintf("%p", tc.it.Labels) {
				t.Error("labels (the type's requirements) were copied")
			}
		})
	}
	conformance.Run(t, c("Store Apply Correctness > with price overlay > should correctly apply price overlay to specific offerings"), func(t *testing.T) {
		it := m5(odA, offering("on-demand", "us-west-2b", 0.096))
		got, res := one(it, priceEntry{adj: "+0.01"}.on(nov("p", 10, r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "us-west-2a"))))
		if !near(got.Offerings[0].Price, 0.106) || res.PriceOverlay("default", "m5.large", "us-west-2a", "on-demand") != "p" {
			t.Errorf("first offering %+v", got.Offerings[0])
		}
		if got.Offerings[1] != it.Offerings[1] || res.PriceOverlay("default", "m5.large", "us-west-2b", "on-demand") != "" {
			t.Errorf("second offering %+v", got.Offerings[1])
		}
		if it.Offerings[0].Price != 0.096 {
			t.Error("the input was modified")
		}
	})
	conformance.Run(t, c("Store Apply Correctness > with capacity overlay > should correctly apply capacity overlay"), func(t *testing.T) {
		it := m5()
		got, _ := one(it, withCapacity(nov("c", 10), "hugepages-2Mi", "100Mi"))
		expectCapacity(t, got, "hugepages-2Mi", "100Mi")
		expectCapacity(t, got, "memory", "8Gi")
		expectCapacity(t, it, "hugepages-2Mi", "")
	})
	conformance.Run(t, c("Store Apply Isolation Between NodePools > should apply different overlays to different node pools"), func(t *testing.T) {
		it := m5(odA)
		a, b := pool("nodepool-a", sharedClass, nil), pool("nodepool-b", sharedClass, nil)
		res := Apply(Input{Classes: map[string][]*scheduling.InstanceType{sharedClass: {it}}, Pools: []*karpv1.NodePool{a, b}, Overlays: []*v1alpha1.NodeOverlay{
			priceEntry{adj: "+10%"}.on(nov("a", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "nodepool-a"))),
			priceEntry{adj: "-5%"}.on(nov("b", 10, r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "nodepool-b"))),
		}})
		pa, pb := res.Pools["nodepool-a"][0], res.Pools["nodepool-b"][0]
		if math.Abs(pa.Offerings[0].Price-0.1056) > 1e-4 || math.Abs(pb.Offerings[0].Price-0.0912) > 1e-4 {
			t.Errorf("prices %v and %v, want 0.1056 and 0.0912", pa.Offerings[0].Price, pb.Offerings[0].Price)
		}
		if it.Offerings[0].Price != 0.096 || &pa.Offerings[0] == &pb.Offerings[0] {
			t.Error("the pools share offerings, or the input was modified")
		}
		// The scheduler and launches see each pool's own view.
		nc := res.NodeClasses(map[string]*scheduling.NodeClass{sharedClass: {Name: sharedClass, InstanceTypes: []*scheduling.InstanceType{it}}})[sharedClass]
		if got := nc.ForPool("nodepool-a").InstanceTypes[0].Offerings[0].Price; math.Abs(got-0.1056) > 1e-4 {
			t.Errorf("ForPool(nodepool-a) price %v", got)
		}
		if got := nc.ForPool("nodepool-b").InstanceTypes[0].Offerings[0].Price; math.Abs(got-0.0912) > 1e-4 {
			t.Errorf("ForPool(nodepool-b) price %v", got)
		}
	})
	conformance.Run(t, c("Store Apply Unevaluated NodePool > should return error for unevaluated node pool"), func(t *testing.T) {
		res := Apply(Input{Classes: map[string][]*scheduling.InstanceType{sharedClass: {m5()}}})
		if _, evaluated := res.Pools["unevaluated"]; evaluated {
			t.Error("a pool not given was evaluated")
		}
	})
	conformance.Run(t, c("NodeOverlay Store Integration > should integrate overlays through the public interface"), func(t *testing.T) {
		large := fakeType("m5.large", "", "", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			odA, offering("spot", "us-west-2a", 0.0288))
		xlarge := fakeType("m5.xlarge", "", "", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}, odA)
		np := pool("default", sharedClass, nil)
		// Karpenter's case stores, by hand, the updates an overlay of
		// weight 100 adding hugepages to m5.large makes.
		res := Apply(Input{Classes: map[string][]*scheduling.InstanceType{sharedClass: {large, xlarge}}, Pools: []*karpv1.NodePool{np}, Overlays: []*v1alpha1.NodeOverlay{
			withCapacity(nov("hugepages", 100, itIn("m5.large")), "hugepages-2Mi", "100Mi"),
		}})
		types := res.Pools["default"]
		expectCapacity(t, typeNamed(t, types, "m5.large"), "hugepages-2Mi", "100Mi")
		expectCapacity(t, typeNamed(t, types, "m5.xlarge"), "hugepages-2Mi", "")
		expectCapacity(t, large, "hugepages-2Mi", "")
	})
}
