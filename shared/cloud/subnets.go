package cloud

import (
	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/instancetype"
)

// unavailableIn is the class's capacity marks as Build takes them
// (instancetype.Unavailable): an offering's own or its capacity type's,
// or its zone's when every subnet of the class there ran out of
// addresses. The marks are read at each call, so a launch sees those of
// the launches before it.
func unavailableIn(ice *unavailable.Cache, nc *awsv1.EC2NodeClass) func(capacityType, instanceType, zone string) bool {
	return instancetype.Unavailable(nc, ice.Unavailable, ice.SubnetUnavailable)
}

// launchSubnets are the class's subnets a launch may use, by zone: those
// not marked out of addresses, or, in a zone where all are, all of them
// (Karpenter sorts a marked subnet last rather than leaving it out: a
// reserved offering, which subnet marks do not take out, still launches
// there).
func launchSubnets(ice *unavailable.Cache, nc *awsv1.EC2NodeClass) map[string][]string {
	out := subnetsByZone(nc)
	for zone, ids := range out {
		var free []string
		for _, id := range ids {
			if !ice.SubnetUnavailable(id) {
				free = append(free, id)
			}
		}
		if len(free) > 0 {
			out[zone] = free
		}
	}
	return out
}

// markSubnets remembers the subnets a fleet answer found out of addresses,
// whatever the capacity type, as Karpenter's updateUnavailableOfferingsCache
// does before it marks the offerings.
func (c *Cloud) markSubnets(errs []instance.FleetError) {
	for _, e := range errs {
		if e.Code == awserr.SubnetOutOfAddresses && e.Subnet != "" {
			c.ice.MarkSubnet(e.Subnet, e.Code)
		}
	}
}
