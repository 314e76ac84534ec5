package interrupt_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/local/emulator"
)

// TestPausedInterruptionProtectsButDoesNotReplace: while Karpless is
// paused, a spot interruption still taints and retires the node and its
// drain and termination go on, but no replacement is launched; the pods
// wait, pending, for the resume.
func TestPausedInterruptionProtectsButDoesNotReplace(t *testing.T) {
	w := setup(t, 2)
	ctx := context.Background()
	cms := w.E.Clients.Core.CoreV1()
	if _, err := pause.Set(ctx, cms, config.DefaultNamespace, pause.Change{Paused: true, By: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cms.ConfigMaps(config.DefaultNamespace).Delete(ctx, pause.ConfigMapName, metav1.DeleteOptions{})
	})
	victim, id := claimWithNode(t, w)
	fleetsBefore := w.Emu.CallCount("CreateFleet")
	if _, err := w.Emu.InjectEvent(emulator.Event{Kind: emulator.EventSpotInterruption, InstanceIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	out := deliver(t, w, mapping(t, w), w.App.InterruptionHandler())
	if out.Failed != 0 || out.HandlerErr != nil {
		t.Fatalf("delivery: %+v", out)
	}
	if nc := getClaim(t, w, victim.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("interrupted NodeClaim not deleted while paused")
	}
	node, err := cms.Nodes().Get(ctx, victim.Status.NodeName, metav1.GetOptions{})
	if err == nil && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) }) {
		t.Error("interrupted node not tainted while paused")
	}
	// Drained and terminated: the claim goes.
	waitGone(t, w, victim.Name)
	if n := w.Emu.CallCount("CreateFleet"); n != fleetsBefore {
		t.Errorf("%d CreateFleet calls while paused, want none", n-fleetsBefore)
	}
	pending := 0
	for _, p := range w.ListPods() {
		if p.Spec.NodeName == "" {
			pending++
		}
	}
	if pending == 0 {
		t.Error("no pod waits for capacity: was a replacement launched?")
	}
	w.AssertNoLeaks()
}
