package emulator

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/karpless/karpless/shared/core/catalog"
)

type xmlFleetLTSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version,omitempty"`
}

type xmlFleetOverrides struct {
	InstanceType     string `xml:"instanceType,omitempty"`
	MaxPrice         string `xml:"maxPrice,omitempty"`
	SubnetID         string `xml:"subnetId,omitempty"`
	AvailabilityZone string `xml:"availabilityZone,omitempty"`
	WeightedCapacity string `xml:"weightedCapacity,omitempty"`
	Priority         string `xml:"priority,omitempty"`
	ImageID          string `xml:"imageId,omitempty"`
}

type xmlLTAndOverrides struct {
	LaunchTemplateSpecification xmlFleetLTSpec    `xml:"launchTemplateSpecification"`
	Overrides                   xmlFleetOverrides `xml:"overrides"`
}

type xmlFleetError struct {
	LaunchTemplateAndOverrides xmlLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string            `xml:"lifecycle"`
	ErrorCode                  string            `xml:"errorCode"`
	ErrorMessage               string            `xml:"errorMessage"`
}

type xmlFleetInstance struct {
	LaunchTemplateAndOverrides xmlLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string            `xml:"lifecycle"`
	InstanceIDs                []string          `xml:"instanceIds>item"`
	InstanceType               string            `xml:"instanceType"`
	Platform                   string            `xml:"platform,omitempty"`
}

// xmlFleetLTConfig is a LaunchTemplateConfigs item as DescribeFleets echoes it.
type xmlFleetLTConfig struct {
	LaunchTemplateSpecification xmlFleetLTSpec      `xml:"launchTemplateSpecification"`
	Overrides                   []xmlFleetOverrides `xml:"overrides>item"`
}

// xmlTargetCapacity is a fleet's TargetCapacitySpecification.
type xmlTargetCapacity struct {
	TotalTargetCapacity       int    `xml:"totalTargetCapacity"`
	OnDemandTargetCapacity    int    `xml:"onDemandTargetCapacity"`
	SpotTargetCapacity        int    `xml:"spotTargetCapacity"`
	DefaultTargetCapacityType string `xml:"defaultTargetCapacityType"`
}

type createFleetResponse struct {
	ec2Meta
	FleetID   string             `xml:"fleetId"`
	Errors    []xmlFleetError    `xml:"errorSet>item"`
	Instances []xmlFleetInstance `xml:"fleetInstanceSet>item"`
}

// pool is one launch template override: an instance type in a subnet.
type pool struct {
	index    int
	lt       *launchTemplate
	spec     xmlFleetLTSpec
	echo     xmlFleetOverrides
	typeName string
	itype    *catalog.InstanceType
	sub      *subnet
	zone     string
	imageID  string
	priority float64
	hasPrio  bool
	maxPrice float64
	failed   map[string]bool // capacity types this pool failed for
	// profile is the instance profile (name or ARN) the launch asks for.
	profile string
	// fleet marks CreateFleet pools, which random fleet errors hit once
	// per capacity type (rolled).
	fleet  bool
	rolled map[string]bool
	// placement is the placement group the launch asks for (ec2_placement.go).
	placement placementRequest
	// reservation is the capacity reservation the launch asks for
	// (ec2_reservations.go); blockFleet marks a fleet whose
	// DefaultTargetCapacityType is capacity-block.
	reservation reservationRequest
	blockFleet  bool
}

// createFleet emulates CreateFleet of type instant.
func (e *Emulator) createFleet(r *request) (any, *apiError) {
	p := r.params
	if t := p.Get("Type"); t != "instant" {
		return nil, errorf(400, "InvalidParameterValue", "Fleet type %q is not emulated; only instant fleets are", t)
	}
	total, err := strconv.Atoi(p.Get("TargetCapacitySpecification.TotalTargetCapacity"))
	if err != nil || total < 1 {
		return nil, errorf(400, "InvalidTargetCapacitySpecification", "TotalTargetCapacity must be a positive integer")
	}
	defType := p.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	// A Capacity Block fleet launches on-demand instances into the blocks
	// its launch templates target; DescribeFleets echoes the type asked for.
	askedType, blockFleet := defType, defType == marketBlock
	switch defType {
	case CapacityTypeSpot, CapacityTypeOnDemand:
	case marketBlock:
		defType = CapacityTypeOnDemand
	case "reserved-capacity":
		return nil, errorf(400, "InvalidParameterValue", "DefaultTargetCapacityType %s is not emulated", defType)
	default:
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter DefaultTargetCapacityType")
	}
	token := p.Get("ClientToken")
	if len(token) > 64 {
		return nil, errorf(400, "InvalidParameterValue", "ClientToken must be at most 64 ASCII characters")
	}
	if token != "" {
		if prev, ok := e.world.tokens["CreateFleet/"+token]; ok {
			if prev.paramsKey != paramsKey(p) {
				return nil, errorf(400, "IdempotentParameterMismatch", "The client token %s was already used with different request parameters.", token)
			}
			cp := *prev.response.(*createFleetResponse)
			return &cp, nil
		}
	}
	specs := tagSpecs(p, "TagSpecification")
	for rt, tags := range specs {
		switch rt {
		case "instance", "volume", "fleet", "network-interface":
		default:
			return nil, errorf(400, "InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		if err := checkTagKeys(tags); err != nil {
			return nil, err
		}
	}
	configs := members(p, "LaunchTemplateConfigs")
	if len(configs) == 0 {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter LaunchTemplateConfigs")
	}
	var pools []*pool
	var echoed []xmlFleetLTConfig
	for _, c := range configs {
		lt, spec, err := e.resolveFleetLT(p, c+".LaunchTemplateSpecification")
		if err != nil {
			return nil, err
		}
		echoed = append(echoed, xmlFleetLTConfig{LaunchTemplateSpecification: spec})
		overrides := members(p, c+".Overrides")
		if len(overrides) == 0 {
			overrides = []string{""}
		}
		for _, o := range overrides {
			get := func(k string) string {
				if o == "" {
					return ""
				}
				return p.Get(o + "." + k)
			}
			pl := &pool{index: len(pools), lt: lt, spec: spec, failed: map[string]bool{}, profile: lt.InstanceProfile, fleet: true, rolled: map[string]bool{},
				reservation: reservationParams(nil, "", lt), blockFleet: blockFleet}
			pl.echo = xmlFleetOverrides{
				InstanceType: get("InstanceType"), MaxPrice: get("MaxPrice"), SubnetID: get("SubnetId"),
				AvailabilityZone: get("AvailabilityZone"), WeightedCapacity: get("WeightedCapacity"),
				Priority: get("Priority"), ImageID: get("ImageId"),
			}
			if o != "" {
				last := &echoed[len(echoed)-1]
				last.Overrides = append(last.Overrides, pl.echo)
			}
			pl.typeName = firstNonEmpty(pl.echo.InstanceType, lt.InstanceType)
			if o != "" {
				pl.placement = placementParams(p, o+".", lt)
			} else {
				pl.placement = placementParams(nil, "", lt)
			}
			if err := checkTenancy(pl.placement.tenancy); err != nil {
				return nil, err
			}
			pl.itype, _ = e.cfg.Catalog.Get(pl.typeName)
			pl.imageID = firstNonEmpty(pl.echo.ImageID, lt.ImageID)
			if pl.echo.SubnetID != "" {
				for _, s := range e.world.subnets {
					if s.ID == pl.echo.SubnetID {
						pl.sub = s
					}
				}
				if pl.sub == nil {
					return nil, errorf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", pl.echo.SubnetID)
				}
				pl.zone = pl.sub.Zone
				if pl.echo.AvailabilityZone != "" && pl.echo.AvailabilityZone != pl.zone {
					return nil, errorf(400, "InvalidParameterValue", "Subnet %s is in %s, not %s", pl.sub.ID, pl.zone, pl.echo.AvailabilityZone)
				}
			} else {
				pl.zone = pl.echo.AvailabilityZone
				pl.sub = e.roomiestSubnet(pl.zone)
			}
			if pl.echo.Priority != "" {
				v, err := strconv.ParseFloat(pl.echo.Priority, 64)
				if err != nil {
					return nil, errorf(400, "InvalidParameterValue", "Invalid Priority %q", pl.echo.Priority)
				}
				pl.priority, pl.hasPrio = v, true
			}
			if pl.echo.MaxPrice != "" {
				v, err := strconv.ParseFloat(pl.echo.MaxPrice, 64)
				if err != nil {
					return nil, errorf(400, "InvalidParameterValue", "Invalid MaxPrice %q", pl.echo.MaxPrice)
				}
				pl.maxPrice = v
			}
			pools = append(pools, pl)
		}
	}
	if err := dryRun(p); err != nil {
		return nil, err
	}

	// Split the target by capacity type.
	want := map[string]int{}
	od, _ := strconv.Atoi(p.Get("TargetCapacitySpecification.OnDemandTargetCapacity"))
	sp, _ := strconv.Atoi(p.Get("TargetCapacitySpecification.SpotTargetCapacity"))
	want[CapacityTypeOnDemand], want[CapacityTypeSpot] = od, sp
	if rest := total - od - sp; rest > 0 {
		want[defType] += rest
	}
	now := e.now()
	resp := &createFleetResponse{FleetID: "fleet-" + e.uuid()}
	reservation := e.newID("r")
	errored := map[[2]string]bool{}
	launched := map[[2]string]*xmlFleetInstance{}
	var order [][2]string
	for _, ct := range []string{defType, other(defType)} {
		for n := 0; n < want[ct]; n++ {
			for {
				pl := e.choosePool(pools, ct, p, now)
				if pl == nil {
					break
				}
				code, msg := e.poolError(pl, ct, now)
				if code != "" {
					pl.failed[ct] = true
					key := [2]string{strconv.Itoa(pl.index), ct + "/" + code}
					if !errored[key] {
						errored[key] = true
						resp.Errors = append(resp.Errors, xmlFleetError{
							LaunchTemplateAndOverrides: xmlLTAndOverrides{pl.spec, pl.echo}, Lifecycle: ct, ErrorCode: code, ErrorMessage: msg,
						})
						r.call.FleetErrors = append(r.call.FleetErrors, fmt.Sprintf("%s:%s:%s:%s", code, ct, pl.typeName, pl.zone))
					}
					continue
				}
				inst := e.launch(launchSpec{
					lt: pl.lt, itype: pl.typeName, sub: pl.sub, imageID: pl.imageID, capacityType: ct,
					fleetID: resp.FleetID, reservation: reservation, token: token,
					tags: specs["instance"], volumeTags: specs["volume"], now: now,
				})
				e.place(inst, pl.placement)
				e.reserve(inst, pl.reservation, now)
				key := [2]string{strconv.Itoa(pl.index), ct}
				fi := launched[key]
				if fi == nil {
					fi = &xmlFleetInstance{LaunchTemplateAndOverrides: xmlLTAndOverrides{pl.spec, pl.echo}, Lifecycle: ct, InstanceType: pl.typeName}
					launched[key] = fi
					order = append(order, key)
				}
				fi.InstanceIDs = append(fi.InstanceIDs, inst.ID)
				break
			}
		}
	}
	for _, k := range order {
		resp.Instances = append(resp.Instances, *launched[k])
	}
	e.world.fleets[resp.FleetID] = &fleet{
		id: resp.FleetID, tags: cloneTags(specs["fleet"]), clientToken: token, created: now,
		target:  xmlTargetCapacity{TotalTargetCapacity: total, OnDemandTargetCapacity: od, SpotTargetCapacity: sp, DefaultTargetCapacityType: askedType},
		configs: echoed, instances: resp.Instances, errors: resp.Errors,
		visibleAt: now.Add(e.hostile.upTo(e.hostile.FleetLagMax)),
	}
	if token != "" {
		cp := *resp
		e.world.tokens["CreateFleet/"+token] = &idempotency{paramsKey: paramsKey(p), response: &cp}
	}
	return resp, nil
}

func other(ct string) string {
	if ct == CapacityTypeSpot {
		return CapacityTypeOnDemand
	}
	return CapacityTypeSpot
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// uuid returns a UUID-shaped id; callers hold e.mu.
func (e *Emulator) uuid() string {
	s := e.hexID("uuid", 32)
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// resolveFleetLT finds the launch template of a LaunchTemplateSpecification.
func (e *Emulator) resolveFleetLT(p url.Values, prefix string) (*launchTemplate, xmlFleetLTSpec, *apiError) {
	id, name, version := p.Get(prefix+".LaunchTemplateId"), p.Get(prefix+".LaunchTemplateName"), p.Get(prefix+".Version")
	var lt *launchTemplate
	switch {
	case id != "":
		if lt = e.ltByID(id); lt == nil {
			return nil, xmlFleetLTSpec{}, errorf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	case name != "":
		// A template created a moment ago may not be found by name yet.
		if lt = e.ltByName(name); lt == nil || e.ltLagging(lt) {
			return nil, xmlFleetLTSpec{}, errorf(400, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
	default:
		return nil, xmlFleetLTSpec{}, errorf(400, "MissingParameter", "The request must contain the parameter LaunchTemplateName or LaunchTemplateId")
	}
	switch version {
	case "", "$Latest", "$Default", "1":
	default:
		return nil, xmlFleetLTSpec{}, errorf(400, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s", version, lt.ID)
	}
	return lt, xmlFleetLTSpec{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, Version: "1"}, nil
}

// roomiestSubnet is the subnet of a zone with the most free addresses.
func (e *Emulator) roomiestSubnet(zone string) *subnet {
	var best *subnet
	for _, s := range e.world.subnets {
		if s.Zone == zone && (best == nil || s.AvailableIPs > best.AvailableIPs) {
			best = s
		}
	}
	return best
}

// choosePool picks the next pool to try for a capacity type, following the
// request's allocation strategy; nil when every pool failed.
func (e *Emulator) choosePool(pools []*pool, ct string, p url.Values, now time.Time) *pool {
	var cand []*pool
	anyPrio := false
	for _, pl := range pools {
		if !pl.failed[ct] {
			cand = append(cand, pl)
		}
		anyPrio = anyPrio || pl.hasPrio
	}
	if len(cand) == 0 {
		return nil
	}
	price := func(pl *pool) float64 {
		if pl.itype == nil {
			return 1e9
		}
		if ct == CapacityTypeSpot {
			if sp := e.spotPrice(pl.itype, pl.zone, now); sp > 0 {
				return sp
			}
			return 1e9
		}
		if pl.itype.OnDemandPrice > 0 {
			return pl.itype.OnDemandPrice
		}
		return 1e9
	}
	prio := func(pl *pool) float64 {
		if pl.hasPrio {
			return pl.priority
		}
		return 1e9
	}
	capacity := func(pl *pool) float64 { return unitHash("capacity", pl.typeName, pl.zone) }
	by := func(keys ...func(*pool) float64) {
		sort.SliceStable(cand, func(i, j int) bool {
			for _, k := range keys {
				a, b := k(cand[i]), k(cand[j])
				if a != b {
					return a < b
				}
			}
			return cand[i].index < cand[j].index
		})
	}
	neg := func(f func(*pool) float64) func(*pool) float64 { return func(pl *pool) float64 { return -f(pl) } }
	if ct == CapacityTypeOnDemand {
		switch p.Get("OnDemandOptions.AllocationStrategy") {
		case "prioritized":
			by(prio, price)
		default: // lowest-price: by the priority Karpenter sets to the price, else the price
			if anyPrio {
				by(prio, price)
			} else {
				by(price)
			}
		}
		return cand[0]
	}
	switch p.Get("SpotOptions.AllocationStrategy") {
	case "price-capacity-optimized":
		// The cheapest few pools, then the deepest of them.
		by(price)
		k := min(3, len(cand))
		top := cand[:k]
		sort.SliceStable(top, func(i, j int) bool { return capacity(top[i]) > capacity(top[j]) })
		return top[0]
	case "capacity-optimized":
		by(neg(capacity))
	case "capacity-optimized-prioritized":
		by(prio, neg(capacity))
	default: // lowest-price, diversified
		by(price)
	}
	return cand[0]
}

// poolError says why a pool cannot launch one more instance now; callers
// hold e.mu. The order is EC2's as far as it shows: the request's own
// validity, then the account (IAM, spot role and markets), then capacity.
func (e *Emulator) poolError(pl *pool, ct string, now time.Time) (code, msg string) {
	if code, msg := e.poolInvalid(pl, ct, now); code != "" {
		return code, msg
	}
	if code, msg := e.placementError(pl); code != "" {
		return code, msg
	}
	if code, msg := e.reservationError(pl, ct, now); code != "" {
		return code, msg
	}
	if ct == CapacityTypeSpot {
		if code, msg := e.spotUnavailable(pl, now); code != "" {
			return code, msg
		}
	}
	if code, msg, ok := e.matchFleet(ct, pl.typeName, pl.zone); ok {
		return code, msg
	}
	if pl.fleet && !pl.rolled[ct] {
		pl.rolled[ct] = true
		if code, ok := e.randomFleetError(ct); ok {
			if code == "InsufficientFreeAddressesInSubnet" {
				return code, noAddressesMessage(pl.sub.ID)
			}
			return code, fleetErrorMessage(code, ct, pl.typeName, pl.zone)
		}
	}
	if pl.sub.AvailableIPs <= 0 {
		return "InsufficientFreeAddressesInSubnet", noAddressesMessage(pl.sub.ID)
	}
	return "", ""
}

// poolInvalid checks what the request names: type, subnet, image, offering,
// instance profile, template tags. Callers hold e.mu.
func (e *Emulator) poolInvalid(pl *pool, ct string, now time.Time) (code, msg string) {
	if pl.itype == nil {
		return "InvalidParameterValue", fmt.Sprintf("The instance type '%s' does not exist", pl.typeName)
	}
	if pl.sub == nil {
		return "InvalidParameterValue", fmt.Sprintf("No subnet in availability zone '%s'", pl.zone)
	}
	im := e.image(pl.imageID)
	if im == nil {
		return "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", pl.imageID)
	}
	if (im.Arch == "arm64") != (pl.itype.Arch == "arm64") {
		return "InvalidParameterValue", fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI.", archName(pl.itype.Arch), im.Arch)
	}
	if e.unoffered(pl.typeName, pl.zone) {
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s). Please retry your request by not specifying an Availability Zone or choosing another one.", pl.typeName, pl.zone)
	}
	if pl.profile != "" {
		if code, msg := e.profileError(pl.profile, now); code != "" {
			return code, msg
		}
	}
	if ct == CapacityTypeOnDemand {
		if _, ok := pl.lt.TagSpecs["spot-instances-request"]; ok {
			return "InvalidParameterValue", "You cannot specify tags for Spot instances requests if there are no Spot instances requests being created by the request."
		}
	}
	return "", ""
}

// spotUnavailable says why a pool cannot launch spot at all: no spot
// service-linked role, no spot market, a max price under the market.
// Callers hold e.mu.
func (e *Emulator) spotUnavailable(pl *pool, now time.Time) (code, msg string) {
	if e.hostile.NoSpotServiceLinkedRole {
		e.hostile.note(EventNoSpotSLR)
		return "AuthFailure.ServiceLinkedRoleCreationNotPermitted", "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances."
	}
	if e.noSpotMarket(pl.typeName, pl.zone) {
		e.hostile.note(EventNoSpotMarket)
		return "Unsupported", "The requested configuration is currently not supported. Please check the documentation for supported configurations."
	}
	sp := e.spotPrice(pl.itype, pl.zone, now)
	if sp == 0 {
		return "Unsupported", fmt.Sprintf("The instance type %s is not supported for Spot instances.", pl.typeName)
	}
	if pl.maxPrice > 0 && pl.maxPrice < sp {
		return "SpotMaxPriceTooLow", fmt.Sprintf("Your Spot request price of %g is lower than the minimum required Spot request fulfillment price of %g.", pl.maxPrice, sp)
	}
	return "", ""
}

func noAddressesMessage(subnetID string) string {
	return fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", subnetID)
}

func archName(a string) string {
	if a == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

// SetUnoffered replaces Config.Unoffered (nil restores the default).
func (e *Emulator) SetUnoffered(f func(instanceType, zone string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cfg.Unoffered = f
}

// unoffered reports that a type is not offered in a zone; callers hold e.mu.
func (e *Emulator) unoffered(instanceType, zone string) bool {
	if e.cfg.Unoffered != nil {
		return e.cfg.Unoffered(instanceType, zone)
	}
	if len(e.cfg.Zones) < 3 || zone != e.cfg.Zones[2].Name {
		return false
	}
	return unitHash("offering", instanceType) < 0.08
}

// launchSpec is what one new instance is made of.
type launchSpec struct {
	lt                   *launchTemplate
	itype                string
	sub                  *subnet
	imageID              string
	capacityType         string
	fleetID, reservation string
	token                string
	tags, volumeTags     map[string]string
	securityGroups       []string
	userData             string
	instanceProfile      string
	now                  time.Time
}

// launch creates a pending instance; callers hold e.mu and checked capacity.
func (e *Emulator) launch(s launchSpec) *instance {
	ip, _ := e.allocateIP(s.sub)
	i := &instance{subnet: s.sub, lt: s.lt}
	i.Instance = Instance{
		ID: e.newID("i"), InstanceType: s.itype, Zone: s.sub.Zone, ZoneID: s.sub.ZoneID, SubnetID: s.sub.ID,
		VPCID: s.sub.VPCID, ImageID: s.imageID, CapacityType: s.capacityType, State: StatePending,
		Tags: map[string]string{}, VolumeTags: map[string]string{}, FleetID: s.fleetID, ReservationID: s.reservation,
		ClientToken: s.token, PrivateIP: ip.String(), PrivateDNSName: e.dnsName(ip),
		LaunchTime: s.now, StateChanged: s.now, SecurityGroupIDs: s.securityGroups, UserData: s.userData,
	}
	i.visibleAt = s.now.Add(e.cfg.DescribeLag + e.hostile.upTo(e.hostile.DescribeLagMax))
	profile := s.instanceProfile
	if s.lt != nil {
		i.LaunchTemplateID, i.LaunchTemplateName = s.lt.ID, s.lt.Name
		for k, v := range s.lt.TagSpecs["instance"] {
			i.Tags[k] = v
		}
		for k, v := range s.lt.TagSpecs["volume"] {
			i.VolumeTags[k] = v
		}
		if len(i.SecurityGroupIDs) == 0 {
			i.SecurityGroupIDs = append([]string(nil), s.lt.SecurityGroupIDs...)
		}
		if i.UserData == "" {
			i.UserData = s.lt.UserData
		}
		if profile == "" {
			profile = s.lt.InstanceProfile
		}
		i.Tags["aws:ec2launchtemplate:id"] = s.lt.ID
		i.Tags["aws:ec2launchtemplate:version"] = "1"
	}
	for k, v := range s.tags {
		i.Tags[k] = v
	}
	for k, v := range s.volumeTags {
		i.VolumeTags[k] = v
	}
	if s.fleetID != "" {
		i.Tags["aws:ec2:fleet-id"] = s.fleetID
	}
	if len(i.SecurityGroupIDs) == 0 {
		for _, g := range e.world.sgs {
			if g.Name == "default" {
				i.SecurityGroupIDs = []string{g.ID}
			}
		}
	}
	if prof := e.profileByNameOrARN(profile); prof != nil {
		i.InstanceProfileARN = prof.arn()
	}
	if s.capacityType == CapacityTypeSpot {
		i.SpotRequestID = "sir-" + e.hexID("sir", 8)
	}
	if im := e.image(s.imageID); im != nil {
		i.family = im.Family
	}
	i.boot = parseUserData(i.UserData, i.family)
	if i.family == "" || i.family == "Custom" {
		i.family = i.boot.Family
	}
	e.world.instances = append(e.world.instances, i)
	e.world.instByID[i.ID] = i
	e.log.Info("instance launched", "instance", i.ID, "type", i.InstanceType, "zone", i.Zone, "capacityType", i.CapacityType, "ip", i.PrivateIP)
	if e.cfg.StateChangeEvents {
		e.sendStateChange(i, StatePending, s.now)
	}
	return i
}

// --- RunInstances ---

type runInstancesResponse struct {
	ec2Meta
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

// runInstances launches MinCount..MaxCount instances of one type in one
// subnet, all or nothing, as RunInstances does.
func (e *Emulator) runInstances(r *request) (any, *apiError) {
	p := r.params
	token := p.Get("ClientToken")
	if token != "" {
		if prev, ok := e.world.tokens["RunInstances/"+token]; ok {
			if prev.paramsKey != paramsKey(p) {
				return nil, errorf(400, "IdempotentParameterMismatch", "The client token %s was already used with different request parameters.", token)
			}
			cp := *prev.response.(*runInstancesResponse)
			return &cp, nil
		}
	}
	minCount, err1 := strconv.Atoi(p.Get("MinCount"))
	maxCount, err2 := strconv.Atoi(p.Get("MaxCount"))
	if err1 != nil || err2 != nil || minCount < 1 || maxCount < minCount {
		return nil, errorf(400, "InvalidParameterValue", "MinCount and MaxCount must be positive and MinCount <= MaxCount")
	}
	var lt *launchTemplate
	if p.Get("LaunchTemplate.LaunchTemplateId") != "" || p.Get("LaunchTemplate.LaunchTemplateName") != "" {
		var err *apiError
		if lt, _, err = e.resolveFleetLT(p, "LaunchTemplate"); err != nil {
			return nil, err
		}
	}
	pick := func(k string, fromLT func(*launchTemplate) string) string {
		if v := p.Get(k); v != "" {
			return v
		}
		if lt != nil {
			return fromLT(lt)
		}
		return ""
	}
	itype := pick("InstanceType", func(l *launchTemplate) string { return l.InstanceType })
	imageID := pick("ImageId", func(l *launchTemplate) string { return l.ImageID })
	if imageID == "" {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter ImageId")
	}
	im := e.image(imageID)
	if im == nil {
		return nil, errorf(400, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID)
	}
	t, ok := e.cfg.Catalog.Get(itype)
	if !ok {
		return nil, errorf(400, "InvalidParameterValue", "Invalid value '%s' for InstanceType.", itype)
	}
	var sub *subnet
	if id := p.Get("SubnetId"); id != "" {
		for _, s := range e.world.subnets {
			if s.ID == id {
				sub = s
			}
		}
		if sub == nil {
			return nil, errorf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	} else {
		zone := p.Get("Placement.AvailabilityZone")
		if zone == "" {
			zone = e.cfg.Zones[0].Name
		}
		if sub = e.roomiestSubnet(zone); sub == nil {
			return nil, errorf(400, "InvalidParameterValue", "Invalid availability zone: [%s]", zone)
		}
	}
	ct := CapacityTypeOnDemand
	if p.Get("InstanceMarketOptions.MarketType") == "spot" {
		ct = CapacityTypeSpot
	}
	specs := tagSpecs(p, "TagSpecification")
	for _, tags := range specs {
		if err := checkTagKeys(tags); err != nil {
			return nil, err
		}
	}
	if err := dryRun(p); err != nil {
		return nil, err
	}
	now := e.now()
	pl := &pool{lt: lt, typeName: itype, itype: t, sub: sub, zone: sub.Zone, imageID: imageID, failed: map[string]bool{}}
	if lt == nil {
		pl.lt = &launchTemplate{}
	}
	pl.profile = firstNonEmpty(p.Get("IamInstanceProfile.Arn"), p.Get("IamInstanceProfile.Name"), pl.lt.InstanceProfile)
	pl.placement = placementParams(p, "", lt)
	if err := checkTenancy(pl.placement.tenancy); err != nil {
		return nil, err
	}
	pl.reservation = reservationParams(p, "", lt)
	n := 0
	var code, msg string
	for n < maxCount {
		if code, msg = e.poolError(pl, ct, now); code != "" {
			break
		}
		n++
		// Reserve the address now so that the check sees it.
		sub.AvailableIPs--
	}
	sub.AvailableIPs += n
	if n < minCount {
		if code == "" {
			code, msg = "InsufficientInstanceCapacity", "Insufficient capacity."
		}
		return nil, errorf(defaultStatus(code), code, "%s", msg)
	}
	var userData string
	if b := p.Get("UserData"); b != "" {
		d, err := decodeBase64(b)
		if err != nil {
			return nil, errorf(400, "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		userData = d
	}
	resp := &runInstancesResponse{ReservationID: e.newID("r"), OwnerID: e.cfg.AccountID}
	for k := 0; k < n; k++ {
		inst := e.launch(launchSpec{
			lt: lt, itype: itype, sub: sub, imageID: imageID, capacityType: ct, reservation: resp.ReservationID,
			token: token, tags: specs["instance"], volumeTags: specs["volume"], securityGroups: list(p, "SecurityGroupId"),
			userData: userData, instanceProfile: firstNonEmpty(p.Get("IamInstanceProfile.Arn"), p.Get("IamInstanceProfile.Name")), now: now,
		})
		e.place(inst, pl.placement)
		e.reserve(inst, pl.reservation, now)
		x := e.xmlInstance(inst)
		x.AMILaunchIndex = k
		resp.Instances = append(resp.Instances, x)
	}
	if token != "" {
		cp := *resp
		e.world.tokens["RunInstances/"+token] = &idempotency{paramsKey: paramsKey(p), response: &cp}
	}
	return resp, nil
}

func decodeBase64(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	return string(b), err
}
