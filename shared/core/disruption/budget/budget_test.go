package budget

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

func sched(s string, d time.Duration) (*string, *metav1.Duration) {
	return &s, &metav1.Duration{Duration: d}
}

func budget(nodes string, schedule string, d time.Duration, reasons ...karpv1.DisruptionReason) karpv1.Budget {
	b := karpv1.Budget{Nodes: nodes, Reasons: reasons}
	if schedule != "" {
		b.Schedule, b.Duration = sched(schedule, d)
	}
	return b
}

func pool(budgets ...karpv1.Budget) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.Budgets = budgets
	return np
}

// Monday 2026-03-02 10:30 UTC.
var monday1030 = time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC)

func TestIsActive(t *testing.T) {
	cases := []struct {
		name     string
		b        karpv1.Budget
		now      time.Time
		want     bool
		wantsErr bool
	}{
		{"no schedule is always active", budget("1", "", 0), monday1030, true, false},
		{"inside a daily window", budget("0", "0 9 * * *", 2*time.Hour), monday1030, true, false},
		{"window start is inclusive", budget("0", "30 10 * * *", time.Hour), monday1030, true, false},
		{"window end is exclusive (cron Next is strictly after)", budget("0", "30 9 * * *", time.Hour), monday1030, false, false},
		{"after the window", budget("0", "0 9 * * *", time.Hour), monday1030, false, false},
		{"before the window", budget("0", "0 11 * * *", 8*time.Hour), monday1030, false, false},
		{"window spanning midnight", budget("0", "0 22 * * *", 14*time.Hour), monday1030, true, false},
		{"weekday field", budget("0", "0 0 * * 1", 24*time.Hour), monday1030, true, false},
		{"other weekday", budget("0", "0 0 * * 2", 24*time.Hour), monday1030, false, false},
		{"macro @daily", budget("0", "@daily", 11*time.Hour), monday1030, true, false},
		{"macro @hourly", budget("0", "@hourly", 10*time.Minute), monday1030, false, false},
		{"schedule is UTC even for a local now", budget("0", "0 9 * * *", 2*time.Hour), monday1030.In(time.FixedZone("X", 5*3600)), true, false},
		{"bad cron", budget("0", "every day", time.Hour), monday1030, false, true},
		{"schedule without duration", karpv1.Budget{Nodes: "0", Schedule: new("@daily")}, monday1030, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := IsActive(c.b, c.now)
			if (err != nil) != c.wantsErr {
				t.Fatalf("err = %v, want error %v", err, c.wantsErr)
			}
			if got != c.want {
				t.Fatalf("active = %v, want %v", got, c.want)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	cases := []struct {
		name    string
		np      *karpv1.NodePool
		reason  karpv1.DisruptionReason
		total   int
		want    int
		wantErr bool
	}{
		{"count", pool(budget("3", "", 0)), karpv1.DisruptionReasonEmpty, 10, 3, false},
		{"percentage rounds up", pool(budget("10%", "", 0)), karpv1.DisruptionReasonEmpty, 11, 2, false},
		{"percentage of few nodes is still one", pool(budget("5%", "", 0)), karpv1.DisruptionReasonEmpty, 3, 1, false},
		{"percentage of none is none", pool(budget("50%", "", 0)), karpv1.DisruptionReasonEmpty, 0, 0, false},
		{"100%", pool(budget("100%", "", 0)), karpv1.DisruptionReasonDrifted, 7, 7, false},
		{"default is 10%", pool(), karpv1.DisruptionReasonUnderutilized, 25, 3, false},
		{"most restrictive wins", pool(budget("50%", "", 0), budget("2", "", 0)), karpv1.DisruptionReasonEmpty, 10, 2, false},
		{"zero in an active window blocks", pool(budget("10", "", 0), budget("0", "0 9 * * *", 8*time.Hour)), karpv1.DisruptionReasonUnderutilized, 10, 0, false},
		{"zero outside its window does not", pool(budget("10", "", 0), budget("0", "0 12 * * *", 8*time.Hour)), karpv1.DisruptionReasonUnderutilized, 10, 10, false},
		{"reason-specific budget applies to its reason", pool(budget("5", "", 0), budget("0", "", 0, karpv1.DisruptionReasonDrifted)), karpv1.DisruptionReasonDrifted, 10, 0, false},
		{"reason-specific budget skips other reasons", pool(budget("5", "", 0), budget("0", "", 0, karpv1.DisruptionReasonDrifted)), karpv1.DisruptionReasonEmpty, 10, 5, false},
		{"only reason-specific budgets leave other reasons unbounded", pool(budget("1", "", 0, karpv1.DisruptionReasonEmpty)), karpv1.DisruptionReasonDrifted, 10, Unbounded, false},
		{"several reasons", pool(budget("2", "", 0, karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized)), karpv1.DisruptionReasonUnderutilized, 10, 2, false},
		{"broken budget fails closed for every reason", pool(budget("5", "", 0), budget("1", "not a cron", time.Hour, karpv1.DisruptionReasonEmpty)), karpv1.DisruptionReasonDrifted, 10, 0, true},
		{"bad value fails closed", pool(budget("lots", "", 0)), karpv1.DisruptionReasonEmpty, 10, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Allowed(c.np, c.reason, c.total, monday1030)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if got != c.want {
				t.Fatalf("allowed = %d, want %d", got, c.want)
			}
		})
	}
}

func TestMappingSubtractsDisrupting(t *testing.T) {
	a, b, c := pool(budget("3", "", 0)), pool(budget("1", "", 0)), pool(budget("x", "", 0))
	a.Name, b.Name, c.Name = "a", "b", "c"
	m := Mapping([]*karpv1.NodePool{a, b, c}, map[string]Count{
		"a": {Total: 10, Disrupting: 1},
		"b": {Total: 10, Disrupting: 4},
		"c": {Total: 10},
	}, karpv1.DisruptionReasonEmpty, monday1030)
	if m["a"].Left != 2 || m["a"].Allowed != 3 {
		t.Errorf("a = %+v, want 3 allowed, 2 left", m["a"])
	}
	if m["b"].Left != 0 {
		t.Errorf("b = %+v, want 0 left (never negative)", m["b"])
	}
	if m["c"].Left != 0 || m["c"].Err == nil {
		t.Errorf("c = %+v, want 0 left and an error", m["c"])
	}
}
