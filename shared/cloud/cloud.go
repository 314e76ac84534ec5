// Package cloud is the seam between the ticks and EC2: for one invocation,
// the instance types each EC2NodeClass can launch (offerings, prices,
// capacity marks) and the launch of a NodeClaim's instance.
//
// A tick opens a Cloud once, tells it which node classes the cluster has
// (Use), simulates with InstanceTypes, and launches with Launch; Close saves
// the capacity marks the launches made. The offerings a launch asks for are
// ordered by scheduling.LaunchOrder, the rules the simulation's price
// prediction uses too.
package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/kube/lease"
)

// TemplateRequest is what a launch template set is built from.
type TemplateRequest struct {
	NodeClass     *awsv1.EC2NodeClass
	NodeClaim     *karpv1.NodeClaim
	InstanceTypes []*scheduling.InstanceType
	CapacityType  string
	Cluster       eksauth.ClusterInfo
	// Seen is the invocation's memory of templates already ensured.
	Seen *launchtemplate.Seen
	// CapacityReservationID and CapacityReservationType are the
	// reservation a reserved launch targets.
	CapacityReservationID, CapacityReservationType string
}

// Templates ensures launch templates exist for a launch, one per AMI group.
type Templates interface {
	Ensure(ctx context.Context, r TemplateRequest) ([]instance.LaunchTemplate, error)
}

// Prices is where offerings and spot prices come from.
type Prices interface {
	Get(ctx context.Context) (*pricing.Book, error)
}

// Deps are the clients and settings a Cloud works with.
type Deps struct {
	ClusterName string
	// Namespace holds the unavailable offerings' ConfigMap.
	Namespace    string
	ReservedENIs int
	// VMMemoryOverheadPercent is VM_MEMORY_OVERHEAD_PERCENT; nil: Karpenter's.
	VMMemoryOverheadPercent *float64
	UnavailableOfferingsTTL time.Duration
	Kube                    *kube.Clients
	Instances               *instance.Provider
	Templates               Templates
	Prices                  Prices
	// Reservations reads what capacity reservations can still take (EC2
	// DescribeCapacityReservations); nil leaves reserved offerings
	// unavailable.
	Reservations nodeclass.CapacityReservationAPI
	Catalog      *catalog.Catalog
	// Cluster returns the cluster facts user data needs (cached by the caller).
	Cluster func(ctx context.Context) (eksauth.ClusterInfo, error)
	Clock   clock.WithTicker
	Log     *slog.Logger
	Events  *record.Recorder
	Metrics *record.Metrics
}

// Cloud is one invocation's view of EC2. Launch and LaunchAll may run
// concurrently; Use and Close may not run beside them.
type Cloud struct {
	Deps
	book    *pricing.Book
	ice     *unavailable.Cache
	views   map[string]*classView
	classes map[string]*scheduling.NodeClass
	// guard, when set, is called before every CreateFleet and fails when
	// this invocation no longer holds the provisioning lease.
	guard lease.Guard
	// templates are the launch templates this invocation has ensured.
	templates launchtemplate.Seen
	// launched counts successful launches (launches run in parallel).
	launched atomic.Int64
	// resv is what capacity reservations can still take (reservation.go).
	resv reservations
	// shifted are the zones (IDs) ARC shifts the cluster away from, and
	// unshifted the Instances the Cloud was opened with (zonalshift.go).
	shifted   zonalshift.Zones
	unshifted *instance.Provider
}

type classView struct {
	nc    *awsv1.EC2NodeClass
	types []*scheduling.InstanceType
	// pools are the types of the NodePools that see the class otherwise
	// (NodeOverlays that select some of its pools only).
	pools map[string][]*scheduling.InstanceType
}

// forPool is the view a NodeClaim of that NodePool launches with.
func (v *classView) forPool(pool string) *classView {
	types, ok := v.pools[pool]
	if !ok {
		return v
	}
	return &classView{nc: v.nc, types: types}
}

// Open reads the capacity marks (unavailable offerings).
func Open(ctx context.Context, d Deps) (*Cloud, error) {
	ice, err := unavailable.Load(ctx, d.Kube.Core.CoreV1(), d.Namespace, d.UnavailableOfferingsTTL, d.Clock)
	if err != nil {
		return nil, err
	}
	return &Cloud{Deps: d, ice: ice, views: map[string]*classView{}, classes: map[string]*scheduling.NodeClass{}}, nil
}

// Use builds the launchable instance types of the node classes, reading
// the price book on first need (once per Cloud).
func (c *Cloud) Use(ctx context.Context, ncs []*awsv1.EC2NodeClass) error {
	if c.book == nil && len(ncs) > 0 {
		book, err := c.Prices.Get(ctx)
		if err != nil {
			return err
		}
		c.book = book
	}
	cat := c.Catalog
	if c.book != nil {
		var fallback []string
		cat, fallback = c.book.Catalog(c.Catalog)
		c.reportFallback(ncs, fallback)
	}
	c.readReservations(ctx, ncs)
	views := map[string]*classView{}
	classes := map[string]*scheduling.NodeClass{}
	for _, nc := range ncs {
		family := nodeclass.Family(nc)
		cfg := catalog.NodeConfigFor(nc, family)
		cfg.ReservedENIs += int64(c.ReservedENIs)
		cfg.VMMemoryOverheadPercent = c.VMMemoryOverheadPercent
		prices := instancetype.Prices{}
		if book := c.book; book != nil {
			prices.Spot = book.Spot
			if len(book.Zones) > 0 {
				prices.Offered = book.Offered
			}
		}
		types, err := instancetype.Build(cat, cfg, instancetype.Zones(nc), prices, c.withoutShifted(nc, unavailableIn(c.ice, nc)))
		if err != nil {
			return fmt.Errorf("instance types of ec2nodeclass %s: %w", nc.Name, err)
		}
		types = instancetype.FilterByAMIs(types, nc.Status.AMIs)
		types = ForPlacementGroup(types, nc)
		types = instancetype.WithReservations(types, nc, c.available, c.withoutShifted(nc, c.ice.Unavailable))
		views[nc.Name] = &classView{nc: nc, types: types}
		classes[nc.Name] = &scheduling.NodeClass{Name: nc.Name, Ready: nodeclass.IsReady(nc) && nc.DeletionTimestamp == nil, InstanceTypes: types}
	}
	c.views, c.classes = views, classes
	return nil
}

// CatalogFallback is the reason of the Event that says the build's
// catalog stands in for the region's live instance types or prices.
const CatalogFallback = "InstanceTypesFromBuild"

// reportFallback says, when the build stands in for part of the region's
// catalog, which part and why: a metric on every tick, and a log line and
// an Event on each EC2NodeClass when this invocation's reading failed (so
// at most once per retry, not every minute, and not while a first reading
// is merely in progress).
func (c *Cloud) reportFallback(ncs []*awsv1.EC2NodeClass, fallback []string) {
	if len(fallback) == 0 {
		return
	}
	c.Metrics.Gauge("karpless_catalog_fallback", float64(len(fallback)), nil)
	if !c.book.ReadFailed() {
		return
	}
	why := strings.Join(fallback, "; ")
	c.Log.Warn("the build's instance-type catalog stands in", "reason", why)
	for _, nc := range ncs {
		c.Events.Warning(record.ObjectOf(awsv1.SchemeGroupVersion.WithKind("EC2NodeClass"), nc), CatalogFallback, "%s", why)
	}
}

// Guard makes every launch check g first (the caller's lease): a Cloud
// that outlives its lease launches nothing more.
func (c *Cloud) Guard(g lease.Guard) { c.guard = g }

// InstanceTypes are the launchable instance types per EC2NodeClass name,
// as the simulator takes them.
func (c *Cloud) InstanceTypes() map[string]*scheduling.NodeClass { return c.classes }

// NodeClass is the EC2NodeClass of that name as Use was given it, or nil.
func (c *Cloud) NodeClass(name string) *awsv1.EC2NodeClass {
	if v := c.views[name]; v != nil {
		return v.nc
	}
	return nil
}

// Launched counts the launches of this Cloud that started an instance.
func (c *Cloud) Launched() int { return int(c.launched.Load()) }

// Close saves the capacity marks the launches made. They matter most after
// a pass that ran out of time working through capacity errors, so the save
// outlives the invocation's context, briefly (the deadline margin is there
// for it). Losing them only costs repeated capacity errors: a failure is
// logged.
func (c *Cloud) Close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timing.FlushTimeout)
	defer cancel()
	if err := c.ice.Save(ctx); err != nil {
		c.Log.Warn("saving unavailable offerings", "error", err)
	}
}
