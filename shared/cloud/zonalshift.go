package cloud

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
)

// ZonalShift makes the Cloud honour an ARC zonal shift from its next Use
// on: offerings in a shifted zone are unavailable (Karpenter's offering
// resolvers), and its launches' instance calls spare the instances of the
// claims it is told of (instance.Provider.WithZonalShift). Call it before
// Use, not beside launches.
func (c *Cloud) ZonalShift(shifted zonalshift.Zones, claims []*karpv1.NodeClaim, classes []*awsv1.EC2NodeClass) {
	c.shifted = shifted
	if c.unshifted == nil {
		c.unshifted = c.Instances
	}
	c.Instances = c.unshifted.WithZonalShift(shifted, KnownInstances(claims, classes))
}

// zoneShifted reports whether the class's zone of that name is shifted away from.
func (c *Cloud) zoneShifted(nc *awsv1.EC2NodeClass, zone string) bool {
	return len(c.shifted) > 0 && c.shifted.Names(nc)[zone]
}

// withoutShifted is unavailable, and every offering in a shifted zone of
// the class.
func (c *Cloud) withoutShifted(nc *awsv1.EC2NodeClass, unavailable func(capacityType, instanceType, zone string) bool) func(capacityType, instanceType, zone string) bool {
	return c.shifted.Unavailable(nc, unavailable)
}

// KnownInstances are the instances the claims know of, without asking
// EC2: the ID of the provider ID, the zone of the zone label (or of the
// provider ID), the zone ID of the zone-id label (or of the classes'
// subnets in that zone), and the claim's name as its NodeClaim tag. Karpless
// keeps no instance cache; this is what stands for Karpenter's during a
// zonal shift.
func KnownInstances(claims []*karpv1.NodeClaim, classes []*awsv1.EC2NodeClass) []instance.Instance {
	zoneIDs := map[string]string{}
	for _, nc := range classes {
		for _, s := range nc.Status.Subnets {
			if s.ZoneID != "" {
				zoneIDs[s.Zone] = s.ZoneID
			}
		}
	}
	var out []instance.Instance
	for _, nc := range claims {
		id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)
		if id == "" {
			continue
		}
		zone := nc.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			zone = zoneOfProviderID(nc.Status.ProviderID)
		}
		zoneID := nc.Labels[wellknown.TopologyZoneIDLabel]
		if zoneID == "" {
			zoneID = zoneIDs[zone]
		}
		out = append(out, instance.Instance{
			ID: id, Zone: zone, ZoneID: zoneID,
			Type: nc.Labels[corev1.LabelInstanceTypeStable], CapacityType: nc.Labels[wellknown.CapacityTypeLabel],
			LaunchTime: nc.CreationTimestamp.Time,
			Tags:       map[string]string{wellknown.NodeClaimTagKey: nc.Name, wellknown.NodePoolTagKey: nc.Labels[wellknown.NodePoolLabel]},
		})
	}
	return out
}

// zoneOfProviderID is the zone of aws:///<zone>/<id>, or "".
func zoneOfProviderID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, wellknown.ProviderIDPrefix)
	if !ok {
		return ""
	}
	zone, _, found := strings.Cut(rest, "/")
	if !found {
		return ""
	}
	return zone
}
