package soak

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/emulator"
)

// TestOverBudget: the budget invariant charges a command only with its own
// candidates' pools, and counts disrupting nodes as Karpenter does at the
// moment the command started.
func TestOverBudget(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier, later := start.Add(-time.Minute), start.Add(time.Minute)
	cmd := func(id string, startedAt time.Time, candidates ...string) *disruption.Record {
		return &disruption.Record{ID: id, Method: disruption.Emptiness, Reason: karpv1.DisruptionReasonEmpty,
			Phase: disruption.Executing, Decision: "delete", StartedAt: &startedAt, Candidates: candidates}
	}
	claim := func(name, pool string, mutate ...func(*karpv1.NodeClaim)) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool}, Annotations: map[string]string{}}}
		nc.Status.NodeName = "node-" + name
		nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(earlier))
		for _, m := range mutate {
			m(&nc)
		}
		return nc
	}
	in := func(r *disruption.Record) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.Annotations[disruption.CommandAnnotation] = r.Encode() }
	}
	deleted := func(at time.Time) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.DeletionTimestamp = &metav1.Time{Time: at} }
	}
	pool := func(name string, budgets ...karpv1.Budget) karpv1.NodePool {
		np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		np.Spec.Disruption.Budgets = budgets
		return np
	}
	one := karpv1.Budget{Nodes: "1"}
	this := cmd("this", start, "a1")
	for _, tc := range []struct {
		name     string
		claims   []karpv1.NodeClaim
		pools    []karpv1.NodePool
		notReady map[string]time.Time
		want     string
	}{
		{
			name:   "the command alone fits a budget of one",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a")},
			pools:  []karpv1.NodePool{pool("a", one)},
			want:   "[]",
		},
		{
			name:   "another command that started earlier in the pool: over",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a", in(cmd("other", earlier, "a2"))), claim("a3", "a")},
			pools:  []karpv1.NodePool{pool("a", one)},
			want:   "[{a 3 2 1}]",
		},
		{
			name:   "a command that started after this one is not this decision's doing",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a", in(cmd("other", later, "a2")))},
			pools:  []karpv1.NodePool{pool("a", one)},
			want:   "[]",
		},
		{
			name:   "another pool over its budget is not charged to this command",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("b1", "b", deleted(earlier)), claim("b2", "b", deleted(earlier))},
			pools:  []karpv1.NodePool{pool("a", one), pool("b", one)},
			want:   "[]",
		},
		{
			name:   "a deletion before the command counts, one after does not",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a", deleted(earlier)), claim("a3", "a", deleted(later))},
			pools:  []karpv1.NodePool{pool("a", one)},
			want:   "[{a 3 2 1}]",
		},
		{
			name:     "a node NotReady before the command counts",
			claims:   []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a")},
			pools:    []karpv1.NodePool{pool("a", one)},
			notReady: map[string]time.Time{"node-a2": earlier},
			want:     "[{a 2 2 1}]",
		},
		{
			name:   "percentages round up: 50% of 3 is 2",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a", deleted(earlier)), claim("a3", "a")},
			pools:  []karpv1.NodePool{pool("a", karpv1.Budget{Nodes: "50%"})},
			want:   "[]",
		},
		{
			name:   "a budget for another reason does not bind",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a", deleted(earlier))},
			pools:  []karpv1.NodePool{pool("a", karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, karpv1.Budget{Nodes: "2"})},
			want:   "[]",
		},
		{
			name: "uninitialized nodes and terminating instances are outside the count",
			claims: []karpv1.NodeClaim{claim("a1", "a", in(this)), claim("a2", "a", deleted(earlier), func(nc *karpv1.NodeClaim) {
				nc.SetCondition(karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "Terminating", "", metav1.NewTime(earlier))
			}), claim("a3", "a", func(nc *karpv1.NodeClaim) { nc.Status.Conditions = nil })},
			pools: []karpv1.NodePool{pool("a", one)},
			want:  "[]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := overBudget(this, tc.claims, tc.pools, tc.notReady)
			var parts []string
			for _, o := range got {
				parts = append(parts, fmt.Sprintf("{%s %d %d %d}", o.pool, o.total, o.disrupting, o.allowed))
			}
			if s := fmt.Sprintf("%v", parts); s != tc.want && !(tc.want == "[]" && len(parts) == 0) {
				t.Errorf("got %s; want %s", s, tc.want)
			}
		})
	}
}

// TestUnlaunchedSince: a claim's launch clock does not run while every
// offering it allows is out (a zone-wide outage of each capacity type it
// may use, in each zone it may use), nor for the time EC2's answers stay
// marked after that.
func TestUnlaunchedSince(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	claim := func(zones ...string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(created)}}
		if len(zones) > 0 {
			nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.ZoneLabel, Operator: "In", Values: zones}}
		}
		return nc
	}
	for _, tc := range []struct {
		name    string
		nc      *karpv1.NodeClaim
		outages []string // capacity-type/zone
		want    time.Time
	}{
		{name: "no outage", nc: claim("us-west-2a"), want: created},
		{name: "spot out, on-demand left", nc: claim("us-west-2a"), outages: []string{"spot/us-west-2a"}, want: created},
		{name: "both out in its only zone", nc: claim("us-west-2a"), outages: []string{"spot/us-west-2a", "on-demand/us-west-2a"}, want: created.Add(time.Hour + timing.DefaultUnavailableOfferingsTTL)},
		{name: "both out in one of its zones", nc: claim(), outages: []string{"spot/us-west-2a", "on-demand/us-west-2a"}, want: created},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newInvariants(nil)
			for i, o := range tc.outages {
				ct, z, _ := strings.Cut(o, "/")
				v.outage(emulator.FaultID(i+1), ct, z, true)
			}
			now := created.Add(time.Hour)
			if got := v.unlaunchedSince(tc.nc, now); !got.Equal(tc.want) {
				t.Errorf("since %s; want %s", got, tc.want)
			}
			for i := range tc.outages {
				v.outage(emulator.FaultID(i+1), "", "", false)
			}
			// The outage over, the clock restarts from its end plus the marks' time.
			if got := v.unlaunchedSince(tc.nc, now.Add(time.Minute)); !got.Equal(tc.want) {
				t.Errorf("after the outage: since %s; want %s", got, tc.want)
			}
		})
	}
}

// TestHeldByRule: a NodeClaim counts as kept by Karpenter's rules only
// when the disruption function's latest Unconsolidatable Event on it says
// so: the spot-to-spot rule anywhere, no cheaper replacement only in a
// NodePool whose budget takes one node at a time.
func TestHeldByRule(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := func(kind, name, msg string, minute int) corev1.Event {
		return corev1.Event{Reason: "Unconsolidatable", Message: msg, LastTimestamp: metav1.NewTime(at.Add(time.Duration(minute) * time.Minute)),
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}}
	}
	claim := func(name, pool string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool}}}
	}
	spot := "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 8"
	cheaper := "Can't replace with a cheaper node (the room left on other nodes cannot take all its pods)"
	got := heldByRule([]corev1.Event{
		ev("NodeClaim", "held", spot, 1),
		ev("NodeClaim", "was-held", spot, 1), ev("NodeClaim", "was-held", cheaper, 2),
		ev("NodeClaim", "now-held", cheaper, 1), ev("NodeClaim", "now-held", spot, 3),
		ev("Node", "a-node", spot, 1),
		ev("NodeClaim", "cheapest", cheaper, 1),
		ev("NodeClaim", "one-at-a-time", cheaper, 1),
		ev("NodeClaim", "was-stuck", cheaper, 1), ev("NodeClaim", "was-stuck", "Consolidation is waiting for consolidateAfter", 2),
	}, map[string]bool{"narrow": true}, []*karpv1.NodeClaim{
		claim("held", "wide"), claim("was-held", "narrow"), claim("now-held", "wide"), claim("cheapest", "wide"),
		claim("one-at-a-time", "narrow"), claim("was-stuck", "narrow"),
	})
	want := map[string]bool{"held": true, "now-held": true, "was-held": true, "one-at-a-time": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("held %v; want %v", got, want)
	}
}

// TestBudgetsAt: a command answers to the budgets its pool had when it
// started; an edit applied in its start second or later may not have been
// read by it.
func TestBudgetsAt(t *testing.T) {
	started := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b := func(n string) []karpv1.Budget { return []karpv1.Budget{{Nodes: n}} }
	np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	np.Spec.Disruption.Budgets = b("10%")
	for _, tc := range []struct {
		name  string
		edits []budgetEdit
		want  string
	}{
		{"never edited", nil, "10%"},
		{"edited before the start", []budgetEdit{{at: started.Add(-time.Second), before: b("20%")}}, "10%"},
		{"edited in the start second", []budgetEdit{{at: started, before: b("20%")}}, "20%"},
		{"edited after the start", []budgetEdit{{at: started.Add(3 * time.Second), before: b("20%")}}, "20%"},
		{"edited before, then twice after", []budgetEdit{
			{at: started.Add(-time.Minute), before: b("50%")},
			{at: started.Add(time.Second), before: b("2")},
			{at: started.Add(time.Minute), before: b("20%")},
		}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := budgetsAt(np, tc.edits, started)
			if n := got.Spec.Disruption.Budgets[0].Nodes; n != tc.want {
				t.Errorf("budgets %s, want %s", n, tc.want)
			}
			if np.Spec.Disruption.Budgets[0].Nodes != "10%" {
				t.Error("the pool given was changed")
			}
		})
	}
}
