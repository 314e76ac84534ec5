package soak

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
)

// scenario is a fault every seed meets at a fixed point of each cycle. The
// random schedule met some paths rarely or never (an orphaned instance
// in one run of 26, a launch that failed for a reason other than
// capacity never): those are driven here, so a fault in the code that
// handles them shows within the CI seeds, not by luck.
type scenario struct {
	at   time.Duration // into each cycle
	name string
	// run does it, or reports that the world does not allow it yet (no
	// instance to orphan, no node draining): it is tried again at the
	// next turn, until the next scenario is due.
	run func(r *runner, ctx context.Context) bool
}

// scenarioCycle repeats the scenarios through a long soak; the CI seeds'
// 15 minutes of churn hold one cycle.
const scenarioCycle = 30 * time.Minute

func scenarios() []scenario {
	return []scenario{
		{2 * time.Minute, "an orphaned instance", (*runner).orphan},
		{4 * time.Minute, "a launch killed after its CreateFleet, then an AMI release", (*runner).armFleetKill},
		{6 * time.Minute, "a pod deleted by its owner while its node drains", (*runner).deleteWhileDraining},
		{9 * time.Minute, "launches failing for a reason other than capacity", (*runner).nonCapacityFailure},
		// Again: the kill may land on a claim that is gone before the
		// next tick (its pods placed elsewhere), and then proves nothing.
		{11 * time.Minute, "a launch killed after its CreateFleet, then an AMI release, again", (*runner).armFleetKill},
	}
}

// coverage counts the paths the scenarios and the chaos drove in a seed.
type coverage struct {
	orphans, fleetKills, nonCapacity, pdbRefusals, terminating atomic.Int64
}

// counts are the coverage by name, for the report.
func (c *coverage) counts() map[string]int64 {
	return map[string]int64{
		"orphans": c.orphans.Load(), "fleet-kills": c.fleetKills.Load(), "non-capacity-failures": c.nonCapacity.Load(),
		"pdb-refusals": c.pdbRefusals.Load(), "terminating-before-eviction": c.terminating.Load(),
	}
}

func (c *coverage) String() string {
	return fmt.Sprintf("orphans=%d fleet-kills=%d non-capacity-failures=%d pdb-refusals=%d terminating-before-eviction=%d",
		c.orphans.Load(), c.fleetKills.Load(), c.nonCapacity.Load(), c.pdbRefusals.Load(), c.terminating.Load())
}

// scenarioDue runs the scenario whose time in the cycle has come, or
// tries again one the world did not allow yet.
func (r *runner) scenarioDue(ctx context.Context) {
	all := scenarios()
	into := r.w.since() % scenarioCycle
	cycle := int(r.w.since() / scenarioCycle)
	for i, s := range all {
		key := cycle*len(all) + i
		if into < s.at || key < r.nextScenario {
			continue
		}
		if key > r.nextScenario {
			// Its predecessor never found the world it needed before
			// this one came due: it is dropped, not stacked.
			r.nextScenario = key
			r.tried = false
		}
		if !r.tried {
			// A kill armed by an earlier scenario stays armed until it
			// fires: dropped when the next scenario came due, it once
			// fired in neither CI seed (a run beside the demo's), and the
			// check that the seeds drove a fleet kill failed by chance.
			r.w.inv.note("scenario: %s", s.name)
			r.tried = true
		}
		if s.run(r, ctx) {
			r.nextScenario, r.tried = key+1, false
		}
	}
	if r.fleetKilled.CompareAndSwap(true, false) {
		r.worldChangesAfterKill(ctx)
	}
}

// worldChangesAfterKill changes the world before the next tick so that
// the killed launch's next attempt cannot be EC2's replay of the same
// call: a new AMI (a new launch template, once the class is resolved
// again), and the offering the killed call launched marked out of
// capacity, as another launch meeting EC2's capacity error in between
// would mark it. Only the claim's tag on the running instance then shows
// that the claim has one.
func (r *runner) worldChangesAfterKill(ctx context.Context) {
	w := r.w
	r.chaos.releaseAMI(ctx)
	claims, err := w.admin.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	unrecorded := map[string]bool{}
	for _, nc := range claims.Items {
		if nc.Status.ProviderID == "" && nc.DeletionTimestamp == nil {
			unrecorded[nc.Name] = true
		}
	}
	cache, err := unavailable.Load(ctx, w.admin.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, w.clk)
	if err != nil {
		return
	}
	for _, i := range w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StatePending || i.State == emulator.StateRunning
	}) {
		if unrecorded[i.Tags[wellknown.NodeClaimTagKey]] {
			cache.Mark(i.CapacityType, i.InstanceType, i.Zone, "InsufficientInstanceCapacity")
			w.inv.note("fault: another launch meets InsufficientInstanceCapacity for %s %s in %s (the killed launch's offering)", i.CapacityType, i.InstanceType, i.Zone)
		}
	}
	if err := cache.Save(ctx); err != nil {
		w.inv.note("marking the killed launch's offering: %v", err)
	}
}

// orphan adds an instance tagged as Karpless's, of a NodeClaim that does
// not exist (a launch whose claim was deleted before its result was
// recorded, as a crash can leave): garbage collection must take it.
func (r *runner) orphan(ctx context.Context) bool {
	w := r.w
	live := w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StateRunning && i.Tags[wellknown.NodeClaimTagKey] != ""
	})
	if len(live) == 0 {
		return false
	}
	src := live[w.intn(len(live))]
	r.orphans++
	ghost := fmt.Sprintf("ghost-%d", r.orphans)
	out, err := w.emu.CloneInstances(src.ID, []map[string]string{{wellknown.NodeClaimTagKey: ghost}})
	if err != nil || len(out) == 0 {
		w.inv.note("orphan: %v", err)
		return false
	}
	w.cov.orphans.Add(1)
	w.inv.note("fault: instance %s (%s) runs for NodeClaim %s, which does not exist", out[0].ID, out[0].InstanceType, ghost)
	return true
}

// armFleetKill makes provisioner invocations that launch die right after
// their first CreateFleet (its instance launched, its answer lost with the
// process), until one does, and starts a Job that needs new nodes.
func (r *runner) armFleetKill(ctx context.Context) bool {
	r.fleetKill.Lock()
	r.fleetKill.armed = true
	r.fleetKill.Unlock()
	r.chaos.burst(ctx)
	return true
}

// takeFleetKill gives the armed switch to an invocation, if armed and not
// with another invocation already.
func (r *runner) takeFleetKill() *deploy.KillSwitch {
	r.fleetKill.Lock()
	defer r.fleetKill.Unlock()
	if !r.fleetKill.armed || r.fleetKill.out {
		return nil
	}
	r.fleetKill.out = true
	return &deploy.KillSwitch{On: "aws CreateFleet", After: true}
}

// fleetKillDone notes an armed invocation's end: fired, the scenario goes
// on (the world changes before the next tick) and the switch is spent;
// not fired (nothing to launch, or the lease held by another), the next
// invocation gets it.
func (r *runner) fleetKillDone(ks *deploy.KillSwitch) {
	r.fleetKill.Lock()
	defer r.fleetKill.Unlock()
	r.fleetKill.out = false
	if ks.Dead() && ks.At > 0 {
		r.fleetKill.armed = false
		r.w.cov.fleetKills.Add(1)
		r.fleetKilled.Store(true)
	}
}

// nonCapacityFailure makes every launch fail for 90 s the way a new
// instance profile IAM does not know yet fails it (no capacity error:
// EC2 launches nothing and says why), while a workload scales up: each
// failed claim must launch with its next token once the fault is gone.
func (r *runner) nonCapacityFailure(ctx context.Context) bool {
	f := emulator.FleetError("InvalidParameterValue", "", "", "")
	f.Message = "Value (karpless-profile) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
	id := r.w.emu.Inject(f)
	r.chaos.ice[id] = r.w.now().Add(90 * time.Second)
	r.w.inv.outage(id, allOfferings, allOfferings, true)
	r.w.cov.nonCapacity.Add(1)
	r.w.inv.note("fault: every CreateFleet override fails with InvalidParameterValue (instance profile) for 90s")
	r.chaos.burst(ctx)
	return true
}

// deleteWhileDraining deletes, as its owner might, a running pod on a
// node being drained (tainted karpenter.sh/disrupted), so that the drain
// meets a pod already terminating: it must neither evict it again nor
// wait on it past its own grace. It waits for a node to drain.
func (r *runner) deleteWhileDraining(ctx context.Context) bool {
	return r.chaos.deleteDrainingPod(ctx)
}

// fleetKillState is the armed kill after CreateFleet: armed until it
// fires, out while an invocation holds it.
type fleetKillState struct {
	sync.Mutex
	armed, out bool
}
