package emulator

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ec2Handlers are the emulated EC2 actions.
var ec2Handlers = map[string]handlerFunc{}

func init() {
	for name, h := range map[string]handlerFunc{
		"CreateFleet":                   (*Emulator).createFleet,
		"RunInstances":                  (*Emulator).runInstances,
		"DescribeInstances":             (*Emulator).describeInstances,
		"DescribeInstanceStatus":        (*Emulator).describeInstanceStatus,
		"TerminateInstances":            (*Emulator).terminateInstances,
		"CreateTags":                    (*Emulator).createTags,
		"DeleteTags":                    (*Emulator).deleteTags,
		"CreateLaunchTemplate":          (*Emulator).createLaunchTemplate,
		"DescribeLaunchTemplates":       (*Emulator).describeLaunchTemplates,
		"DeleteLaunchTemplate":          (*Emulator).deleteLaunchTemplate,
		"DescribeSubnets":               (*Emulator).describeSubnets,
		"DescribeSecurityGroups":        (*Emulator).describeSecurityGroups,
		"DescribeImages":                (*Emulator).describeImages,
		"DescribeAvailabilityZones":     (*Emulator).describeAvailabilityZones,
		"DescribeInstanceTypes":         (*Emulator).describeInstanceTypes,
		"DescribeInstanceTypeOfferings": (*Emulator).describeInstanceTypeOfferings,
		"DescribeSpotPriceHistory":      (*Emulator).describeSpotPriceHistory,
		"DescribeFleets":                (*Emulator).describeFleets,
	} {
		ec2Handlers[name] = h
	}
}

// --- instances ---

type xmlState struct {
	Code int32  `xml:"code"`
	Name string `xml:"name"`
}

func stateOf(s string) xmlState { return xmlState{Code: stateCodes[s], Name: s} }

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName,omitempty"`
}

type xmlInstance struct {
	InstanceID     string   `xml:"instanceId"`
	ImageID        string   `xml:"imageId"`
	State          xmlState `xml:"instanceState"`
	PrivateDNSName string   `xml:"privateDnsName"`
	DNSName        string   `xml:"dnsName"`
	Reason         string   `xml:"reason"`
	AMILaunchIndex int      `xml:"amiLaunchIndex"`
	InstanceType   string   `xml:"instanceType"`
	LaunchTime     string   `xml:"launchTime"`
	Placement      struct {
		AvailabilityZone   string `xml:"availabilityZone"`
		AvailabilityZoneID string `xml:"availabilityZoneId"`
		Tenancy            string `xml:"tenancy"`
		GroupName          string `xml:"groupName,omitempty"`
		GroupID            string `xml:"groupId,omitempty"`
		PartitionNumber    int32  `xml:"partitionNumber,omitempty"`
	} `xml:"placement"`
	SubnetID         string     `xml:"subnetId,omitempty"`
	VPCID            string     `xml:"vpcId,omitempty"`
	PrivateIPAddress string     `xml:"privateIpAddress,omitempty"`
	SourceDestCheck  bool       `xml:"sourceDestCheck"`
	Groups           []xmlGroup `xml:"groupSet>item"`
	StateReason      *struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	} `xml:"stateReason,omitempty"`
	Architecture          string   `xml:"architecture"`
	RootDeviceType        string   `xml:"rootDeviceType"`
	RootDeviceName        string   `xml:"rootDeviceName"`
	InstanceLifecycle     string   `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string   `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string   `xml:"virtualizationType"`
	ClientToken           string   `xml:"clientToken,omitempty"`
	Tags                  []xmlTag `xml:"tagSet>item"`
	Hypervisor            string   `xml:"hypervisor"`
	IAMInstanceProfile    *struct {
		ARN string `xml:"arn"`
		ID  string `xml:"id"`
	} `xml:"iamInstanceProfile,omitempty"`
	EBSOptimized                     bool                        `xml:"ebsOptimized"`
	ENASupport                       bool                        `xml:"enaSupport"`
	Platform                         string                      `xml:"platform,omitempty"`
	PlatformDetails                  string                      `xml:"platformDetails"`
	UsageOperation                   string                      `xml:"usageOperation"`
	CapacityReservationID            string                      `xml:"capacityReservationId,omitempty"`
	CapacityReservationSpecification *xmlCapacityReservationSpec `xml:"capacityReservationSpecification,omitempty"`
}

// platformOf is what EC2 reports of an image family: platform "windows"
// (blank otherwise), its platformDetails and the usageOperation billing
// code.
func platformOf(family string) (platform, details, usage string) {
	if strings.HasPrefix(family, "Windows") {
		return "windows", "Windows", "RunInstances:0002"
	}
	return "", "Linux/UNIX", "RunInstances"
}

func (e *Emulator) xmlInstance(i *instance) xmlInstance {
	x := xmlInstance{
		InstanceID: i.ID, ImageID: i.ImageID, State: stateOf(i.State), InstanceType: i.InstanceType,
		LaunchTime: awsTime(i.LaunchTime), SubnetID: i.SubnetID, VPCID: i.VPCID, PrivateIPAddress: i.PrivateIP,
		PrivateDNSName: i.PrivateDNSName, SourceDestCheck: true, Architecture: archOf(e, i),
		RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm", ClientToken: i.ClientToken,
		Tags: xmlTags(i.Tags), Hypervisor: "xen", EBSOptimized: true, ENASupport: true,
		PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances",
	}
	x.Placement.AvailabilityZone, x.Placement.AvailabilityZoneID, x.Placement.Tenancy = i.Zone, i.ZoneID, tenancyOf(i)
	x.Platform, x.PlatformDetails, x.UsageOperation = platformOf(i.family)
	if x.Platform == "windows" {
		x.RootDeviceName = "/dev/sda1"
	}
	x.Placement.GroupName, x.Placement.GroupID, x.Placement.PartitionNumber = e.placementXML(i.ID)
	x.CapacityReservationID, x.CapacityReservationSpecification = e.reservationXML(i.ID)
	if i.capacityBlock {
		x.InstanceLifecycle = marketBlock
	}
	if i.State == StateTerminated || i.State == StateShuttingDown {
		x.PrivateDNSName, x.PrivateIPAddress = "", ""
		if i.State == StateTerminated {
			x.SubnetID, x.VPCID = "", ""
		}
	}
	if i.CapacityType == CapacityTypeSpot {
		x.InstanceLifecycle, x.SpotInstanceRequestID = "spot", i.SpotRequestID
	}
	for _, g := range i.SecurityGroupIDs {
		x.Groups = append(x.Groups, xmlGroup{GroupID: g, GroupName: e.sgName(g)})
	}
	if i.StateReason != "" {
		code, msg, _ := strings.Cut(i.StateReason, ": ")
		x.StateReason = &struct {
			Code    string `xml:"code"`
			Message string `xml:"message"`
		}{code, msg}
		x.Reason = fmt.Sprintf("%s (%s)", msg, i.StateChanged.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	if i.InstanceProfileARN != "" {
		x.IAMInstanceProfile = &struct {
			ARN string `xml:"arn"`
			ID  string `xml:"id"`
		}{i.InstanceProfileARN, "AIPA" + strings.ToUpper(e.hexID("aipa", 17))}
	}
	return x
}

func archOf(e *Emulator, i *instance) string {
	if t, ok := e.cfg.Catalog.Get(i.InstanceType); ok && t.Arch == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

func (e *Emulator) sgName(id string) string {
	for _, g := range e.world.sgs {
		if g.ID == id {
			return g.Name
		}
	}
	return ""
}

var instanceIDPattern = regexp.MustCompile(`^i-[0-9a-f]{8}([0-9a-f]{9})?$`)

// lookupInstances resolves InstanceId.N: malformed or unknown ids fail the
// whole call, as in EC2.
func (e *Emulator) lookupInstances(ids []string) ([]*instance, *apiError) {
	var out []*instance
	var missing []string
	for _, id := range ids {
		if !instanceIDPattern.MatchString(id) {
			return nil, errorf(400, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		i, ok := e.world.instByID[id]
		if !ok || i.hidden || e.lagging(i) {
			missing = append(missing, id)
			continue
		}
		out = append(out, i)
	}
	if len(missing) == 1 {
		return nil, errorf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	}
	if len(missing) > 1 {
		return nil, errorf(400, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
	return out, nil
}

func (e *Emulator) instanceFields(i *instance) fields {
	return func(name string) ([]string, bool) {
		switch name {
		case "instance-id":
			return []string{i.ID}, true
		case "instance-state-name":
			return []string{i.State}, true
		case "instance-state-code":
			return []string{strconv.Itoa(int(stateCodes[i.State]))}, true
		case "instance-type":
			return []string{i.InstanceType}, true
		case "availability-zone":
			return []string{i.Zone}, true
		case "platform":
			p, _, _ := platformOf(i.family)
			return []string{p}, true
		case "platform-details":
			_, d, _ := platformOf(i.family)
			return []string{d}, true
		case "placement-group-name", "placement-partition-number":
			return e.placementFilter(i.ID, name), true
		case "tenancy":
			return []string{tenancyOf(i)}, true
		case "subnet-id":
			return []string{i.SubnetID}, true
		case "vpc-id":
			return []string{i.VPCID}, true
		case "image-id":
			return []string{i.ImageID}, true
		case "private-dns-name":
			return []string{i.PrivateDNSName}, true
		case "private-ip-address":
			return []string{i.PrivateIP}, true
		case "instance-lifecycle":
			if i.CapacityType == CapacityTypeSpot {
				return []string{"spot"}, true
			}
			return nil, true
		case "client-token":
			return []string{i.ClientToken}, true
		case "reservation-id":
			return []string{i.ReservationID}, true
		case "spot-instance-request-id":
			return []string{i.SpotRequestID}, true
		case "architecture":
			return []string{archOf(e, i)}, true
		case "instance.group-id":
			return i.SecurityGroupIDs, true
		}
		return nil, false
	}
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	RequesterID   string        `xml:"requesterId,omitempty"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	ec2Meta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeInstances(r *request) (any, *apiError) {
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	ids := list(r.params, "InstanceId")
	if len(ids) > 0 && r.params.Get("MaxResults") != "" {
		return nil, errorf(400, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	candidates := e.world.instances
	if len(ids) > 0 {
		var err *apiError
		if candidates, err = e.lookupInstances(ids); err != nil {
			return nil, err
		}
	}
	filters := parseFilters(r.params)
	var matched []*instance
	for _, i := range candidates {
		if i = e.view(i); i == nil {
			continue
		}
		ok, err := matchFilters(filters, e.instanceFields(i), i.Tags)
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, i)
		}
	}
	page, next, err := paginate(matched, r.params, 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeInstancesResponse{NextToken: next}
	byRes := map[string]int{}
	for _, i := range page {
		k, ok := byRes[i.ReservationID]
		if !ok {
			k = len(resp.Reservations)
			byRes[i.ReservationID] = k
			resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: i.ReservationID, OwnerID: e.cfg.AccountID, RequesterID: requesterOf(i)})
		}
		resp.Reservations[k].Instances = append(resp.Reservations[k].Instances, e.xmlInstance(i))
	}
	return resp, nil
}

// requesterOf is the service that launched an instance for the caller.
func requesterOf(i *instance) string {
	if i.FleetID != "" {
		return "AIDAEC2FLEETREQUESTER"
	}
	return ""
}

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	ec2Meta
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

func (e *Emulator) terminateInstances(r *request) (any, *apiError) {
	ids := list(r.params, "InstanceId")
	if len(ids) == 0 {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	insts, err := e.lookupInstances(ids)
	if err != nil {
		return nil, err
	}
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	now := e.now()
	resp := &terminateInstancesResponse{}
	for _, i := range insts {
		prev, prevReason := i.State, i.StateReason
		switch i.State {
		case StatePending, StateRunning, StateStopping, StateStopped:
			e.setState(i, StateShuttingDown, "Client.UserInitiatedShutdown: User initiated shutdown", now)
			// Describe answers keep the old state for a while.
			if d := e.hostile.upTo(e.hostile.TerminatedStaleMax); d > 0 {
				i.staleUntil, i.staleState, i.staleReason = now.Add(d), prev, prevReason
			}
		}
		resp.Instances = append(resp.Instances, xmlStateChange{InstanceID: i.ID, CurrentState: stateOf(i.State), PreviousState: stateOf(prev)})
	}
	return resp, nil
}

// taggable finds the tag map of a resource id; callers hold e.mu.
func (e *Emulator) taggable(id string) (map[string]string, *apiError) {
	switch {
	case strings.HasPrefix(id, "i-"):
		if i, ok := e.world.instByID[id]; ok && !i.hidden {
			return i.Tags, nil
		}
		return nil, errorf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	case strings.HasPrefix(id, "lt-"):
		for _, lt := range e.world.lts {
			if lt.ID == id {
				return lt.Tags, nil
			}
		}
		return nil, errorf(400, "InvalidLaunchTemplateId.NotFound", "The launch template ID '%s' does not exist", id)
	case strings.HasPrefix(id, "subnet-"):
		for _, s := range e.world.subnets {
			if s.ID == id {
				return s.Tags, nil
			}
		}
		return nil, errorf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	case strings.HasPrefix(id, "sg-"):
		for _, g := range e.world.sgs {
			if g.ID == id {
				return g.Tags, nil
			}
		}
		return nil, errorf(400, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	case strings.HasPrefix(id, "ami-"):
		for _, im := range e.world.images {
			if im.ID == id {
				return im.Tags, nil
			}
		}
		return nil, errorf(400, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	case strings.HasPrefix(id, "fleet-"):
		if f, ok := e.world.fleets[id]; ok {
			return f.tags, nil
		}
		return nil, errorf(400, "InvalidFleetId.NotFound", "The fleet ID '%s' does not exist", id)
	}
	return nil, errorf(400, "InvalidID", "The ID '%s' is not valid", id)
}

func checkTagKeys(tags map[string]string) *apiError {
	for k, v := range tags {
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return errorf(400, "InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
		}
		if len(k) > 128 || len(v) > 256 {
			return errorf(400, "InvalidParameterValue", "Tag key or value too long: %q", k)
		}
	}
	return nil
}

func (e *Emulator) createTags(r *request) (any, *apiError) {
	ids := list(r.params, "ResourceId")
	tags := tagList(r.params, "Tag")
	if len(ids) == 0 {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter ResourceId")
	}
	if len(tags) == 0 {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter Tag")
	}
	if err := checkTagKeys(tags); err != nil {
		return nil, err
	}
	targets := map[string]map[string]string{}
	for _, id := range ids {
		m, err := e.taggable(id)
		if err != nil {
			return nil, err
		}
		n := len(m)
		for k := range tags {
			if _, ok := m[k]; !ok {
				n++
			}
		}
		if n > 50 {
			return nil, errorf(400, "TagLimitExceeded", "The maximum number of Tags for a resource has been reached (%s)", id)
		}
		targets[id] = m
	}
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	for _, id := range ids {
		e.changeTags(id, targets[id], func(m map[string]string) {
			for k, v := range tags {
				m[k] = v
			}
		})
	}
	return &struct {
		ec2Meta
		Return bool `xml:"return"`
	}{Return: true}, nil
}

func (e *Emulator) deleteTags(r *request) (any, *apiError) {
	ids := list(r.params, "ResourceId")
	if len(ids) == 0 {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter ResourceId")
	}
	var del []struct{ k, v string }
	for _, m := range members(r.params, "Tag") {
		del = append(del, struct{ k, v string }{r.params.Get(m + ".Key"), r.params.Get(m + ".Value")})
	}
	targets := map[string]map[string]string{}
	for _, id := range ids {
		m, err := e.taggable(id)
		if err != nil {
			return nil, err
		}
		targets[id] = m
	}
	for _, id := range ids {
		e.changeTags(id, targets[id], func(m map[string]string) {
			for _, d := range del {
				if v, ok := m[d.k]; ok && (d.v == "" || d.v == v) {
					delete(m, d.k)
				}
			}
		})
	}
	return &struct {
		ec2Meta
		Return bool `xml:"return"`
	}{Return: true}, nil
}

// --- instance status ---

type xmlStatusDetail struct {
	Name          string `xml:"name"`
	Status        string `xml:"status"`
	ImpairedSince string `xml:"impairedSince,omitempty"`
}

type xmlStatusSummary struct {
	Status  string            `xml:"status"`
	Details []xmlStatusDetail `xml:"details>item"`
}

type xmlStatusEvent struct {
	ID          string `xml:"instanceEventId"`
	Code        string `xml:"code"`
	Description string `xml:"description"`
	NotBefore   string `xml:"notBefore,omitempty"`
}

type xmlInstanceStatus struct {
	InstanceID         string           `xml:"instanceId"`
	AvailabilityZone   string           `xml:"availabilityZone"`
	AvailabilityZoneID string           `xml:"availabilityZoneId"`
	State              xmlState         `xml:"instanceState"`
	InstanceStatus     xmlStatusSummary `xml:"instanceStatus"`
	SystemStatus       xmlStatusSummary `xml:"systemStatus"`
	Events             []xmlStatusEvent `xml:"eventsSet>item,omitempty"`
}

type describeInstanceStatusResponse struct {
	ec2Meta
	Statuses  []xmlInstanceStatus `xml:"instanceStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeInstanceStatus(r *request) (any, *apiError) {
	ids := list(r.params, "InstanceId")
	candidates := e.world.instances
	if len(ids) > 0 {
		var err *apiError
		if candidates, err = e.lookupInstances(ids); err != nil {
			return nil, err
		}
	}
	all := boolParam(r.params, "IncludeAllInstances")
	filters := parseFilters(r.params)
	var matched []*instance
	for _, i := range candidates {
		if i = e.view(i); i == nil || (!all && i.State != StateRunning) {
			continue
		}
		get := func(name string) ([]string, bool) {
			switch name {
			case "instance-status.status":
				return []string{checkStatus(i, i.health.InstanceImpaired)}, true
			case "instance-status.reachability":
				return []string{reach(i, i.health.InstanceImpaired)}, true
			case "system-status.status":
				return []string{checkStatus(i, i.health.SystemImpaired)}, true
			case "system-status.reachability":
				return []string{reach(i, i.health.SystemImpaired)}, true
			case "event.code":
				var codes []string
				for _, ev := range i.health.Events {
					codes = append(codes, ev.Code)
				}
				return codes, true
			}
			return e.instanceFields(i)(name)
		}
		ok, err := matchFilters(filters, get, nil)
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, i)
		}
	}
	page, next, err := paginate(matched, r.params, 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeInstanceStatusResponse{NextToken: next}
	for _, i := range page {
		resp.Statuses = append(resp.Statuses, statusOf(i))
	}
	return resp, nil
}

// statusOf is an instance's DescribeInstanceStatus item.
func statusOf(i *instance) xmlInstanceStatus {
	check := func(failing bool, since time.Time) xmlStatusSummary {
		d := xmlStatusDetail{Name: "reachability", Status: reach(i, failing)}
		if failing && i.State == StateRunning {
			d.ImpairedSince = since.Format(time.RFC3339Nano)
		}
		return xmlStatusSummary{Status: checkStatus(i, failing), Details: []xmlStatusDetail{d}}
	}
	out := xmlInstanceStatus{
		InstanceID: i.ID, AvailabilityZone: i.Zone, AvailabilityZoneID: i.ZoneID, State: stateOf(i.State),
		InstanceStatus: check(i.health.InstanceImpaired, i.health.instanceSince),
		SystemStatus:   check(i.health.SystemImpaired, i.health.systemSince),
	}
	for k, ev := range i.health.Events {
		x := xmlStatusEvent{ID: i.health.eventIDs[k], Code: ev.Code, Description: "The instance is scheduled for " + strings.ReplaceAll(ev.Code, "-", " ")}
		if !ev.NotBefore.IsZero() {
			x.NotBefore = ev.NotBefore.UTC().Format(time.RFC3339Nano)
		}
		out.Events = append(out.Events, x)
	}
	return out
}

// checkStatus is a status check's summary: EC2 reports not-applicable for
// an instance that is not running.
func checkStatus(i *instance, failing bool) string {
	switch {
	case i.State != StateRunning:
		return "not-applicable"
	case failing:
		return "impaired"
	}
	return "ok"
}

func reach(i *instance, failing bool) string {
	switch {
	case i.State != StateRunning:
		return "not-applicable"
	case failing:
		return "failed"
	}
	return "passed"
}

// --- network ---

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetARN               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VPCID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CIDRBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAZ            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	AssignIPv6OnCreation    bool     `xml:"assignIpv6AddressOnCreation"`
	IPv6Native              bool     `xml:"ipv6Native"`
	Tags                    []xmlTag `xml:"tagSet>item"`
}

type describeSubnetsResponse struct {
	ec2Meta
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeSubnets(r *request) (any, *apiError) {
	ids := list(r.params, "SubnetId")
	filters := parseFilters(r.params)
	var matched []*subnet
	found := map[string]bool{}
	shown := map[string]map[string]string{} // tags as far as they propagated
	for _, s := range e.world.subnets {
		if len(ids) > 0 && !contains(ids, s.ID) {
			continue
		}
		found[s.ID] = true
		get := func(name string) ([]string, bool) {
			switch name {
			case "subnet-id":
				return []string{s.ID}, true
			case "vpc-id":
				return []string{s.VPCID}, true
			case "availability-zone":
				return []string{s.Zone}, true
			case "availability-zone-id":
				return []string{s.ZoneID}, true
			case "cidr-block", "cidr":
				return []string{s.CIDR}, true
			case "state":
				return []string{"available"}, true
			case "default-for-az":
				return []string{"false"}, true
			case "map-public-ip-on-launch":
				return []string{strconv.FormatBool(s.MapPublicIP)}, true
			case "owner-id":
				return []string{e.cfg.AccountID}, true
			}
			return nil, false
		}
		shown[s.ID] = e.visibleTags(s.ID, s.Tags)
		ok, err := matchFilters(filters, get, shown[s.ID])
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, s)
		}
	}
	for _, id := range ids {
		if !found[id] {
			return nil, errorf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	page, next, err := paginate(matched, r.params, 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeSubnetsResponse{NextToken: next}
	for _, s := range page {
		resp.Subnets = append(resp.Subnets, xmlSubnet{
			SubnetID: s.ID, SubnetARN: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", e.cfg.Region, e.cfg.AccountID, s.ID),
			State: "available", VPCID: s.VPCID, OwnerID: e.cfg.AccountID, CIDRBlock: s.CIDR,
			AvailableIPAddressCount: s.AvailableIPs, AvailabilityZone: s.Zone, AvailabilityZoneID: s.ZoneID,
			MapPublicIPOnLaunch: s.MapPublicIP, Tags: xmlTags(shown[s.ID]),
		})
	}
	return resp, nil
}

type xmlSecurityGroup struct {
	GroupID     string   `xml:"groupId"`
	GroupName   string   `xml:"groupName"`
	Description string   `xml:"groupDescription"`
	VPCID       string   `xml:"vpcId"`
	OwnerID     string   `xml:"ownerId"`
	ARN         string   `xml:"securityGroupArn"`
	Tags        []xmlTag `xml:"tagSet>item"`
}

type describeSecurityGroupsResponse struct {
	ec2Meta
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeSecurityGroups(r *request) (any, *apiError) {
	ids, names := list(r.params, "GroupId"), list(r.params, "GroupName")
	filters := parseFilters(r.params)
	var matched []*SecurityGroup
	found := map[string]bool{}
	shown := map[string]map[string]string{} // tags as far as they propagated
	for _, g := range e.world.sgs {
		if (len(ids) > 0 && !contains(ids, g.ID)) || (len(names) > 0 && !contains(names, g.Name)) {
			continue
		}
		found[g.ID], found[g.Name] = true, true
		get := func(name string) ([]string, bool) {
			switch name {
			case "group-id":
				return []string{g.ID}, true
			case "group-name":
				return []string{g.Name}, true
			case "vpc-id":
				return []string{g.VPCID}, true
			case "description":
				return []string{g.Description}, true
			case "owner-id":
				return []string{e.cfg.AccountID}, true
			}
			return nil, false
		}
		shown[g.ID] = e.visibleTags(g.ID, g.Tags)
		ok, err := matchFilters(filters, get, shown[g.ID])
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, g)
		}
	}
	for _, id := range ids {
		if !found[id] {
			return nil, errorf(400, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range names {
		if !found[n] {
			return nil, errorf(400, "InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC", n)
		}
	}
	page, next, err := paginate(matched, r.params, 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeSecurityGroupsResponse{NextToken: next}
	for _, g := range page {
		resp.Groups = append(resp.Groups, xmlSecurityGroup{
			GroupID: g.ID, GroupName: g.Name, Description: g.Description, VPCID: g.VPCID, OwnerID: e.cfg.AccountID,
			ARN: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", e.cfg.Region, e.cfg.AccountID, g.ID), Tags: xmlTags(shown[g.ID]),
		})
	}
	return resp, nil
}

type xmlImage struct {
	ImageID            string   `xml:"imageId"`
	ImageLocation      string   `xml:"imageLocation"`
	ImageState         string   `xml:"imageState"`
	OwnerID            string   `xml:"imageOwnerId"`
	CreationDate       string   `xml:"creationDate"`
	IsPublic           bool     `xml:"isPublic"`
	Architecture       string   `xml:"architecture"`
	ImageType          string   `xml:"imageType"`
	ImageOwnerAlias    string   `xml:"imageOwnerAlias,omitempty"`
	Name               string   `xml:"name"`
	Description        string   `xml:"description"`
	RootDeviceType     string   `xml:"rootDeviceType"`
	RootDeviceName     string   `xml:"rootDeviceName"`
	VirtualizationType string   `xml:"virtualizationType"`
	Hypervisor         string   `xml:"hypervisor"`
	ENASupport         bool     `xml:"enaSupport"`
	Platform           string   `xml:"platform,omitempty"`
	PlatformDetails    string   `xml:"platformDetails"`
	UsageOperation     string   `xml:"usageOperation"`
	DeprecationTime    string   `xml:"deprecationTime,omitempty"`
	Tags               []xmlTag `xml:"tagSet>item"`
}

type describeImagesResponse struct {
	ec2Meta
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeImages(r *request) (any, *apiError) {
	ids, owners := list(r.params, "ImageId"), list(r.params, "Owner")
	includeDeprecated := boolParam(r.params, "IncludeDeprecated")
	filters := parseFilters(r.params)
	now := e.now()
	var matched []*Image
	shown := map[string]map[string]string{} // tags as far as they propagated
	for _, im := range e.world.images {
		if len(ids) > 0 && !contains(ids, im.ID) {
			continue
		}
		if len(owners) > 0 && !ownerMatches(owners, im, e.cfg.AccountID) {
			continue
		}
		deprecated := !im.Deprecation.IsZero() && !now.Before(im.Deprecation)
		// Deprecated images are listed when asked by id, or with IncludeDeprecated.
		if deprecated && !includeDeprecated && len(ids) == 0 {
			continue
		}
		get := func(name string) ([]string, bool) {
			switch name {
			case "image-id":
				return []string{im.ID}, true
			case "name":
				return []string{im.Name}, true
			case "owner-id":
				return []string{im.OwnerID}, true
			case "owner-alias":
				return []string{im.OwnerAlias}, true
			case "architecture":
				return []string{im.Arch}, true
			case "state":
				return []string{im.State}, true
			case "image-type":
				return []string{"machine"}, true
			case "is-public":
				return []string{strconv.FormatBool(im.OwnerID != e.cfg.AccountID)}, true
			case "description":
				return []string{im.Description}, true
			case "platform":
				p, _, _ := platformOf(im.Family)
				return []string{p}, true
			case "platform-details":
				_, d, _ := platformOf(im.Family)
				return []string{d}, true
			case "root-device-type":
				return []string{"ebs"}, true
			case "virtualization-type":
				return []string{"hvm"}, true
			}
			return nil, false
		}
		shown[im.ID] = e.visibleTags(im.ID, im.Tags)
		ok, err := matchFilters(filters, get, shown[im.ID])
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, im)
		}
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "ami-") {
			return nil, errorf(400, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
	}
	page, next, err := paginate(matched, r.params, 0, 1, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeImagesResponse{NextToken: next}
	for _, im := range page {
		x := xmlImage{
			ImageID: im.ID, ImageLocation: im.OwnerAlias + "/" + im.Name, ImageState: im.State, OwnerID: im.OwnerID,
			CreationDate: awsTime(im.CreationDate), IsPublic: im.OwnerID != e.cfg.AccountID, Architecture: im.Arch,
			ImageType: "machine", ImageOwnerAlias: im.OwnerAlias, Name: im.Name, Description: im.Description,
			RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm", Hypervisor: "xen",
			ENASupport: true, PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances", Tags: xmlTags(shown[im.ID]),
		}
		if im.Family == "Bottlerocket" {
			x.RootDeviceName = "/dev/xvda"
		}
		x.Platform, x.PlatformDetails, x.UsageOperation = platformOf(im.Family)
		if x.Platform == "windows" {
			x.RootDeviceName = "/dev/sda1"
		}
		if !im.Deprecation.IsZero() {
			x.DeprecationTime = awsTime(im.Deprecation)
		}
		resp.Images = append(resp.Images, x)
	}
	return resp, nil
}

func ownerMatches(owners []string, im *Image, self string) bool {
	for _, o := range owners {
		switch o {
		case "self":
			if im.OwnerID == self {
				return true
			}
		case "amazon", "aws-marketplace":
			if im.OwnerAlias == o {
				return true
			}
		default:
			if im.OwnerID == o {
				return true
			}
		}
	}
	return false
}

type describeAvailabilityZonesResponse struct {
	ec2Meta
	Zones []struct {
		ZoneName           string `xml:"zoneName"`
		ZoneID             string `xml:"zoneId"`
		ZoneState          string `xml:"zoneState"`
		RegionName         string `xml:"regionName"`
		GroupName          string `xml:"groupName"`
		NetworkBorderGroup string `xml:"networkBorderGroup"`
		OptInStatus        string `xml:"optInStatus"`
		ZoneType           string `xml:"zoneType"`
	} `xml:"availabilityZoneInfo>item"`
}

func (e *Emulator) describeAvailabilityZones(r *request) (any, *apiError) {
	names, ids := list(r.params, "ZoneName"), list(r.params, "ZoneId")
	filters := parseFilters(r.params)
	resp := &describeAvailabilityZonesResponse{}
	for _, z := range e.cfg.Zones {
		if (len(names) > 0 && !contains(names, z.Name)) || (len(ids) > 0 && !contains(ids, z.ID)) {
			continue
		}
		get := func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{z.Name}, true
			case "zone-id":
				return []string{z.ID}, true
			case "region-name":
				return []string{e.cfg.Region}, true
			case "state":
				return []string{"available"}, true
			case "zone-type":
				return []string{"availability-zone"}, true
			case "opt-in-status":
				return []string{"opt-in-not-required"}, true
			case "group-name", "network-border-group":
				return []string{e.cfg.Region}, true
			}
			return nil, false
		}
		ok, err := matchFilters(filters, get, nil)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		resp.Zones = append(resp.Zones, struct {
			ZoneName           string `xml:"zoneName"`
			ZoneID             string `xml:"zoneId"`
			ZoneState          string `xml:"zoneState"`
			RegionName         string `xml:"regionName"`
			GroupName          string `xml:"groupName"`
			NetworkBorderGroup string `xml:"networkBorderGroup"`
			OptInStatus        string `xml:"optInStatus"`
			ZoneType           string `xml:"zoneType"`
		}{z.Name, z.ID, "available", e.cfg.Region, e.cfg.Region, e.cfg.Region, "opt-in-not-required", "availability-zone"})
	}
	for _, n := range names {
		if _, ok := e.zone(n); !ok {
			return nil, errorf(400, "InvalidParameterValue", "Invalid availability zone: [%s]", n)
		}
	}
	return resp, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// paramsKey is a canonical form of a request's parameters without the
// client token, to compare idempotent replays.
func paramsKey(p url.Values) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		if k != "ClientToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strings.Join(p[k], ","))
		b.WriteByte('&')
	}
	return b.String()
}
