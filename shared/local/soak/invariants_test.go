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
	"github.com/karpless/karpless/shared/core/scheduling"
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
		// A fault failing every launch (no capacity error, nothing marked
		// unavailable): the clock restarts when it ends, with no mark's time.
		{name: "every launch failing", nc: claim(), outages: []string{allOfferings + "/" + allOfferings}, want: created.Add(time.Hour)},
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

// TestHeld: the reference keeps a NodeClaim by Karpenter's rules only
// as judged from the cluster: the spot-to-spot rule anywhere, no move at
// all only in a NodePool whose budget takes one node at a time.
func TestHeld(t *testing.T) {
	claim := func(name, pool string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool}}}
	}
	got := held(map[string]move{
		"spot-rule":       {none: true, spotRule: true},
		"spot-rule-wide":  {none: true, spotRule: true},
		"stuck-narrow":    {none: true},
		"stuck-wide":      {none: true},
		"movable-narrow":  {},
		"not-initialized": {},
	}, map[string]bool{"narrow": true}, []*karpv1.NodeClaim{
		claim("spot-rule", "narrow"), claim("spot-rule-wide", "wide"), claim("stuck-narrow", "narrow"), claim("stuck-wide", "wide"),
		claim("movable-narrow", "narrow"), claim("unknown", "narrow"),
	})
	want := map[string]bool{"spot-rule": true, "spot-rule-wide": true, "stuck-narrow": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("held %v; want %v", got, want)
	}
}

// TestCheaperTypes counts the types a replacement could launch as that
// are cheaper than the node it replaces: only available offerings in the
// zones and capacity types the claim allows, and by the worst price among
// them, as Karpenter's price filter does (a soak seed's reference counted
// a type cheap in one zone and dear in another, 15 types where Karpenter's
// rule and the functions counted 14, and blamed the functions).
func TestCheaperTypes(t *testing.T) {
	it := func(name string, os ...scheduling.Offering) *scheduling.InstanceType {
		return &scheduling.InstanceType{Name: name, Offerings: os}
	}
	o := func(zone, ct string, price float64, available bool) scheduling.Offering {
		return scheduling.Offering{Zone: zone, CapacityType: ct, Price: price, Available: available}
	}
	n := &scheduling.NewNodeClaim{
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2a", "us-west-2b"}},
		},
		InstanceTypes: []*scheduling.InstanceType{
			it("spot-cheap", o("us-west-2a", "spot", 0.02, true), o("us-west-2a", "on-demand", 0.08, true)),
			it("od-cheap", o("us-west-2b", "on-demand", 0.04, true)),
			it("other-zone", o("us-west-2c", "spot", 0.01, true)),
			it("unavailable", o("us-west-2a", "spot", 0.01, false)),
			it("dear", o("us-west-2a", "spot", 0.09, true)),
			it("dear-in-one-zone", o("us-west-2a", "spot", 0.02, true), o("us-west-2b", "spot", 0.07, true)),
			it("dear-only-where-out", o("us-west-2a", "spot", 0.03, true), o("us-west-2b", "spot", 0.07, false)),
		},
	}
	if all, spot := cheaperTypes(n, 0.05); all != 3 || spot != 2 {
		t.Errorf("cheaper than $0.05: %d types, %d spot; want 3 and 2", all, spot)
	}
}

// TestCapacityFor: a pending pod has capacity when a pool it may use has
// a zone and capacity type no outage took; a zone-spread pod needs one in
// every zone; a GPU pod only counts the GPU pool.
func TestCapacityFor(t *testing.T) {
	all := pools()
	var general, gpuPool karpv1.NodePool
	for _, np := range all {
		if np.Name == "general" {
			general = *np
		} else {
			gpuPool = *np
		}
	}
	pod := func(shape func(*corev1.PodTemplateSpec)) *corev1.Pod {
		tpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}}}
		if shape != nil {
			shape(tpl)
		}
		return &corev1.Pod{Spec: tpl.Spec}
	}
	shapes := map[string]func(*corev1.PodTemplateSpec){}
	for _, d := range workloads() {
		shapes[d.name] = d.shape
	}
	outs := func(keys ...string) map[string]bool {
		m := map[string]bool{}
		for _, k := range keys {
			m[k] = true
		}
		return m
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		out  map[string]bool
		want bool
	}{
		{"plain, nothing out", pod(shapes["small"]), nil, true},
		{"plain, spot out in one zone", pod(shapes["small"]), outs("spot/us-west-2a"), true},
		{"plain, everything out in two zones", pod(shapes["small"]), outs("spot/us-west-2a", "on-demand/us-west-2a", "spot/us-west-2b", "on-demand/us-west-2b"), true},
		{"zone spread, spot out in one zone", pod(shapes["web"]), outs("spot/us-west-2a"), true},
		{"zone spread, a zone fully out", pod(shapes["web"]), outs("spot/us-west-2a", "on-demand/us-west-2a"), false},
		{"gpu, spot out everywhere", pod(shapes["gpu"]), outs("spot/us-west-2a", "spot/us-west-2b", "spot/us-west-2c"), true},
		{"gpu, on-demand out everywhere", pod(shapes["gpu"]), outs("on-demand/us-west-2a", "on-demand/us-west-2b", "on-demand/us-west-2c"), false},
		{"everything out", pod(nil), outs("spot/us-west-2a", "on-demand/us-west-2a", "spot/us-west-2b", "on-demand/us-west-2b", "spot/us-west-2c", "on-demand/us-west-2c"), false},
	} {
		if got := capacityFor(tc.pod, []karpv1.NodePool{general, gpuPool}, tc.out); got != tc.want {
			t.Errorf("%s: capacity %v, want %v", tc.name, got, tc.want)
		}
	}
	// A GPU pod that does not tolerate the GPU pool's taint has none.
	p := pod(shapes["gpu"])
	p.Spec.Tolerations = nil
	if capacityFor(p, []karpv1.NodePool{general, gpuPool}, nil) {
		t.Error("a GPU pod without the toleration has capacity")
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
