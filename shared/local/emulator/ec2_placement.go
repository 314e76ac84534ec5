package emulator

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// Placement groups: DescribePlacementGroups, the seeded groups, a
// CreatePlacementGroup helper for tests, and what launches into a group
// meet: an unknown group, a partition out of range, a cluster group's one
// zone, a spread group's seven instances per zone.

func init() {
	ec2Handlers["DescribePlacementGroups"] = (*Emulator).describePlacementGroups
}

// Placement group strategies.
const (
	PlacementCluster   = "cluster"
	PlacementPartition = "partition"
	PlacementSpread    = "spread"
)

// spreadPerZone is EC2's limit of running instances per zone in a
// rack-level spread placement group.
const spreadPerZone = 7

// spreadLimitMessage is EC2's message when a spread group is full in a
// zone; Karpenter recognises the limit by it
// (IsSpreadPlacementGroupLimitError).
const spreadLimitMessage = "You've reached the limit of instances in this spread placement group. A spread placement group can have up to seven instances per Availability Zone."

// PlacementGroup is a placement group as tests see it.
type PlacementGroup struct {
	ID, Name string
	// Strategy is cluster, partition or spread.
	Strategy string
	// PartitionCount is set for partition groups.
	PartitionCount int32
	// SpreadLevel is rack for spread groups.
	SpreadLevel string
	State       string
	Tags        map[string]string
}

type placementGroup struct {
	PlacementGroup
	// visibleAt is when Describe and launches first find a new group
	// (Hostility.PlacementGroupLagMax).
	visibleAt time.Time
}

// instancePlacement is where an instance was placed.
type instancePlacement struct {
	group     *placementGroup
	partition int32
}

// placementWorld is the placement state; callers hold e.mu.
type placementWorld struct {
	groups   []*placementGroup
	instance map[string]instancePlacement
}

// SeededPlacementGroupName is the name of the seeded group of a strategy:
// <cluster>-cluster, <cluster>-spread (rack level) and <cluster>-partition
// (three partitions).
func SeededPlacementGroupName(cluster, strategy string) string { return cluster + "-" + strategy }

// placements returns the placement state, seeding it on first use: the
// seeded groups are visible at once, as if made long before. Callers hold
// e.mu.
func (e *Emulator) placements() *placementWorld {
	if e.world.placement != nil {
		return e.world.placement
	}
	w := &placementWorld{instance: map[string]instancePlacement{}}
	e.world.placement = w
	for _, g := range []PlacementGroup{
		{Strategy: PlacementCluster},
		{Strategy: PlacementSpread, SpreadLevel: "rack"},
		{Strategy: PlacementPartition, PartitionCount: 3},
	} {
		g.Name = SeededPlacementGroupName(e.cfg.ClusterName, g.Strategy)
		g.ID, g.State, g.Tags = e.newID("pg"), "available", map[string]string{}
		w.groups = append(w.groups, &placementGroup{PlacementGroup: g})
	}
	return w
}

// CreatePlacementGroup makes a group as EC2's CreatePlacementGroup does
// (partitions only for the partition strategy, 1..7); like EC2 it is not
// found by Describe or launches for a moment (Hostility.PlacementGroupLagMax).
func (e *Emulator) CreatePlacementGroup(name, strategy string, partitions int32, tags map[string]string) (PlacementGroup, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.placements()
	for _, g := range w.groups {
		if g.Name == name {
			return PlacementGroup{}, fmt.Errorf("InvalidPlacementGroup.Duplicate: The Placement Group '%s' already exists.", name)
		}
	}
	g := PlacementGroup{Name: name, Strategy: strategy, State: "available", Tags: cloneTags(tags)}
	if g.Tags == nil {
		g.Tags = map[string]string{}
	}
	switch strategy {
	case PlacementCluster:
	case PlacementSpread:
		g.SpreadLevel = "rack"
	case PlacementPartition:
		if partitions < 1 || partitions > 7 {
			return PlacementGroup{}, fmt.Errorf("InvalidParameterValue: partition count %d is not between 1 and 7", partitions)
		}
		g.PartitionCount = partitions
	default:
		return PlacementGroup{}, fmt.Errorf("InvalidParameterValue: strategy %q", strategy)
	}
	if strategy != PlacementPartition && partitions != 0 {
		return PlacementGroup{}, fmt.Errorf("InvalidParameterValue: only partition groups have partitions")
	}
	g.ID = e.newID("pg")
	now := e.now()
	w.groups = append(w.groups, &placementGroup{PlacementGroup: g, visibleAt: now.Add(e.hostile.upTo(e.hostile.PlacementGroupLagMax))})
	return g, nil
}

// PlacementGroups lists every group, new ones included (no lag).
func (e *Emulator) PlacementGroups() []PlacementGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []PlacementGroup
	for _, g := range e.placements().groups {
		cp := g.PlacementGroup
		cp.Tags = cloneTags(g.Tags)
		out = append(out, cp)
	}
	return out
}

// PlacementOf is the group and partition an instance was launched into
// (ok false when it was launched into none).
func (e *Emulator) PlacementOf(instanceID string) (group PlacementGroup, partition int32, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.placements().instance[instanceID]
	if !ok {
		return PlacementGroup{}, 0, false
	}
	return p.group.PlacementGroup, p.partition, true
}

// lagging reports (and counts) a group EC2 does not show yet.
func (e *Emulator) pgLagging(g *placementGroup) bool {
	if e.now().Before(g.visibleAt) {
		e.hostile.note(EventPlacementGroupLag)
		return true
	}
	return false
}

// --- DescribePlacementGroups ---

type xmlPlacementGroup struct {
	GroupName      string   `xml:"groupName"`
	State          string   `xml:"state"`
	Strategy       string   `xml:"strategy"`
	PartitionCount int32    `xml:"partitionCount,omitempty"`
	GroupID        string   `xml:"groupId"`
	GroupARN       string   `xml:"groupArn"`
	SpreadLevel    string   `xml:"spreadLevel,omitempty"`
	Tags           []xmlTag `xml:"tagSet>item"`
}

type describePlacementGroupsResponse struct {
	ec2Meta
	Groups []xmlPlacementGroup `xml:"placementGroupSet>item"`
}

func (e *Emulator) describePlacementGroups(r *request) (any, *apiError) {
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	ids, names := list(r.params, "GroupId"), list(r.params, "GroupName")
	filters := parseFilters(r.params)
	found := map[string]bool{}
	resp := &describePlacementGroupsResponse{}
	for _, g := range e.placements().groups {
		if e.pgLagging(g) || (len(ids) > 0 && !contains(ids, g.ID)) || (len(names) > 0 && !contains(names, g.Name)) {
			continue
		}
		found[g.ID], found[g.Name] = true, true
		get := func(name string) ([]string, bool) {
			switch name {
			case "group-name":
				return []string{g.Name}, true
			case "group-id":
				return []string{g.ID}, true
			case "strategy":
				return []string{g.Strategy}, true
			case "state":
				return []string{g.State}, true
			case "spread-level":
				return []string{g.SpreadLevel}, true
			case "group-arn":
				return []string{e.pgARN(g)}, true
			}
			return nil, false
		}
		ok, err := matchFilters(filters, get, g.Tags)
		if err != nil {
			return nil, err
		}
		if ok {
			resp.Groups = append(resp.Groups, xmlPlacementGroup{
				GroupName: g.Name, State: g.State, Strategy: g.Strategy, PartitionCount: g.PartitionCount,
				GroupID: g.ID, GroupARN: e.pgARN(g), SpreadLevel: g.SpreadLevel, Tags: xmlTags(g.Tags),
			})
		}
	}
	// A name or id EC2 does not have (or does not show yet) fails the call.
	for _, want := range append(names, ids...) {
		if !found[want] {
			return nil, unknownPlacementGroup(want)
		}
	}
	return resp, nil
}

func (e *Emulator) pgARN(g *placementGroup) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:placement-group/%s", e.cfg.Region, e.cfg.AccountID, g.Name)
}

func unknownPlacementGroup(nameOrID string) *apiError {
	return errorf(400, "InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", nameOrID)
}

// --- launches ---

// placementRequest is the Placement a launch asks for: a group by name or
// id, a partition (0 = EC2 chooses), and a tenancy ("" = default).
type placementRequest struct {
	groupName, groupID string
	partition          int32
	bad                string // an unparsable PartitionNumber
	tenancy            string
}

func (q placementRequest) empty() bool { return q.groupName == "" && q.groupID == "" }

// placementParams reads prefix+"Placement.*" from p, falling back to the
// launch template's own Placement for what p leaves out (an override's or
// a RunInstances request's placement wins over the template's).
func placementParams(p url.Values, prefix string, lt *launchTemplate) placementRequest {
	get := func(k string) string {
		if v := p.Get(prefix + "Placement." + k); v != "" {
			return v
		}
		if lt != nil && lt.params != nil {
			if vs := lt.params["Placement."+k]; len(vs) > 0 {
				return vs[0]
			}
		}
		return ""
	}
	q := placementRequest{groupName: get("GroupName"), groupID: get("GroupId"), tenancy: get("Tenancy")}
	if s := get("PartitionNumber"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			q.bad = s
		}
		q.partition = int32(n)
	}
	return q
}

// placementError says why a pool cannot launch one more instance into its
// placement group now, with EC2's codes; callers hold e.mu. A cluster
// group holds instances in one zone only: once one runs, EC2 answers other
// zones with insufficient capacity (Karpenter's design relies on exactly
// this and treats it as a capacity error).
func (e *Emulator) placementError(pl *pool) (code, msg string) {
	q := pl.placement
	if q.tenancy == tenancyHost {
		// Launching onto a Dedicated Host needs one allocated; the
		// emulator has none.
		return "InvalidParameterValue", "Tenancy host is not emulated: there are no Dedicated Hosts to launch onto."
	}
	if q.empty() {
		return "", ""
	}
	g := e.findPlacementGroup(q)
	if g == nil {
		return "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", firstNonEmpty(q.groupID, q.groupName))
	}
	if q.bad != "" || q.partition < 0 || q.partition > 0 && (g.Strategy != PlacementPartition || q.partition > g.PartitionCount) {
		return "InvalidParameterValue", fmt.Sprintf("Invalid partition number '%s' for placement group '%s'.", firstNonEmpty(q.bad, strconv.Itoa(int(q.partition))), g.Name)
	}
	switch g.Strategy {
	case PlacementCluster:
		if z := e.clusterZone(g); z != "" && z != pl.zone {
			return "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s) for placement group '%s'. Launch into the placement group's Availability Zone.", pl.typeName, pl.zone, g.Name)
		}
	case PlacementSpread:
		if e.liveInGroup(g, pl.zone) >= spreadPerZone {
			return "InsufficientInstanceCapacity", spreadLimitMessage
		}
	}
	return "", ""
}

func (e *Emulator) findPlacementGroup(q placementRequest) *placementGroup {
	for _, g := range e.placements().groups {
		if (q.groupID != "" && g.ID == q.groupID || q.groupID == "" && g.Name == q.groupName) && g.State == "available" && !e.pgLagging(g) {
			return g
		}
	}
	return nil
}

// clusterZone is the zone a cluster group's instances are in, "" when it
// has none that is not terminated.
func (e *Emulator) clusterZone(g *placementGroup) string {
	for id, p := range e.placements().instance {
		if i := e.world.instByID[id]; p.group == g && i != nil && i.State != StateTerminated {
			return i.Zone
		}
	}
	return ""
}

// liveInGroup counts a group's instances in a zone ("" = all) that are not
// terminated.
func (e *Emulator) liveInGroup(g *placementGroup, zone string) int {
	n := 0
	for id, p := range e.placements().instance {
		if i := e.world.instByID[id]; p.group == g && i != nil && i.State != StateTerminated && (zone == "" || i.Zone == zone) {
			n++
		}
	}
	return n
}

// place records where a launched instance went; a partition group's
// instance without a requested partition goes to the emptiest partition
// (EC2 spreads them evenly), the lowest number on a tie. Callers hold e.mu
// and checked placementError.
func (e *Emulator) place(inst *instance, q placementRequest) {
	inst.Tenancy = firstNonEmpty(q.tenancy, tenancyDefault)
	if q.empty() {
		return
	}
	g := e.findPlacementGroup(q)
	if g == nil {
		return
	}
	p := instancePlacement{group: g, partition: q.partition}
	if g.Strategy == PlacementPartition && p.partition == 0 {
		count := make([]int, g.PartitionCount+1)
		for id, o := range e.placements().instance {
			if i := e.world.instByID[id]; o.group == g && i != nil && i.State != StateTerminated {
				count[o.partition]++
			}
		}
		parts := make([]int32, 0, g.PartitionCount)
		for n := int32(1); n <= g.PartitionCount; n++ {
			parts = append(parts, n)
		}
		sort.SliceStable(parts, func(a, b int) bool { return count[parts[a]] < count[parts[b]] })
		p.partition = parts[0]
	}
	e.placements().instance[inst.ID] = p
}

// Tenancies EC2 knows (Placement.Tenancy); the emulator launches default
// and dedicated instances, and has no Dedicated Hosts for host.
const (
	tenancyDefault   = "default"
	tenancyDedicated = "dedicated"
	tenancyHost      = "host"
)

// checkTenancy answers a Placement.Tenancy that is not one of EC2's values
// as EC2 answers a bad enum value ("" is left to EC2's default).
func checkTenancy(v string) *apiError {
	switch v {
	case "", tenancyDefault, tenancyDedicated, tenancyHost:
		return nil
	}
	return errorf(400, "InvalidParameterValue", "Value (%s) for parameter tenancy is invalid.", v)
}

// tenancyOf is the tenancy DescribeInstances shows: default unless the
// instance was launched otherwise.
func tenancyOf(i *instance) string { return firstNonEmpty(i.Tenancy, tenancyDefault) }

// placementXML is the placement DescribeInstances shows for an instance.
func (e *Emulator) placementXML(id string) (groupName, groupID string, partition int32) {
	p, ok := e.placements().instance[id]
	if !ok {
		return "", "", 0
	}
	return p.group.Name, p.group.ID, p.partition
}

// placementFilter answers DescribeInstances' placement-group-name and
// placement-partition-number filters.
func (e *Emulator) placementFilter(id, name string) []string {
	p, ok := e.placements().instance[id]
	switch {
	case !ok:
		return nil
	case name == "placement-group-name":
		return []string{p.group.Name}
	case p.partition > 0:
		return []string{strconv.Itoa(int(p.partition))}
	}
	return nil
}
