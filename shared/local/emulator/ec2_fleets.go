package emulator

import (
	"regexp"
)

// xmlFleetData is a DescribeFleets fleetSet item.
type xmlFleetData struct {
	ActivityStatus              string             `xml:"activityStatus"`
	ClientToken                 string             `xml:"clientToken,omitempty"`
	CreateTime                  string             `xml:"createTime"`
	FleetID                     string             `xml:"fleetId"`
	FleetState                  string             `xml:"fleetState"`
	FulfilledCapacity           float64            `xml:"fulfilledCapacity"`
	FulfilledOnDemandCapacity   float64            `xml:"fulfilledOnDemandCapacity"`
	LaunchTemplateConfigs       []xmlFleetLTConfig `xml:"launchTemplateConfigs>item"`
	TargetCapacitySpecification xmlTargetCapacity  `xml:"targetCapacitySpecification"`
	Type                        string             `xml:"type"`
	Tags                        []xmlTag           `xml:"tagSet>item"`
	Errors                      []xmlFleetError    `xml:"errorSet>item"`
	Instances                   []xmlFleetInstance `xml:"fleetInstanceSet>item"`
}

type describeFleetsResponse struct {
	ec2Meta
	Fleets    []xmlFleetData `xml:"fleetSet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

var fleetIDPattern = regexp.MustCompile(`^fleet-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Instant fleets are all the emulator has; they keep this state, and
// "fulfilled" is the only activity status EC2 gives instant fleets (once
// every request is placed, whether or not the target was met).
const (
	fleetTypeInstant       = "instant"
	fleetStateActive       = "active"
	fleetActivityFulfilled = "fulfilled"
	maxDescribeFleets      = 1000
)

// describeFleets answers DescribeFleets. EC2 lists an instant fleet only
// when the request names it by id ("If a fleet is of type instant, you
// must specify the fleet ID in the request, otherwise the fleet does not
// appear in the response"), so a call without FleetId.N finds nothing:
// filters narrow the named fleets. A new fleet is unknown for a while
// (Hostility.FleetLagMax).
func (e *Emulator) describeFleets(r *request) (any, *apiError) {
	ids := list(r.params, "FleetId")
	for _, id := range ids {
		if !fleetIDPattern.MatchString(id) {
			return nil, errorf(400, "InvalidFleetId.Malformed", "Invalid id: \"%s\" (expecting \"fleet-...\")", id)
		}
		if f, ok := e.world.fleets[id]; !ok || e.fleetLagging(f) {
			return nil, errorf(400, "InvalidFleetId.NotFound", "The fleet ID '%s' does not exist", id)
		}
	}
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	filters := parseFilters(r.params)
	var matched []xmlFleetData
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		f := e.world.fleets[id]
		tags := e.visibleTags(f.id, f.tags)
		ok, err := matchFilters(filters, fleetFields, tags)
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, xmlFleet(f, tags))
		}
	}
	page, next, err := paginate(matched, r.params, 0, 1, maxDescribeFleets)
	if err != nil {
		return nil, err
	}
	return &describeFleetsResponse{Fleets: page, NextToken: next}, nil
}

// fleetFields are DescribeFleets' filters for an instant fleet.
func fleetFields(name string) ([]string, bool) {
	switch name {
	case "fleet-state":
		return []string{fleetStateActive}, true
	case "type":
		return []string{fleetTypeInstant}, true
	case "activity-status":
		return []string{fleetActivityFulfilled}, true
	}
	return nil, false
}

// xmlFleet renders a fleet with the tags a Describe shows now.
func xmlFleet(f *fleet, tags map[string]string) xmlFleetData {
	x := xmlFleetData{
		ActivityStatus: fleetActivityFulfilled, ClientToken: f.clientToken, CreateTime: awsTime(f.created), FleetID: f.id, FleetState: fleetStateActive,
		LaunchTemplateConfigs: f.configs, TargetCapacitySpecification: f.target, Type: fleetTypeInstant,
		Tags: xmlTags(tags), Errors: f.errors, Instances: f.instances,
	}
	for _, fi := range f.instances {
		n := float64(len(fi.InstanceIDs))
		x.FulfilledCapacity += n
		if fi.Lifecycle == CapacityTypeOnDemand {
			x.FulfilledOnDemandCapacity += n
		}
	}
	return x
}

// fleetLagging reports that a new fleet is not visible to DescribeFleets
// yet, and counts it; callers hold e.mu.
func (e *Emulator) fleetLagging(f *fleet) bool {
	if e.now().Before(f.visibleAt) {
		e.hostile.note(EventFleetLag)
		return true
	}
	return false
}
