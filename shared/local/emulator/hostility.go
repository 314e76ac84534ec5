package emulator

import (
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"time"
)

// Hostility is how far the emulator behaves like real AWS beyond its
// documented contracts: eventual consistency, propagation delays, missing
// spot markets and the random errors every large fleet sees. It is on by
// default (DefaultHostility), because code that only ever met a strongly
// consistent, always-answering AWS fails in production. Every random
// choice comes from one PCG source seeded from Config.Seed, so a run
// replays for a seed (as far as the callers' own order of calls does).
//
// A test that must reach one specific state copies DefaultHostility(),
// zeroes one field and says why in a comment; NoHostility() turns
// everything off.
type Hostility struct {
	// DescribeLagMax: a new instance is missing from DescribeInstances and
	// DescribeInstanceStatus (by filter, and by id with
	// InvalidInstanceID.NotFound; TerminateInstances by id too) for
	// Config.DescribeLag plus a random 0..DescribeLagMax after launch,
	// chosen at launch.
	DescribeLagMax time.Duration
	// TerminatedStaleMax: after TerminateInstances, DescribeInstances and
	// DescribeInstanceStatus keep reporting the instance's previous state
	// (and filter on it) for a random 0..TerminatedStaleMax. The
	// TerminateInstances answer itself reports the new state, as EC2's does.
	TerminatedStaleMax time.Duration
	// TagLagMax: tags added by CreateTags or removed by DeleteTags reach the
	// Describe* answers and tag filters after a random 0..TagLagMax. Tags
	// given at creation (TagSpecifications) are visible with the resource.
	TagLagMax time.Duration
	// LaunchTemplateLagMax: a new launch template is missing from
	// DescribeLaunchTemplates (InvalidLaunchTemplateName.NotFoundException
	// or InvalidLaunchTemplateId.NotFound when asked for, absent from
	// lists), and CreateFleet and RunInstances naming it by name fail with
	// the same top-level 400, for a random 0..LaunchTemplateLagMax.
	LaunchTemplateLagMax time.Duration
	// PlacementGroupLagMax: a group made by CreatePlacementGroup is unknown
	// to DescribePlacementGroups (InvalidPlacementGroup.Unknown when named,
	// absent from lists) and to launches naming it, for a random
	// 0..PlacementGroupLagMax.
	PlacementGroupLagMax time.Duration
	// CapacityReservationLagMax: a reservation made by
	// AddCapacityReservation is unknown to DescribeCapacityReservations and
	// to launches for 0..max, and a reservation's availableInstanceCount
	// counts a launched instance only 0..max after the launch and releases
	// a terminated one 0..max after it terminated (drawn per instance).
	CapacityReservationLagMax time.Duration
	// FleetLagMax: DescribeFleets does not know a new fleet
	// (InvalidFleetId.NotFound) for a random 0..FleetLagMax.
	FleetLagMax time.Duration
	// ProfilePropagationMin..Max: an instance profile just created, or
	// whose role was just added, is rejected by CreateFleet (errorSet item
	// InvalidParameterValue, "Invalid IAM Instance Profile name") and
	// RunInstances (the same code, top level) for a random duration in this
	// range: IAM's propagation to EC2.
	ProfilePropagationMin, ProfilePropagationMax time.Duration
	// NoSpotMarketFraction of (instance type, zone) pairs, chosen by a hash
	// of the seed, have no spot market: no DescribeSpotPriceHistory rows,
	// and spot overrides for them fail with Unsupported while on-demand
	// works. DescribeInstanceTypeOfferings still lists them.
	NoSpotMarketFraction float64
	// NoSpotServiceLinkedRole makes every spot override fail with
	// AuthFailure.ServiceLinkedRoleCreationNotPermitted, as in an account
	// where the spot service-linked role does not exist and the caller may
	// not create it. Off by default: a world option, not a random event.
	NoSpotServiceLinkedRole bool
	// FleetErrorRate is the probability that a CreateFleet pool (override
	// and capacity type) fails in errorSet when tried, with
	// UnfulfillableCapacity, MaxSpotInstanceCountExceeded (spot only),
	// VcpuLimitExceeded or InsufficientFreeAddressesInSubnet.
	FleetErrorRate float64
	// ThrottleRate is the probability per EC2, SSM, IAM or SQS call that a
	// throttling burst starts (RequestLimitExceeded, HTTP 503, on EC2;
	// ThrottlingException elsewhere); a burst fails 1..4 consecutive calls
	// of that service made within ThrottleBurstWindow of the clock. AWS
	// throttles with token buckets that refill every second, so a caller
	// whose retries back off outlives a transient burst, while callers
	// that retry at once all meet it; throttling that outlasts every
	// backoff is the Throttle fault.
	ThrottleRate float64
	// ServerErrorRate is the probability per EC2, SSM, IAM or SQS call of
	// an HTTP 500 (InternalError on EC2, InternalFailure elsewhere); the
	// call is not applied.
	ServerErrorRate float64
	// LostAnswerRate is the probability per mutating call (CreateFleet,
	// RunInstances, TerminateInstances, CreateTags, DeleteTags,
	// CreateLaunchTemplate, DeleteLaunchTemplate, the IAM instance-profile
	// writes, SQS SendMessage, DeleteMessage and DeleteMessageBatch) that the
	// call is applied and the connection then dropped without an answer, as
	// the DropAfterApply fault does.
	LostAnswerRate float64
	// AsyncDelayMax: an asynchronous Lambda invocation (Invoke with
	// InvocationType Event) runs its function after a random
	// 0..AsyncDelayMax beyond Config's fixed minimum, as Lambda's internal
	// queue delivers it.
	AsyncDelayMax time.Duration
	// AsyncDuplicateRate is the probability that an asynchronous
	// invocation runs its function twice: Lambda delivers an event at
	// least once.
	AsyncDuplicateRate float64
}

// DefaultHostility is what a Config without Hostility gets: AWS as it
// behaves on an ordinary day.
func DefaultHostility() Hostility {
	return Hostility{
		DescribeLagMax:            8 * time.Second,
		TerminatedStaleMax:        5 * time.Second,
		TagLagMax:                 3 * time.Second,
		LaunchTemplateLagMax:      3 * time.Second,
		PlacementGroupLagMax:      3 * time.Second,
		CapacityReservationLagMax: 5 * time.Second,
		FleetLagMax:               5 * time.Second,
		ProfilePropagationMin:     5 * time.Second,
		ProfilePropagationMax:     20 * time.Second,
		NoSpotMarketFraction:      0.05,
		FleetErrorRate:            0.03,
		ThrottleRate:              0.01,
		ServerErrorRate:           0.003,
		LostAnswerRate:            0.003,
		AsyncDelayMax:             200 * time.Millisecond,
		AsyncDuplicateRate:        0.01,
	}
}

// NoHostility turns every behaviour off: a strongly consistent AWS that
// answers every call. Only for tests that must reach one specific state;
// callers say why.
func NoHostility() Hostility { return Hostility{} }

// Hostile event names, the keys of HostileEvents (fleet errors are
// "fleet-error:<code>").
const (
	EventThrottle               = "throttle"
	EventServerError            = "server-error"
	EventLostAnswer             = "lost-answer"
	EventDescribeLag            = "describe-lag"
	EventTerminatedStale        = "terminated-stale"
	EventTagLag                 = "tag-lag"
	EventLaunchTemplateLag      = "launch-template-lag"
	EventFleetLag               = "fleet-lag"
	EventPlacementGroupLag      = "placement-group-lag"
	EventCapacityReservationLag = "capacity-reservation-lag"
	EventProfilePropagation     = "profile-propagation"
	EventNoSpotMarket           = "no-spot-market"
	EventNoSpotSLR              = "no-spot-service-linked-role"
	EventAsyncDuplicate         = "async-duplicate"
	eventFleetErrorPrefix       = "fleet-error:"
)

// hostileServices are the services random throttles and server errors hit.
var hostileServices = map[string]bool{"ec2": true, "ssm": true, "iam": true, "sqs": true, "pricing": true, "lambda": true, "events": true, "cloudformation": true, "arc-zonal-shift": true}

// mutatingActions are the calls whose answer LostAnswerRate may lose after
// applying them.
var mutatingActions = map[string]bool{
	"ec2/CreateFleet": true, "ec2/RunInstances": true, "ec2/TerminateInstances": true,
	"ec2/CreateTags": true, "ec2/DeleteTags": true,
	"ec2/CreateLaunchTemplate": true, "ec2/DeleteLaunchTemplate": true,
	"iam/CreateInstanceProfile": true, "iam/DeleteInstanceProfile": true,
	"iam/AddRoleToInstanceProfile": true, "iam/RemoveRoleFromInstanceProfile": true,
	"iam/TagInstanceProfile": true, "iam/UntagInstanceProfile": true,
	"sqs/SendMessage": true, "sqs/DeleteMessage": true, "sqs/DeleteMessageBatch": true,
}

// randomFleetErrors are the codes FleetErrorRate draws from; spotOnly
// codes are never drawn for on-demand pools.
var randomFleetErrors = []struct {
	code     string
	spotOnly bool
}{
	{"UnfulfillableCapacity", false},
	{"MaxSpotInstanceCountExceeded", true},
	{"VcpuLimitExceeded", false},
	{"InsufficientFreeAddressesInSubnet", false},
}

// hostility is the emulator's hostile state; guarded by Emulator.mu.
type hostility struct {
	Hostility
	rng    *rand.Rand
	events map[string]int
	// burst is the throttling burst under way per service.
	burst map[string]throttleBurst
}

// throttleBurst fails the next left calls of a service made before until.
type throttleBurst struct {
	left  int
	until time.Time
}

// ThrottleBurstWindow is how long of the clock a throttling burst lasts at
// most: about one refill of an EC2 token bucket.
const ThrottleBurstWindow = time.Second

// newHostility seeds the hostile random source from the emulator's seed,
// apart from the id sequences so that turning hostility off does not
// change generated ids.
func newHostility(h Hostility, seed uint64) *hostility {
	return &hostility{
		Hostility: h,
		rng:       rand.New(rand.NewPCG(seed, seed^0x686f7374696c6521)), // "hostile!"
		events:    map[string]int{},
		burst:     map[string]throttleBurst{},
	}
}

// chance draws true with probability p; p <= 0 draws nothing, so that a
// behaviour switched off does not shift the others' random sequence.
func (h *hostility) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	return h.rng.Float64() < p
}

// upTo draws a duration in [0, max]; 0 without drawing when max <= 0.
func (h *hostility) upTo(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(h.rng.Int64N(int64(max) + 1))
}

// between draws a duration in [lo, hi].
func (h *hostility) between(lo, hi time.Duration) time.Duration {
	if hi < lo {
		hi = lo
	}
	return lo + h.upTo(hi-lo)
}

func (h *hostility) note(event string) { h.events[event]++ }

// HostileEvents counts what hostility did so far, by event: "throttle"
// and "server-error" per failed call, "lost-answer" per dropped answer,
// "fleet-error:<code>" per failed pool, "describe-lag",
// "terminated-stale" and "tag-lag" per resource a Describe answer showed
// stale or hid, "launch-template-lag" and "fleet-lag" per lookup that
// missed, "profile-propagation", "no-spot-market" and
// "no-spot-service-linked-role" per override rejected.
func (e *Emulator) HostileEvents() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.hostile.events)
}

// SetHostility replaces the hostility settings from now on; lags already
// chosen (instances, templates, fleets, profiles, tags) keep theirs, and a
// throttling burst under way runs out.
func (e *Emulator) SetHostility(h Hostility) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hostile.Hostility = h
	e.cfg.Hostility = &h
}

// callHostility decides the random fate of one call before its handler
// runs: a throttle (bursts included), a server error, or a lost answer.
// Injected faults take precedence: callers skip it when a rule decided.
// Callers hold e.mu.
func (e *Emulator) callHostility(service, action string) requestFaults {
	h := e.hostile
	var out requestFaults
	if hostileServices[service] {
		now := e.now()
		switch {
		case h.burst[service].left > 0 && now.Before(h.burst[service].until):
			h.burst[service] = throttleBurst{h.burst[service].left - 1, h.burst[service].until}
			out.err = throttleError(service)
		case h.chance(h.ThrottleRate):
			h.burst[service] = throttleBurst{h.rng.IntN(4), now.Add(ThrottleBurstWindow)} // this call plus 0..3 more
			out.err = throttleError(service)
		case h.chance(h.ServerErrorRate):
			out.err = serverError(service)
		}
	}
	switch {
	case out.err != nil && out.err.Status == 500:
		h.note(EventServerError)
	case out.err != nil:
		h.note(EventThrottle)
	case mutatingActions[service+"/"+action] && h.chance(h.LostAnswerRate):
		out.drop = true
		h.note(EventLostAnswer)
	}
	return out
}

func serverError(service string) *apiError {
	if service == "ec2" {
		return &apiError{Code: "InternalError", Message: "An internal error has occurred", Status: 500}
	}
	return &apiError{Code: "InternalFailure", Message: "The request processing has failed because of an unknown error, exception or failure.", Status: 500}
}

// seededUnit maps parts to [0,1) by a hash of the seed: facts that differ
// between seeds but not between calls (which spot markets are missing).
func (e *Emulator) seededUnit(parts ...string) float64 {
	h := e.hash(parts...)
	return float64(binary.LittleEndian.Uint64(h[:8])>>11) / float64(1<<53)
}

// noSpotMarket reports that a type has no spot market in a zone; callers
// hold e.mu.
func (e *Emulator) noSpotMarket(instanceType, zone string) bool {
	f := e.hostile.NoSpotMarketFraction
	return f > 0 && e.seededUnit("no-spot-market", instanceType, zone) < f
}

// randomFleetError draws whether a pool fails by FleetErrorRate, and with
// which code; callers hold e.mu.
func (e *Emulator) randomFleetError(capacityType string) (string, bool) {
	h := e.hostile
	if !h.chance(h.FleetErrorRate) {
		return "", false
	}
	var codes []string
	for _, c := range randomFleetErrors {
		if !c.spotOnly || capacityType == CapacityTypeSpot {
			codes = append(codes, c.code)
		}
	}
	code := codes[h.rng.IntN(len(codes))]
	h.note(eventFleetErrorPrefix + code)
	return code, true
}

// --- tag lag ---

// tagView is what Describe answers show of a resource's tags while
// CreateTags and DeleteTags changes are propagating.
type tagView struct {
	visible map[string]string
	pending []tagChange
}

// tagChange is one CreateTags or DeleteTags applied to a resource, visible
// from at.
type tagChange struct {
	at    time.Time
	apply func(map[string]string)
}

// changeTags applies a tag change to a resource now and schedules its
// visibility after a random 0..TagLagMax. Changes become visible in the
// order they were made, so the view converges to the tags. Callers hold e.mu.
func (e *Emulator) changeTags(id string, tags map[string]string, apply func(map[string]string)) {
	d := e.hostile.upTo(e.hostile.TagLagMax)
	v := e.world.tagViews[id]
	if d > 0 || v != nil {
		if v == nil {
			v = &tagView{visible: cloneTags(tags)}
			e.world.tagViews[id] = v
		}
		at := e.now().Add(d)
		if n := len(v.pending); n > 0 && v.pending[n-1].at.After(at) {
			at = v.pending[n-1].at
		}
		v.pending = append(v.pending, tagChange{at: at, apply: apply})
	}
	apply(tags)
}

// visibleTags is what a Describe answer shows of a resource's tags now;
// callers hold e.mu.
func (e *Emulator) visibleTags(id string, tags map[string]string) map[string]string {
	v := e.world.tagViews[id]
	if v == nil {
		return tags
	}
	now := e.now()
	for len(v.pending) > 0 && !now.Before(v.pending[0].at) {
		v.pending[0].apply(v.visible)
		v.pending = v.pending[1:]
	}
	if len(v.pending) == 0 {
		delete(e.world.tagViews, id)
		return tags
	}
	e.hostile.note(EventTagLag)
	return v.visible
}

// --- instance views ---

// view is an instance as a Describe answer shows it now: hidden while new
// (nil), its previous state for a while after TerminateInstances, and its
// tags as far as they propagated. Callers hold e.mu.
func (e *Emulator) view(i *instance) *instance {
	if i.hidden || e.lagging(i) {
		return nil
	}
	v := *i
	if e.now().Before(i.staleUntil) {
		v.State, v.StateReason = i.staleState, i.staleReason
		e.hostile.note(EventTerminatedStale)
	}
	v.Tags = e.visibleTags(i.ID, i.Tags)
	return &v
}

// lagging reports that a new instance is not visible to Describe yet, and
// counts it; callers hold e.mu.
func (e *Emulator) lagging(i *instance) bool {
	if e.now().Before(i.visibleAt) {
		e.hostile.note(EventDescribeLag)
		return true
	}
	return false
}
