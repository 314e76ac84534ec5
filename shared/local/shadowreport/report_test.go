package shadowreport

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/local/whatif"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func claim(name, typ, ct string, created time.Time, node string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
		wellknown.NodePoolLabel: "general", wellknown.InstanceTypeLabel: typ, wellknown.CapacityTypeLabel: ct, wellknown.ZoneLabel: "us-west-2a",
	}}}
	nc.Status.NodeName = node
	return nc
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"}, Spec: corev1.PodSpec{NodeName: node}}
}

// TestBuild: each decision beside what Karpenter did with the same pods or
// nodes (launched, kept, deleted with its Event, gone without a trace),
// what Karpenter did alone, the window, the merge of the sources, and the
// $/h of each side priced from the catalog.
func TestBuild(t *testing.T) {
	deleting := claim("general-old", "m5.large", "on-demand", t0.Add(-48*time.Hour), "n2")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0.Add(20 * time.Minute)}
	snap := &cluster.Snapshot{
		NodeClaims: []*karpv1.NodeClaim{
			claim("general-new", "m5.xlarge", "on-demand", t0.Add(time.Minute), "n1"),  // Karpenter's answer to the pods
			claim("general-big", "m5.2xlarge", "on-demand", t0.Add(-24*time.Hour), ""), // kept: Karpless would consolidate it
			claim("general-solo", "c5.large", "spot", t0.Add(30*time.Minute), ""),      // Karpenter alone
			deleting,
		},
		Pods: []*corev1.Pod{pod("a", "n1"), pod("b", "")},
	}
	launch := shadow.Decision{Kind: shadow.KindLaunch, At: t0, NodePool: "general", Pods: []string{"web/a", "web/b", "web/c"}, PodCount: 3,
		Offering: &shadow.Offering{InstanceType: "c6a.large", CapacityType: "spot", Zone: "us-west-2a", Price: 0.03}, InstanceTypeCount: 100}
	consolidate := shadow.Decision{Kind: shadow.KindConsolidate, Method: "SingleNodeConsolidation", NodePool: "general",
		Candidates: []shadow.Node{{NodeClaim: "general-big", Price: 0.384}}, PriceBefore: 0.384, PriceAfter: 0.05, Savings: 0.334,
		Replacements: []shadow.Decision{{Kind: shadow.KindLaunch, Offering: &shadow.Offering{InstanceType: "c6a.large", CapacityType: "spot", Price: 0.05}}}}
	expire := shadow.Decision{Kind: shadow.KindExpire, At: t0.Add(10 * time.Minute), NodeClaim: "general-gone", Candidates: []shadow.Node{{NodeClaim: "general-gone"}}}
	old := shadow.Decision{Kind: shadow.KindExpire, At: t0.Add(-3 * time.Hour), NodeClaim: "general-ancient"}
	c1, c2 := consolidate, consolidate
	c1.At, c2.At = t0.Add(5*time.Minute), t0.Add(15*time.Minute)
	src := &Sources{
		File:     whatif.NewFile(snap, whatif.Market{}, t0.Add(time.Hour), "test", "kube-system"),
		Stored:   []shadow.Entry{{Decision: launch, First: t0, Last: t0.Add(2 * time.Minute), Seen: 2}, {Decision: old, First: old.At, Last: old.At, Seen: 1}},
		Recorded: []shadow.Decision{launch, c1, c2, expire},
		Events: []corev1.Event{{InvolvedObject: corev1.ObjectReference{Kind: "NodeClaim", Name: "general-gone"}, Reason: "DisruptionTerminating",
			Message: "Disrupting NodeClaim: Expired", LastTimestamp: metav1.NewTime(t0.Add(12 * time.Minute))}},
		Scheduled: map[string]string{"web/c": "n1"}, // deleted since; ran on n1
		FromStore: 2, FromEvents: 4,
	}
	r, err := Build(src, Window{Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Decisions != 3 {
		t.Errorf("%d decisions in the window, want 3 (the one 3 h old is out)", r.Decisions)
	}
	byKind := map[string][]Row{}
	for _, row := range r.Rows {
		byKind[row.Kind] = append(byKind[row.Kind], row)
	}
	var mine, alone []Row
	for _, row := range byKind[shadow.KindLaunch] {
		if row.Decision != nil {
			mine = append(mine, row)
		} else {
			alone = append(alone, row)
		}
	}
	if len(mine) != 1 || mine[0].Seen != 2 || mine[0].Karpless.PerHour != 0.03 ||
		!strings.Contains(mine[0].Karpenter.Action, "launched general-new (m5.xlarge on-demand us-west-2a)") ||
		!strings.Contains(mine[0].Karpenter.Action, "1 pod(s) still pending") || mine[0].Karpenter.PerHour != 0.192 {
		t.Errorf("launch row: %+v", mine)
	}
	if len(alone) != 1 || !strings.HasPrefix(alone[0].Karpless.Action, "no decision") || alone[0].Karpenter.NodeClaims[0] != "general-solo" {
		t.Errorf("karpenter's own launch: %+v", alone)
	}
	cons := byKind[shadow.KindConsolidate]
	if len(cons) != 1 || cons[0].Seen != 2 || !cons[0].First.Equal(c1.At) || !cons[0].Last.Equal(c2.At) ||
		!strings.HasPrefix(cons[0].Karpenter.Action, "kept general-big") || cons[0].Karpenter.PerHour != 0.384 || cons[0].Karpless.PerHour != 0.05 {
		t.Errorf("consolidation row: %+v", cons)
	}
	exp := byKind[shadow.KindExpire]
	if len(exp) != 1 || !strings.Contains(exp[0].Karpenter.Action, "deleted general-gone at 10:12 (Disrupting NodeClaim: Expired)") {
		t.Errorf("expire row: %+v", exp)
	}
	del := byKind["delete"]
	if len(del) != 1 || !strings.Contains(del[0].Karpenter.Action, "deleting general-old") || !strings.Contains(del[0].Karpless.Action, "would have kept general-old") {
		t.Errorf("karpenter's own deletion: %+v", del)
	}
	// The fleet: general-new 0.192, general-big 0.384, general-solo (a
	// spot estimate); Karpless's standing consolidation takes 0.334 off.
	// The launch does not stand (a pod is still pending): only the
	// consolidation changes the estimate.
	if d := r.Totals.Fleet - r.Totals.WithKarpless; r.Totals.Fleet < 0.576 || d < 0.3339 || d > 0.3341 || r.Totals.KarpenterLaunches != 0.192 || r.Totals.KarplessLaunches != 0.03 ||
		mine[0].Standing || !cons[0].Standing {
		t.Errorf("totals %+v", r.Totals)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KARPLESS WOULD", "launch 1× c6a.large spot us-west-2a for 3 pods (a, b, +1)", "0.0300", "0.1920", "(to 10:15, 2x)", "What this report cannot know"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestBurstableClaimPricedWithCredits: a kept burstable node whose pods
// request more CPU than its baseline is priced with the surplus CPU
// credits they spend, as Karpless's own decisions price it.
func TestBurstableClaimPricedWithCredits(t *testing.T) {
	kept := func(cpu string) float64 {
		t.Helper()
		nc := claim("general-t", "t3.medium", "on-demand", t0.Add(-24*time.Hour), "nt")
		nc.Labels[wellknown.InstanceFamilyLabel], nc.Labels[wellknown.InstanceSizeLabel] = "t3", "medium"
		nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		p := pod("busy", "nt")
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		consolidate := shadow.Decision{Kind: shadow.KindConsolidate, At: t0, Method: "SingleNodeConsolidation", NodePool: "general",
			Candidates: []shadow.Node{{NodeClaim: "general-t"}}, PriceAfter: 0.01}
		src := &Sources{
			File:     whatif.NewFile(&cluster.Snapshot{NodeClaims: []*karpv1.NodeClaim{nc}, Pods: []*corev1.Pod{p}}, whatif.Market{}, t0.Add(time.Hour), "test", "kube-system"),
			Recorded: []shadow.Decision{consolidate},
		}
		r, err := Build(src, Window{Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range r.Rows {
			if row.Kind == shadow.KindConsolidate {
				if row.Karpenter.Unpriced || row.Karpenter.PerHour == 0 {
					t.Fatalf("kept node not priced: %+v", row.Karpenter)
				}
				return row.Karpenter.PerHour
			}
		}
		t.Fatalf("no consolidation row: %+v", r.Rows)
		return 0
	}
	// At 100m a t3.medium is under its baseline (20% of 2 vCPUs); at
	// 1500m it spends 1.1 vCPU-hours of credits an hour at $0.05.
	if low, high := kept("100m"), kept("1500m"); high-low < 0.0549 || high-low > 0.0551 {
		t.Errorf("$%.4f/h at 100m, $%.4f/h at 1500m: want $0.055/h of credits between them", low, high)
	}
}
