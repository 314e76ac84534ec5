package budget

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/apis/v1/nodepool_budgets_test.go, ported: the
// budgets of its BeforeEach, Karpenter's expected counts through
// Karpless's Allowed, IsActive and Nodes.
const budgetsFile = "pkg/apis/v1/nodepool_budgets_test.go"

// budgetFixture is the suite's BeforeEach: six budgets, the clock at
// 2000-06-15 12:30:30 UTC.
func budgetFixture() ([]karpv1.Budget, time.Time) {
	hour := &metav1.Duration{Duration: time.Hour}
	s := func(v string) *string { return &v }
	return []karpv1.Budget{
		{Nodes: "10", Schedule: s("* * * * *"), Duration: hour},
		{Nodes: "100", Schedule: s("* * * * *"), Duration: hour},
		{Nodes: "100%", Schedule: s("* * * * *"), Duration: hour},
		{Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized}, Nodes: "15", Schedule: s("* * * * *"), Duration: hour},
		{Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}, Nodes: "5", Schedule: s("* * * * *"), Duration: hour},
		{Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonEmpty}, Nodes: "0", Schedule: s("@weekly"), Duration: hour},
	}, time.Date(2000, time.June, 15, 12, 30, 30, 0, time.UTC)
}

var allReasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonDrifted}

func poolOf(budgets []karpv1.Budget) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "np"}, Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: budgets}}}
}

func ptr[T any](v T) *T { return &v }

func TestConformanceBudgets(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/apis/v1", File: budgetsFile, Spec: "Budgets > " + spec}
	}
	allowedByReason := func(t *testing.T, budgets []karpv1.Budget, now time.Time, want map[karpv1.DisruptionReason]int) {
		t.Helper()
		for reason, n := range want {
			got, err := Allowed(poolOf(budgets), reason, 100, now)
			if err != nil || got != n {
				t.Errorf("%s: %d, %v; want %d", reason, got, err, n)
			}
		}
	}
	every := func(n int) map[karpv1.DisruptionReason]int {
		m := map[karpv1.DisruptionReason]int{}
		for _, r := range allReasons {
			m[r] = n
		}
		return m
	}
	// allowedOne is Karpenter's Budget.GetAllowedDisruptions: a pool of
	// that one budget, for a reason it applies to.
	allowedOne := func(b karpv1.Budget, now time.Time) (int, error) {
		return Allowed(poolOf([]karpv1.Budget{b}), karpv1.DisruptionReasonDrifted, 100, now)
	}

	conformance.Run(t, c("GetAllowedDisruptionsByReason > should return 0 for all reasons if a budget is active for all reasons"), func(t *testing.T) {
		b, now := budgetFixture()
		b[5].Schedule, b[5].Duration = ptr("* * * * *"), &metav1.Duration{Duration: time.Hour}
		allowedByReason(t, b, now, every(0))
	})
	conformance.Run(t, c("GetAllowedDisruptionsByReason > should return MaxInt32 for all reasons when there are no active budgets"), func(t *testing.T) {
		b, now := budgetFixture()
		for i := range b {
			b[i].Schedule, b[i].Duration = ptr("@yearly"), &metav1.Duration{Duration: time.Hour}
		}
		allowedByReason(t, b, now, every(math.MaxInt32))
	})
	conformance.Run(t, c("GetAllowedDisruptionsByReason > should ignore reason-defined budgets when inactive"), func(t *testing.T) {
		b, now := budgetFixture()
		b[3].Schedule, b[4].Schedule = ptr("@yearly"), ptr("@yearly")
		allowedByReason(t, b, now, every(10))
	})
	conformance.Run(t, c("GetAllowedDisruptionsByReason > should return the budget for all disruption reasons when undefined"), func(t *testing.T) {
		b, now := budgetFixture()
		allowedByReason(t, b[:1], now, every(10))
	})
	conformance.Run(t, c("GetAllowedDisruptionsByReason > should get the minimum budget for each reason"), func(t *testing.T) {
		b, now := budgetFixture()
		b = append(b, karpv1.Budget{Schedule: ptr("* * * * *"), Nodes: "4", Duration: &metav1.Duration{Duration: time.Hour}, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}})
		allowedByReason(t, b, now, map[karpv1.DisruptionReason]int{
			karpv1.DisruptionReasonEmpty: 4, karpv1.DisruptionReasonDrifted: 5, karpv1.DisruptionReasonUnderutilized: 10,
		})
	})

	conformance.Run(t, c("AllowedDisruptions > should return zero values if a schedule is invalid"), func(t *testing.T) {
		b, now := budgetFixture()
		b[0].Schedule = ptr("@wrongly")
		if n, err := allowedOne(b[0], now); err == nil || n != 0 {
			t.Errorf("%d, %v; want 0 and an error", n, err)
		}
	})
	conformance.Run(t, c("AllowedDisruptions > should return zero values if a nodes value is invalid"), func(t *testing.T) {
		b, now := budgetFixture()
		b[0].Nodes = "1000a%"
		if n, err := allowedOne(b[0], now); err == nil || n != 0 {
			t.Errorf("%d, %v; want 0 and an error", n, err)
		}
	})
	conformance.Run(t, c("AllowedDisruptions > should return MaxInt32 when a budget is inactive"), func(t *testing.T) {
		b, now := budgetFixture()
		b[0].Schedule, b[0].Duration = ptr("@yearly"), &metav1.Duration{Duration: time.Hour}
		if n, err := allowedOne(b[0], now); err != nil || n != math.MaxInt32 {
			t.Errorf("%d, %v; want MaxInt32", n, err)
		}
	})
	conformance.Run(t, c("AllowedDisruptions > should return the int value when a budget is active"), func(t *testing.T) {
		b, now := budgetFixture()
		if n, err := allowedOne(b[0], now); err != nil || n != 10 {
			t.Errorf("%d, %v; want 10", n, err)
		}
	})
	conformance.Run(t, c("AllowedDisruptions > should return the string value when a budget is active"), func(t *testing.T) {
		b, now := budgetFixture()
		if n, err := allowedOne(b[2], now); err != nil || n != 100 {
			t.Errorf("%d, %v; want 100", n, err)
		}
	})

	active := func(t *testing.T, b karpv1.Budget, now time.Time, want bool) {
		t.Helper()
		got, err := IsActive(b, now)
		if err != nil || got != want {
			t.Errorf("active %v, %v; want %v", got, err, want)
		}
	}
	conformance.Run(t, c("IsActive > should always consider a schedule and time in UTC"), func(t *testing.T) {
		b, _ := budgetFixture()
		b[0].Schedule, b[0].Duration = ptr("@daily"), &metav1.Duration{Duration: 30 * time.Minute}
		active(t, b[0], time.Date(2000, time.June, 0, 0, 0, 0, 0, time.FixedZone("fake-zone", 3600)), false)
	})
	conformance.Run(t, c("IsActive > should return that a schedule is active when schedule and duration are nil"), func(t *testing.T) {
		b, now := budgetFixture()
		b[0].Schedule, b[0].Duration = nil, nil
		active(t, b[0], now, true)
	})
	conformance.Run(t, c("IsActive > should return that a schedule is active"), func(t *testing.T) {
		b, now := budgetFixture()
		active(t, b[0], now, true)
	})
	conformance.Run(t, c("IsActive > should return that a schedule is inactive"), func(t *testing.T) {
		b, now := budgetFixture()
		b[0].Schedule = ptr("@yearly")
		active(t, b[0], now, false)
	})
	conformance.Run(t, c("IsActive > should return that a schedule is active when the schedule hit is in the middle of the duration"), func(t *testing.T) {
		b, _ := budgetFixture()
		b[0].Schedule, b[0].Duration = ptr("@yearly"), &metav1.Duration{Duration: 24 * time.Hour}
		active(t, b[0], time.Date(1000, time.January, 1, 12, 0, 0, 0, time.UTC), true)
	})
	conformance.Run(t, c("IsActive > should return that a schedule is active when the duration is longer than the recurrence"), func(t *testing.T) {
		b, _ := budgetFixture()
		b[0].Schedule, b[0].Duration = ptr("@daily"), &metav1.Duration{Duration: 48 * time.Hour}
		active(t, b[0], time.Date(2024, time.January, 7, 0, 0, 0, 0, time.UTC), true)
	})
	conformance.Run(t, c("IsActive > should return that a schedule is inactive when the schedule hit is after the duration"), func(t *testing.T) {
		b, _ := budgetFixture()
		b[0].Schedule, b[0].Duration = ptr("30 6 * * SUN"), &metav1.Duration{Duration: 6 * time.Hour}
		active(t, b[0], time.Date(2024, time.January, 7, 0, 0, 0, 0, time.UTC), false)
	})
	conformance.Run(t, c("IsActive > should return an error indicating why the cron fails to parse"), func(t *testing.T) {
		b, _ := budgetFixture()
		b[0].Schedule, b[0].Duration = ptr("0 0 * * tue-mon"), &metav1.Duration{Duration: 6 * time.Hour}
		_, err := IsActive(b[0], time.Date(2024, time.January, 7, 0, 0, 0, 0, time.UTC))
		if err == nil || !strings.Contains(err.Error(), "beginning of range (2) beyond end of range (1)") {
			t.Errorf("error %v", err)
		}
	})
}
