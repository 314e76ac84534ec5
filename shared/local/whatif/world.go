package whatif

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/overlay"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// Market is what the functions know about prices and availability: the
// pricing book and the unavailable-offerings marks they keep in the
// cluster's ConfigMaps.
type Market struct {
	// Book is the content of the karpless-pricing ConfigMap; nil when it is
	// absent, empty or unreadable.
	Book *pricing.Book `json:"book,omitempty"`
	// Unavailable are the marks of the karpless-unavailable-offerings
	// ConfigMap: offerings that recently failed for lack of capacity.
	Unavailable []Mark `json:"unavailableOfferings,omitempty"`
	// Notes say what could not be read and why (a missing ConfigMap, no
	// permission), for the reports.
	Notes []string `json:"notes,omitempty"`
}

// Mark is one offering out of use until a time.
type Mark struct {
	CapacityType string    `json:"capacityType"`
	InstanceType string    `json:"instanceType"`
	Zone         string    `json:"zone"`
	Until        time.Time `json:"until"`
}

// Options are the function settings that change decisions.
type Options struct {
	// Now is the time decisions are made at (budgets' schedules,
	// consolidateAfter, expiry, capacity marks). Zero means time.Now().
	Now time.Time
	// ReservedENIs is the functions' RESERVED_ENIS setting.
	ReservedENIs int
	// SpotToSpotConsolidation is the functions' feature gate of that name.
	SpotToSpotConsolidation bool
	// ConsolidationTimeout bounds the consolidation search of Simulate and
	// ExplainNodeClaim (0: one minute, as Karpenter's multi-node search).
	ConsolidationTimeout time.Duration
	// Reservations says how many more instances each capacity reservation
	// can take (by id). The cluster does not record EC2's count: a
	// reservation of a class's status not named here is assumed to have
	// room for every claim that wants it (UnknownReservationRoom), and the
	// answers say so.
	Reservations map[string]int
}

// UnknownReservationRoom is the room assumed in a capacity reservation
// whose remaining count the answers were not given: enough for any batch.
const UnknownReservationRoom = 1000

// Input is everything a question is answered from.
type Input struct {
	Cluster *cluster.Snapshot
	Market  Market
	// Catalog is the instance-type catalog; nil loads the compiled-in one.
	Catalog *catalog.Catalog
	Options Options
}

// World is an Input prepared once for any number of questions: the
// launchable instance types of each EC2NodeClass and the simulator's view
// of the cluster.
type World struct {
	snap    *cluster.Snapshot
	opts    Options
	now     time.Time
	classes map[string]*scheduling.NodeClass
	// pending are the pods a provisioning pass would simulate: the pending
	// pods, then the CapacityBuffers' virtual pods.
	pending []*corev1.Pod
	// buffers are the CapacityBuffers as the provisioner resolves them.
	buffers []*buffer.Buffer
	// sim is planning.SimulationInput(snap, pending, classes).
	sim *scheduling.Snapshot
	// notes say where prices came from and what is missing.
	notes []string
	book  *pricing.Book
	// overlays is what the NodeOverlays changed on the instance types.
	overlays overlay.Result
	// cat is the catalog the instance types were built from.
	cat *catalog.Catalog
}

// New prepares a World. It builds every EC2NodeClass's instance types the
// way the provisioner does, with the book's spot prices and zone offerings
// and the live capacity marks; without a book, on-demand prices come from
// the catalog and spot prices are estimated.
func New(in Input) (*World, error) {
	if in.Cluster == nil {
		return nil, fmt.Errorf("whatif: no cluster snapshot")
	}
	w := &World{snap: in.Cluster, opts: in.Options, now: in.Options.Now}
	if w.now.IsZero() {
		w.now = time.Now()
	}
	cat := in.Catalog
	if cat == nil {
		var err error
		if cat, err = catalog.Load(); err != nil {
			return nil, err
		}
	}
	w.notes = append(w.notes, marketNotes(in.Market, w.now)...)
	marks := map[string]time.Time{}
	for _, m := range in.Market.Unavailable {
		k := m.CapacityType + ":" + m.InstanceType + ":" + m.Zone
		if m.Until.After(marks[k]) {
			marks[k] = m.Until
		}
	}
	book := in.Market.Book
	w.book = book
	if book != nil {
		// The provisioner prices with the region's live catalog where the
		// book holds one; so do the answers.
		var fallback []string
		cat, fallback = book.Catalog(cat)
		w.notes = append(w.notes, catalogNote(book, fallback))
	}
	w.cat = cat
	w.classes = map[string]*scheduling.NodeClass{}
	for _, nc := range in.Cluster.NodeClasses {
		types, err := w.instanceTypes(cat, nc, book, marks)
		if err != nil {
			return nil, err
		}
		w.classes[nc.Name] = &scheduling.NodeClass{Name: nc.Name, Ready: nodeclass.IsReady(nc) && nc.DeletionTimestamp == nil, InstanceTypes: types}
		w.notes = append(w.notes, classNotes(nc, len(types))...)
	}
	w.notes = append(w.notes, reservationNotes(in.Cluster.NodeClasses, in.Options.Reservations)...)
	w.applyOverlays()
	w.buffers = buffer.Resolve(in.Cluster, metav1.NewTime(w.now))
	w.pending = append(planning.PodsToProvision(in.Cluster, w.now), buffer.Pods(w.buffers)...)
	w.sim = planning.SimulationInput(in.Cluster, w.pending, w.classes)
	return w, nil
}

// instanceTypes is what the provisioner's pass builds for one class
// (shared/ticks/provision/pass.go, instanceTypes).
func (w *World) instanceTypes(cat *catalog.Catalog, nc *awsv1.EC2NodeClass, book *pricing.Book, marks map[string]time.Time) ([]*scheduling.InstanceType, error) {
	cfg := catalog.NodeConfigFor(nc, nodeclass.Family(nc))
	cfg.ReservedENIs += int64(w.opts.ReservedENIs)
	prices := instancetype.Prices{}
	if book != nil {
		prices.Spot = book.Spot
		if len(book.Zones) > 0 {
			prices.Offered = book.Offered
		}
	}
	unavailable := func(ct, it, zone string) bool {
		until, ok := marks[ct+":"+it+":"+zone]
		return ok && w.now.Before(until)
	}
	types, err := instancetype.Build(cat, cfg, instancetype.Zones(nc), prices, unavailable)
	if err != nil {
		return nil, fmt.Errorf("instance types of ec2nodeclass %s: %w", nc.Name, err)
	}
	// The class's placement group narrows and labels its types as in a
	// launch (cloud.Use does the same), and its capacity reservations add
	// reserved offerings.
	types = cloud.ForPlacementGroup(instancetype.FilterByAMIs(types, nc.Status.AMIs), nc)
	return instancetype.WithReservations(types, nc, w.reservationRoom, unavailable), nil
}

// reservationRoom is what a reservation can still take, as given, else
// UnknownReservationRoom.
func (w *World) reservationRoom(id string) int {
	if n, ok := w.opts.Reservations[id]; ok {
		return n
	}
	return UnknownReservationRoom
}

// reservationNotes say which reservations' counts the answers assumed.
func reservationNotes(ncs []*awsv1.EC2NodeClass, given map[string]int) []string {
	var unknown []string
	for _, id := range nodeclass.ReservationIDs(ncs) {
		if _, ok := given[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("capacity reservations %s: EC2's remaining count is not in the cluster; the answers assume they have room (say how much with --reservations id=N)", strings.Join(unknown, ", "))}
}

// Price is the $/h the functions put on an offering: the class's offering
// (NodeOverlays applied, available or not) when the class has it, else the
// catalog's on-demand price, the book's spot price or its estimate, or the
// reserved price. ok is false for a type the catalog does not know.
func (w *World) Price(class, instanceType, zone, capacityType string) (float64, bool) {
	if c := w.classes[class]; c != nil {
		for _, it := range c.InstanceTypes {
			if it.Name != instanceType {
				continue
			}
			for _, o := range it.Offerings {
				if o.Zone == zone && o.CapacityType == capacityType {
					return o.Price, true
				}
			}
		}
	}
	t, ok := w.cat.Get(instanceType)
	if !ok || t.OnDemandPrice == 0 {
		return 0, false
	}
	switch capacityType {
	case "spot":
		if w.book != nil {
			if p, ok := w.book.Spot[instanceType][zone]; ok {
				return p, true
			}
		}
		return instancetype.SpotEstimate(instanceType, zone, t.OnDemandPrice), true
	case "reserved":
		return instancetype.ReservedPrice(t.OnDemandPrice), true
	}
	return t.OnDemandPrice, true
}

// Notes say where the prices came from and what the answers could not
// know, one sentence each.
func (w *World) Notes() []string { return slices.Clone(w.notes) }

func marketNotes(m Market, now time.Time) []string {
	out := slices.Clone(m.Notes)
	switch b := m.Book; {
	case b == nil:
		out = append(out, "no pricing book (ConfigMap karpless-pricing): on-demand prices are the built-in catalog's, spot prices are estimates (30-45% of on-demand), and every instance type is assumed offered in every zone")
	default:
		age := now.Sub(b.UpdatedAt).Round(time.Second)
		out = append(out, fmt.Sprintf("prices: spot prices and zone offerings from the pricing book of %s (%s old); types without a spot quote use an estimate",
			b.UpdatedAt.UTC().Format(time.RFC3339), age))
	}
	live := 0
	for _, mk := range m.Unavailable {
		if now.Before(mk.Until) {
			live++
		}
	}
	if live > 0 {
		out = append(out, fmt.Sprintf("%d offering(s) marked unavailable after recent capacity errors", live))
	}
	return out
}

// catalogNote says where instance types and on-demand prices came from.
func catalogNote(b *pricing.Book, fallback []string) string {
	l := b.Live
	var parts []string
	if l.Types != nil {
		parts = append(parts, fmt.Sprintf("%d instance types read from %s at %s", len(l.Types), l.Region, l.TypesAt.UTC().Format(time.RFC3339)))
	}
	if l.OnDemand != nil {
		parts = append(parts, fmt.Sprintf("on-demand prices of %d types from the %s price list at %s", len(l.OnDemand), l.Region, l.OnDemandAt.UTC().Format(time.RFC3339)))
	}
	parts = append(parts, fallback...)
	return "catalog: " + strings.Join(parts, "; ")
}

func classNotes(nc *awsv1.EC2NodeClass, types int) []string {
	var out []string
	switch {
	case nc.DeletionTimestamp != nil:
		out = append(out, fmt.Sprintf("EC2NodeClass %s is being deleted: its NodePools launch nothing", nc.Name))
	case !nodeclass.IsReady(nc):
		out = append(out, fmt.Sprintf("EC2NodeClass %s is not Ready for its generation %d (the provisioner resolves it each tick; see kubectl describe ec2nodeclass %s): its NodePools launch nothing", nc.Name, nc.Generation, nc.Name))
	case len(instancetype.Zones(nc)) == 0:
		out = append(out, fmt.Sprintf("EC2NodeClass %s has no resolved subnets: no zone to launch in", nc.Name))
	case types == 0:
		out = append(out, fmt.Sprintf("EC2NodeClass %s: no instance type can boot its resolved AMIs", nc.Name))
	}
	return out
}

// Offering is one way an instance runs: type, zone, capacity type, price.
type Offering struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
	// CreditsPerHour is what a burstable type (t3, t3a, t4g) spends on
	// surplus CPU credits above its baseline with the pods planned on it,
	// on top of PricePerHour (scheduling.CreditHourly).
	CreditsPerHour float64 `json:"creditsPerHour,omitempty"`
	// PriceOverlay names the NodeOverlay that set the price, if one did.
	PriceOverlay string `json:"priceOverlay,omitempty"`
	// CapacityReservation is the reservation a reserved offering launches
	// into (Karpenter prices it at on-demand/10,000,000: it is prepaid).
	CapacityReservation string `json:"capacityReservation,omitempty"`
}

func (o Offering) String() string {
	res := ""
	if o.CapacityReservation != "" {
		res = " in capacity reservation " + o.CapacityReservation + " (prepaid)"
	}
	credits := ""
	if o.CreditsPerHour > 0 {
		credits = " + " + money(o.CreditsPerHour) + " of CPU credits"
	}
	return fmt.Sprintf("%s %s in %s at %s%s%s%s", o.InstanceType, o.CapacityType, o.Zone, money(o.PricePerHour), credits, res, o.overlaid())
}

// Hourly is the offering's price and its credits.
func (o Offering) Hourly() float64 { return o.PricePerHour + o.CreditsPerHour }

// overlaid says which NodeOverlay set the price, for people.
func (o Offering) overlaid() string {
	if o.PriceOverlay == "" {
		return ""
	}
	return " (price from NodeOverlay " + o.PriceOverlay + ")"
}

// launchOffering is the offering a new claim would launch as, nil if none.
func (w *World) launchOffering(n *scheduling.NewNodeClaim) *Offering {
	it, o := n.CheapestOffering()
	if it == nil {
		return nil
	}
	return &Offering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.Price,
		CreditsPerHour: max(0, n.HourlyPrice()-o.Price),
		PriceOverlay:   w.overlays.PriceOverlay(n.NodePool, it.Name, o.Zone, o.CapacityType), CapacityReservation: o.ReservationID}
}

// ClaimSummary is a NodeClaim provisioning or disruption would create.
type ClaimSummary struct {
	NodePool  string `json:"nodePool"`
	NodeClass string `json:"nodeClass"`
	// Pods are namespace/name of the pods it is for.
	Pods []string `json:"pods"`
	// InstanceTypes are the types it may launch as, cheapest first (the
	// launch sends the first 60 to CreateFleet).
	InstanceTypes []string `json:"instanceTypes"`
	// Launch is the offering the launch would pick, nil if none is available.
	Launch *Offering `json:"launch,omitempty"`
}

func (w *World) summarizeClaim(n *scheduling.NewNodeClaim) ClaimSummary {
	s := ClaimSummary{NodePool: n.NodePool, NodeClass: n.NodeClass, Launch: w.launchOffering(n)}
	for _, p := range n.Pods {
		s.Pods = append(s.Pods, p.Namespace+"/"+p.Name)
	}
	sort.Strings(s.Pods)
	for _, it := range n.InstanceTypes {
		s.InstanceTypes = append(s.InstanceTypes, it.Name)
	}
	return s
}

func money(v float64) string { return fmt.Sprintf("$%.4f/h", v) }

// ago renders a duration for people: 3d4h, 2h5m, 4m10s, 12s.
func ago(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}
