package disrupt_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// zonalEnv is the functions' environment with ENABLE_ZONAL_SHIFT on: the
// engines read the shifts from the emulator's ARC with the real SDK client.
func (w *world) zonalEnv() *app.Env {
	a := w.env(nil)
	a.Config.EnableZonalShift, a.Config.ClusterARN = true, w.emu.ClusterARN(clusterName)
	return a
}

// terminationsOf counts the TerminateInstances calls that named the instance.
func terminationsOf(emu *emulator.Emulator, id string) int {
	n := 0
	for _, c := range emu.Calls() {
		if c.Action != "TerminateInstances" {
			continue
		}
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") && slices.Contains(v, id) {
				n++
			}
		}
	}
	return n
}

// TestZonalShift: with ENABLE_ZONAL_SHIFT, a NodeClaim deleted while its
// instance's zone is shifted away from is drained, its pod provisioned
// again in another zone, and its instance left alone (no
// TerminateInstances, no "instance gone" conclusion) until the shift is
// cancelled; then it is terminated and the claim finalized. The NodePool
// gets ZonalShiftActive, then ZonalShiftCleared. A cluster ARC does not
// know fails the pass.
func TestZonalShift(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.apply(nil)
	w.deployment("app", 1, "500m", nil)
	w.converge(1, 2*time.Minute)

	claims := w.claims()
	if len(claims) != 1 {
		t.Fatalf("%d claims, want 1: %s", len(claims), w.describe())
	}
	victim := claims[0]
	id := wellknown.InstanceIDFromProviderID(victim.Status.ProviderID)
	zoneID := victim.Labels[wellknown.TopologyZoneIDLabel]
	if id == "" || zoneID == "" {
		t.Fatalf("claim %s has no instance or zone ID: %s", victim.Name, w.describe())
	}

	// Not registered: the pass fails and names the fix, and does nothing.
	if _, _, err := w.zonalEnv().Disrupter().Pass(ctx); err == nil || !strings.Contains(err.Error(), "enableZonalShift=false") {
		t.Fatalf("a pass on a cluster ARC does not know: %v, want the not-registered error", err)
	}
	if _, err := w.zonalEnv().Provisioner().Pass(ctx); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("a provisioning pass on a cluster ARC does not know: %v, want the not-registered error", err)
	}

	if err := w.emu.RegisterZonalShift(clusterName); err != nil {
		t.Fatal(err)
	}
	shift, err := w.emu.StartZonalShift(w.emu.ClusterARN(clusterName), zoneID, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.e.Clients.NodeClaims.Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pass := func() {
		t.Helper()
		a := w.zonalEnv()
		if _, _, err := a.Disrupter().Pass(ctx); err != nil && !errors.Is(err, testworld.ErrKilled) {
			t.Logf("disruption pass: %v", err)
		}
		if _, err := w.zonalEnv().Provisioner().Pass(ctx); err != nil {
			t.Logf("provisioner pass: %v", err)
		}
	}
	waiting := func() bool {
		for _, nc := range w.claims() {
			if nc.Name == victim.Name {
				return nc.IsTrue(karpv1.ConditionTypeInstanceTerminating) && w.running(1)
			}
		}
		t.Fatalf("claim %s finalized during the shift: %s", victim.Name, w.describe())
		return false
	}
	rounds := testworld.RoundsBackoff(settleSleep)
	deadline := time.Now().Add(3 * time.Minute)
	for !waiting() {
		if time.Now().After(deadline) {
			t.Fatalf("the drain did not reach the instance's termination: %s", w.describe())
		}
		w.clk.Advance(5 * time.Second)
		w.step(time.Second)
		pass()
		time.Sleep(rounds.Step())
	}
	// Garbage collection and termination run for a while longer: the
	// instance stays, and so does its claim.
	for range 5 {
		w.clk.Advance(time.Minute)
		w.step(time.Second)
		pass()
	}
	if n := terminationsOf(w.emu, id); n != 0 {
		t.Errorf("%d TerminateInstances for %s, in a shifted zone", n, id)
	}
	if !slices.ContainsFunc(w.claims(), func(nc karpv1.NodeClaim) bool { return nc.Name == victim.Name }) {
		t.Fatalf("claim %s finalized during the shift", victim.Name)
	}
	for _, nc := range w.claims() {
		if nc.Name != victim.Name && nc.Labels[wellknown.TopologyZoneIDLabel] == zoneID {
			t.Errorf("claim %s launched into the shifted zone %s", nc.Name, zoneID)
		}
	}
	if got := w.eventsFor(zonalshift.ReasonActive, "NodePool", "Warning"); !slices.Equal(got, []string{"default"}) {
		t.Errorf("%s on NodePools %v, want [default]", zonalshift.ReasonActive, got)
	}

	if err := w.emu.CancelZonalShift(shift); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(3 * time.Minute)
	for slices.ContainsFunc(w.claims(), func(nc karpv1.NodeClaim) bool { return nc.Name == victim.Name }) {
		if time.Now().After(deadline) {
			t.Fatalf("claim %s not finalized after the shift: %s", victim.Name, w.describe())
		}
		w.clk.Advance(5 * time.Second)
		w.step(time.Second)
		pass()
		time.Sleep(rounds.Step())
	}
	if n := terminationsOf(w.emu, id); n == 0 {
		t.Errorf("%s finalized without a TerminateInstances for it", victim.Name)
	}
	if got := w.eventsFor(zonalshift.ReasonCleared, "NodePool", "Normal"); !slices.Equal(got, []string{"default"}) {
		t.Errorf("%s on NodePools %v, want [default]", zonalshift.ReasonCleared, got)
	}
}
