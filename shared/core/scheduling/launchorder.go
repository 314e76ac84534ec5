package scheduling

import (
	"cmp"
	"math"
	"slices"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// MaxLaunchTypes is how many instance types one launch offers EC2, the
// cheapest: Karpenter's AWS provider caps CreateFleet overrides at 60.
const MaxLaunchTypes = 60

// LaunchOffering is one offering a launch may ask EC2 for.
type LaunchOffering struct {
	Type     *InstanceType
	Offering Offering
	// Credits is the $/h of surplus CPU credits the node would spend on
	// this type (burstable types above their baseline; CreditHourly).
	Credits float64
}

// Hourly is what the offering costs per hour, credits included.
func (o LaunchOffering) Hourly() float64 { return o.Offering.Price + o.Credits }

// LaunchOrder is why a launch asks for what it asks: the one place both the
// launch (what CreateFleet is offered) and the simulator's price prediction
// (CheapestOffering) take it from. allows says whether an offering may be
// used at all (available, in the claim's zones and capacity types, not
// marked unavailable); minValues is set when the claim's requirements have
// minValues; requestedCPUMilli is the CPU the claim's pods and DaemonSets
// request (its spec.resources.requests), which prices the surplus CPU
// credits of burstable types (0: none). The rules are those of Karpenter's
// AWS provider, in its order, with credits added (Karpenter ignores them):
//
//  1. Only types with an allowed offering.
//  2. Without minValues, exotic types (metal, GPUs, accelerators) only when
//     nothing else is left.
//  3. Without minValues, when both spot and on-demand offerings are
//     allowed, spot offerings dearer than the cheapest on-demand one are
//     dropped (a large spot type must not win over a cheaper on-demand
//     one), and types left with no offering go.
//  4. Types by their cheapest allowed offering, ties by name: the order in
//     which EC2 takes them (CreateFleet's lowest-price, and mostly
//     price-capacity-optimized for spot).
//  5. Without minValues, a burstable type that costs more with credits
//     than a type after it is dropped (keepInEC2Order): EC2 would launch
//     it for its cheaper offering. With minValues every type stays, as in
//     Karpenter, for the values. What is left is in the order of price
//     with credits too, so ranking by offering price (what EC2 does)
//     ranks by the bill.
//  6. The first MaxLaunchTypes stay.
//  7. The capacity type: reserved if any of those has an allowed reserved
//     offering, else spot if any has a spot one, else on-demand.
//
// It returns that capacity type and its allowed offerings of the kept
// types, cheapest offering first (ties by type, then zone), each with the
// credits it would spend; no offerings when none is allowed. The first
// is what EC2 would launch; LaunchOffering.Hourly is what it costs.
func LaunchOrder(types []*InstanceType, allows func(*Offering) bool, minValues bool, requestedCPUMilli int64) (string, []LaunchOffering) {
	type candidate struct {
		it       *InstanceType
		offers   []Offering
		cheapest float64
		credits  float64
	}
	var all []candidate
	generic := false
	for _, it := range types {
		c := candidate{it: it, cheapest: math.Inf(1), credits: CreditHourly(it, requestedCPUMilli)}
		for i := range it.Offerings {
			if o := &it.Offerings[i]; allows(o) {
				c.offers = append(c.offers, *o)
			}
		}
		if len(c.offers) == 0 {
			continue
		}
		generic = generic || !isExotic(it)
		all = append(all, c)
	}
	if !minValues && generic {
		all = slices.DeleteFunc(all, func(c candidate) bool { return isExotic(c.it) })
	}
	if !minValues {
		cheapestOD, hasSpot := math.Inf(1), false
		for _, c := range all {
			for _, o := range c.offers {
				switch o.CapacityType {
				case wellknown.CapacityTypeOnDemand:
					cheapestOD = min(cheapestOD, o.Price)
				case wellknown.CapacityTypeSpot:
					hasSpot = true
				}
			}
		}
		if hasSpot && !math.IsInf(cheapestOD, 1) {
			for i := range all {
				all[i].offers = slices.DeleteFunc(all[i].offers, func(o Offering) bool {
					return o.CapacityType == wellknown.CapacityTypeSpot && o.Price > cheapestOD
				})
			}
			all = slices.DeleteFunc(all, func(c candidate) bool { return len(c.offers) == 0 })
		}
	}
	for i := range all {
		for _, o := range all[i].offers {
			all[i].cheapest = min(all[i].cheapest, o.Price)
		}
	}
	slices.SortStableFunc(all, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.cheapest, b.cheapest), cmp.Compare(a.it.Name, b.it.Name))
	})
	if !minValues && slices.ContainsFunc(all, func(c candidate) bool { return c.credits > 0 }) {
		price, credits, keep := make([]float64, len(all)), make([]float64, len(all)), make([]bool, len(all))
		for i, c := range all {
			price[i], credits[i] = c.cheapest, c.credits
		}
		keepInEC2Order(price, credits, keep)
		n := 0
		for i, c := range all {
			if keep[i] {
				all[n] = c
				n++
			}
		}
		all = all[:n]
	}
	if len(all) > MaxLaunchTypes {
		all = all[:MaxLaunchTypes]
	}
	ct := wellknown.CapacityTypeOnDemand
	for _, want := range []string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeSpot} {
		if slices.ContainsFunc(all, func(c candidate) bool {
			return slices.ContainsFunc(c.offers, func(o Offering) bool { return o.CapacityType == want })
		}) {
			ct = want
			break
		}
	}
	var out []LaunchOffering
	for _, c := range all {
		for _, o := range c.offers {
			if o.CapacityType == ct {
				out = append(out, LaunchOffering{Type: c.it, Offering: o, Credits: c.credits})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b LaunchOffering) int {
		return cmp.Or(cmp.Compare(a.Offering.Price, b.Offering.Price), cmp.Compare(a.Type.Name, b.Type.Name), cmp.Compare(a.Offering.Zone, b.Offering.Zone))
	})
	return ct, out
}
