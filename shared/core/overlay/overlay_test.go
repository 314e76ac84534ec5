package overlay

import (
	"math"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// typ builds an instance type with a spot and an on-demand offering in
// zones a and b; spot costs 40% of on-demand.
func typ(name, family, cpu string, od float64) *scheduling.InstanceType {
	it := &scheduling.InstanceType{
		Name: name,
		Labels: map[string]string{
			wellknown.InstanceTypeLabel: name, wellknown.InstanceFamilyLabel: family, wellknown.InstanceCPULabel: cpu,
		},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("7Gi")},
	}
	for _, z := range []string{"a", "b"} {
		it.Offerings = append(it.Offerings,
			scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeSpot, Price: od * 0.4, Available: true},
			scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeOnDemand, Price: od, Available: true})
	}
	return it
}

func classes() map[string][]*scheduling.InstanceType {
	return map[string][]*scheduling.InstanceType{
		"default": {typ("m5.large", "m5", "2", 0.1), typ("c5.large", "c5", "2", 0.085), typ("m5.xlarge", "m5", "4", 0.2)},
		"gpu":     {typ("g5.xlarge", "g5", "4", 1.0)},
	}
}

func pool(name, class string, labels map[string]string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class}
	return np
}

func r(key string, op corev1.NodeSelectorOperator, values ...string) v1alpha1.NodeSelectorRequirement {
	return v1alpha1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

type ov struct {
	name       string
	weight     int32
	price, adj string
	capacity   corev1.ResourceList
	reqs       []v1alpha1.NodeSelectorRequirement
}

func (o ov) build() *v1alpha1.NodeOverlay {
	out := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: o.name}}
	out.Spec.Requirements = o.reqs
	if o.weight != 0 {
		out.Spec.Weight = &o.weight
	}
	if o.price != "" {
		out.Spec.Price = &o.price
	}
	if o.adj != "" {
		out.Spec.PriceAdjustment = &o.adj
	}
	out.Spec.Capacity = o.capacity
	return out
}

func types(names ...string) v1alpha1.NodeSelectorRequirement {
	return r(wellknown.InstanceTypeLabel, corev1.NodeSelectorOpIn, names...)
}

func fuse(n string) corev1.ResourceList {
	return corev1.ResourceList{"smarter-devices/fuse": resource.MustParse(n)}
}

// TestApply ports the cases of Karpenter v1.14.1's nodeoverlay controller
// suite (validation, conflicts by instance type and by offering, weights,
// price and capacity merging, NodePool selection) to Karpless's per-class
// instance types.
func TestApply(t *testing.T) {
	defaultPools := []*karpv1.NodePool{pool("default", "default", nil), pool("gpu", "gpu", nil)}
	for _, tc := range []struct {
		name     string
		pools    []*karpv1.NodePool // defaultPools when nil
		overlays []ov
		// outcomes: overlay name -> "" when applied, else the reason.
		outcomes map[string]string
		// prices: "class/type/zone/capacity-type" -> price; unnamed
		// offerings keep theirs.
		prices map[string]float64
		// resources: "class/type/resource" -> allocatable ("" absent).
		resources map[string]string
		// poolPrices: "pool/type/zone/capacity-type" -> price as that
		// NodePool sees it.
		poolPrices map[string]float64
	}{
		{
			name:     "a single price overlay",
			overlays: []ov{{name: "a", price: "1.5", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}}},
			outcomes: map[string]string{"a": ""},
			prices:   map[string]float64{"default/m5.large/a/spot": 1.5, "default/m5.large/b/on-demand": 1.5, "default/c5.large/a/on-demand": 0.085},
		},
		{
			name:     "an empty requirement list selects every type",
			overlays: []ov{{name: "a", adj: "+100%"}},
			outcomes: map[string]string{"a": ""},
			prices:   map[string]float64{"default/c5.large/a/on-demand": 0.17, "gpu/g5.xlarge/b/on-demand": 2},
		},
		{
			name:     "runtime validation: a restricted key",
			overlays: []ov{{name: "a", price: "1", reqs: []v1alpha1.NodeSelectorRequirement{r("karpenter.sh/custom", corev1.NodeSelectorOpIn, "x")}}},
			outcomes: map[string]string{"a": v1alpha1.ReasonRuntimeValidation},
			prices:   map[string]float64{"default/m5.large/a/on-demand": 0.1},
		},
		{
			name:     "runtime validation: In without values",
			overlays: []ov{{name: "a", price: "1", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceFamilyLabel, corev1.NodeSelectorOpIn)}}},
			outcomes: map[string]string{"a": v1alpha1.ReasonRuntimeValidation},
		},
		{
			name:      "runtime validation: a well-known resource in capacity",
			overlays:  []ov{{name: "a", capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
			outcomes:  map[string]string{"a": v1alpha1.ReasonRuntimeValidation},
			resources: map[string]string{"default/m5.large/cpu": "2"},
		},
		{
			name: "equal weights that set the price of one type conflict; the later name wins",
			overlays: []ov{
				{name: "overlay-a", weight: 10, price: "1.03", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large", "c5.large")}},
				{name: "overlay-b", weight: 10, price: "23", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large", "m5.xlarge")}},
			},
			outcomes: map[string]string{"overlay-a": v1alpha1.ReasonConflict, "overlay-b": ""},
			// overlay-a is applied nowhere, not even on c5.large.
			prices: map[string]float64{"default/m5.large/a/spot": 23, "default/m5.xlarge/a/spot": 23, "default/c5.large/a/spot": 0.034},
		},
		{
			name: "equal weights that select different types both apply",
			overlays: []ov{
				{name: "overlay-a", weight: 10, adj: "+54", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
				{name: "overlay-b", weight: 10, adj: "-2", reqs: []v1alpha1.NodeSelectorRequirement{types("c5.large")}},
			},
			outcomes: map[string]string{"overlay-a": "", "overlay-b": ""},
			prices:   map[string]float64{"default/m5.large/a/on-demand": 54.1, "default/c5.large/a/on-demand": 0},
		},
		{
			name: "equal weights that select the same offerings by zone conflict",
			overlays: []ov{
				{name: "overlay-a", weight: 1, price: "54", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "a")}},
				{name: "overlay-b", weight: 1, price: "23", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.ZoneLabel, corev1.NodeSelectorOpIn, "a", "b")}},
			},
			outcomes: map[string]string{"overlay-a": v1alpha1.ReasonConflict, "overlay-b": ""},
			prices:   map[string]float64{"default/m5.large/a/spot": 23, "default/m5.large/b/spot": 23},
		},
		{
			name: "equal weights that select the same offerings by capacity type conflict",
			overlays: []ov{
				{name: "overlay-a", price: "54", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot")}},
				{name: "overlay-b", price: "23", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpExists)}},
			},
			outcomes: map[string]string{"overlay-a": v1alpha1.ReasonConflict, "overlay-b": ""},
		},
		{
			name: "equal weights on disjoint offerings of one type both apply",
			overlays: []ov{
				{name: "overlay-a", price: "34", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large"), r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot")}},
				{name: "overlay-b", price: "2", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large"), r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "on-demand")}},
			},
			outcomes: map[string]string{"overlay-a": "", "overlay-b": ""},
			prices:   map[string]float64{"default/m5.large/a/spot": 34, "default/m5.large/b/spot": 34, "default/m5.large/a/on-demand": 2},
		},
		{
			name: "the heavier overlay wins the price; the lighter applies where the heavier does not",
			overlays: []ov{
				{name: "light", weight: 1, price: "5", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceFamilyLabel, corev1.NodeSelectorOpIn, "m5")}},
				{name: "heavy", weight: 100, adj: "-50%", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
			},
			outcomes: map[string]string{"light": "", "heavy": ""},
			prices:   map[string]float64{"default/m5.large/a/on-demand": 0.05, "default/m5.xlarge/a/on-demand": 5},
		},
		{
			name: "equal light weights conflict even when a heavier overlay wins the offering",
			overlays: []ov{
				{name: "heavy", weight: 100, price: "9", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
				{name: "light-a", weight: 1, price: "5", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
				{name: "light-b", weight: 1, price: "6", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
			},
			outcomes: map[string]string{"heavy": "", "light-b": "", "light-a": v1alpha1.ReasonConflict},
			prices:   map[string]float64{"default/m5.large/a/on-demand": 9},
		},
		{
			name: "Gte on a number label selects by value",
			overlays: []ov{
				{name: "big", price: "7", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceCPULabel, karpv1.NodeSelectorOpGte, "4")}},
			},
			outcomes: map[string]string{"big": ""},
			prices:   map[string]float64{"default/m5.xlarge/a/spot": 7, "gpu/g5.xlarge/a/spot": 7, "default/m5.large/a/spot": 0.04},
		},
		{
			name: "a key no type has selects nothing unless the requirement allows its absence",
			overlays: []ov{
				{name: "gpu", weight: 2, price: "7", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceGPUCountLabel, corev1.NodeSelectorOpIn, "1")}},
				{name: "no-gpu", weight: 1, price: "8", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceGPUCountLabel, corev1.NodeSelectorOpDoesNotExist)}},
			},
			outcomes: map[string]string{"gpu": "", "no-gpu": ""},
			prices:   map[string]float64{"default/m5.large/a/spot": 8, "gpu/g5.xlarge/a/spot": 8},
		},
		{
			name: "capacity: equal weights adding one resource to one type conflict",
			overlays: []ov{
				{name: "overlay-a", weight: 10, capacity: fuse("54"), reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large", "c5.large")}},
				{name: "overlay-b", weight: 10, capacity: fuse("54"), reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large", "m5.xlarge")}},
			},
			outcomes:  map[string]string{"overlay-a": v1alpha1.ReasonConflict, "overlay-b": ""},
			resources: map[string]string{"default/m5.large/smarter-devices/fuse": "54", "default/c5.large/smarter-devices/fuse": ""},
		},
		{
			name: "capacity: equal weights on disjoint types both apply",
			overlays: []ov{
				{name: "overlay-a", weight: 10, capacity: fuse("1"), reqs: []v1alpha1.NodeSelectorRequirement{types("c5.large")}},
				{name: "overlay-b", weight: 10, capacity: fuse("2"), reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
			},
			outcomes:  map[string]string{"overlay-a": "", "overlay-b": ""},
			resources: map[string]string{"default/c5.large/smarter-devices/fuse": "1", "default/m5.large/smarter-devices/fuse": "2"},
		},
		{
			name: "capacity: the heavier wins a resource, resources of different overlays merge",
			overlays: []ov{
				{name: "overlay-a", weight: 5, capacity: corev1.ResourceList{"hugepages-2Mi": resource.MustParse("50Mi"), "smarter-devices/fuse": resource.MustParse("1")}, reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
				{name: "overlay-b", weight: 10, capacity: corev1.ResourceList{"custom-device/gpu": resource.MustParse("1"), "smarter-devices/fuse": resource.MustParse("3")}, reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
			},
			outcomes: map[string]string{"overlay-a": "", "overlay-b": ""},
			resources: map[string]string{
				"default/m5.large/hugepages-2Mi": "50Mi", "default/m5.large/custom-device/gpu": "1", "default/m5.large/smarter-devices/fuse": "3",
				"default/m5.large/cpu": "2", "default/m5.xlarge/custom-device/gpu": "",
			},
		},
		{
			name: "a price and a capacity from two overlays on one type",
			overlays: []ov{
				{name: "price", adj: "+10%", reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
				{name: "capacity", capacity: fuse("4"), reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}},
			},
			outcomes:  map[string]string{"price": "", "capacity": ""},
			prices:    map[string]float64{"default/m5.large/a/on-demand": 0.11},
			resources: map[string]string{"default/m5.large/smarter-devices/fuse": "4"},
		},
		{
			name:  "a NodePool requirement applies to its own class only",
			pools: []*karpv1.NodePool{pool("general", "default", nil), pool("accelerated", "gpu", nil)},
			overlays: []ov{
				{name: "only-gpu-pool", price: "0.5", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "accelerated")}},
			},
			outcomes: map[string]string{"only-gpu-pool": ""},
			prices:   map[string]float64{"gpu/g5.xlarge/a/on-demand": 0.5, "default/m5.large/a/on-demand": 0.1},
		},
		{
			name:  "a template label selects the pool's types",
			pools: []*karpv1.NodePool{pool("general", "default", map[string]string{"team": "web"}), pool("accelerated", "gpu", map[string]string{"team": "ml"})},
			overlays: []ov{
				{name: "ml", capacity: fuse("1"), reqs: []v1alpha1.NodeSelectorRequirement{r("team", corev1.NodeSelectorOpIn, "ml")}},
			},
			outcomes:  map[string]string{"ml": ""},
			resources: map[string]string{"gpu/g5.xlarge/smarter-devices/fuse": "1", "default/m5.large/smarter-devices/fuse": ""},
		},
		{
			name:  "pools that share a class and are selected apart: each sees its own",
			pools: []*karpv1.NodePool{pool("a", "default", nil), pool("b", "default", nil), pool("c", "default", nil), pool("accelerated", "gpu", nil)},
			overlays: []ov{
				// only-a comes first (equal weights, names descending)
				// and wins pool a; both then conflicts on pool a.
				{name: "only-a", price: "0.5", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "a", "accelerated")}},
				{name: "both", price: "0.7", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "a", "b")}},
				{name: "heavier-b", weight: 5, price: "0.9", reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "b")}},
			},
			outcomes: map[string]string{"only-a": "", "both": v1alpha1.ReasonConflict, "heavier-b": ""},
			prices:   map[string]float64{"gpu/g5.xlarge/a/on-demand": 0.5, "default/m5.large/a/on-demand": 0.1},
			poolPrices: map[string]float64{
				"a/m5.large/a/on-demand": 0.5, "b/m5.large/a/on-demand": 0.9, "c/m5.large/a/on-demand": 0.1, "accelerated/g5.xlarge/b/spot": 0.5,
			},
		},
		{
			name:     "a custom label no pool sets selects nothing",
			overlays: []ov{{name: "a", price: "3", reqs: []v1alpha1.NodeSelectorRequirement{r("team", corev1.NodeSelectorOpIn, "ml")}}},
			outcomes: map[string]string{"a": ""},
			prices:   map[string]float64{"default/m5.large/a/on-demand": 0.1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pools := tc.pools
			if pools == nil {
				pools = defaultPools
			}
			var overlays []*v1alpha1.NodeOverlay
			for _, o := range tc.overlays {
				overlays = append(overlays, o.build())
			}
			in := classes()
			res := Apply(Input{Classes: in, Pools: pools, Overlays: overlays})
			for name, want := range tc.outcomes {
				got, ok := res.Overlays[name]
				if !ok {
					t.Fatalf("no outcome for %s", name)
				}
				if got.Applied != (want == "") || got.Reason != want {
					t.Errorf("%s: applied=%v reason=%q (%s), want reason %q", name, got.Applied, got.Reason, got.Message, want)
				}
			}
			for key, want := range tc.prices {
				if got := price(t, res.Classes, key); math.Abs(got-want) > 1e-9 {
					t.Errorf("price of %s = %v, want %v", key, got, want)
				}
			}
			for key, want := range tc.poolPrices {
				poolName, rest, _ := strings.Cut(key, "/")
				var class string
				for _, np := range pools {
					if np.Name == poolName {
						class = np.Spec.Template.Spec.NodeClassRef.Name
					}
				}
				if got := price(t, map[string][]*scheduling.InstanceType{class: res.Pools[poolName]}, class+"/"+rest); math.Abs(got-want) > 1e-9 {
					t.Errorf("price of %s = %v, want %v", key, got, want)
				}
				if byClass, diverges := res.PoolTypes(class)[poolName]; diverges && &byClass[0] != &res.Pools[poolName][0] {
					t.Errorf("PoolTypes of %s is not its view", poolName)
				}
			}
			for key, want := range tc.resources {
				class, name, res2 := split3(key)
				it := find(t, res.Classes, class, name)
				q, ok := it.Allocatable[corev1.ResourceName(res2)]
				switch {
				case want == "" && ok:
					t.Errorf("%s is %s, want absent", key, q.String())
				case want != "" && (!ok || q.Cmp(resource.MustParse(want)) != 0):
					t.Errorf("%s is %s (present %v), want %s", key, q.String(), ok, want)
				case want != "" && !capacityIs(it, res2, want):
					t.Errorf("capacity of %s is not %s", key, want)
				}
			}
			if !reflect.DeepEqual(in, classes()) {
				t.Error("Apply modified its input")
			}
		})
	}
}

func capacityIs(it *scheduling.InstanceType, name, want string) bool {
	q, ok := it.Capacity[corev1.ResourceName(name)]
	return ok && q.Cmp(resource.MustParse(want)) == 0
}

func split3(key string) (string, string, string) {
	var parts []string
	start := 0
	for i := 0; i < len(key) && len(parts) < 2; i++ {
		if key[i] == '/' {
			parts = append(parts, key[start:i])
			start = i + 1
		}
	}
	return parts[0], parts[1], key[start:]
}

func find(t *testing.T, classes map[string][]*scheduling.InstanceType, class, name string) *scheduling.InstanceType {
	t.Helper()
	for _, it := range classes[class] {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no type %s in class %s", name, class)
	return nil
}

func price(t *testing.T, classes map[string][]*scheduling.InstanceType, key string) float64 {
	t.Helper()
	var class, name, zone, ct string
	parts := [4]*string{&class, &name, &zone, &ct}
	i, start := 0, 0
	for j := 0; j <= len(key); j++ {
		if j == len(key) || key[j] == '/' {
			*parts[i] = key[start:j]
			i, start = i+1, j+1
		}
	}
	for _, o := range find(t, classes, class, name).Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o.Price
		}
	}
	t.Fatalf("no offering %s", key)
	return 0
}

// TestApplyCopiesOnWrite: untouched classes keep their slice, untouched
// types their pointer; a changed type is a copy whose maps are its own.
func TestApplyCopiesOnWrite(t *testing.T) {
	in := classes()
	res := Apply(Input{Classes: in, Pools: []*karpv1.NodePool{pool("default", "default", nil), pool("gpu", "gpu", nil)}, Overlays: []*v1alpha1.NodeOverlay{
		ov{name: "a", price: "1", capacity: fuse("2"), reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large")}}.build(),
	}})
	if &res.Classes["gpu"][0] != &in["gpu"][0] {
		t.Error("an untouched class got a new slice")
	}
	if res.Classes["default"][1] != in["default"][1] {
		t.Error("an untouched type was copied")
	}
	got, orig := res.Classes["default"][0], in["default"][0]
	if got == orig {
		t.Fatal("the overlaid type is the input's")
	}
	got.Capacity["x"] = resource.MustParse("1")
	got.Offerings[0].Price = 99
	if _, leaked := orig.Capacity["x"]; leaked || orig.Offerings[0].Price == 99 {
		t.Error("the copy shares maps or offerings with the input")
	}
	if res.PriceOverlay("default", "m5.large", "a", "spot") != "a" || res.PriceOverlay("default", "c5.large", "a", "spot") != "" {
		t.Errorf("PriceOverlay: %+v", res.Changes)
	}
	if res.Changes["default"]["m5.large"].Capacity["smarter-devices/fuse"] != "a" {
		t.Errorf("Changes.Capacity: %+v", res.Changes["default"]["m5.large"])
	}
}

// TestApplyNoOverlays returns the input as is.
func TestApplyNoOverlays(t *testing.T) {
	in := classes()
	res := Apply(Input{Classes: in})
	for name := range in {
		if &res.Classes[name][0] != &in[name][0] {
			t.Errorf("class %s copied", name)
		}
	}
}

// TestAdjustedPrice ports Karpenter's AdjustedPrice cases.
func TestAdjustedPrice(t *testing.T) {
	for _, tc := range []struct {
		price  float64
		change string
		want   float64
	}{
		{1, "", 1},
		{1, "2.5", 2.5},
		{1, "0", 0},
		{1, "+0.5", 1.5},
		{1, "-0.25", 0.75},
		{1, "-2", 0},
		{1, "+10%", 1.1},
		{2, "-15%", 1.7},
		{2, "-100%", 0},
		{2, "+.5", 2.5},
		{2, "+200%", 6},
		{2, "x", 2},
	} {
		if got := AdjustedPrice(tc.price, tc.change); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("AdjustedPrice(%v, %q) = %v, want %v", tc.price, tc.change, got, tc.want)
		}
	}
}

// TestOrder: heavier first, then names descending, as Karpenter's
// OrderByWeight.
func TestOrder(t *testing.T) {
	got := Order([]*v1alpha1.NodeOverlay{
		ov{name: "a"}.build(), ov{name: "c", weight: 5}.build(), ov{name: "b"}.build(), ov{name: "d", weight: 5}.build(), ov{name: "e", weight: 9}.build(),
	})
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
	}
	if want := []string{"e", "d", "c", "b", "a"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Order = %v, want %v", names, want)
	}
}

// TestValidate covers what only the code checks (the schema's rules are
// tested against the API server in shared/apis/crds).
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    ov
		ok   bool
	}{
		{"well-known keys", ov{reqs: []v1alpha1.NodeSelectorRequirement{types("m5.large"), r(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "a"), r(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "spot")}}, true},
		{"a custom key", ov{reqs: []v1alpha1.NodeSelectorRequirement{r("example.com/team", corev1.NodeSelectorOpIn, "a")}}, true},
		{"node-restriction domain", ov{reqs: []v1alpha1.NodeSelectorRequirement{r("node-restriction.kubernetes.io/team", corev1.NodeSelectorOpExists)}}, true},
		{"a deprecated key is normalised", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(corev1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large")}}, true},
		{"hostname", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.HostnameLabel, corev1.NodeSelectorOpIn, "a")}}, false},
		{"kubernetes.io domain, free in Karpenter v1.14", ov{reqs: []v1alpha1.NodeSelectorRequirement{r("kubernetes.io/custom", corev1.NodeSelectorOpExists)}}, true},
		{"karpenter.sh domain", ov{reqs: []v1alpha1.NodeSelectorRequirement{r("karpenter.sh/custom", corev1.NodeSelectorOpExists)}}, false},
		{"NotIn without values", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceFamilyLabel, corev1.NodeSelectorOpNotIn)}}, false},
		{"Gt with a word", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceCPULabel, corev1.NodeSelectorOpGt, "two")}}, false},
		{"Lte negative", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceCPULabel, karpv1.NodeSelectorOpLte, "-1")}}, false},
		{"unknown operator", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceCPULabel, "Above", "1")}}, false},
		{"an invalid label value", ov{reqs: []v1alpha1.NodeSelectorRequirement{r(wellknown.InstanceFamilyLabel, corev1.NodeSelectorOpIn, "m5 large")}}, false},
		{"memory capacity", ov{capacity: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}, false},
		{"pods capacity", ov{capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}, false},
		{"an unparsable price", ov{price: "cheap"}, false},
		{"price and adjustment", ov{price: "1", adj: "+1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.o.build())
			if (err == nil) != tc.ok {
				t.Errorf("Validate = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
