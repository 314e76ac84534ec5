package emulator

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"time"

	"github.com/karpless/karpless/events"
)

// Capacity reservations: on-demand capacity reservations (open and
// targeted) and Capacity Blocks. DescribeCapacityReservations, the seeded
// reservations, AddCapacityReservation for tests, launches into a
// reservation (CreateFleet and RunInstances honour the launch template's or
// the request's CapacityReservationSpecification and the capacity-block
// market type) with EC2's errors when it is full, expired or does not
// match, the available count going down per instance and up when it
// terminates (late, as EC2 reports it), open reservations taking matching
// on-demand launches that do not opt out, and a Capacity Block's end: the
// "Capacity Block Reservation Expiration Warning" to the interruption
// queue 40 minutes before, its instances terminated from 30 minutes
// before, the reservation expired at the end.

func init() {
	ec2Handlers["DescribeCapacityReservations"] = (*Emulator).describeCapacityReservations
}

// Reservation kinds and states, as EC2 spells them.
const (
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
	MatchOpen                    = "open"
	MatchTargeted                = "targeted"
	ReservationActive            = "active"
	ReservationExpired           = "expired"
	ReservationCancelled         = "cancelled"
)

// Capacity reservation preferences of a launch.
const (
	preferenceOpen = "open"
	preferenceNone = "none"
	preferenceOnly = "capacity-reservations-only"
	marketBlock    = "capacity-block"
)

// When a Capacity Block ends, as EC2 documents it: the warning 40 minutes
// before the end, termination of its instances from 30 minutes before.
const (
	capacityBlockWarning     = 40 * time.Minute
	capacityBlockTermination = events.CapacityBlockTerminationLead
)

// CapacityReservation is a capacity reservation as tests see it.
type CapacityReservation struct {
	ID           string
	InstanceType string
	Zone         string
	// Total is the number of instances it holds.
	Total int
	// MatchCriteria is open or targeted.
	MatchCriteria string
	// ReservationType is default or capacity-block.
	ReservationType string
	// Start and End of the reservation; a zero End is unlimited (a
	// Capacity Block always has one).
	Start, End time.Time
	State      string
	OwnerID    string
	Tags       map[string]string
}

type capacityReservation struct {
	CapacityReservation
	zoneID string
	// visibleAt is when Describe and launches first find a new reservation
	// (Hostility.CapacityReservationLagMax).
	visibleAt time.Time
	warned    bool
}

// reservationUse is an instance's place in a reservation.
type reservationUse struct {
	r *capacityReservation
	// countedAt is when DescribeCapacityReservations starts counting the
	// instance; release is how late it stops counting it after it is
	// terminated (Hostility.CapacityReservationLagMax, drawn at launch).
	countedAt time.Time
	release   time.Duration
}

// reservationWorld is the reservation state; callers hold e.mu.
type reservationWorld struct {
	list []*capacityReservation
	// use maps an instance id to its reservation.
	use map[string]*reservationUse
	// pref is each instance's CapacityReservationSpecification preference.
	pref map[string]string
}

// SeededCapacityReservationName is the Name tag of a seeded reservation:
// <cluster>-targeted (m5.large, first zone, 2 instances, targeted),
// <cluster>-open (c6i.large, second zone, 2 instances, open) and
// <cluster>-capacity-block (p5.48xlarge, first zone, 1 instance, ending a
// day after the emulator first needs it). Each carries
// karpenter.sh/discovery: <cluster>.
func SeededCapacityReservationName(cluster, kind string) string { return cluster + "-" + kind }

// reservations returns the reservation state, seeding it on first use; the
// seeded reservations are visible at once, as if made long before.
// Callers hold e.mu.
func (e *Emulator) reservations() *reservationWorld {
	if e.world.reservations != nil {
		return e.world.reservations
	}
	w := &reservationWorld{use: map[string]*reservationUse{}, pref: map[string]string{}}
	e.world.reservations = w
	now := e.now()
	zone := func(i int) string { return e.cfg.Zones[min(i, len(e.cfg.Zones)-1)].Name }
	for _, s := range []struct {
		kind string
		r    CapacityReservation
	}{
		{"targeted", CapacityReservation{InstanceType: "m5.large", Zone: zone(0), Total: 2, MatchCriteria: MatchTargeted}},
		{"open", CapacityReservation{InstanceType: "c6i.large", Zone: zone(1), Total: 2, MatchCriteria: MatchOpen}},
		{"capacity-block", CapacityReservation{InstanceType: "p5.48xlarge", Zone: zone(0), Total: 1, MatchCriteria: MatchTargeted,
			ReservationType: ReservationTypeCapacityBlock, Start: now.Add(-time.Hour), End: now.Add(24 * time.Hour)}},
	} {
		r := s.r
		r.Tags = map[string]string{"Name": SeededCapacityReservationName(e.cfg.ClusterName, s.kind), "karpenter.sh/discovery": e.cfg.ClusterName}
		if _, err := e.addReservation(r, now, false); err != nil {
			panic(err) // the seed is ours
		}
	}
	return w
}

// AddCapacityReservation makes a reservation as CreateCapacityReservation
// (or buying a Capacity Block) does: active from Start (now if zero), for
// Total instances of one type in one zone; like EC2, Describe and launches
// do not find it for a moment (Hostility.CapacityReservationLagMax).
func (e *Emulator) AddCapacityReservation(r CapacityReservation) (CapacityReservation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reservations()
	cr, err := e.addReservation(r, e.now(), true)
	if err != nil {
		return CapacityReservation{}, err
	}
	return cr.copy(), nil
}

func (e *Emulator) addReservation(r CapacityReservation, now time.Time, lag bool) (*capacityReservation, error) {
	if _, ok := e.cfg.Catalog.Get(r.InstanceType); !ok {
		return nil, fmt.Errorf("InvalidParameterValue: instance type %q", r.InstanceType)
	}
	var zoneID string
	for _, z := range e.cfg.Zones {
		if z.Name == r.Zone {
			zoneID = z.ID
		}
	}
	if zoneID == "" {
		return nil, fmt.Errorf("InvalidParameterValue: availability zone %q", r.Zone)
	}
	if r.Total < 1 {
		return nil, fmt.Errorf("InvalidParameterValue: instance count %d", r.Total)
	}
	if r.MatchCriteria == "" {
		r.MatchCriteria = MatchOpen
	}
	if r.ReservationType == "" {
		r.ReservationType = ReservationTypeDefault
	}
	if r.ReservationType == ReservationTypeCapacityBlock && (r.End.IsZero() || r.MatchCriteria != MatchTargeted) {
		return nil, fmt.Errorf("InvalidParameterValue: a Capacity Block is targeted and has an end date")
	}
	if r.Start.IsZero() {
		r.Start = now
	}
	if r.State == "" {
		r.State = ReservationActive
	}
	if r.OwnerID == "" {
		r.OwnerID = e.cfg.AccountID
	}
	r.Tags = cloneTags(r.Tags)
	if r.Tags == nil {
		r.Tags = map[string]string{}
	}
	r.ID = e.newID("cr")
	cr := &capacityReservation{CapacityReservation: r, zoneID: zoneID}
	if lag {
		cr.visibleAt = now.Add(e.hostile.upTo(e.hostile.CapacityReservationLagMax))
	}
	w := e.world.reservations
	w.list = append(w.list, cr)
	return cr, nil
}

func (r *capacityReservation) copy() CapacityReservation {
	out := r.CapacityReservation
	out.Tags = cloneTags(r.Tags)
	return out
}

// CapacityReservations lists every reservation as it is (no lag), with its
// instances that are not terminated.
func (e *Emulator) CapacityReservations() []CapacityReservation {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []CapacityReservation
	for _, r := range e.reservations().list {
		out = append(out, r.copy())
	}
	return out
}

// ReservationOf is the reservation an instance runs in ("" for none).
func (e *Emulator) ReservationOf(instanceID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if u := e.reservations().use[instanceID]; u != nil {
		return u.r.ID
	}
	return ""
}

// ReservationInstances is how many instances that are not terminated run
// in the reservation now (what EC2 will report once it catches up).
func (e *Emulator) ReservationInstances(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.reservations().list {
		if r.ID == id {
			return e.liveInReservation(r)
		}
	}
	return 0
}

// liveInReservation counts the instances in r that are not terminated,
// which is what a launch is checked against; callers hold e.mu.
func (e *Emulator) liveInReservation(r *capacityReservation) int {
	n := 0
	for id, u := range e.world.reservations.use {
		if i := e.world.instByID[id]; u.r == r && i != nil && i.State != StateTerminated {
			n++
		}
	}
	return n
}

// reportedInUse is the count DescribeCapacityReservations reports: an
// instance counts from its countedAt until a moment after it terminated.
func (e *Emulator) reportedInUse(r *capacityReservation, now time.Time) int {
	n := 0
	for id, u := range e.world.reservations.use {
		i := e.world.instByID[id]
		if u.r != r || i == nil || now.Before(u.countedAt) {
			continue
		}
		if i.State == StateTerminated && !now.Before(i.StateChanged.Add(u.release)) {
			continue
		}
		n++
	}
	return n
}

func (e *Emulator) crLagging(r *capacityReservation, now time.Time) bool {
	if now.Before(r.visibleAt) {
		e.hostile.note(EventCapacityReservationLag)
		return true
	}
	return false
}

// --- DescribeCapacityReservations ---

type xmlCapacityReservation struct {
	CapacityReservationID  string   `xml:"capacityReservationId"`
	OwnerID                string   `xml:"ownerId"`
	CapacityReservationARN string   `xml:"capacityReservationArn"`
	AvailabilityZoneID     string   `xml:"availabilityZoneId"`
	InstanceType           string   `xml:"instanceType"`
	InstancePlatform       string   `xml:"instancePlatform"`
	AvailabilityZone       string   `xml:"availabilityZone"`
	Tenancy                string   `xml:"tenancy"`
	TotalInstanceCount     int      `xml:"totalInstanceCount"`
	AvailableInstanceCount int      `xml:"availableInstanceCount"`
	EBSOptimized           bool     `xml:"ebsOptimized"`
	EphemeralStorage       bool     `xml:"ephemeralStorage"`
	State                  string   `xml:"state"`
	StartDate              string   `xml:"startDate"`
	EndDate                string   `xml:"endDate,omitempty"`
	EndDateType            string   `xml:"endDateType"`
	InstanceMatchCriteria  string   `xml:"instanceMatchCriteria"`
	CreateDate             string   `xml:"createDate"`
	ReservationType        string   `xml:"reservationType"`
	Interruptible          bool     `xml:"interruptible"`
	Tags                   []xmlTag `xml:"tagSet>item"`
}

type describeCapacityReservationsResponse struct {
	ec2Meta
	Reservations []xmlCapacityReservation `xml:"capacityReservationSet>item"`
	NextToken    string                   `xml:"nextToken,omitempty"`
}

var capacityReservationIDPattern = regexp.MustCompile(`^cr-[0-9a-f]{8,17}$`)

func (e *Emulator) describeCapacityReservations(r *request) (any, *apiError) {
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	ids := list(r.params, "CapacityReservationId")
	if len(ids) > 0 && r.params.Get("MaxResults") != "" {
		return nil, errorf(400, "InvalidParameterCombination", "The parameter CapacityReservationIds cannot be used with the parameter MaxResults")
	}
	for _, id := range ids {
		if !capacityReservationIDPattern.MatchString(id) {
			return nil, errorf(400, "InvalidCapacityReservationId.Malformed", "Invalid id: \"%s\"", id)
		}
	}
	filters := parseFilters(r.params)
	now := e.now()
	found := map[string]bool{}
	var matched []xmlCapacityReservation
	for _, cr := range e.reservations().list {
		if e.crLagging(cr, now) || (len(ids) > 0 && !contains(ids, cr.ID)) {
			continue
		}
		found[cr.ID] = true
		endType := "unlimited"
		if !cr.End.IsZero() {
			endType = "limited"
		}
		get := func(name string) ([]string, bool) {
			switch name {
			case "capacity-reservation-id":
				return []string{cr.ID}, true
			case "instance-type":
				return []string{cr.InstanceType}, true
			case "owner-id":
				return []string{cr.OwnerID}, true
			case "availability-zone":
				return []string{cr.Zone}, true
			case "availability-zone-id":
				return []string{cr.zoneID}, true
			case "instance-platform":
				return []string{"Linux/UNIX"}, true
			case "tenancy":
				return []string{"default"}, true
			case "state":
				return []string{cr.State}, true
			case "instance-match-criteria":
				return []string{cr.MatchCriteria}, true
			case "end-date-type":
				return []string{endType}, true
			}
			return nil, false
		}
		ok, err := matchFilters(filters, get, cr.Tags)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		x := xmlCapacityReservation{
			CapacityReservationID: cr.ID, OwnerID: cr.OwnerID,
			CapacityReservationARN: fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", e.cfg.Region, cr.OwnerID, cr.ID),
			AvailabilityZoneID:     cr.zoneID, InstanceType: cr.InstanceType, InstancePlatform: "Linux/UNIX",
			AvailabilityZone: cr.Zone, Tenancy: "default", TotalInstanceCount: cr.Total,
			AvailableInstanceCount: max(0, cr.Total-e.reportedInUse(cr, now)), EBSOptimized: true,
			State: cr.State, StartDate: awsTime(cr.Start), EndDateType: endType,
			InstanceMatchCriteria: cr.MatchCriteria, CreateDate: awsTime(cr.Start), ReservationType: cr.ReservationType,
			Tags: xmlTags(cr.Tags),
		}
		if cr.State != ReservationActive {
			x.AvailableInstanceCount = 0
		}
		if !cr.End.IsZero() {
			x.EndDate = awsTime(cr.End)
		}
		matched = append(matched, x)
	}
	for _, id := range ids {
		if !found[id] {
			return nil, errorf(400, "InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
	}
	sort.SliceStable(matched, func(i, j int) bool { return matched[i].CapacityReservationID < matched[j].CapacityReservationID })
	page, next, err := paginate(matched, r.params, 0, 1, 1000)
	if err != nil {
		return nil, err
	}
	return &describeCapacityReservationsResponse{Reservations: page, NextToken: next}, nil
}

// --- launches ---

// reservationRequest is the CapacityReservationSpecification (and market
// type) a launch carries.
type reservationRequest struct {
	preference string // open (EC2's default), none or capacity-reservations-only
	target     string // a capacity reservation id
	market     string // capacity-block, spot or ""
}

// reservationParams reads prefix+"CapacityReservationSpecification.*" and
// the market type from p, falling back to the launch template's own.
func reservationParams(p url.Values, prefix string, lt *launchTemplate) reservationRequest {
	get := func(k string) string {
		if v := p.Get(prefix + k); v != "" {
			return v
		}
		if lt != nil && lt.params != nil {
			if vs := lt.params[k]; len(vs) > 0 {
				return vs[0]
			}
		}
		return ""
	}
	return reservationRequest{
		preference: get("CapacityReservationSpecification.CapacityReservationPreference"),
		target:     get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
		market:     get("InstanceMarketOptions.MarketType"),
	}
}

// reservationError says why a pool cannot launch one more instance into
// the reservation it targets, with EC2's codes; callers hold e.mu.
func (e *Emulator) reservationError(pl *pool, ct string, now time.Time) (code, msg string) {
	q := pl.reservation
	if q.target == "" {
		switch {
		case q.preference == preferenceOnly:
			return "InvalidParameterValue", "A capacity-reservations-only launch must target a capacity reservation (targeting a resource group is not emulated)."
		case pl.blockFleet || q.market == marketBlock:
			return "InvalidParameterValue", "A Capacity Block launch must target a Capacity Block reservation."
		}
		return "", ""
	}
	var cr *capacityReservation
	for _, r := range e.reservations().list {
		if r.ID == q.target && !e.crLagging(r, now) {
			cr = r
		}
	}
	switch {
	case cr == nil:
		return "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", q.target)
	case ct == CapacityTypeSpot:
		return "InvalidParameterCombination", "Spot Instances cannot be launched into a capacity reservation."
	case cr.InstanceType != pl.typeName || cr.Zone != pl.zone:
		return "InvalidParameterValue", fmt.Sprintf("The instance type and Availability Zone of the request (%s, %s) must match those of Capacity Reservation %s (%s, %s).", pl.typeName, pl.zone, cr.ID, cr.InstanceType, cr.Zone)
	case (cr.ReservationType == ReservationTypeCapacityBlock) != (q.market == marketBlock):
		return "InvalidParameterValue", fmt.Sprintf("Capacity Reservation %s is of type %s; the instance market type must be capacity-block exactly for Capacity Blocks.", cr.ID, cr.ReservationType)
	case cr.State != ReservationActive || now.Before(cr.Start):
		return "InsufficientInstanceCapacity", fmt.Sprintf("Capacity Reservation %s is not active (%s).", cr.ID, cr.State)
	case cr.ReservationType == ReservationTypeCapacityBlock && !now.Before(cr.End.Add(-capacityBlockTermination)):
		return "InsufficientInstanceCapacity", fmt.Sprintf("Capacity Block %s is ending; it takes no new instances.", cr.ID)
	case e.liveInReservation(cr) >= cr.Total:
		return "ReservationCapacityExceeded", fmt.Sprintf("The requested number of instances exceeds the available capacity of Capacity Reservation %s.", cr.ID)
	}
	return "", ""
}

// reserve records a launched instance's reservation: the one it targeted,
// else for an on-demand launch that does not opt out the first open
// reservation of its type and zone with room, as EC2 matches open
// reservations. Callers hold e.mu and checked reservationError.
func (e *Emulator) reserve(inst *instance, q reservationRequest, now time.Time) {
	w := e.reservations()
	pref := q.preference
	if pref == "" {
		pref = preferenceOpen
	}
	w.pref[inst.ID] = pref
	var cr *capacityReservation
	switch {
	case q.target != "":
		for _, r := range w.list {
			if r.ID == q.target {
				cr = r
			}
		}
	case pref == preferenceOpen && inst.CapacityType == CapacityTypeOnDemand:
		for _, r := range w.list {
			if r.MatchCriteria == MatchOpen && r.State == ReservationActive && r.InstanceType == inst.InstanceType &&
				r.Zone == inst.Zone && !now.Before(r.visibleAt) && e.liveInReservation(r) < r.Total {
				cr = r
				break
			}
		}
	}
	if cr == nil {
		return
	}
	lag := e.hostile.CapacityReservationLagMax
	w.use[inst.ID] = &reservationUse{r: cr, countedAt: now.Add(e.hostile.upTo(lag)), release: e.hostile.upTo(lag)}
	if cr.ReservationType == ReservationTypeCapacityBlock {
		inst.capacityBlock = true
	}
}

// reservationXML is what DescribeInstances shows of an instance's
// reservation: its id and its CapacityReservationSpecification.
func (e *Emulator) reservationXML(id string) (reservationID string, spec *xmlCapacityReservationSpec) {
	w := e.reservations()
	spec = &xmlCapacityReservationSpec{Preference: preferenceOpen}
	if p := w.pref[id]; p != "" {
		spec.Preference = p
	}
	if u := w.use[id]; u != nil {
		reservationID = u.r.ID
		if spec.Preference == preferenceOnly {
			spec.Target = &xmlCapacityReservationTarget{ID: u.r.ID}
		}
	}
	return reservationID, spec
}

type xmlCapacityReservationTarget struct {
	ID string `xml:"capacityReservationId"`
}

type xmlCapacityReservationSpec struct {
	Preference string                        `xml:"capacityReservationPreference"`
	Target     *xmlCapacityReservationTarget `xml:"capacityReservationTarget,omitempty"`
}

// advanceReservations ends Capacity Blocks on the clock; callers hold e.mu.
func (e *Emulator) advanceReservations(now time.Time) {
	w := e.world.reservations
	if w == nil {
		return
	}
	for _, cr := range w.list {
		if cr.ReservationType != ReservationTypeCapacityBlock && !cr.End.IsZero() && cr.State == ReservationActive && !now.Before(cr.End) {
			// An on-demand capacity reservation that ends leaves its
			// instances running, as plain on-demand instances.
			e.endReservation(cr, ReservationExpired)
			continue
		}
		if cr.ReservationType != ReservationTypeCapacityBlock || cr.End.IsZero() || cr.State != ReservationActive {
			continue
		}
		if !cr.warned && !now.Before(cr.End.Add(-capacityBlockWarning)) {
			cr.warned = true
			if q := e.world.queues[e.cfg.ClusterName]; q != nil {
				e.enqueue(q, string(events.NewCapacityBlockExpiration(e.uuid(), cr.ID, cr.End, now)), 0)
			}
			e.log.Info("capacity block expiration warning", "reservation", cr.ID, "end", cr.End)
		}
		if !now.Before(cr.End.Add(-capacityBlockTermination)) {
			for id, u := range w.use {
				if i := e.world.instByID[id]; u.r == cr && i != nil && (i.State == StatePending || i.State == StateRunning) {
					e.setState(i, StateShuttingDown, "Server.ScheduledStop: Capacity Block reservation is ending", now)
				}
			}
		}
		if !now.Before(cr.End) {
			cr.State = ReservationExpired
			e.log.Info("capacity block expired", "reservation", cr.ID)
		}
	}
}

// ReservationInstanceIDs are the ids of the instances in a reservation that
// are not terminated, sorted.
func (e *Emulator) ReservationInstanceIDs(id string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for iid, u := range e.reservations().use {
		if i := e.world.instByID[iid]; u.r.ID == id && i != nil && i.State != StateTerminated {
			out = append(out, iid)
		}
	}
	sort.Strings(out)
	return out
}

// CancelCapacityReservation cancels an on-demand capacity reservation as
// CancelCapacityReservation does: its instances keep running, on-demand,
// out of it.
func (e *Emulator) CancelCapacityReservation(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cr := range e.reservations().list {
		if cr.ID == id {
			if cr.ReservationType == ReservationTypeCapacityBlock {
				return fmt.Errorf("InvalidParameterValue: a Capacity Block cannot be cancelled")
			}
			e.endReservation(cr, ReservationCancelled)
			return nil
		}
	}
	return fmt.Errorf("InvalidCapacityReservationId.NotFound: %s", id)
}

// endReservation ends a default reservation: its instances leave it.
// Callers hold e.mu.
func (e *Emulator) endReservation(cr *capacityReservation, state string) {
	cr.State = state
	for id, u := range e.world.reservations.use {
		if u.r == cr {
			delete(e.world.reservations.use, id)
		}
	}
	e.log.Info("capacity reservation ended", "reservation", cr.ID, "state", state)
}
