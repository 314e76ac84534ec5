package disrupt_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

// repairPass runs one disruption pass with NODE_REPAIR on or off.
func (w *world) repairPass(on bool) disrupt.Summary {
	w.t.Helper()
	d := w.disrupter(w.env(nil))
	d.Config.NodeRepair = on
	s, _, err := d.Pass(context.Background())
	if err != nil {
		w.t.Logf("disruption pass: %v", err)
	}
	return s
}

// repairBlocked lists the nodes with a NodeRepairBlocked Warning.
func (w *world) repairBlocked() []string {
	w.t.Helper()
	return w.eventsFor("NodeRepairBlocked", "Node", corev1.EventTypeWarning)
}

// claimOf is the NodeClaim of the instance with providerID, or nil.
func (w *world) claimOf(providerID string) *karpv1.NodeClaim {
	for _, nc := range w.claims() {
		if nc.Status.ProviderID == providerID {
			return &nc
		}
	}
	return nil
}

// TestNodeRepair: of a NodePool's three nodes, two have been not Ready
// for 31 minutes. More than 20% (rounded up: one node) are unhealthy, so
// neither is replaced and both get NodeRepairBlocked; once one recovers,
// the other is replaced (forcefully: its pods go, a new node comes) and
// the recovered one stays. With NODE_REPAIR off nothing happens.
func TestNodeRepair(t *testing.T) {
	w := newWorld(t)
	w.tolerateNotReady = true
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	w.deployment("web", 3, "1", spreadHard)
	w.converge(3, time.Minute)
	live := w.live()
	if len(live) != 3 {
		t.Fatalf("%d instances, want 3: %s", len(live), w.describe())
	}
	ctx := context.Background()
	sick, recovering := live[0], live[1]
	for _, i := range []string{sick.ID, recovering.ID} {
		if err := w.emu.SetNodeCondition(ctx, i, corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			LastTransitionTime: metav1.NewTime(w.clk.Now().Add(-31 * time.Minute)),
		}); err != nil {
			t.Fatal(err)
		}
	}

	if s := w.repairPass(false); len(s.Repaired) > 0 || !w.noneDeleting() {
		t.Fatalf("NODE_REPAIR off repaired %v", s.Repaired)
	}
	if s := w.repairPass(true); len(s.Repaired) > 0 || !w.noneDeleting() {
		t.Fatalf("two of three unhealthy (over 20%%) repaired %v", s.Repaired)
	}
	want := []string{sick.NodeName, recovering.NodeName}
	slices.Sort(want)
	if got := w.repairBlocked(); !slices.Equal(got, want) {
		t.Fatalf("NodeRepairBlocked on %v, want %v", got, want)
	}

	if err := w.emu.SetNodeCondition(ctx, recovering.ID, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}); err != nil {
		t.Fatal(err)
	}
	sickClaim := w.claimOf(sick.ProviderID())
	s := w.repairPass(true)
	if !slices.Equal(s.Repaired, []string{sickClaim.Name}) {
		t.Fatalf("repaired %v, want %s", s.Repaired, sickClaim.Name)
	}
	nc := w.claimOf(sick.ProviderID())
	if nc == nil || nc.DeletionTimestamp == nil || nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation] == "" {
		t.Fatalf("repaired claim not deleting with a termination timestamp: %+v", nc)
	}
	deadline := time.Now().Add(time.Minute)
	rounds := testworld.RoundsBackoff(settleSleep)
	for {
		w.repairPass(true)
		w.provision()
		gone := !slices.ContainsFunc(w.live(), func(i emulator.Instance) bool { return i.ID == sick.ID })
		if gone && w.running(3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unhealthy node not replaced: %s", w.describe())
		}
		w.step(time.Second)
		time.Sleep(rounds.Step())
	}
	if nc := w.claimOf(recovering.ProviderID()); nc == nil || nc.DeletionTimestamp != nil {
		t.Errorf("the recovered node's claim was deleted")
	}
	if n := len(w.live()); n != 3 {
		t.Errorf("%d instances after the repair, want 3", n)
	}
	w.assertInvariants()
}

// TestInstanceStatus: EC2's own view, as Karpenter's instance status
// controller reads it. Of three nodes, one's instance fails its status
// check and another is scheduled for retirement. The retirement is acted
// on at once (the claim deleted, its pods drained within their budgets);
// the failed check only once it has failed for two minutes, and then
// forcefully (termination grace period cut to now). The third node stays,
// and both are replaced.
func TestInstanceStatus(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	w.deployment("web", 3, "1", spreadHard)
	w.converge(3, time.Minute)
	live := w.live()
	if len(live) != 3 {
		t.Fatalf("%d instances, want 3: %s", len(live), w.describe())
	}
	broken, retiring, healthy := live[0], live[1], live[2]
	if err := w.emu.SetInstanceHealth(broken.ID, emulator.InstanceHealth{InstanceImpaired: true}); err != nil {
		t.Fatal(err)
	}
	if err := w.emu.SetInstanceHealth(retiring.ID, emulator.InstanceHealth{Events: []emulator.ScheduledEvent{
		{Code: "instance-retirement", NotBefore: w.clk.Now().Add(72 * time.Hour)},
	}}); err != nil {
		t.Fatal(err)
	}
	retiringClaim, brokenClaim := w.claimOf(retiring.ProviderID()), w.claimOf(broken.ProviderID())

	// The event counts at once, without cutting the grace period; the
	// failed check not yet (node repair being off changes nothing).
	var impaired []string
	for try := 0; try < 5 && len(impaired) == 0; try++ {
		impaired = w.repairPass(false).Impaired
	}
	if !slices.Equal(impaired, []string{retiringClaim.Name}) {
		t.Fatalf("impaired %v, want %s", impaired, retiringClaim.Name)
	}
	if nc := w.claimOf(retiring.ProviderID()); nc == nil || nc.DeletionTimestamp == nil {
		t.Fatalf("the retiring instance's claim is not deleting: %+v", nc)
	} else if _, cut := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; cut {
		t.Errorf("a scheduled event cut the grace period: %v", nc.Annotations)
	}
	if nc := w.claimOf(broken.ProviderID()); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatalf("a check failed for less than two minutes deleted its claim")
	}

	w.step(2 * time.Minute)
	impaired = nil
	for try := 0; try < 5 && !slices.Contains(impaired, brokenClaim.Name); try++ {
		impaired = append(impaired, w.repairPass(false).Impaired...)
	}
	if !slices.Equal(impaired, []string{brokenClaim.Name}) {
		t.Fatalf("impaired %v, want %s only (the retiring claim is deleting already)", impaired, brokenClaim.Name)
	}
	if nc := w.claimOf(broken.ProviderID()); nc == nil || nc.DeletionTimestamp == nil || nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation] == "" {
		t.Fatalf("the broken instance's claim is not deleting with a termination timestamp: %+v", nc)
	}
	if got := w.eventsFor("InstanceUnhealthy", "NodeClaim", corev1.EventTypeWarning); !slices.Contains(got, brokenClaim.Name) || !slices.Contains(got, retiringClaim.Name) {
		t.Errorf("InstanceUnhealthy on claims %v", got)
	}

	deadline := time.Now().Add(time.Minute)
	rounds := testworld.RoundsBackoff(settleSleep)
	for {
		w.repairPass(false)
		w.provision()
		ids := map[string]bool{}
		for _, i := range w.live() {
			ids[i.ID] = true
		}
		if !ids[broken.ID] && !ids[retiring.ID] && ids[healthy.ID] && w.running(3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("impaired instances not replaced: %s", w.describe())
		}
		w.step(time.Second)
		time.Sleep(rounds.Step())
	}
	if n := len(w.live()); n != 3 {
		t.Errorf("%d instances after the replacements, want 3", n)
	}
	w.assertInvariants()
}

// eventsFor lists the names of the objects of kind with an Event reason
// (of eventType, or any type when it is empty).
func (w *world) eventsFor(reason, kind, eventType string) []string {
	w.t.Helper()
	evs, err := w.e.Clients.Core.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == kind && (eventType == "" || e.Type == eventType) && !slices.Contains(out, e.InvolvedObject.Name) {
			out = append(out, e.InvolvedObject.Name)
		}
	}
	slices.Sort(out)
	return out
}
