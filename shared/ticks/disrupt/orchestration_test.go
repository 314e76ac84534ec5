package disrupt_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

// executing brings a world (crashSetup) to a consolidation being carried
// out: record Executing, replacement created, candidate tainted.
func executing(t *testing.T) (*world, *disruption.Record) {
	t.Helper()
	w := crashSetup(t)
	s := w.disrupt()
	if len(s.Commands) == 0 || s.Commands[0].Action != "executed" {
		t.Fatalf("not executed: %+v", s.Commands)
	}
	for _, nc := range w.claims() {
		if r, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation]); err == nil && r.Phase == disruption.Executing {
			return w, r
		}
	}
	t.Fatal("no executing record")
	return nil, nil
}

// clean checks that a command left nothing behind: no record, no taint, no
// DisruptionReason condition, and the candidate kept.
func (w *world) clean(rec *disruption.Record) {
	w.t.Helper()
	for _, nc := range w.claims() {
		if _, ok := nc.Annotations[disruption.CommandAnnotation]; ok {
			w.t.Errorf("claim %s still carries a record", nc.Name)
		}
		if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil {
			w.t.Errorf("claim %s still has DisruptionReason", nc.Name)
		}
		if nc.Name == rec.Candidates[0] && nc.DeletionTimestamp != nil {
			w.t.Errorf("candidate %s was deleted", nc.Name)
		}
		if nc.Name == rec.Replacements[0] && nc.DeletionTimestamp == nil && !nc.IsTrue(karpv1.ConditionTypeInitialized) {
			w.t.Errorf("uninitialized replacement %s kept", nc.Name)
		}
	}
	nodes, err := w.e.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	// A replacement's node may have registered before its claim was
	// deleted: termination taints it on its way out.
	// Its claim may not have recorded the node's name yet (termination
	// finds the node by provider ID), so both keys count.
	leaving, whose := map[string]bool{}, map[string]string{}
	for _, nc := range w.claims() {
		if nc.DeletionTimestamp != nil {
			leaving[nc.Status.NodeName] = true
			leaving[nc.Status.ProviderID] = true
		}
		role := "another claim"
		switch nc.Name {
		case rec.Candidates[0]:
			role = "the candidate"
		case rec.Replacements[0]:
			role = "the replacement"
		}
		whose[nc.Status.ProviderID] = role + " " + nc.Name
	}
	delete(leaving, "")
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil && !leaving[n.Name] && !leaving[n.Spec.ProviderID] && hasDisrupted(n) {
			owner, ok := whose[n.Spec.ProviderID]
			if !ok {
				owner = "no claim (gone)"
			}
			w.t.Errorf("node %s (%s, of %s) still tainted: %v", n.Name, n.Spec.ProviderID, owner, n.Spec.Taints)
		}
	}
}

func hasDisrupted(n corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == wellknown.DisruptedTaintKey {
			return true
		}
	}
	return false
}

func TestAbandonWhenTheReplacementIsDeleted(t *testing.T) {
	w, rec := executing(t)
	// The replacement is retired (say, no capacity) before it initializes.
	ctx := context.Background()
	_ = w.e.Clients.NodeClaims.Delete(ctx, rec.Replacements[0], metav1.DeleteOptions{})
	deadline := time.Now().Add(time.Minute)
	for done := false; !done; {
		if time.Now().After(deadline) {
			t.Fatalf("not abandoned: %s", w.describe())
		}
		w.provision() // finalizes the deleted replacement (terminates its instance)
		for _, c := range w.disrupt().Commands {
			if c.ID == rec.ID && c.Action == "abandoned" {
				t.Logf("abandoned: %s", c.Why)
				done = true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Right after: no trace of the command (a new proposal may follow).
	w.clean(rec)
	w.settle(time.Second, time.Minute, func() bool { return w.running(2) })
	w.assertInvariants()
}

func TestAbandonWhenTheReplacementDoesNotInitialize(t *testing.T) {
	w, rec := executing(t)
	// Ten minutes pass without the replacement becoming initialized (the
	// emulator's node is kept from joining by advancing before it does).
	w.clk.Advance(11 * time.Minute)
	s := w.disrupt()
	found := false
	for _, c := range s.Commands {
		if c.ID == rec.ID && c.Action == "abandoned" {
			found = true
			t.Logf("abandoned: %s", c.Why)
		}
	}
	if !found {
		t.Fatalf("not abandoned: %+v", s.Commands)
	}
	w.clean(rec)
	w.settle(time.Second, time.Minute, func() bool { return w.noneDeleting() && w.running(2) })
	w.assertInvariants()
}

func TestStaleTaintAndConditionAreRemoved(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	w.deployment("web", 1, "1", nil)
	w.converge(1, 2*time.Minute)
	ctx := context.Background()
	nc := w.claims()[0]
	// What a tick that died after marking a candidate leaves behind.
	node, err := w.e.Clients.Core.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, wellknown.DisruptedNoScheduleTaint)
	if _, err := w.e.Clients.Core.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.e.Clients.UpdateNodeClaimStatus(ctx, &nc, func(c *karpv1.NodeClaim) {
		c.SetCondition(karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, "Underutilized", "", metav1.Now())
	}); err != nil {
		t.Fatal(err)
	}
	s := w.disrupt()
	if len(s.Untainted) != 1 {
		t.Fatalf("untainted %v", s.Untainted)
	}
	w.clean(&disruption.Record{Candidates: []string{nc.Name}, Replacements: []string{"none"}})
}

func TestRunTakesTheLeaseOnce(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	a := w.env(nil)
	a.Config.WatchWindow = 0
	d1 := w.disrupter(a)
	ctx := context.Background()
	// The world is hostile and this harness's clients try each call once:
	// the pass may meet a throttle. What matters is that the run took the
	// lease and passed.
	s, err := d1.Run(ctx, "first")
	if s.Skipped != "" || s.Passes != 1 {
		t.Fatalf("first run: %+v %v", s, err)
	}
	if err != nil {
		t.Logf("first run's pass met the hostile world: %v", err)
	}
	// A holder that never released (killed) keeps the lease until it expires.
	held := w.disrupter(w.env(nil))
	if s, err := held.Run(ctx, "second"); s.Skipped != "" || s.Passes != 1 {
		t.Fatalf("second run: %+v %v", s, err)
	} else if err != nil {
		t.Logf("second run's pass met the hostile world: %v", err)
	}
	lease, err := w.e.Clients.Core.CoordinationV1().Leases(a.Config.Namespace).Get(ctx, "karpless-disruption", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = new("someone-else")
	lease.Spec.RenewTime = &metav1.MicroTime{Time: w.clk.Now()}
	if _, err := w.e.Clients.Core.CoordinationV1().Leases(a.Config.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err = w.disrupter(w.env(nil)).Run(ctx, "third")
	if err != nil || s.Skipped == "" {
		t.Fatalf("want skipped while someone else holds the lease, got %+v %v", s, err)
	}
}

// TestRunCarriesAConsolidationThroughItsWindow checks the tick's own loop:
// within one Run (40 s window) a due proposal is validated, executed, its
// replacement launched, registered and initialized by the tick's passes,
// and the candidate deleted. The tick polls every second, and its clock
// runs four times faster than the real one meanwhile (the tick sleeps on
// real timers, so each poll is 4 s of the clock): slow enough that a
// loaded machine still fits the passes the command needs in the window.
func TestRunCarriesAConsolidationThroughItsWindow(t *testing.T) {
	w := crashSetup(t)
	a := w.env(nil)
	a.Config.WatchWindow = 40 * time.Second
	d := w.disrupter(a)
	d.PollInterval = time.Second
	start := time.Now()
	s, err := runTicking(w, d, "windowed")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, c := range s.Commands {
		actions = append(actions, c.Action)
	}
	t.Logf("one Run: %d passes in %s, actions %v", s.Passes, time.Since(start).Round(100*time.Millisecond), actions)
	if !slices.Contains(actions, "executed") || !slices.Contains(actions, "finished") {
		t.Fatalf("the command did not run to its end within the window: %v", actions)
	}
	w.finish(1, 2, 2)
	w.assertInvariants()
}

// TestRunDrainsThroughItsWindow: a NodeClaim deleted by someone (kubectl
// delete nodeclaim) is drained, its instance terminated and its finalizer
// released within one invocation, pass after pass, not a pass a minute.
func TestRunDrainsThroughItsWindow(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("app", 1, "250m", nil)
	w.converge(1, 2*time.Minute)
	claims := w.claims()
	if len(claims) != 1 {
		t.Fatalf("want one claim, got %d", len(claims))
	}
	victim := claims[0].Name
	if err := w.e.Clients.NodeClaims.Delete(context.Background(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a := w.env(nil)
	a.Config.WatchWindow = 50 * time.Second
	d := w.disrupter(a)
	d.PollInterval = 2 * time.Second
	s, err := runTicking(w, d, "draining")
	if err != nil {
		t.Logf("run: %v", err)
	}
	t.Logf("one Run: %d passes, termination %+v", s.Passes, s.Termination)
	if s.Termination.Finished != 1 || s.Passes < 3 {
		t.Fatalf("the deleted claim was not retired within one invocation's window: %d passes, %+v", s.Passes, s.Termination)
	}
	if _, err := w.e.Clients.NodeClaims.Get(context.Background(), victim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim %s still there after the Run (%v)", victim, err)
	}
	w.assertInvariants()
}

// runTicking runs one invocation while the clock moves a second every
// 250 ms of real time, so its window's passes come as they would.
func runTicking(w *world, d *disrupt.Disrupter, holder string) (disrupt.Summary, error) {
	done := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		for {
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
				w.clk.Advance(time.Second)
			}
		}
	}()
	defer func() { close(done); <-ticking }()
	return d.Run(context.Background(), holder)
}
