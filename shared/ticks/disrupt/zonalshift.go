package disrupt

import (
	"context"
	"fmt"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	awszonalshift "github.com/karpless/karpless/shared/aws/zonalshift"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/function/record"
)

// ZonalShiftsKey keeps, in the state ConfigMap, the zones (IDs) the last
// pass found shifted away from (zonalshift.Zones.String): a shift's start
// and end are told on the NodePools once each, across invocations, as
// Karpenter's controller remembers them in memory between its reconciles;
// and every function goes by them when ARC does not answer.
const ZonalShiftsKey = "zonalShifts"

// zonalShift reads the zones ARC shifts the cluster away from and returns
// the instance side of the pass: the tick's, made to spare the instances
// of those zones its claims know of (instance.Provider.WithZonalShift). It
// fails when ARC cannot say: terminating as if no zone were shifted is what
// ENABLE_ZONAL_SHIFT is there to prevent. It tells the NodePools of
// shifts that began or ended since the last pass (not in shadow mode:
// Karpenter does).
func (d *Disrupter) zonalShift(ctx context.Context, inv *invocation, snap *cluster.Snapshot) (Instances, error) {
	if d.ZonalShifts == nil {
		return d.Instances, nil
	}
	shifted, err := awszonalshift.Read(ctx, d.ZonalShifts)
	if err != nil {
		d.Log.Error("reading ARC zonal shifts (ENABLE_ZONAL_SHIFT); the pass stops", "error", err)
		return nil, fmt.Errorf("zonal shift: %w", err)
	}
	if !d.shadow() {
		d.noteZonalShifts(inv.state, shifted, snap)
	}
	shifter, ok := d.Instances.(instance.ZonalShifter)
	if !ok || len(shifted) == 0 {
		return d.Instances, nil
	}
	d.Log.Info("zonal shift in force: no EC2 call for the instances of these zones", "zone_ids", shifted.Sorted())
	return shifter.WithZonalShift(shifted, cloud.KnownInstances(snap.NodeClaims, snap.NodeClasses)), nil
}

// noteZonalShifts records ZonalShiftActive and ZonalShiftCleared on the
// NodePools a change of shifted zones affects, and remembers the zones.
func (d *Disrupter) noteZonalShifts(st *state, shifted zonalshift.Zones, snap *cluster.Snapshot) {
	previous := zonalshift.Parse(st.zonalShifts)
	if previous.String() == shifted.String() {
		return
	}
	classes := map[string]*awsv1.EC2NodeClass{}
	for _, nc := range snap.NodeClasses {
		classes[nc.Name] = nc
	}
	for _, n := range zonalshift.Notes(previous, shifted, snap.NodePools, classes) {
		obj := record.ObjectOf(karpv1.SchemeGroupVersion.WithKind("NodePool"), n.Pool)
		if n.Cleared {
			d.Events.Normal(obj, n.Reason(), "%s", n.Message())
		} else {
			d.Events.Warning(obj, n.Reason(), "%s", n.Message())
		}
	}
	d.Log.Info("zonal shifts changed", "previous", previous.Sorted(), "now", shifted.Sorted())
	st.zonalShifts, st.changed = shifted.String(), true
}
