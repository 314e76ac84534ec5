// Package instancetype turns the compiled-in catalog into the instance types
// one EC2NodeClass can launch, with prices, offerings and availability.
package instancetype

import (
	"fmt"
	"hash/fnv"
	"strings"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// The karpenter.k8s.aws/instance-tenancy values Karpless launches, as
// Karpenter v1.14.1: shared hardware (default) or single-tenant hardware
// (dedicated, EC2's Dedicated Instances).
const (
	TenancyDefault   = "default"
	TenancyDedicated = "dedicated"
)

// Tenancies are the tenancies every instance type can be launched with, in
// the order a launch prefers them.
var tenancies = []string{TenancyDefault, TenancyDedicated}

// Tenancy is the tenancy a NodeClaim's instance is launched with, as
// Karpenter v1.14.1's getTenancyType: default when its requirements allow
// it (or say nothing), dedicated when they allow only that.
func Tenancy(reqs []karpv1.NodeSelectorRequirementWithMinValues) string {
	r := scheduling.RequirementsFromNodePool(reqs).Get(wellknown.InstanceTenancyLabel)
	for _, t := range tenancies {
		if r.Has(t) {
			return t
		}
	}
	return TenancyDefault
}

// Prices are what an instance type costs per hour. Both maps are optional.
type Prices struct {
	// OnDemand overrides the catalog's on-demand price by instance type.
	OnDemand map[string]float64
	// Spot is the spot price by instance type and zone, as EC2 quotes it.
	// Nil means no quotes were read at all (an offline snapshot): every spot
	// offering then carries a deterministic estimate (SpotEstimate). With
	// quotes, a (type, zone) without one has no spot market there: its spot
	// offering is unavailable, as in Karpenter, and carries the estimate
	// only so that a node already running there still has a price.
	Spot map[string]map[string]float64
	// Offered says whether EC2 offers a type in a zone at all (nil: in
	// every zone). Where it does not, the type has no offering there, which
	// tells "not sold here" apart from "out of capacity right now".
	Offered func(instanceType, zone string) bool
}

// SpotEstimate is the spot price assumed when none is known: between 30% and
// 45% of on-demand, varying by instance type and zone through a hash of
// their names so that zones and types differ as they do on the real market,
// and the same inputs always give the same price.
func SpotEstimate(instanceType, zone string, onDemand float64) float64 {
	h := fnv.New32a()
	h.Write([]byte(instanceType))
	h.Write([]byte{0})
	h.Write([]byte(zone))
	frac := float64(h.Sum32()%1000) / 1000
	return onDemand * (0.30 + 0.15*frac)
}

func (p Prices) onDemand(t *catalog.InstanceType) float64 {
	if v, ok := p.OnDemand[t.Name]; ok {
		return v
	}
	return t.OnDemandPrice
}

// spot is the type's spot price in the zone and whether spot can be
// launched there at all.
func (p Prices) spot(name, zone string, od float64) (float64, bool) {
	if v, ok := p.Spot[name][zone]; ok {
		return v, true
	}
	return SpotEstimate(name, zone, od), p.Spot == nil
}

// Build returns the catalog's instance types for one EC2NodeClass: capacity
// and allocatable under its kubelet settings (cfg), a spot and an on-demand
// offering in each of its subnets' zones that EC2 offers it in, marked unavailable where the
// capacity-error cache says so (unavailable may be nil). Types without an
// on-demand price are skipped; for Windows AMI families only amd64 types
// are built, labelled kubernetes.io/os=windows and with the family's
// node.kubernetes.io/windows-build. Reserved offerings are added by
// WithReservations.
func Build(cat *catalog.Catalog, cfg catalog.NodeConfig, zones []string, prices Prices, unavailable func(capacityType, instanceType, zone string) bool) ([]*scheduling.InstanceType, error) {
	out := make([]*scheduling.InstanceType, 0, cat.Len())
	for _, t := range cat.All() {
		od := prices.onDemand(t)
		if od <= 0 {
			continue
		}
		capacity, alloc, err := t.Resources(cfg)
		if err != nil {
			return nil, fmt.Errorf("building instance types: %w", err)
		}
		labels := t.Labels()
		// As Karpenter's instance type requirements: nodes are in the
		// catalog's region (a pod asking for another must not get a
		// node here), and each type can be launched with either tenancy
		// (the launch picks it from the NodeClaim: Tenancy). Dedicated
		// Instances cost more than shared ones, but Karpenter prices
		// them as shared (it reads shared-tenancy prices only), and so
		// does Karpless: the offerings carry one price.
		if cat.Region != "" {
			labels[wellknown.RegionLabel] = cat.Region
		}
		labels[wellknown.InstanceTenancyLabel] = TenancyDefault
		if strings.HasPrefix(cfg.Family, "Windows") {
			// As Karpenter's instance types for a Windows family: only
			// amd64 types run Windows (it gives the others no OS), and
			// each carries its family's build, which the Windows AMIs
			// require (status.amis[].requirements).
			if labels[wellknown.ArchLabel] != "amd64" {
				continue
			}
			labels[wellknown.OSLabel] = "windows"
			labels[wellknown.WindowsBuildLabel] = catalog.WindowsBuild(cfg.Family)
		}
		it := &scheduling.InstanceType{
			Name:         t.Name,
			Labels:       labels,
			LabelChoices: map[string][]string{wellknown.InstanceTenancyLabel: tenancies},
			Capacity:     capacity,
			Allocatable:  alloc,
			Offerings:    make([]scheduling.Offering, 0, 2*len(zones)),
		}
		compatible := Compatible(t, cfg)
		for _, z := range zones {
			if prices.Offered != nil && !prices.Offered(t.Name, z) {
				continue
			}
			for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
				price, priced := od, true
				if ct == wellknown.CapacityTypeSpot {
					price, priced = prices.spot(t.Name, z, od)
				}
				it.Offerings = append(it.Offerings, scheduling.Offering{
					Zone: z, CapacityType: ct, Price: price,
					Available: compatible && priced && (unavailable == nil || !unavailable(ct, t.Name, z)),
				})
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// Compatible is Karpenter's instance type and EC2NodeClass compatibility
// check, as far as the catalog knows the type: AL2023 does not boot a1
// types, and a type cannot attach more EFA-only interfaces than its EFA
// limit. An incompatible type is kept with every offering unavailable, as
// Karpenter keeps it.
func Compatible(t *catalog.InstanceType, cfg catalog.NodeConfig) bool {
	if cfg.Family == catalog.FamilyAL2023 && strings.HasPrefix(t.Name, "a1.") {
		return false
	}
	return cfg.EFAInterfaces == nil || *cfg.EFAInterfaces <= t.MaxEFA()
}

// FilterByAMIs keeps the types at least one of the EC2NodeClass's resolved
// AMIs can boot: an AMI's requirements (status.amis[].requirements, e.g.
// kubernetes.io/arch In [arm64], or a GPU count for accelerated images) must
// all hold for the type's labels. With no AMIs, nothing can launch.
func FilterByAMIs(types []*scheduling.InstanceType, amis []awsv1.AMI) []*scheduling.InstanceType {
	sets := make([]scheduling.Requirements, 0, len(amis))
	for _, a := range amis {
		sets = append(sets, scheduling.RequirementsFromNodeSelector(a.Requirements))
	}
	var out []*scheduling.InstanceType
	for _, it := range types {
		for _, reqs := range sets {
			if reqs.MatchesLabels(it.Labels) == nil {
				out = append(out, it)
				break
			}
		}
	}
	return out
}

// Unavailable is Karpenter's IsUnavailable for a class's spot and
// on-demand offerings, the predicate Build takes: an offering is
// unavailable when it is marked (offering: itself or its capacity type,
// after a capacity error), or when every one of the class's subnets in its
// zone is marked out of addresses (subnet: after
// InsufficientFreeAddressesInSubnet), so a launch does not try that zone
// again until the marks expire. A zone with one subnet left is still
// offered: the launch uses that subnet.
func Unavailable(nc *awsv1.EC2NodeClass, offering func(capacityType, instanceType, zone string) bool, subnet func(id string) bool) func(capacityType, instanceType, zone string) bool {
	byZone := map[string][]string{}
	for _, s := range nc.Status.Subnets {
		byZone[s.Zone] = append(byZone[s.Zone], s.ID)
	}
	return func(ct, it, zone string) bool {
		if offering != nil && offering(ct, it, zone) {
			return true
		}
		ids := byZone[zone]
		if subnet == nil || len(ids) == 0 {
			return false
		}
		for _, id := range ids {
			if !subnet(id) {
				return false
			}
		}
		return true
	}
}

// Zones are the distinct zones of an EC2NodeClass's subnets, in status order.
func Zones(nc *awsv1.EC2NodeClass) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range nc.Status.Subnets {
		if !seen[s.Zone] {
			seen[s.Zone] = true
			out = append(out, s.Zone)
		}
	}
	return out
}

// ReservedPriceDivisor is how Karpenter v1.14.1 prices a reserved offering:
// the type's on-demand price over it. Reserved capacity is paid for
// whether used or not, so it is all but free to use; dividing (rather than
// 0) keeps the types' order for consolidation.
const ReservedPriceDivisor = 10_000_000.0

// ReservedPrice is the price of a reserved offering of a type whose
// on-demand price is onDemand.
func ReservedPrice(onDemand float64) float64 { return onDemand / ReservedPriceDivisor }

// WithReservations adds a reserved offering for each of the class's
// resolved capacity reservations (status.capacityReservations) to the type
// it reserves, as Karpenter's ReservedCapacityResolver: priced by
// ReservedPrice, carrying the reservation's id, type and interruptibility
// and what it can still take (available, by id), and available only when
// it can take one, is in one of the class's zones, is not expiring and is
// not marked unavailable. Types are copied, never changed in place: they
// may be shared. A reservation for a type the class cannot launch (not in
// types) offers nothing.
func WithReservations(types []*scheduling.InstanceType, nc *awsv1.EC2NodeClass, available func(id string) int, unavailable func(capacityType, instanceType, zone string) bool) []*scheduling.InstanceType {
	if nc == nil || len(nc.Status.CapacityReservations) == 0 {
		return types
	}
	zones := map[string]bool{}
	for _, z := range Zones(nc) {
		zones[z] = true
	}
	byType := map[string][]awsv1.CapacityReservation{}
	for _, cr := range nc.Status.CapacityReservations {
		byType[cr.InstanceType] = append(byType[cr.InstanceType], cr)
	}
	out := make([]*scheduling.InstanceType, len(types))
	for i, it := range types {
		out[i] = it
		crs := byType[it.Name]
		if len(crs) == 0 {
			continue
		}
		od := 0.0
		for _, o := range it.Offerings {
			if o.CapacityType == wellknown.CapacityTypeOnDemand && o.Price > 0 {
				od = o.Price
				break
			}
		}
		cp := *it
		cp.Offerings = append(make([]scheduling.Offering, 0, len(it.Offerings)+len(crs)), it.Offerings...)
		for _, cr := range crs {
			n := 0
			if available != nil {
				n = available(cr.ID)
			}
			typ := cr.ReservationType
			if typ == "" {
				typ = "default"
			}
			cp.Offerings = append(cp.Offerings, scheduling.Offering{
				Zone: cr.AvailabilityZone, CapacityType: wellknown.CapacityTypeReserved, Price: ReservedPrice(od),
				Available: n > 0 && zones[cr.AvailabilityZone] && cr.State != "expiring" &&
					(unavailable == nil || !unavailable(wellknown.CapacityTypeReserved, it.Name, cr.AvailabilityZone)),
				ReservationID: cr.ID, ReservationCapacity: n, ReservationType: typ, ReservationInterruptible: cr.Interruptible,
			})
		}
		out[i] = &cp
	}
	return out
}
