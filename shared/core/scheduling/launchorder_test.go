package scheduling

import (
	"fmt"
	"strings"
	"testing"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// offer builds a type with the given offerings as "capacity-type/zone=price".
func offer(name string, gpu bool, offers map[string]float64) *InstanceType {
	var it *InstanceType
	if gpu {
		it = mkType(name, 8, 61, 60, "amd64", 1, string(wellknown.ResourceNVIDIAGPU), "1")
	} else {
		it = mkType(name, 2, 4, 30, "amd64", 1)
	}
	it.Offerings = nil
	for k, p := range offers {
		ct, zone, _ := strings.Cut(k, "/")
		it.Offerings = append(it.Offerings, Offering{Zone: zone, CapacityType: ct, Price: p, Available: true})
	}
	return it
}

func TestLaunchOrder(t *testing.T) {
	all := func(*Offering) bool { return true }
	onlyZone := func(z string) func(*Offering) bool { return func(o *Offering) bool { return o.Zone == z } }
	onlyCT := func(ct string) func(*Offering) bool { return func(o *Offering) bool { return o.CapacityType == ct } }
	for _, tc := range []struct {
		name      string
		types     []*InstanceType
		allows    func(*Offering) bool
		minValues bool
		wantCT    string
		want      []string // type/zone of the offerings, in order
	}{
		{
			name:   "spot wins when it is allowed, cheapest first",
			types:  []*InstanceType{offer("b.large", false, map[string]float64{"spot/z1": 0.03, "on-demand/z1": 0.1}), offer("a.large", false, map[string]float64{"spot/z1": 0.02, "spot/z2": 0.04, "on-demand/z1": 0.09})},
			allows: all, wantCT: "spot", want: []string{"a.large/z1", "b.large/z1", "a.large/z2"},
		},
		{
			name:   "on-demand when spot is not allowed",
			types:  []*InstanceType{offer("a.large", false, map[string]float64{"spot/z1": 0.02, "on-demand/z1": 0.09})},
			allows: onlyCT("on-demand"), wantCT: "on-demand", want: []string{"a.large/z1"},
		},
		{
			// Karpenter's SpotOfferingFilter: a large spot type must not win
			// over a cheaper on-demand one.
			name:   "spot dearer than the cheapest on-demand is dropped",
			types:  []*InstanceType{offer("big.4xlarge", false, map[string]float64{"spot/z1": 0.3}), offer("small.large", false, map[string]float64{"spot/z1": 0.05, "on-demand/z1": 0.1})},
			allows: all, wantCT: "spot", want: []string{"small.large/z1"},
		},
		{
			name:   "every spot offering dearer than on-demand: on-demand",
			types:  []*InstanceType{offer("big.4xlarge", false, map[string]float64{"spot/z1": 0.3}), offer("small.large", false, map[string]float64{"on-demand/z1": 0.1})},
			allows: all, wantCT: "on-demand", want: []string{"small.large/z1"},
		},
		{
			name:      "minValues keeps dear spot",
			types:     []*InstanceType{offer("big.4xlarge", false, map[string]float64{"spot/z1": 0.3}), offer("small.large", false, map[string]float64{"on-demand/z1": 0.1})},
			allows:    all,
			minValues: true, wantCT: "spot", want: []string{"big.4xlarge/z1"},
		},
		{
			// Karpenter's ExoticInstanceTypeFilter.
			name:   "a GPU type only when nothing else is left",
			types:  []*InstanceType{offer("gpu.2xlarge", true, map[string]float64{"spot/z1": 0.01}), offer("c.large", false, map[string]float64{"spot/z1": 0.05})},
			allows: all, wantCT: "spot", want: []string{"c.large/z1"},
		},
		{
			name:   "the GPU type when the generic one has no allowed offering",
			types:  []*InstanceType{offer("gpu.2xlarge", true, map[string]float64{"spot/z1": 0.5}), offer("c.large", false, map[string]float64{"spot/z2": 0.05})},
			allows: onlyZone("z1"), wantCT: "spot", want: []string{"gpu.2xlarge/z1"},
		},
		{
			name:      "minValues keeps GPU types in price order",
			types:     []*InstanceType{offer("gpu.2xlarge", true, map[string]float64{"spot/z1": 0.01}), offer("c.large", false, map[string]float64{"spot/z1": 0.05})},
			allows:    all,
			minValues: true, wantCT: "spot", want: []string{"gpu.2xlarge/z1", "c.large/z1"},
		},
		{
			name:   "reserved before spot",
			types:  []*InstanceType{offer("a.large", false, map[string]float64{"spot/z1": 0.02, "reserved/z2": 0.00001}), offer("b.large", false, map[string]float64{"on-demand/z1": 0.09})},
			allows: all, wantCT: "reserved", want: []string{"a.large/z2"},
		},
		{
			name:   "nothing allowed",
			types:  []*InstanceType{offer("a.large", false, map[string]float64{"spot/z1": 0.02})},
			allows: onlyZone("z9"), wantCT: "on-demand", want: nil,
		},
		{
			name: "unavailable offerings are never asked for",
			types: []*InstanceType{func() *InstanceType {
				it := offer("a.large", false, map[string]float64{"spot/z1": 0.02})
				it.Offerings[0].Available = false
				return it
			}()},
			allows: func(o *Offering) bool { return o.Available }, wantCT: "on-demand", want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, got := LaunchOrder(tc.types, tc.allows, tc.minValues, 0)
			var names []string
			for _, o := range got {
				names = append(names, o.Type.Name+"/"+o.Offering.Zone)
			}
			if ct != tc.wantCT || fmt.Sprint(names) != fmt.Sprint(tc.want) {
				t.Errorf("got %s %v; want %s %v", ct, names, tc.wantCT, tc.want)
			}
		})
	}
}

// TestLaunchOrderKeepsTheCheapestTypes: one launch offers at most
// MaxLaunchTypes types, the cheapest by their cheapest allowed offering,
// with every allowed offering of each.
func TestLaunchOrderKeepsTheCheapestTypes(t *testing.T) {
	var types []*InstanceType
	for i := range MaxLaunchTypes + 20 {
		// Dearer as i grows; listed dearest first.
		p := 0.01 * float64(MaxLaunchTypes+20-i)
		types = append(types, offer(fmt.Sprintf("t%03d.large", i), false, map[string]float64{"spot/z1": p, "spot/z2": p * 1.5}))
	}
	_, got := LaunchOrder(types, func(*Offering) bool { return true }, false, 0)
	kept := map[string]int{}
	for _, o := range got {
		kept[o.Type.Name]++
	}
	if len(kept) != MaxLaunchTypes || len(got) != 2*MaxLaunchTypes {
		t.Fatalf("kept %d types and %d offerings; want %d and %d", len(kept), len(got), MaxLaunchTypes, 2*MaxLaunchTypes)
	}
	for i := range 20 {
		if name := fmt.Sprintf("t%03d.large", i); kept[name] > 0 {
			t.Errorf("kept %s, one of the 20 dearest", name)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].Offering.Price < got[i-1].Offering.Price {
			t.Fatalf("offering %d ($%.3f) after a dearer one ($%.3f)", i, got[i].Offering.Price, got[i-1].Offering.Price)
		}
	}
}
