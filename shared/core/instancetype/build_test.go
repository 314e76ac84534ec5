package instancetype

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestBuild(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	zones := []string{"us-east-1a", "us-east-1b"}
	ice := func(ct, it, z string) bool { return ct == "spot" && it == "m5.large" && z == "us-east-1b" }
	types, err := Build(cat, catalog.NodeConfig{Family: catalog.FamilyAL2023}, zones, Prices{Spot: map[string]map[string]float64{"m5.large": {"us-east-1a": 0.031}}}, ice)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) < 1300 {
		t.Fatalf("only %d types", len(types))
	}
	var m5 = types[0]
	for _, it := range types {
		if it.Name == "m5.large" {
			m5 = it
		}
		if len(it.Offerings) != 4 {
			t.Fatalf("%s has %d offerings", it.Name, len(it.Offerings))
		}
		for _, o := range it.Offerings {
			if o.Price <= 0 {
				t.Fatalf("%s %s price %f", it.Name, o.CapacityType, o.Price)
			}
			// With live quotes, a spot offering without one has no market:
			// only m5.large in us-east-1a is quoted here.
			quoted := it.Name == "m5.large" && o.Zone == "us-east-1a"
			if o.CapacityType == "spot" && !quoted && o.Available {
				t.Fatalf("%s spot in %s is available without a spot price", it.Name, o.Zone)
			}
		}
	}
	if m5.Name != "m5.large" || m5.Labels[wellknown.ArchLabel] != "amd64" {
		t.Fatalf("m5.large missing or mislabelled")
	}
	for _, o := range m5.Offerings {
		switch {
		case o.CapacityType == "spot" && o.Zone == "us-east-1a" && o.Price != 0.031:
			t.Fatalf("spot override not used: %v", o)
		case o.CapacityType == "spot" && o.Zone == "us-east-1b" && o.Available:
			t.Fatalf("ICE mark ignored: %v", o)
		case o.CapacityType == "on-demand" && o.Price != 0.096:
			t.Fatalf("on-demand price %v", o)
		}
	}
	alloc := m5.Allocatable[corev1.ResourceMemory]
	capacity := m5.Capacity[corev1.ResourceMemory]
	if alloc.Cmp(capacity) >= 0 {
		t.Fatalf("allocatable %s not below capacity %s", alloc.String(), capacity.String())
	}
	// Same inputs, same estimate; estimates stay in the documented band.
	a, b := SpotEstimate("c5.large", "z", 1), SpotEstimate("c5.large", "z", 1)
	if a != b || a < 0.30 || a >= 0.45 {
		t.Fatalf("estimate %f %f", a, b)
	}
}

func TestFilterByAMIs(t *testing.T) {
	cat, _ := catalog.Load()
	types, _ := Build(cat, catalog.NodeConfig{}, []string{"z"}, Prices{}, nil)
	arm := []awsv1.AMI{{ID: "ami-arm", Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}}
	kept := FilterByAMIs(types, arm)
	if len(kept) == 0 || len(kept) >= len(types) {
		t.Fatalf("kept %d of %d", len(kept), len(types))
	}
	for _, it := range kept {
		if it.Labels[wellknown.ArchLabel] != "arm64" {
			t.Fatalf("%s kept", it.Name)
		}
	}
	noGPU := []awsv1.AMI{{ID: "ami-std", Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}}}
	for _, it := range FilterByAMIs(types, noGPU) {
		if _, ok := it.Labels[wellknown.InstanceGPUCountLabel]; ok {
			t.Fatalf("gpu type %s kept by a standard AMI", it.Name)
		}
	}
	if len(FilterByAMIs(types, nil)) != 0 {
		t.Fatal("no AMIs should keep nothing")
	}
	nc := &awsv1.EC2NodeClass{Status: awsv1.EC2NodeClassStatus{Subnets: []awsv1.Subnet{{Zone: "a"}, {Zone: "b"}, {Zone: "a"}}}}
	if z := Zones(nc); len(z) != 2 {
		t.Fatalf("zones %v", z)
	}
}

func TestBuildWindows(t *testing.T) {
	cat, _ := catalog.Load()
	types, err := Build(cat, catalog.NodeConfig{Family: catalog.FamilyWindows2022}, []string{"z"}, Prices{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Labels[wellknown.OSLabel] != "windows" || it.Labels[wellknown.WindowsBuildLabel] != "10.0.20348" || it.Labels[wellknown.ArchLabel] != "amd64" {
			t.Fatalf("%s os=%s build=%s arch=%s", it.Name, it.Labels[wellknown.OSLabel], it.Labels[wellknown.WindowsBuildLabel], it.Labels[wellknown.ArchLabel])
		}
	}
	// The requirements the windows2022 alias's AMI carries keep them all.
	ami := awsv1.AMI{ID: "ami-w", Requirements: []corev1.NodeSelectorRequirement{
		{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
		{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: wellknown.WindowsBuildLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.20348"}},
	}}
	if len(types) == 0 || len(FilterByAMIs(types, []awsv1.AMI{ami})) != len(types) {
		t.Errorf("%d Windows types, %d kept by the Windows 2022 AMI", len(types), len(FilterByAMIs(types, []awsv1.AMI{ami})))
	}
}

// A type EC2 does not sell in a zone has no offering there at all, so the
// simulator's reasons say "not offered" instead of "out of capacity".
func TestBuildOmitsUnofferedZones(t *testing.T) {
	cat, _ := catalog.Load()
	offered := func(it, zone string) bool { return it != "m5.large" || zone == "a" }
	types, err := Build(cat, catalog.NodeConfig{}, []string{"a", "b"}, Prices{Offered: offered}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		want := 4
		if it.Name == "m5.large" {
			want = 2
		}
		if len(it.Offerings) != want {
			t.Fatalf("%s: %d offerings, want %d", it.Name, len(it.Offerings), want)
		}
		for _, o := range it.Offerings {
			if !o.Available || (it.Name == "m5.large" && o.Zone != "a") {
				t.Fatalf("%s: offering %+v", it.Name, o)
			}
		}
	}
}

// TestSpotWithoutAPrice: an offering EC2 quotes no spot price for has no
// spot market and cannot launch (Karpenter's hasPrice); without any quotes
// (an offline snapshot) the estimate stands in and spot stays launchable.
func TestSpotWithoutAPrice(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	quotes := map[string]map[string]float64{"m5.large": {"a": 0.03}}
	for _, tc := range []struct {
		name          string
		prices        Prices
		zone          string
		wantAvailable bool
		wantPrice     float64 // 0: the estimate
	}{
		{"quoted", Prices{Spot: quotes}, "a", true, 0.03},
		{"no quote in this zone", Prices{Spot: quotes}, "b", false, 0},
		{"no quotes read at all", Prices{}, "b", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			types, err := Build(cat, catalog.NodeConfig{}, []string{"a", "b"}, tc.prices, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range types {
				if it.Name != "m5.large" {
					continue
				}
				for _, o := range it.Offerings {
					if o.CapacityType != "spot" || o.Zone != tc.zone {
						continue
					}
					want := tc.wantPrice
					if want == 0 {
						want = SpotEstimate("m5.large", tc.zone, 0.096)
					}
					if o.Available != tc.wantAvailable || o.Price != want {
						t.Fatalf("spot in %s: available=%v price=%v, want %v %v", tc.zone, o.Available, o.Price, tc.wantAvailable, want)
					}
					return
				}
			}
			t.Fatal("no m5.large spot offering")
		})
	}
}

// BenchmarkBuild is the cost of one class's instance types from the whole
// catalog in three zones: what the provisioner pays per class on each pass
// of its watch window.
func BenchmarkBuild(b *testing.B) {
	cat, err := catalog.Load()
	if err != nil {
		b.Fatal(err)
	}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	none := func(string, string, string) bool { return false }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(cat, catalog.NodeConfig{Family: catalog.FamilyAL2023}, zones, Prices{}, none); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTenancy(t *testing.T) {
	const key = wellknown.InstanceTenancyLabel
	req := func(op corev1.NodeSelectorOperator, vals ...string) []karpv1.NodeSelectorRequirementWithMinValues {
		return []karpv1.NodeSelectorRequirementWithMinValues{{Key: key, Operator: op, Values: vals}}
	}
	for _, tc := range []struct {
		name string
		reqs []karpv1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{"no requirement", nil, TenancyDefault},
		{"default", req(corev1.NodeSelectorOpIn, "default"), TenancyDefault},
		{"dedicated", req(corev1.NodeSelectorOpIn, "dedicated"), TenancyDedicated},
		{"either: default first", req(corev1.NodeSelectorOpIn, "dedicated", "default"), TenancyDefault},
		{"not default", req(corev1.NodeSelectorOpNotIn, "default"), TenancyDedicated},
		{"exists", req(corev1.NodeSelectorOpExists), TenancyDefault},
		// Never asked of a launch (no type allows it), as in Karpenter.
		{"neither", req(corev1.NodeSelectorOpIn, "host"), TenancyDefault},
	} {
		if got := Tenancy(tc.reqs); got != tc.want {
			t.Errorf("%s: Tenancy = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// Every type can be launched with either tenancy, and its label says
// default, the tenancy of a claim that does not choose.
func TestBuildTenancyChoices(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	types, err := Build(cat, catalog.NodeConfig{Family: catalog.FamilyAL2023}, []string{"us-east-1a"}, Prices{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dedicated := scheduling.NewRequirement(wellknown.InstanceTenancyLabel, corev1.NodeSelectorOpIn, TenancyDedicated)
	host := scheduling.NewRequirement(wellknown.InstanceTenancyLabel, corev1.NodeSelectorOpIn, "host")
	for _, it := range types {
		if it.Labels[wellknown.InstanceTenancyLabel] != TenancyDefault || !it.LabelMatches(dedicated) || it.LabelMatches(host) {
			t.Fatalf("%s: tenancy label %q, choices %v", it.Name, it.Labels[wellknown.InstanceTenancyLabel], it.LabelChoices)
		}
	}
}

// TestUnavailable: an offering is out when it is marked or its zone has
// no subnet of the class left that is not out of addresses (Karpenter's
// IsUnavailable), and only then.
func TestUnavailable(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a1", Zone: "a"}, {ID: "subnet-a2", Zone: "a"}, {ID: "subnet-b1", Zone: "b"}}
	marked := func(ct, it, zone string) bool { return ct == "spot" && it == "m5.large" && zone == "c" }
	for _, tc := range []struct {
		name     string
		out      []string
		ct, zone string
		want     bool
	}{
		{"nothing marked", nil, "on-demand", "a", false},
		{"the offering marked", nil, "spot", "c", true},
		{"one of a zone's subnets out", []string{"subnet-a1"}, "on-demand", "a", false},
		{"all of a zone's subnets out", []string{"subnet-a1", "subnet-a2"}, "on-demand", "a", true},
		{"all of a zone's subnets out, spot too", []string{"subnet-a1", "subnet-a2"}, "spot", "a", true},
		{"another zone's subnets out", []string{"subnet-b1"}, "on-demand", "a", false},
		{"the only subnet out", []string{"subnet-b1"}, "on-demand", "b", true},
		{"a zone without subnets", []string{"subnet-a1", "subnet-a2", "subnet-b1"}, "on-demand", "c", false},
	} {
		out := map[string]bool{}
		for _, id := range tc.out {
			out[id] = true
		}
		f := Unavailable(nc, marked, func(id string) bool { return out[id] })
		if got := f(tc.ct, "m5.large", tc.zone); got != tc.want {
			t.Errorf("%s: Unavailable(%s, %s) = %v, want %v", tc.name, tc.ct, tc.zone, got, tc.want)
		}
	}
	if Unavailable(nc, nil, nil)("spot", "m5.large", "a") {
		t.Error("no marks at all took an offering out")
	}
}
