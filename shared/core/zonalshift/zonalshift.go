// Package zonalshift decides what an ARC zonal shift on the cluster means
// (Karpenter's settings.enableZonalShift): which zones are shifted away from,
// and which NodePools to tell when a shift starts or ends.
package zonalshift

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Shift is one zonal shift ARC lists on the cluster.
type Shift struct {
	// AwayFrom is the zone ID (usw2-az1) traffic is shifted away from.
	AwayFrom string
	Expiry   time.Time
	// Applied is ARC's APPLIED status; a NOT_APPLIED shift (one another
	// shift overrides, or a practice run that did not take) moves nothing.
	Applied bool
}

// Zones are zone IDs shifted away from. The zero value (nil) is none: a
// cluster without enableZonalShift, or with no shift in force.
type Zones map[string]bool

// Active are the zones of the shifts that hold at now: applied and not
// expired, as Karpenter's IsZonalShifted.
func Active(shifts []Shift, now time.Time) Zones {
	var z Zones
	for _, s := range shifts {
		if s.AwayFrom == "" || !s.Applied || !s.Expiry.After(now) {
			continue
		}
		if z == nil {
			z = Zones{}
		}
		z[s.AwayFrom] = true
	}
	return z
}

// Has reports whether the zone of that ID is shifted away from.
func (z Zones) Has(zoneID string) bool { return zoneID != "" && z[zoneID] }

// Sorted are the zone IDs in order.
func (z Zones) Sorted() []string {
	out := make([]string, 0, len(z))
	for id := range z {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// String is the sorted IDs joined by commas ("" for none): the form kept
// between invocations (Parse reads it back).
func (z Zones) String() string { return strings.Join(z.Sorted(), ",") }

// Parse reads String's form.
func Parse(s string) Zones {
	var z Zones
	for id := range strings.SplitSeq(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			if z == nil {
				z = Zones{}
			}
			z[id] = true
		}
	}
	return z
}

// Names are the zone names (us-west-2a) of the shifted zones the class's
// subnets are in: offerings are by zone name, shifts by zone ID, and the
// class's subnets are what relates the two (as Karpenter's ZoneInfo).
func (z Zones) Names(nc *awsv1.EC2NodeClass) map[string]bool {
	if len(z) == 0 || nc == nil {
		return nil
	}
	out := map[string]bool{}
	for _, s := range nc.Status.Subnets {
		if z.Has(s.ZoneID) {
			out[s.Zone] = true
		}
	}
	return out
}

// Unavailable is unavailable, and also every offering in a zone of the
// class that is shifted away from: Karpenter's offering resolvers make
// such an offering (on-demand, spot or reserved) unavailable until the
// shift ends.
func (z Zones) Unavailable(nc *awsv1.EC2NodeClass, unavailable func(capacityType, instanceType, zone string) bool) func(capacityType, instanceType, zone string) bool {
	names := z.Names(nc)
	if len(names) == 0 {
		return unavailable
	}
	return func(capacityType, instanceType, zone string) bool {
		return names[zone] || (unavailable != nil && unavailable(capacityType, instanceType, zone))
	}
}

// The reasons of the Events on an affected NodePool, Karpenter's.
const (
	ReasonActive  = "ZonalShiftActive"
	ReasonCleared = "ZonalShiftCleared"
)

// Note is one Event to record on a NodePool.
type Note struct {
	Pool *karpv1.NodePool
	// Zone and ZoneID name the zone.
	Zone, ZoneID string
	// Cleared: the shift ended (a Normal Event); otherwise it began (a
	// Warning).
	Cleared bool
}

// Reason is the Event's reason.
func (n Note) Reason() string {
	if n.Cleared {
		return ReasonCleared
	}
	return ReasonActive
}

// Message is the Event's message, Karpenter's words.
func (n Note) Message() string {
	if n.Cleared {
		return fmt.Sprintf("Zonal shift cleared: offerings in zone %s (%s) are restored for this NodePool", n.Zone, n.ZoneID)
	}
	return fmt.Sprintf("Zonal shift detected: offerings in zone %s (%s) are unavailable for this NodePool", n.Zone, n.ZoneID)
}

// Notes are the Events a change from previous to current shifted zones
// calls for, as Karpenter's PublishZonalShiftEvents: each zone that became
// shifted, and each that no longer is, on every NodePool that can launch
// there (its requirements allow the zone, and its EC2NodeClass has a
// subnet there). classes are the EC2NodeClasses by name; a NodePool whose
// class is not among them is told nothing. No change: no Notes.
func Notes(previous, current Zones, pools []*karpv1.NodePool, classes map[string]*awsv1.EC2NodeClass) []Note {
	began, ended := diff(current, previous), diff(previous, current)
	if len(began) == 0 && len(ended) == 0 {
		return nil
	}
	pools = slices.Clone(pools)
	sort.Slice(pools, func(a, b int) bool { return pools[a].Name < pools[b].Name })
	var out []Note
	for _, p := range pools {
		ref := p.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			continue
		}
		nc := classes[ref.Name]
		if nc == nil {
			continue
		}
		reqs := scheduling.RequirementsFromNodePool(p.Spec.Template.Spec.Requirements)
		for _, c := range []struct {
			ids     []string
			cleared bool
		}{{began, false}, {ended, true}} {
			for _, id := range c.ids {
				if zone, ok := affected(reqs, nc, id); ok {
					out = append(out, Note{Pool: p, Zone: zone, ZoneID: id, Cleared: c.cleared})
				}
			}
		}
	}
	return out
}

// affected is the zone's name and whether a NodePool of those requirements
// can launch in the zone of that ID with the class.
func affected(reqs scheduling.Requirements, nc *awsv1.EC2NodeClass, zoneID string) (string, bool) {
	i := slices.IndexFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.ZoneID == zoneID })
	if i < 0 {
		return "", false
	}
	zone := nc.Status.Subnets[i].Zone
	if !reqs.Get(corev1.LabelTopologyZone).Has(zone) || !reqs.Get(wellknown.TopologyZoneIDLabel).Has(zoneID) {
		return "", false
	}
	return zone, true
}

// diff are the IDs in a and not in b, sorted.
func diff(a, b Zones) []string {
	var out []string
	for _, id := range a.Sorted() {
		if !b[id] {
			out = append(out, id)
		}
	}
	return out
}
