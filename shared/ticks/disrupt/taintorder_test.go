package disrupt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

// The fault these tests pin: a disruption command used to be recorded
// Executing (and its replacements created) before its candidates were
// tainted. A pass killed in between left an executing command on an
// untainted node; pods landed there, and the next pass's progress() put the
// taint back and went on to delete the candidate without validating the
// command again: pods nobody had looked at were evicted. Now the candidates
// are tainted first, their pods read again (a pod bound since the
// validation defers the command), and only then is the record written. A
// kill between the taints and the record leaves a proposal, which the next
// pass validates again.
//
// Against the old order each test fails: the kill point "right after the
// taint" came after the record, so the record is Executing where these
// tests want a proposal, and the pod that landed is evicted where they
// want it left alone; the hook "just before the taint" ran after the
// record too, and nothing deferred the command.

// landBig binds a pod of 1500m straight to node, as kube-scheduler does
// with a pod it placed from a cache that had not seen the node's taint. With
// it the candidate's pods no longer fit the cheaper replacement: a
// validation that sees it rejects the command, so it must never be evicted.
func (w *world) landBig(node string) *corev1.Pod {
	w.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "landed", Namespace: w.ns, Labels: map[string]string{"app": "landed"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "app", Image: "registry.local/landed:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		},
	}
	created, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return created
}

// recordPhase is the phase of the record on claim ("" without one).
func (w *world) recordPhase(claim string) disruption.Phase {
	w.t.Helper()
	nc, err := w.e.Clients.NodeClaims.Get(context.Background(), claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		w.t.Fatal(err)
	}
	r, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation])
	if err != nil {
		return ""
	}
	return r.Phase
}

func (w *world) nodeTainted(node string) bool {
	w.t.Helper()
	n, err := w.e.Clients.Core.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return hasDisrupted(*n)
}

// actionOn is what a pass did with command id, and why ("" if nothing).
func actionOn(s disrupt.Summary, id string) (string, string) {
	for _, c := range s.Commands {
		if c.ID == id {
			return c.Action, c.Why
		}
	}
	return "", ""
}

// leftAlone runs passes for two minutes of the clock and checks that the
// command never turns Executing, the candidate is never deleted and the
// landed pod is never evicted (it goes on to the end, so that a failure
// shows all that went wrong).
func (w *world) leftAlone(p proposed, landed *corev1.Pod) {
	w.t.Helper()
	executing, deleted := false, false
	for range 12 {
		w.clk.Advance(10 * time.Second)
		w.step(time.Second)
		w.disrupt()
		w.provision()
		if ph := w.recordPhase(p.claim); ph == disruption.Executing && !executing {
			executing = true
			w.t.Errorf("the command was recorded Executing with pod %s on its candidate, which its validation never saw", landed.Name)
		}
		nc, err := w.e.Clients.NodeClaims.Get(context.Background(), p.claim, metav1.GetOptions{})
		if (err != nil || nc.DeletionTimestamp != nil) && !deleted {
			deleted = true
			w.t.Errorf("candidate %s deleted with pod %s on it (%v)", p.claim, landed.Name, err)
		}
		time.Sleep(settleSleep)
	}
	w.evMu.Lock()
	n := w.evictions[w.ns+"/"+landed.Name]
	w.evMu.Unlock()
	if n > 0 {
		w.t.Fatalf("pod %s, which landed on the candidate after the validation, was evicted %d times", landed.Name, n)
	}
	cur, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Get(context.Background(), landed.Name, metav1.GetOptions{})
	if err != nil || cur.DeletionTimestamp != nil || cur.Spec.NodeName != p.node {
		w.t.Fatalf("pod %s no longer runs on %s (%v)", landed.Name, p.node, err)
	}
	w.noCommandLeft()
	w.assertInvariants()
}

// killAfterTaint returns a hook that kills the pass once the taint on node
// has been written.
func killAfterTaint(k *testworld.KillSwitch, node string) func(string, bool) {
	return func(desc string, answered bool) {
		if answered && desc == "kube PUT /api/v1/nodes/"+node {
			k.Kill()
		}
	}
}

// TestKillBetweenTaintAndRecordLeavesAProposal kills the executing pass
// right after it tainted the candidate, then binds a pod to the candidate
// that makes the command invalid: the command must still be a proposal, the
// next pass must validate it (and reject it), and the pod must never be
// evicted.
func TestKillBetweenTaintAndRecordLeavesAProposal(t *testing.T) {
	w := crashSetup(t)
	p := w.proposal()
	k := &testworld.KillSwitch{}
	w.killer = k
	w.hook = killAfterTaint(k, p.node)
	w.disrupt()
	w.killer, w.hook = nil, nil
	if !k.Dead() {
		t.Fatalf("the pass never tainted %s: %v", p.node, k.Calls())
	}
	if !w.nodeTainted(p.node) {
		t.Fatalf("node %s not tainted after the kill", p.node)
	}
	if ph := w.recordPhase(p.claim); ph != disruption.Proposed {
		t.Errorf("after a kill right after the taint the record is %q, want %q (the record comes after the taint)", ph, disruption.Proposed)
	}
	for _, nc := range w.claims() {
		if _, ok := nc.Annotations[disruption.ReplacementAnnotation]; ok {
			t.Errorf("replacement %s exists before the command was recorded", nc.Name)
		}
	}
	landed := w.landBig(p.node)
	waitFor(t, 10*time.Second, func() bool {
		for _, q := range w.pods() {
			if q.Name == landed.Name && q.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
	s := w.disrupt()
	action, why := actionOn(s, p.rec.ID)
	if action != "rejected" || strings.Contains(why, "marked for deletion") {
		t.Errorf("the pass after the kill did %q with the proposal (%s), want it validated again and rejected (pod %s makes it invalid)", action, why, landed.Name)
	}
	t.Logf("the pass after the kill: %s (%s)", action, why)
	w.leftAlone(p, landed)
}

// TestKillBetweenTaintAndRecordKeepsTheCommand kills the executing pass
// right after it tainted the candidate and changes nothing: the next pass
// removes the taint and validates the proposal again; the cluster is as the
// proposal saw it, so the validation must pass and the command execute.
func TestKillBetweenTaintAndRecordKeepsTheCommand(t *testing.T) {
	w := crashSetup(t)
	p := w.proposal()
	k := &testworld.KillSwitch{}
	w.killer = k
	w.hook = killAfterTaint(k, p.node)
	w.disrupt()
	w.killer, w.hook = nil, nil
	if !k.Dead() || w.recordPhase(p.claim) != disruption.Proposed {
		t.Fatalf("no proposal left after a kill right after the taint (calls %v)", k.Calls())
	}
	s := w.disrupt()
	action, why := actionOn(s, p.rec.ID)
	if action != "executed" {
		// Before 2ebe750 the pass validated against its snapshot, taken
		// before it removed the stale taint: the candidate's own taint read
		// as "marked for deletion" and the proposal was lost.
		t.Errorf("the pass after the kill did %q with an unchanged proposal (%s), want it executed", action, why)
	}
	w.finish(1, 2, 2)
	w.assertInvariants()
}

// TestPodLandingBeforeTheTaintDefers binds a pod to the candidate while the
// executing pass is about to taint it (after the validation read the
// cluster): the pass must see it once the taint is on, defer the command
// (no record, no replacement, taint removed), and the pod must never be
// evicted; the next pass validates with the pod and rejects.
func TestPodLandingBeforeTheTaintDefers(t *testing.T) {
	w := crashSetup(t)
	p := w.proposal()
	var landed *corev1.Pod
	w.hook = func(desc string, answered bool) {
		if !answered && landed == nil && desc == "kube PUT /api/v1/nodes/"+p.node {
			landed = w.landBig(p.node)
		}
	}
	s := w.disrupt()
	w.hook = nil
	if landed == nil {
		t.Fatal("the pass never tainted the candidate")
	}
	action, why := actionOn(s, p.rec.ID)
	if action != "deferred" || !strings.Contains(why, landed.Name) {
		t.Fatalf("the pass did %q (%s) with a pod landed on the candidate after the validation, want deferred because of %s", action, why, landed.Name)
	}
	if ph := w.recordPhase(p.claim); ph != disruption.Proposed {
		t.Fatalf("a deferred command is recorded %q, want %q", ph, disruption.Proposed)
	}
	if w.nodeTainted(p.node) {
		t.Fatalf("a deferred command left its taint on %s", p.node)
	}
	for _, nc := range w.claims() {
		if _, ok := nc.Annotations[disruption.ReplacementAnnotation]; ok {
			t.Fatalf("a deferred command created replacement %s", nc.Name)
		}
	}
	s = w.disrupt()
	action, why = actionOn(s, p.rec.ID)
	if action != "rejected" {
		t.Fatalf("the pass after the deferral did %q (%s), want the proposal rejected (pod %s makes it invalid)", action, why, landed.Name)
	}
	t.Logf("validated with the pod: %s (%s)", action, why)
	w.leftAlone(p, landed)
}

// TestBudgetLoweredBeforeTheStartDefers: the NodePool's budget drops to
// zero nodes after the pass's snapshot and before the command starts. The
// budgets are checked again on the NodePools read at the start (Karpenter
// reads them afresh when it validates), so the command waits, untainted.
func TestBudgetLoweredBeforeTheStartDefers(t *testing.T) {
	w := crashSetup(t)
	p := w.proposal()
	lists, lowered := 0, false
	w.hook = func(desc string, answered bool) {
		if answered || lowered || !strings.HasPrefix(desc, "kube GET /apis/karpenter.sh/v1/nodepools") {
			return
		}
		// The first list is the snapshot's; the second, the start's.
		if lists++; lists == 2 {
			ctx := context.Background()
			np, err := w.e.Clients.NodePools.Get(ctx, "default", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
			if _, err := w.e.Clients.NodePools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			lowered = true
		}
	}
	s := w.disrupt()
	w.hook = nil
	if !lowered {
		t.Fatalf("the pass listed NodePools %d times; the test no longer reaches the start", lists)
	}
	action, why := actionOn(s, p.rec.ID)
	if action != "deferred" || !strings.Contains(why, "budgets") {
		t.Fatalf("the pass did %q (%s) after the budget dropped to zero, want deferred for the budgets", action, why)
	}
	if w.nodeTainted(p.node) {
		t.Fatalf("a command the budgets stopped tainted %s", p.node)
	}
	for _, nc := range w.claims() {
		if nc.DeletionTimestamp != nil {
			t.Fatalf("claim %s is being deleted under a budget of zero", nc.Name)
		}
	}
}
