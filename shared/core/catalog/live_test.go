package catalog

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestFactsRoundTrip: every compiled-in type rebuilt from its own facts is
// the same type (labels, capacity and allocatable under several node
// configurations), so a live reading that agrees with the build changes
// nothing.
func TestFactsRoundTrip(t *testing.T) {
	c := mustLoad(t)
	cfgs := []NodeConfig{{}, {Family: FamilyBottlerocket}, {ReservedENIs: 1}, {Family: FamilyAL2023, PodsPerCore: ptr.To[int32](4)}}
	for _, want := range c.All() {
		got, err := NewType(want.Facts(), want.OnDemandPrice)
		if err != nil {
			t.Fatalf("%s: %v", want.Name, err)
		}
		if *got != *want {
			t.Fatalf("%s: rebuilt\n%+v\nwant\n%+v", want.Name, *got, *want)
		}
		for _, cfg := range cfgs {
			a, _ := got.Allocatable(cfg)
			b, _ := want.Allocatable(cfg)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s %+v: allocatable %v, want %v", want.Name, cfg, a, b)
			}
		}
	}
}

func TestNewTypeRejects(t *testing.T) {
	good := Facts{Name: "x9.large", VCPU: 2, MemoryMiB: 4096, Arch: "arm64", Interfaces: 3, IPv4PerInterface: 10}
	for name, tc := range map[string]struct {
		edit func(*Facts)
		want string
	}{
		"no name":   {func(f *Facts) { f.Name = "" }, "without a name"},
		"no vcpu":   {func(f *Facts) { f.VCPU = 0 }, "no vCPU"},
		"no memory": {func(f *Facts) { f.MemoryMiB = 0 }, "no vCPU or memory"},
		"arch":      {func(f *Facts) { f.Arch = "x86_64" }, "architecture"},
		"no enis":   {func(f *Facts) { f.Interfaces = 0 }, "ENI limits"},
		"one addr":  {func(f *Facts) { f.IPv4PerInterface = 1 }, "ENI limits"},
	} {
		t.Run(name, func(t *testing.T) {
			f := good
			tc.edit(&f)
			if _, err := NewType(f, 0.1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	got, err := NewType(good, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if got.ENILimitedPods(0) != 29 {
		t.Fatalf("pods = %d, want 3*(10-1)+2 = 29", got.ENILimitedPods(0))
	}
	if v, _ := got.Label(wellknown.OSLabel); v != "linux" {
		t.Fatalf("os label %q, want linux by default", v)
	}
}

func TestLive(t *testing.T) {
	c := mustLoad(t)
	m5, _ := c.Get("m5.large")
	fresh := Facts{Name: "r9g.large", VCPU: 2, MemoryMiB: 8192, Arch: "arm64", Interfaces: 3, IPv4PerInterface: 10,
		Labels: map[string]string{wellknown.InstanceFamilyLabel: "r9g", "not.a/known-label": "x"}}
	// EC2 does not publish network bandwidth or branch interfaces.
	m5live := m5.Facts()
	delete(m5live.Labels, wellknown.InstanceNetworkBandwidthLabel)
	m5live.PodENI, m5live.BranchInterfaces = false, 0

	t.Run("types and prices read", func(t *testing.T) {
		live, skipped := c.Live("eu-central-1", []Facts{m5live, fresh, {Name: "broken.large"}}, map[string]float64{"m5.large": 0.115, "r9g.large": 0.09})
		if len(skipped) != 1 || !strings.Contains(skipped[0], "broken.large") {
			t.Fatalf("skipped %v", skipped)
		}
		if live.Len() != 2 || live.Region != "eu-central-1" {
			t.Fatalf("live catalog %d types in %s", live.Len(), live.Region)
		}
		got, _ := live.Get("m5.large")
		if got.OnDemandPrice != 0.115 {
			t.Fatalf("m5.large price %v, want the region's 0.115", got.OnDemandPrice)
		}
		if *got != *withPrice(m5, 0.115) {
			t.Fatalf("m5.large not completed from the build:\n%+v\nwant\n%+v", *got, *withPrice(m5, 0.115))
		}
		n, ok := live.Get("r9g.large")
		if !ok || n.OnDemandPrice != 0.09 {
			t.Fatalf("new type %v %v", ok, n)
		}
		if _, ok := n.Label("not.a/known-label"); ok {
			t.Fatal("unknown label kept")
		}
	})
	t.Run("prices not read: the build's prices, none for a new type", func(t *testing.T) {
		live, _ := c.Live("eu-central-1", []Facts{m5live, fresh}, nil)
		got, _ := live.Get("m5.large")
		n, _ := live.Get("r9g.large")
		if got.OnDemandPrice != m5.OnDemandPrice || n.OnDemandPrice != 0 {
			t.Fatalf("prices %v %v", got.OnDemandPrice, n.OnDemandPrice)
		}
	})
	t.Run("types not read: the build's types at the region's prices", func(t *testing.T) {
		live, skipped := c.Live("eu-central-1", nil, map[string]float64{"m5.large": 0.115})
		if len(skipped) != 0 || live.Len() != c.Len() {
			t.Fatalf("%d types, skipped %v", live.Len(), skipped)
		}
		got, _ := live.Get("m5.large")
		other, _ := live.Get("c5.large")
		if got.OnDemandPrice != 0.115 || other.OnDemandPrice != 0 {
			t.Fatalf("prices %v %v: a type the price list does not name is not sold on demand there", got.OnDemandPrice, other.OnDemandPrice)
		}
	})
}

func withPrice(t *InstanceType, p float64) *InstanceType {
	c := *t
	c.OnDemandPrice = p
	return &c
}
