package emulator

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// Instance states, as EC2 names them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

var stateCodes = map[string]int32{
	StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48, StateStopping: 64, StateStopped: 80,
}

// Capacity types as EC2 lifecycle values.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// Instance is what the emulator knows of an EC2 instance. Values returned by
// the emulator are copies.
type Instance struct {
	ID           string
	InstanceType string
	Zone         string
	ZoneID       string
	SubnetID     string
	VPCID        string
	ImageID      string
	// CapacityType is spot or on-demand.
	CapacityType string
	// Tenancy is the Placement.Tenancy it was launched with: default
	// (shared hardware) or dedicated.
	Tenancy string
	State   string
	// StateReason explains the last transition (e.g. Client.UserInitiatedShutdown).
	StateReason string
	Tags        map[string]string
	// VolumeTags were requested for the instance's volumes.
	VolumeTags         map[string]string
	LaunchTemplateID   string
	LaunchTemplateName string
	FleetID            string
	ReservationID      string
	SpotRequestID      string
	ClientToken        string
	PrivateIP          string
	PrivateDNSName     string
	SecurityGroupIDs   []string
	InstanceProfileARN string
	// UserData is the decoded user data the instance booted with.
	UserData   string
	LaunchTime time.Time
	// StateChanged is when State last changed.
	StateChanged time.Time
	// NodeName is set once the instance has registered a Node.
	NodeName string
}

// NotTerminated selects instances that still exist or are shutting down.
func NotTerminated(i Instance) bool { return i.State != StateTerminated }

// Running selects running instances.
func Running(i Instance) bool { return i.State == StateRunning }

// WithTag selects instances carrying key (with value, unless value is "*").
func WithTag(key, value string) func(Instance) bool {
	return func(i Instance) bool {
		v, ok := i.Tags[key]
		return ok && (value == "*" || v == value)
	}
}

// ProviderID is the instance's Kubernetes provider ID.
func (i Instance) ProviderID() string { return wellknown.ProviderID(i.Zone, i.ID) }

// instance is the emulator's record; the kube fields are owned by Step.
type instance struct {
	Instance
	subnet     *subnet
	lt         *launchTemplate
	boot       bootConfig
	family     string
	runningAt  time.Time
	terminate  time.Time // scheduled termination (spot interruption), zero if none
	hidden     bool      // terminated long enough ago to vanish from Describe
	nodeState  nodeState
	nodeAt     time.Time // when the Node was registered
	health     instanceHealth
	podCounter uint32
	// conditions are node conditions set by SetNodeCondition, which the
	// fake kubelet keeps on the node instead of its own.
	conditions []corev1.NodeCondition
	// capacityBlock marks an instance launched into a Capacity Block
	// (instanceLifecycle capacity-block).
	capacityBlock bool
	// visibleAt is when Describe* first shows the instance (DescribeLag
	// plus a random part of Hostility.DescribeLagMax, chosen at launch).
	visibleAt time.Time
	// Until staleUntil Describe* still shows staleState and staleReason,
	// the state before TerminateInstances (Hostility.TerminatedStaleMax).
	staleUntil              time.Time
	staleState, staleReason string
}

type nodeState int

const (
	nodeNone nodeState = iota
	nodeRegistered
	nodeReady
	nodeGone
)

func (i *instance) copy() Instance {
	out := i.Instance
	out.Tags = cloneTags(i.Tags)
	out.VolumeTags = cloneTags(i.VolumeTags)
	out.SecurityGroupIDs = append([]string(nil), i.SecurityGroupIDs...)
	return out
}

// Subnet is an emulated VPC subnet.
type Subnet struct {
	ID           string
	Zone         string
	ZoneID       string
	VPCID        string
	CIDR         string
	AvailableIPs int
	MapPublicIP  bool
	Tags         map[string]string
}

type subnet struct {
	Subnet
	prefix netip.Prefix
	used   map[netip.Addr]bool
}

// SecurityGroup is an emulated security group.
type SecurityGroup struct {
	ID          string
	Name        string
	Description string
	VPCID       string
	Tags        map[string]string
}

// Image is an emulated AMI.
type Image struct {
	ID          string
	Name        string
	Description string
	// Arch is x86_64 or arm64 (EC2's names).
	Arch string
	// Family is AL2023, AL2, Bottlerocket or Custom; Variant is standard,
	// nvidia or neuron for the EKS-optimized families.
	Family            string
	Variant           string
	KubernetesVersion string
	// Release is the AMI release (v20240807 for the EKS AMIs, 1.20.0 for
	// Bottlerocket).
	Release      string
	OwnerID      string
	OwnerAlias   string
	CreationDate time.Time
	// Deprecation is when the image is deprecated (zero: never).
	Deprecation time.Time
	State       string
	Tags        map[string]string
}

// LaunchTemplate is an emulated launch template (one version).
type LaunchTemplate struct {
	ID               string
	Name             string
	ImageID          string
	InstanceType     string
	UserData         string // decoded
	SecurityGroupIDs []string
	// InstanceProfile is the name or ARN given in IamInstanceProfile.
	InstanceProfile string
	Tags            map[string]string
	// TagSpecs are the tags the template applies per resource type.
	TagSpecs   map[string]map[string]string
	CreateTime time.Time
	CreatedBy  string
}

type launchTemplate struct {
	LaunchTemplate
	userDataB64 string
	// rootVolumes are the EBS sizes by device name, for ephemeral storage.
	volumes map[string]int64
	// params are the LaunchTemplateData.* request values, kept whole.
	params map[string][]string
	// visibleAt is when DescribeLaunchTemplates, and launches naming the
	// template, first find it (Hostility.LaunchTemplateLagMax).
	visibleAt time.Time
}

// fleet is an instant fleet as DescribeFleets reports it.
type fleet struct {
	id          string
	tags        map[string]string
	clientToken string
	created     time.Time
	target      xmlTargetCapacity
	configs     []xmlFleetLTConfig
	// instances and errors are the CreateFleet answer's.
	instances []xmlFleetInstance
	errors    []xmlFleetError
	// visibleAt is when DescribeFleets first knows the fleet
	// (Hostility.FleetLagMax).
	visibleAt time.Time
}

// idempotency is one ClientToken's remembered call.
type idempotency struct {
	paramsKey string
	response  any
}

type world struct {
	// functions are the Lambda functions Invoke runs (RegisterFunction).
	functions  map[string]FunctionHandler
	vpcID      string
	subnets    []*subnet
	sgs        []*SecurityGroup
	images     []*Image
	lts        []*launchTemplate
	instances  []*instance
	instByID   map[string]*instance
	fleets     map[string]*fleet
	tokens     map[string]*idempotency
	params     map[string]*ssmParam
	queues     map[string]*queue
	clusters   map[string]*eksCluster
	roles      map[string]*iamRole
	profiles   map[string]*iamProfile
	identities map[string]Identity // access key id -> identity
	// policies are customer-managed IAM policies by ARN, rules the
	// EventBridge rules by name (accounts.go).
	policies map[string]*iamPolicy
	rules    map[string]*Rule
	// stacks are CloudFormation stacks by ID (cloudformation.go).
	stacks map[string]*cfnStack
	// tagViews are the resources (by id) whose tag changes are still
	// propagating to Describe answers (Hostility.TagLagMax).
	tagViews map[string]*tagView
	// placement is the placement groups and who is in them (ec2_placement.go).
	placement *placementWorld
	// reservations are the capacity reservations and who is in them
	// (ec2_reservations.go).
	reservations *reservationWorld
	// zonalShifts are ARC's shifts, started in order (arczonalshift.go).
	zonalShifts []*zonalShift
	// release counters for UpdateAMIs
	bottlerocketMinor int
	podIP             uint32
}

func (w *world) init() {
	w.instByID = map[string]*instance{}
	w.fleets = map[string]*fleet{}
	w.tokens = map[string]*idempotency{}
	w.params = map[string]*ssmParam{}
	w.queues = map[string]*queue{}
	w.clusters = map[string]*eksCluster{}
	w.roles = map[string]*iamRole{}
	w.profiles = map[string]*iamProfile{}
	w.identities = map[string]Identity{}
	w.tagViews = map[string]*tagView{}
}

// --- accessors for tests and the CLI ---

// Instances returns copies of the instances match selects (nil = all),
// terminated ones included, in launch order.
func (e *Emulator) Instances(match func(Instance) bool) []Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Instance
	for _, i := range e.world.instances {
		c := i.copy()
		if match == nil || match(c) {
			out = append(out, c)
		}
	}
	return out
}

// Instance returns one instance by id.
func (e *Emulator) Instance(id string) (Instance, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, ok := e.world.instByID[id]
	if !ok {
		return Instance{}, false
	}
	return i.copy(), true
}

// Subnets returns copies of the subnets.
func (e *Emulator) Subnets() []Subnet {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Subnet, 0, len(e.world.subnets))
	for _, s := range e.world.subnets {
		c := s.Subnet
		c.Tags = cloneTags(s.Tags)
		out = append(out, c)
	}
	return out
}

// SecurityGroups returns copies of the security groups.
func (e *Emulator) SecurityGroups() []SecurityGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]SecurityGroup, 0, len(e.world.sgs))
	for _, g := range e.world.sgs {
		c := *g
		c.Tags = cloneTags(g.Tags)
		out = append(out, c)
	}
	return out
}

// Images returns copies of the images.
func (e *Emulator) Images() []Image {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Image, 0, len(e.world.images))
	for _, im := range e.world.images {
		c := *im
		c.Tags = cloneTags(im.Tags)
		out = append(out, c)
	}
	return out
}

// LaunchTemplates returns copies of the launch templates.
func (e *Emulator) LaunchTemplates() []LaunchTemplate {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]LaunchTemplate, 0, len(e.world.lts))
	for _, lt := range e.world.lts {
		c := lt.LaunchTemplate
		c.Tags = cloneTags(lt.Tags)
		c.SecurityGroupIDs = append([]string(nil), lt.SecurityGroupIDs...)
		out = append(out, c)
	}
	return out
}

// AddSubnet adds a subnet in zone with a CIDR (e.g. 10.0.200.0/28 to test
// address exhaustion); it returns its id.
func (e *Emulator) AddSubnet(zone, cidr string, tags map[string]string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	z, ok := e.zone(zone)
	if !ok {
		return "", fmt.Errorf("emulator: unknown zone %q", zone)
	}
	s, err := e.addSubnet(z, cidr, tags)
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// AddSecurityGroup adds a security group and returns its id.
func (e *Emulator) AddSecurityGroup(name string, tags map[string]string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addSG(name, "added by a test", tags).ID
}

// AddImage adds an AMI (ID generated when empty) and returns its id.
func (e *Emulator) AddImage(im Image) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if im.ID == "" {
		im.ID = e.newID("ami")
	}
	if im.State == "" {
		im.State = "available"
	}
	if im.OwnerID == "" {
		im.OwnerID = e.cfg.AccountID
	}
	if im.CreationDate.IsZero() {
		im.CreationDate = e.now()
	}
	if im.Arch == "" {
		im.Arch = "x86_64"
	}
	if im.Family == "" {
		im.Family = "Custom"
	}
	im.Tags = cloneTags(im.Tags)
	e.world.images = append(e.world.images, &im)
	return im.ID
}

// DeprecateImage sets an image's deprecation time.
func (e *Emulator) DeprecateImage(id string, at time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, im := range e.world.images {
		if im.ID == id {
			im.Deprecation = at
			return nil
		}
	}
	return fmt.Errorf("emulator: no image %s", id)
}

func (e *Emulator) zone(name string) (Zone, bool) {
	for _, z := range e.cfg.Zones {
		if z.Name == name || z.ID == name {
			return z, true
		}
	}
	return Zone{}, false
}

func (e *Emulator) addSubnet(z Zone, cidr string, tags map[string]string) (*subnet, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return nil, fmt.Errorf("emulator: bad subnet CIDR %q (IPv4, /28 or larger)", cidr)
	}
	p = p.Masked()
	s := &subnet{
		Subnet: Subnet{
			ID: e.newID("subnet"), Zone: z.Name, ZoneID: z.ID, VPCID: e.world.vpcID, CIDR: p.String(),
			// AWS reserves the first four addresses and the last one.
			AvailableIPs: 1<<(32-p.Bits()) - 5,
			Tags:         cloneTags(tags),
		},
		prefix: p,
		used:   map[netip.Addr]bool{},
	}
	e.world.subnets = append(e.world.subnets, s)
	return s, nil
}

// allocateIP takes a free address of the subnet, chosen by hash so that
// emulators sharing a cluster do not repeat node names; callers hold e.mu.
func (e *Emulator) allocateIP(s *subnet) (netip.Addr, bool) {
	if s.AvailableIPs <= 0 {
		return netip.Addr{}, false
	}
	size := uint32(1) << (32 - s.prefix.Bits())
	base := binary.BigEndian.Uint32(s.prefix.Addr().AsSlice())
	h := e.hash("ip", s.ID, fmt.Sprint(len(s.used)))
	start := binary.LittleEndian.Uint32(h[:4]) % (size - 5)
	for k := uint32(0); k < size-5; k++ {
		off := 4 + (start+k)%(size-5)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+off)
		a := netip.AddrFrom4(b)
		if !s.used[a] {
			s.used[a] = true
			s.AvailableIPs--
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (s *subnet) release(ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !s.used[a] {
		return
	}
	delete(s.used, a)
	s.AvailableIPs++
}

func (e *Emulator) addSG(name, desc string, tags map[string]string) *SecurityGroup {
	g := &SecurityGroup{ID: e.newID("sg"), Name: name, Description: desc, VPCID: e.world.vpcID, Tags: cloneTags(tags)}
	e.world.sgs = append(e.world.sgs, g)
	return g
}

// dnsName is EC2's private DNS name of an address.
func (e *Emulator) dnsName(ip netip.Addr) string {
	domain := e.cfg.Region + ".compute.internal"
	if e.cfg.Region == "us-east-1" {
		domain = "ec2.internal"
	}
	return "ip-" + strings.ReplaceAll(ip.String(), ".", "-") + "." + domain
}

// --- instance lifecycle ---

// setState changes an instance's state; callers hold e.mu.
func (e *Emulator) setState(i *instance, state, reason string, now time.Time) {
	if i.State == state {
		return
	}
	i.State, i.StateReason, i.StateChanged = state, reason, now
	if state == StateRunning {
		i.runningAt = now
	}
	if state == StateTerminated && i.subnet != nil {
		i.subnet.release(i.PrivateIP)
	}
	e.log.Info("instance state", "instance", i.ID, "type", i.InstanceType, "zone", i.Zone, "state", state)
	if e.cfg.StateChangeEvents {
		e.sendStateChange(i, state, now)
	}
}

// advance applies the transitions due at now; callers hold e.mu.
func (e *Emulator) advance(now time.Time) {
	e.advanceReservations(now)
	for _, i := range e.world.instances {
		switch i.State {
		case StatePending:
			if !now.Before(i.LaunchTime.Add(e.cfg.PendingDelay)) {
				e.setState(i, StateRunning, "", now)
			}
		case StateShuttingDown:
			if !now.Before(i.StateChanged.Add(e.cfg.TerminateDelay)) {
				e.setState(i, StateTerminated, i.StateReason, now)
			}
		case StateStopping:
			if !now.Before(i.StateChanged.Add(e.cfg.TerminateDelay)) {
				e.setState(i, StateStopped, i.StateReason, now)
			}
		case StateTerminated:
			if !i.hidden && !now.Before(i.StateChanged.Add(e.cfg.TerminatedRetention)) {
				i.hidden = true
			}
		}
		if !i.terminate.IsZero() && !now.Before(i.terminate) && (i.State == StatePending || i.State == StateRunning) {
			i.terminate = time.Time{}
			e.setState(i, StateShuttingDown, "Server.SpotInstanceTermination: Spot instance termination", now)
		}
	}
	e.expireMessages(now)
}

// TerminateInstance starts terminating an instance as if from outside
// (console, spot reclaim); reason is EC2's state reason code.
func (e *Emulator) TerminateInstance(id, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, ok := e.world.instByID[id]
	if !ok {
		return fmt.Errorf("emulator: no instance %s", id)
	}
	if reason == "" {
		reason = "Client.UserInitiatedShutdown: User initiated shutdown"
	}
	if i.State == StatePending || i.State == StateRunning || i.State == StateStopped || i.State == StateStopping {
		e.setState(i, StateShuttingDown, reason, e.now())
	}
	return nil
}

// SetInstanceState forces an instance into a state (stopping, stopped, ...)
// for tests of the state-change paths.
func (e *Emulator) SetInstanceState(id, state string) error {
	if _, ok := stateCodes[state]; !ok {
		return fmt.Errorf("emulator: unknown state %q", state)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	i, ok := e.world.instByID[id]
	if !ok {
		return fmt.Errorf("emulator: no instance %s", id)
	}
	e.setState(i, state, "Client.InstanceInitiatedShutdown", e.now())
	return nil
}

// InstanceHealth is what DescribeInstanceStatus reports about an instance
// beyond its state: failed status checks and scheduled events.
type InstanceHealth struct {
	// InstanceImpaired fails the instance status check (reachability), as
	// a kernel panic or exhausted memory on the instance would.
	InstanceImpaired bool
	// SystemImpaired fails the system status check: the host under it.
	SystemImpaired bool
	// Events are scheduled events (instance-retirement, system-reboot,
	// instance-reboot, system-maintenance, instance-stop).
	Events []ScheduledEvent
}

// ScheduledEvent is one scheduled event of an instance.
type ScheduledEvent struct {
	Code      string
	NotBefore time.Time
}

// instanceHealth is InstanceHealth with when each check began to fail.
type instanceHealth struct {
	InstanceHealth
	instanceSince, systemSince time.Time
	eventIDs                   []string
}

// SetInstanceHealth sets what DescribeInstanceStatus reports about the
// instance's checks and events from now on. A check that starts failing
// is impaired since now; one that was failing already keeps its time.
func (e *Emulator) SetInstanceHealth(id string, h InstanceHealth) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, ok := e.world.instByID[id]
	if !ok {
		return fmt.Errorf("emulator: no instance %s", id)
	}
	now := e.now()
	since := func(failing, was bool, t time.Time) time.Time {
		switch {
		case !failing:
			return time.Time{}
		case was:
			return t
		}
		return now
	}
	next := instanceHealth{
		InstanceHealth: InstanceHealth{InstanceImpaired: h.InstanceImpaired, SystemImpaired: h.SystemImpaired, Events: slices.Clone(h.Events)},
		instanceSince:  since(h.InstanceImpaired, i.health.InstanceImpaired, i.health.instanceSince),
		systemSince:    since(h.SystemImpaired, i.health.SystemImpaired, i.health.systemSince),
	}
	for range h.Events {
		next.eventIDs = append(next.eventIDs, e.newID("instance-event"))
	}
	i.health = next
	return nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Taint is re-exported for Config.StartupTaints.
type Taint = corev1.Taint
