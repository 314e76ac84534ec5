package disrupt_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube/pause"
)

// TestPausedTickLeavesTheEmptyNode: an empty node that emptiness would
// delete stays while Karpless is paused, over several ticks; the ticks'
// summaries say paused. Resumed, the next ticks delete it.
func TestPausedTickLeavesTheEmptyNode(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.apply(nil)
	w.deployment("web", 2, "1", spreadHard)
	w.converge(2, 2*time.Minute)
	if n := len(w.live()); n != 2 {
		t.Fatalf("%d instances, want 2", n)
	}
	cms := w.e.Clients.Core.CoreV1()
	if _, err := pause.Set(ctx, cms, config.DefaultNamespace, pause.Change{Paused: true, By: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cms.ConfigMaps(config.DefaultNamespace).Delete(ctx, pause.ConfigMapName, metav1.DeleteOptions{})
	})
	w.scale("web", 1)
	for i := range 6 {
		w.clk.Advance(20 * time.Second)
		w.step(time.Second)
		sum, err := w.disrupter(w.env(nil)).Run(ctx, "paused")
		if err != nil || !sum.Paused || sum.Passes != 0 {
			t.Fatalf("tick %d while paused: %+v, %v", i, sum, err)
		}
		if !w.noneDeleting() || len(w.live()) != 2 {
			t.Fatalf("tick %d while paused disrupted: %s", i, w.describe())
		}
	}
	if _, err := pause.Set(ctx, cms, config.DefaultNamespace, pause.Change{Paused: false, By: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	sum, err := w.disrupter(w.env(nil)).Run(ctx, "resumed")
	if err != nil || sum.Paused || sum.Passes == 0 {
		t.Errorf("resumed tick: %+v, %v", sum, err)
	}
	w.settle(20*time.Second, 2*time.Minute, func() bool { return len(w.live()) == 1 && w.noneDeleting() && w.running(1) })
	w.assertInvariants()
}
