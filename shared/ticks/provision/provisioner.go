// Package provision is the provisioner tick: it turns pending pods into
// NodeClaims and EC2 instances, and moves NodeClaims until their nodes are ready.
//
// A tick takes the provisioning lease, then runs passes: snapshot the
// cluster, run the EC2NodeClass finalizer (add it to each class; finish
// each deleted class no NodeClaim refers to any more), refresh
// EC2NodeClass status, advance every NodeClaim one step, simulate
// scheduling of the pending pods, create the NodeClaims the simulation
// asks for (the durable intent) and launch each with CreateFleet.
// When a pass found work, the tick keeps watching pending pods for the rest
// of its window, batching them as Karpenter does, and hands over through the
// lease. Every step is idempotent, so a tick killed anywhere is finished by
// the next one.
package provision

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	awszonalshift "github.com/karpless/karpless/shared/aws/zonalshift"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"k8s.io/utils/clock"
)

// LeaseName is the lease provisioning passes hold; the interruption function
// borrows it to launch replacements.
const LeaseName = "karpless-provisioning"

// NodeClassResolver computes an EC2NodeClass's status from AWS.
type NodeClassResolver interface {
	Resolve(ctx context.Context, nc *awsv1.EC2NodeClass, cluster eksauth.ClusterInfo) (awsv1.EC2NodeClassStatus, error)
}

// Provisioner holds the clients and settings of the provisioning tick; it
// keeps no data between invocations.
type Provisioner struct {
	Config    config.Config
	Kube      *kube.Clients
	Instances *instance.Provider
	Resolver  NodeClassResolver
	// Cleanup finishes deleted EC2NodeClasses (their finalizer); nil adds
	// no finalizer and finishes none.
	Cleanup NodeClassCleanup
	// Reservations reads what capacity reservations can still take; nil
	// uses the resolver's EC2 client when it is a *nodeclass.Resolver.
	Reservations nodeclass.CapacityReservationAPI
	Templates    cloud.Templates
	Prices       cloud.Prices
	Catalog      *catalog.Catalog
	// Cluster returns the cluster facts user data needs (cached by the caller).
	Cluster func(ctx context.Context) (eksauth.ClusterInfo, error)
	Clock   clock.WithTicker
	Log     *slog.Logger
	// Metrics and Events are per invocation; Run creates them when nil.
	Metrics *record.Metrics
	Events  *record.Recorder
	// MetricsOut receives the EMF lines after each pass of Run and at its
	// end (nil: discarded).
	MetricsOut io.Writer
	// OffSchedule marks a Run the watcher started, not the schedule: it
	// observes no pod timings, which the scheduled ticks' windows tile.
	OffSchedule bool
	// ZonalShifts reads the zones ARC shifts the cluster away from
	// (ENABLE_ZONAL_SHIFT); nil reads none. Each pass and session reads
	// it once; a failed read fails the pass.
	ZonalShifts awszonalshift.Source
	// Decisions, in shadow mode (MODE=shadow), records the NodeClaims a
	// pass would create and launch instead of creating them, and the pass
	// writes nothing of Karpenter's: no EC2NodeClass status or finalizer,
	// no NodeOverlay or CapacityBuffer status, no lifecycle step of any
	// NodeClaim (they are Karpenter's), no Event on pods. Nil acts.
	Decisions *shadow.Recorder
}

// Summary is what a tick did, for logs and tests.
type Summary struct {
	Skipped string `json:"skipped,omitempty"`
	// Paused: the pause switch was on; the tick did nothing.
	Paused            bool `json:"paused,omitempty"`
	Passes            int  `json:"passes"`
	PendingPods       int  `json:"pendingPods"`
	NodeClaimsCreated int  `json:"nodeClaimsCreated"`
	Launched          int  `json:"launched"`
	Registered        int  `json:"registered"`
	Initialized       int  `json:"initialized"`
	Retired           int  `json:"retired"`
	Unschedulable     int  `json:"unschedulable"`
	// Deferred are the pending pods the last pass left for the next one:
	// a backlog is provisioned for timing.MaxPodsPerPass pods at a time.
	Deferred int `json:"deferredPods,omitempty"`
	// ShadowDecisions counts the launches a shadow pass recorded instead
	// of creating them.
	ShadowDecisions int           `json:"shadowDecisions,omitempty"`
	SnapshotBytes   int64         `json:"snapshotBytes"`
	Duration        time.Duration `json:"duration"`
	Errors          []string      `json:"errors,omitempty"`
}

func (s *Summary) add(p passResult) {
	s.Passes++
	s.PendingPods += p.pending
	s.NodeClaimsCreated += p.created
	s.Launched += p.lifecycle.Launched + p.launched
	s.Registered += p.lifecycle.Registered
	s.Initialized += p.lifecycle.Initialized
	s.Retired += p.lifecycle.Retired
	s.Unschedulable = p.unschedulable
	s.Deferred = p.deferred
	s.ShadowDecisions += p.decisions
	s.SnapshotBytes += p.snapshotBytes
}

// openCloud opens the invocation's view of EC2 (once) with the guard it
// carries.
func (p *Provisioner) openCloud(ctx context.Context, inv *invocation) error {
	if inv.cloud != nil {
		return nil
	}
	reservations := p.Reservations
	if r, ok := p.Resolver.(*nodeclass.Resolver); ok && reservations == nil && r.EC2 != nil {
		reservations = r.EC2
	}
	c, err := cloud.Open(ctx, cloud.Deps{
		Reservations: reservations,
		ClusterName:  p.Config.ClusterName, Namespace: p.Config.Namespace, ReservedENIs: p.Config.ReservedENIs,
		VMMemoryOverheadPercent: p.Config.VMMemoryOverheadPercent,
		UnavailableOfferingsTTL: p.Config.UnavailableOfferingsTTL, Kube: p.Kube, Instances: p.Instances,
		Templates: p.Templates, Prices: p.Prices, Catalog: p.Catalog, Cluster: p.Cluster,
		Clock: p.Clock, Log: p.Log, Events: p.Events, Metrics: p.Metrics,
	})
	if err != nil {
		return err
	}
	c.Guard(inv.guard)
	inv.cloud = c
	return nil
}

// readZonalShift reads the zones shifted away from into the invocation.
// It fails when ARC cannot say (a cluster not registered with it, the
// call refused): launching or terminating as if no zone were shifted is
// what the setting is there to prevent.
func (p *Provisioner) readZonalShift(ctx context.Context, inv *invocation) error {
	z, err := awszonalshift.Read(ctx, p.ZonalShifts)
	if err != nil {
		p.Log.Error("reading ARC zonal shifts (ENABLE_ZONAL_SHIFT); the pass stops", "error", err)
		return err
	}
	if len(z) > 0 {
		p.Log.Info("zonal shift in force: no launch into these zones, and no EC2 call for their instances", "zone_ids", z.Sorted())
	}
	inv.shifted = z
	return nil
}

// shadow reports whether the pass only records its decisions.
func (p *Provisioner) shadow() bool { return p.Decisions != nil }

func (p *Provisioner) validate() error {
	switch {
	case p.Kube == nil, p.Instances == nil, p.Resolver == nil, p.Templates == nil, p.Prices == nil, p.Catalog == nil, p.Cluster == nil, p.Clock == nil, p.Log == nil:
		return fmt.Errorf("provisioner is missing a dependency")
	}
	return nil
}
