package orchestrate_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/disruption"
	"github.com/karpless/karpless/shared/localaws"
	"github.com/karpless/karpless/shared/localrun/localruntest"
	"github.com/karpless/karpless/shared/wellknown"
)

// crashSetup brings a world to the moment a single-node consolidation
// (one c5.xlarge holding 500m replaced by a cheaper node) is proposed and
// due: the next disruption pass validates and executes it.
func crashSetup(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	// Only c5.xlarge at first: two small pods get one c5.xlarge.
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.xlarge"},
		})
	})
	w.deployment("small", 2, "250m", nil)
	w.converge(2, 2*time.Minute)
	if n := len(w.live()); n != 1 {
		t.Fatalf("want one node, got %v", typesOf(w))
	}
	// Now c5.large is allowed too: the node can be replaced by a cheaper one.
	ctx := context.Background()
	np, err := w.e.Clients.NodePools.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := np.Spec.Template.Spec.Requirements
	reqs[len(reqs)-1].Values = []string{"c5.xlarge", "c5.large"}
	if _, err := w.e.Clients.NodePools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	proposed := func() bool {
		for _, nc := range w.claims() {
			if r, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation]); err == nil && r.Phase == disruption.Proposed {
				return true
			}
		}
		return false
	}
	w.settle(20*time.Second, 2*time.Minute, func() bool { return w.running(2) && proposed() })
	w.clk.Advance(20 * time.Second)
	return w
}

// finish runs fresh passes until the cluster has converged, checking on
// the way that replacements are initialized before candidates go and that
// no command ever has two live replacements for one.
func (w *world) finish(want int) {
	w.t.Helper()
	w.killer = nil
	w.settle(10*time.Second, 3*time.Minute, func() bool {
		w.launchBeforeDelete()
		w.noDuplicateReplacements(2)
		return len(w.live()) == want && w.noneDeleting() && w.running(2) && !w.commandsInFlight()
	})
}

func (w *world) commandsInFlight() bool {
	for _, nc := range w.claims() {
		if _, ok := nc.Annotations[disruption.CommandAnnotation]; ok && nc.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// noDuplicateReplacements fails when a command has two live replacements,
// or more than maxLive instances run at once.
func (w *world) noDuplicateReplacements(maxLive int) {
	w.t.Helper()
	live := map[string]int{}
	for _, nc := range w.claims() {
		if id, ok := nc.Annotations[disruption.ReplacementAnnotation]; ok && nc.DeletionTimestamp == nil {
			live[id]++
		}
	}
	for id, n := range live {
		if n > 1 {
			w.t.Errorf("command %s has %d live replacements", id, n)
		}
	}
	launched := 0
	for _, i := range w.emu.Instances(func(i localaws.Instance) bool {
		return i.State == localaws.StatePending || i.State == localaws.StateRunning
	}) {
		_ = i
		launched++
	}
	if launched > maxLive {
		w.t.Errorf("%d live instances, want at most %d", launched, maxLive)
	}
}

// TestCrashDuringExecution kills the pass that executes a consolidation
// before and after each of its external calls in turn (Kubernetes writes
// and AWS calls), then lets fresh passes run: the consolidation must end
// with one cheaper node, no pod evicted twice, no instance terminated under
// running pods, no leaked instance and never two replacements at once.
// KARPLESS_CRASH_ALL=1 tries every call (run with -timeout 40m); by
// default every fourth is tried.
func TestCrashDuringExecution(t *testing.T) {
	w := crashSetup(t)
	counter := &localruntest.KillSwitch{}
	w.killer = counter
	s := w.disrupt()
	calls := counter.Calls()
	t.Logf("an undisturbed execution pass makes %d external calls: %v", len(calls), calls)
	if len(s.Commands) == 0 || s.Commands[0].Action != "executed" {
		t.Fatalf("the pass did not execute the proposal: %+v", s.Commands)
	}
	w.finish(1)
	w.assertInvariants()

	stride := 4
	if os.Getenv("KARPLESS_CRASH_ALL") != "" {
		stride = 1
	}
	for at := 1; at <= len(calls); at += stride {
		for _, after := range []bool{false, true} {
			when := "before"
			if after {
				when = "after"
			}
			name := fmt.Sprintf("%s call %d (%s)", when, at, calls[at-1])
			t.Run(name, func(t *testing.T) {
				w := crashSetup(t)
				k := &localruntest.KillSwitch{At: at, After: after}
				w.killer = k
				w.disrupt()
				if !k.Dead() {
					t.Fatalf("kill point not reached (%d calls)", len(k.Calls()))
				}
				w.finish(1)
				w.assertInvariants()
			})
		}
	}
}

// TestCrashEveryPass runs a multi-node consolidation from proposal to the
// end while killing every disruption pass at a different call (cycling
// through before and after, call 1, 2, 3, ...), then lets fresh passes
// finish: the same promises must hold.
func TestCrashEveryPass(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("filler", 3, "3", spreadHard)
	w.converge(3, 2*time.Minute)
	w.deployment("app", 2, "300m", nil)
	w.converge(5, 2*time.Minute)
	before := w.cost()
	if err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Delete(context.Background(), "filler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kills := 0
	deadline := time.Now().Add(4 * time.Minute)
	for pass := 0; ; pass++ {
		if len(w.live()) == 1 && w.noneDeleting() && w.running(2) && !w.commandsInFlight() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not converge: %s", w.describe())
		}
		if pass < 30 {
			w.clk.Advance(10 * time.Second) // at most 5 minutes (see maxSettleSkew)
		}
		k := &localruntest.KillSwitch{At: pass/2%12 + 1, After: pass%2 == 1}
		w.killer = k
		w.disrupt()
		if k.Dead() {
			kills++
		}
		w.killer = nil
		w.launchBeforeDelete()
		w.noDuplicateReplacements(4) // three nodes and one replacement
		w.provision()
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("converged through %d killed passes: $%.4f/h -> $%.4f/h (%v)", kills, before, w.cost(), typesOf(w))
	w.assertInvariants()
}
