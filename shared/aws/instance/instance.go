// Package instance is the EC2 edge for nodes: launch one instance per
// NodeClaim with CreateFleet, find it again by tags, tag it, terminate it.
//
// Launches are safe to repeat. The instance carries its NodeClaim's name as
// a tag from the moment it exists, so a tick killed after CreateFleet finds
// and adopts it; and the ClientToken is derived from the NodeClaim UID and a
// launch attempt that only advances after EC2 answered "nothing launched", so
// an SDK retry of a request EC2 already applied returns the same instance.
package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
)

// EC2 is the part of the EC2 API this package calls.
type EC2 interface {
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

// MaxInstanceTypes is how many types one CreateFleet may offer: the launch
// order's cap (Karpenter's), enforced here again for any caller.
const MaxInstanceTypes = scheduling.MaxLaunchTypes

// Instance is an EC2 instance, as plain data.
type Instance struct {
	ID   string
	Type string
	Zone string
	// ZoneID is the zone's ID (use1-az1), which names the same place in
	// every account.
	ZoneID       string
	CapacityType string
	State        string
	ImageID      string
	SubnetID     string
	PrivateDNS   string
	LaunchTime   time.Time
	Tags         map[string]string
	// CapacityReservationID and CapacityReservationType (default or
	// capacity-block) are set for a reserved instance: one launched into
	// a reservation it targeted (preference capacity-reservations-only),
	// as Karpenter tells them; an instance an open reservation took in is
	// on-demand.
	CapacityReservationID   string
	CapacityReservationType string
	// Tenancy is EC2's Placement.Tenancy: default (shared hardware) or
	// dedicated.
	Tenancy string
}

// ProviderID is aws:///<zone>/<id>.
func (i Instance) ProviderID() string { return wellknown.ProviderID(i.Zone, i.ID) }

// Offering is one (type, zone) a fleet may launch, with its price.
type Offering struct {
	InstanceType string
	Zone         string
	Price        float64
}

// LaunchTemplate is a template and the instance types it serves (one AMI).
type LaunchTemplate struct {
	Name          string
	ImageID       string
	InstanceTypes []string
}

// Request is one NodeClaim's launch.
type Request struct {
	NodeClaimName string
	NodeClaimUID  string
	// Attempt distinguishes launches after a definitive failure; it is part
	// of the ClientToken.
	Attempt      int
	CapacityType string
	// Offerings, cheapest first; truncated to MaxInstanceTypes types.
	Offerings       []Offering
	LaunchTemplates []LaunchTemplate
	// SubnetIDs per zone, each zone's candidates; the one with most free
	// addresses is used.
	Subnets map[string][]string
	Tags    map[string]string
	Context string
	// ReservationID and ReservationType are the capacity reservation a
	// reserved launch targets (its launch templates name it; one per
	// call) and its type: a capacity-block one is a capacity-block fleet.
	ReservationID, ReservationType string
	// Tenancy is what the launch templates ask for (default or
	// dedicated): the instance's until EC2 lists it.
	Tenancy string
	// Prioritized asks EC2 to follow the offerings' order (their
	// Priority, the price the launch saw) rather than its own prices, as
	// Karpenter does for a claim priced by a NodeOverlay
	// (karpenter.sh/price-overlay-applied): EC2 does not know the
	// overlay's prices, so lowest-price would ignore them.
	Prioritized bool
}

// ReservationTypeCapacityBlock is the type of a Capacity Block reservation.
const ReservationTypeCapacityBlock = "capacity-block"

// FleetError is one override CreateFleet could not fill, and the subnet
// it named.
type FleetError struct {
	Code, Message, InstanceType, Zone, Subnet string
}

// Result of a launch.
type Result struct {
	Instance *Instance
	// Errors are the per-override errors EC2 reported (capacity and others).
	Errors []FleetError
}

// ErrNothingLaunched means EC2 answered and launched nothing. The answer is
// final for its ClientToken (a retry with that token replays it), so the
// next launch must use the next attempt's token.
var ErrNothingLaunched = errors.New("EC2 launched nothing")

// ErrNoCapacity is ErrNothingLaunched where every error was a capacity error
// (the spot service-linked role missing counts, for spot): mark the
// offerings unavailable and try others at once.
var ErrNoCapacity = fmt.Errorf("insufficient capacity: %w", ErrNothingLaunched)

// ErrAlreadyRequested means EC2 has seen this ClientToken with different
// parameters: an earlier call was applied (its answer was lost, or the tick
// died before recording it). Whether it launched anything is for the
// instance's NodeClaim tag to tell; never launch again without knowing.
var ErrAlreadyRequested = errors.New("launch already requested with this client token")

// Provider launches, lists, tags and terminates instances of one cluster.
type Provider struct {
	ec2     EC2
	cluster string
	// shifted are the zones (IDs) ARC shifts the cluster away from, and
	// known the instances the pass knows without asking EC2 (from its
	// NodeClaims), by ID: see WithZonalShift.
	shifted zonalshift.Zones
	known   map[string]Instance
}

// ErrZonallyShifted means a call for an instance was not made because its
// zone is shifted away from (ARC zonal shift): EC2 calls for an impaired
// zone fail or hang, and their retries only add load there. The call is
// for after the shift; nothing about the instance is concluded meanwhile.
var ErrZonallyShifted = errors.New("zonally shifted")

// WithZonalShift is the provider for one pass that knows the zones ARC
// shifts the cluster away from (shifted, zone IDs) and what the pass knows
// of its instances (known: at least ID, Zone and ZoneID, from NodeClaims;
// Tags[karpenter.sh/nodeclaim] names the claim). While an instance's zone
// is shifted it makes no EC2 call for it, as Karpenter v1.14 does with
// its instance cache: Get and ForNodeClaim answer with what is known,
// Delete and Tag refuse with ErrZonallyShifted, and List keeps a known
// instance EC2 did not list. Without a shift it is p.
func (p *Provider) WithZonalShift(shifted zonalshift.Zones, known []Instance) *Provider {
	if len(shifted) == 0 {
		return p
	}
	q := &Provider{ec2: p.ec2, cluster: p.cluster, shifted: shifted, known: map[string]Instance{}}
	for _, i := range known {
		if i.ID != "" {
			q.known[i.ID] = i
		}
	}
	return q
}

// ZonalShifter gives a pass its shift-aware provider (a *Provider does).
type ZonalShifter interface {
	WithZonalShift(shifted zonalshift.Zones, known []Instance) *Provider
}

// Shifted reports whether the instance's zone is shifted away from.
func (p *Provider) Shifted(i Instance) bool { return p.shifted.Has(i.ZoneID) }

// shiftedKnown is the known instance of that ID when its zone is shifted.
func (p *Provider) shiftedKnown(id string) (Instance, bool) {
	i, ok := p.known[id]
	return i, ok && p.Shifted(i)
}

// OnlyZonallyShifted reports whether err is ErrZonallyShifted alone (for
// one instance or several, errors.Join'ed): nothing failed but what waits
// for a shift to end.
func OnlyZonallyShifted(err error) bool {
	if err == nil {
		return false
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !OnlyZonallyShifted(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, ErrZonallyShifted)
}

func shiftedError(i Instance, skipping string) error {
	return fmt.Errorf("instance %s is in zonally shifted availability zone %s (%s), skipping %s: %w", i.ID, i.Zone, i.ZoneID, skipping, ErrZonallyShifted)
}

// NewProvider returns a provider for the cluster's instances.
func NewProvider(api EC2, clusterName string) *Provider {
	return &Provider{ec2: api, cluster: clusterName}
}

// ClientToken is the CreateFleet idempotency token of a NodeClaim's launch attempt.
func ClientToken(uid string, attempt int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", uid, attempt))
	return "karpless-" + hex.EncodeToString(sum[:])[:40]
}

// Create launches one instance for the request with CreateFleet (instant).
func (p *Provider) Create(ctx context.Context, r Request) (Result, error) {
	in, err := p.fleetInput(ctx, r)
	if err != nil {
		return Result{}, err
	}
	out, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		if awserr.Code(err) == "IdempotentParameterMismatch" {
			return Result{}, fmt.Errorf("launching nodeclaim %s: %w", r.NodeClaimName, ErrAlreadyRequested)
		}
		return Result{}, fmt.Errorf("launching nodeclaim %s: %w", r.NodeClaimName, err)
	}
	res := Result{}
	for _, e := range out.Errors {
		fe := FleetError{Code: aws.ToString(e.ErrorCode), Message: aws.ToString(e.ErrorMessage)}
		if e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			o := e.LaunchTemplateAndOverrides.Overrides
			fe.InstanceType, fe.Zone, fe.Subnet = string(o.InstanceType), aws.ToString(o.AvailabilityZone), aws.ToString(o.SubnetId)
		}
		res.Errors = append(res.Errors, fe)
	}
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	if len(ids) == 0 {
		for _, e := range res.Errors {
			if !awserr.IsCapacityCode(e.Code) && !(r.CapacityType == wellknown.CapacityTypeSpot && awserr.IsSpotServiceLinkedRoleMissing(e.Code)) {
				return res, fmt.Errorf("launching nodeclaim %s: %w: %s: %s", r.NodeClaimName, ErrNothingLaunched, e.Code, e.Message)
			}
		}
		if len(res.Errors) == 0 {
			return res, fmt.Errorf("launching nodeclaim %s: %w and reported no error", r.NodeClaimName, ErrNothingLaunched)
		}
		return res, fmt.Errorf("launching nodeclaim %s: %w (%d offerings tried)", r.NodeClaimName, ErrNoCapacity, len(res.Errors))
	}
	sort.Strings(ids)
	if len(ids) > 1 {
		// One per NodeClaim is all we ask for; anything more is a leak.
		_ = p.Terminate(ctx, ids[1:]...)
	}
	inst, err := p.Get(ctx, ids[0])
	if err != nil {
		// EC2 reads are eventually consistent: describe with what the fleet said.
		inst = &Instance{ID: ids[0], CapacityType: r.CapacityType, State: "pending", Tags: r.Tags, Tenancy: tenancy(r.Tenancy)}
		if r.CapacityType == wellknown.CapacityTypeReserved {
			inst.CapacityReservationID, inst.CapacityReservationType = r.ReservationID, reservationType(r.ReservationType)
		}
		for _, fi := range out.Instances {
			if len(fi.InstanceIds) > 0 && fi.InstanceIds[0] == ids[0] {
				inst.Type = string(fi.InstanceType)
				if fi.LaunchTemplateAndOverrides != nil && fi.LaunchTemplateAndOverrides.Overrides != nil {
					inst.Zone = aws.ToString(fi.LaunchTemplateAndOverrides.Overrides.AvailabilityZone)
					inst.ImageID = aws.ToString(fi.LaunchTemplateAndOverrides.Overrides.ImageId)
					inst.SubnetID = aws.ToString(fi.LaunchTemplateAndOverrides.Overrides.SubnetId)
				}
			}
		}
	}
	res.Instance = inst
	return res, nil
}

func (p *Provider) fleetInput(ctx context.Context, r Request) (*ec2.CreateFleetInput, error) {
	if len(r.Offerings) == 0 {
		return nil, fmt.Errorf("launching nodeclaim %s: no offerings to launch", r.NodeClaimName)
	}
	subnets, err := p.pickSubnets(ctx, r.Subnets)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", r.NodeClaimName, err)
	}
	ltOf := map[string]LaunchTemplate{}
	for _, lt := range r.LaunchTemplates {
		for _, t := range lt.InstanceTypes {
			ltOf[t] = lt
		}
	}
	// Keep the cheapest MaxInstanceTypes types, all their zones.
	types := map[string]bool{}
	var order []string
	for _, o := range r.Offerings {
		if _, ok := ltOf[o.InstanceType]; !ok {
			continue
		}
		if _, ok := subnets[o.Zone]; !ok {
			continue
		}
		if !types[o.InstanceType] {
			if len(order) == MaxInstanceTypes {
				continue
			}
			types[o.InstanceType] = true
			order = append(order, o.InstanceType)
		}
	}
	byLT := map[string][]ec2types.FleetLaunchTemplateOverridesRequest{}
	for _, o := range r.Offerings {
		if !types[o.InstanceType] {
			continue
		}
		subnet, ok := subnets[o.Zone]
		if !ok {
			continue
		}
		lt := ltOf[o.InstanceType]
		byLT[lt.Name] = append(byLT[lt.Name], ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType:     ec2types.InstanceType(o.InstanceType),
			SubnetId:         aws.String(subnet),
			AvailabilityZone: aws.String(o.Zone),
			ImageId:          aws.String(lt.ImageID),
			Priority:         aws.Float64(o.Price),
		})
	}
	if len(byLT) == 0 {
		return nil, fmt.Errorf("launching nodeclaim %s: no offering has both a launch template and a subnet", r.NodeClaimName)
	}
	names := make([]string, 0, len(byLT))
	for n := range byLT {
		names = append(names, n)
	}
	sort.Strings(names)
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for _, n := range names {
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(n), Version: aws.String("$Latest")},
			Overrides:                   byLT[n],
		})
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(ClientToken(r.NodeClaimUID, r.Attempt)),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: targetCapacityType(r),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: toTags(r.Tags)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: toTags(r.Tags)},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: toTags(r.Tags)},
		},
	}
	if r.Context != "" {
		in.Context = aws.String(r.Context)
	}
	switch {
	case r.CapacityType == wellknown.CapacityTypeSpot:
		strategy := ec2types.SpotAllocationStrategyPriceCapacityOptimized
		if r.Prioritized {
			strategy = ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized
		}
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: strategy}
	case targetCapacityType(r) != ec2types.DefaultTargetCapacityTypeCapacityBlock:
		// As Karpenter's CreateFleetInputBuilder: a capacity-block fleet
		// takes no on-demand options.
		strategy := ec2types.FleetOnDemandAllocationStrategyLowestPrice
		if r.Prioritized {
			strategy = ec2types.FleetOnDemandAllocationStrategyPrioritized
		}
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: strategy}
	}
	return in, nil
}

// targetCapacityType is the fleet's DefaultTargetCapacityType, as Karpenter
// v1.14.1 sets it: a reserved launch is on-demand into the reservation its
// templates target, or capacity-block for a Capacity Block.
func targetCapacityType(r Request) ec2types.DefaultTargetCapacityType {
	if r.CapacityType != wellknown.CapacityTypeReserved {
		return ec2types.DefaultTargetCapacityType(r.CapacityType)
	}
	if r.ReservationType == ReservationTypeCapacityBlock {
		return ec2types.DefaultTargetCapacityTypeCapacityBlock
	}
	return ec2types.DefaultTargetCapacityTypeOnDemand
}

// tenancy is EC2's tenancy, default when unsaid (as Karpenter's
// tenancyFromInstance).
func tenancy(t string) string {
	if t == "" {
		return string(ec2types.TenancyDefault)
	}
	return t
}

func reservationType(t string) string {
	if t == "" {
		return "default"
	}
	return t
}

// pickSubnets chooses, per zone, the candidate subnet with the most free
// addresses (ties: lowest id, so the choice is stable and tokens repeat).
func (p *Provider) pickSubnets(ctx context.Context, byZone map[string][]string) (map[string]string, error) {
	var ids []string
	for _, s := range byZone {
		ids = append(ids, s...)
	}
	if len(ids) == 0 {
		return nil, errors.New("no subnets resolved for the node class")
	}
	free := map[string]int32{}
	out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
	if err != nil {
		return nil, fmt.Errorf("describing subnets: %w", err)
	}
	for _, s := range out.Subnets {
		free[aws.ToString(s.SubnetId)] = aws.ToInt32(s.AvailableIpAddressCount)
	}
	picked := map[string]string{}
	for zone, cands := range byZone {
		best := ""
		for _, id := range cands {
			if _, known := free[id]; !known {
				continue
			}
			if best == "" || free[id] > free[best] || (free[id] == free[best] && id < best) {
				best = id
			}
		}
		if best != "" && free[best] > 0 {
			picked[zone] = best
		}
	}
	if len(picked) == 0 {
		return nil, errors.New("every subnet of the node class is out of free addresses")
	}
	return picked, nil
}

// LiveStates are the states of an instance that still exists or may.
var LiveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// List returns the cluster's instances (tagged kubernetes.io/cluster/<name>
// and karpenter.sh/nodepool) in the given states (LiveStates if none).
// During a zonal shift, a known instance of a shifted zone that EC2 did
// not list is listed all the same (with no states given): EC2's answers
// about an impaired zone prove nothing, and what is missing from them
// must not read as gone.
func (p *Provider) List(ctx context.Context, states ...string) ([]Instance, error) {
	out, err := p.describe(ctx, states,
		ec2types.Filter{Name: aws.String("tag:" + wellknown.ClusterTagKey(p.cluster)), Values: []string{wellknown.OwnedTagValue}},
		ec2types.Filter{Name: aws.String("tag-key"), Values: []string{wellknown.NodePoolTagKey}},
	)
	if err != nil || len(p.known) == 0 || len(states) > 0 {
		return out, err
	}
	listed := map[string]bool{}
	for _, i := range out {
		listed[i.ID] = true
	}
	for id, i := range p.known {
		if !listed[id] && p.Shifted(i) {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// ForNodeClaim returns the live instances tagged with the NodeClaim's
// name. During a zonal shift, a claim known to have an instance in a
// shifted zone gets its known instances, without asking EC2.
func (p *Provider) ForNodeClaim(ctx context.Context, nodeClaim string) ([]Instance, error) {
	var known []Instance
	shifted := false
	for _, i := range p.known {
		if i.Tags[wellknown.NodeClaimTagKey] == nodeClaim {
			known = append(known, i)
			shifted = shifted || p.Shifted(i)
		}
	}
	if shifted {
		sort.Slice(known, func(a, b int) bool { return known[a].ID < known[b].ID })
		return known, nil
	}
	return p.describe(ctx, nil,
		ec2types.Filter{Name: aws.String("tag:" + wellknown.ClusterTagKey(p.cluster)), Values: []string{wellknown.OwnedTagValue}},
		ec2types.Filter{Name: aws.String("tag:" + wellknown.NodeClaimTagKey), Values: []string{nodeClaim}},
	)
}

// Get returns one instance; not found is an error matched by awserr.IsNotFound
// or ErrNotFound. During a zonal shift, a known instance of a shifted zone
// is answered with what is known, without asking EC2.
func (p *Provider) Get(ctx context.Context, id string) (*Instance, error) {
	if i, ok := p.shiftedKnown(id); ok {
		return &i, nil
	}
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if awserr.IsNotFound(err) {
			return nil, fmt.Errorf("instance %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			inst := fromEC2(i)
			return &inst, nil
		}
	}
	return nil, fmt.Errorf("instance %s: %w", id, ErrNotFound)
}

// ErrNotFound means EC2 does not know the instance (or no longer).
var ErrNotFound = errors.New("instance not found")

func (p *Provider) describe(ctx context.Context, states []string, filters ...ec2types.Filter) ([]Instance, error) {
	if len(states) == 0 {
		states = LiveStates
	}
	filters = append(filters, ec2types.Filter{Name: aws.String("instance-state-name"), Values: states})
	pager := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	var out []Instance
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, fromEC2(i))
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

func fromEC2(i ec2types.Instance) Instance {
	inst := Instance{
		ID: aws.ToString(i.InstanceId), Type: string(i.InstanceType), ImageID: aws.ToString(i.ImageId),
		SubnetID: aws.ToString(i.SubnetId), PrivateDNS: aws.ToString(i.PrivateDnsName), Tags: map[string]string{},
		CapacityType: wellknown.CapacityTypeOnDemand,
	}
	if i.Placement != nil {
		inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
		inst.ZoneID = aws.ToString(i.Placement.AvailabilityZoneId)
		inst.Tenancy = string(i.Placement.Tenancy)
	}
	inst.Tenancy = tenancy(inst.Tenancy)
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	if i.LaunchTime != nil {
		inst.LaunchTime = *i.LaunchTime
	}
	switch {
	case i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot:
		inst.CapacityType = wellknown.CapacityTypeSpot
	case i.CapacityReservationId != nil && i.CapacityReservationSpecification != nil &&
		i.CapacityReservationSpecification.CapacityReservationPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly:
		// Karpenter's capacityTypeFromInstance: reserved only when launched
		// into the reservation on purpose, not taken in by an open one.
		inst.CapacityType = wellknown.CapacityTypeReserved
		inst.CapacityReservationID = aws.ToString(i.CapacityReservationId)
		inst.CapacityReservationType = "default"
		if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			inst.CapacityReservationType = ReservationTypeCapacityBlock
		}
	}
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return inst
}

// Terminate terminates instances; already gone or already terminating is success.
func (p *Provider) Terminate(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil && !awserr.IsNotFound(err) {
		return fmt.Errorf("terminating %s: %w", strings.Join(ids, ","), err)
	}
	return nil
}

// TerminationFailuresMetric is Karpenter's
// karpenter_cloudprovider_instance_termination_failures_total: a
// TerminateInstances that failed, once for each instance it was for,
// labelled with the instance's zone and zone_id.
const TerminationFailuresMetric = "karpenter_cloudprovider_instance_termination_failures_total"

// Counter counts figures by name and dimensions (record.Metrics does).
type Counter interface {
	Count(name string, v float64, dims map[string]string)
}

// Delete terminates instances read from EC2 (Get, List, ForNodeClaim), as
// Terminate. When TerminateInstances fails, each is counted once in
// TerminationFailuresMetric on failures (nil counts nothing), by the zone
// it was read in, as Karpenter's Delete counts its failed call; an
// instance already gone is not a failure. An instance of a zone shifted
// away from is not terminated (ErrZonallyShifted, not a failure counted):
// Karpenter v1.14 leaves it until the shift ends.
func (p *Provider) Delete(ctx context.Context, failures Counter, insts ...Instance) error {
	var ids []string
	var skipped []error
	var terminated []Instance
	for _, inst := range insts {
		if p.Shifted(inst) {
			skipped = append(skipped, shiftedError(inst, "termination"))
			continue
		}
		ids = append(ids, inst.ID)
		terminated = append(terminated, inst)
	}
	err := p.Terminate(ctx, ids...)
	if err != nil && failures != nil {
		for _, inst := range terminated {
			failures.Count(TerminationFailuresMetric, 1, map[string]string{"zone": inst.Zone, "zone_id": inst.ZoneID})
		}
	}
	return errors.Join(append(skipped, err)...)
}

// Tag adds tags to an instance (idempotent). During a zonal shift, a known
// instance of a shifted zone is not tagged (ErrZonallyShifted); one the
// pass does not know is, as Karpenter tags an instance its cache misses.
func (p *Provider) Tag(ctx context.Context, id string, tags map[string]string) error {
	if len(tags) == 0 {
		return nil
	}
	if i, ok := p.shiftedKnown(id); ok {
		return shiftedError(i, "tag creation")
	}
	_, err := p.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: toTags(tags)})
	if err != nil {
		return fmt.Errorf("tagging instance %s: %w", id, err)
	}
	return nil
}

func toTags(m map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}
