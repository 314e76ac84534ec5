package soak

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/local/controlplane"
)

// ciSeeds and ciDuration are the soak's share of `make test`: a few
// virtual hours' worth of seeds would not fit in CI, so each CI seed churns
// for a short while, then settles and is checked at rest like any other.
// Each minute of churn costs the suite about 5 CPU-seconds per seed
// (2026-11-26: seed 101 took 133 CPU-s at 20 minutes, 93 at 12, settling
// included), so the churn is 15 minutes.
var ciSeeds = []uint64{101, 102}

const ciDuration = 15 * time.Minute

// testWriter sends the soak's lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestSoakCI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs control planes for virtual hours")
	}
	if _, err := controlplane.FindBinDir(); err != nil {
		if errors.Is(err, controlplane.ErrNotBuilt) && os.Getenv("KARPLESS_REQUIRE_KUBE") != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Options{Seeds: ciSeeds, Duration: ciDuration, Quick: true, Out: testWriter{t}})
	t.Log(r.Line())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Violations) > 0 {
		t.Errorf("%d invariant violations (each printed above with its seed and the events before it)", len(r.Violations))
	}
	if r.Invocations < len(ciSeeds)*int(ciDuration/tickEvery) || r.Faults == 0 || r.Kills == 0 {
		t.Errorf("the soak did too little to mean anything: %s", r.Line())
	}
	// Each path the scenarios and chaos drive was driven: a soak that
	// never meets an orphan cannot catch a collector that spares them.
	for _, path := range []string{"orphans", "fleet-kills", "non-capacity-failures", "pdb-refusals", "terminating-before-eviction"} {
		if r.Coverage[path] == 0 {
			t.Errorf("the CI seeds drove no %s: %v", path, r.Coverage)
		}
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Seeds: 20, VirtualHours: 120, Invocations: 15000, Kills: 2000, Faults: 90000}, "soak: seeds=20 virtual-hours=120 invocations=15000 kills=2000 faults=90000 violations=0"},
		{Report{Seeds: 2, VirtualHours: 0.6666666, Violations: []Violation{{}}}, "soak: seeds=2 virtual-hours=0.67 invocations=0 kills=0 faults=0 violations=1"},
	} {
		if got := tc.r.Line(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestBudgetCeiling(t *testing.T) {
	pool := func(budgets ...karpv1.Budget) *karpv1.NodePool {
		np := &karpv1.NodePool{}
		np.Spec.Disruption.Budgets = budgets
		return np
	}
	for _, tc := range []struct {
		name  string
		np    *karpv1.NodePool
		total int
		want  int
	}{
		{"percent rounds up", pool(karpv1.Budget{Nodes: "20%"}), 7, 2},
		{"count", pool(karpv1.Budget{Nodes: "2"}), 7, 2},
		{"smallest wins", pool(karpv1.Budget{Nodes: "50%"}, karpv1.Budget{Nodes: "1"}), 10, 1},
		{"zero", pool(karpv1.Budget{Nodes: "0"}), 10, 0},
		{"other reason only", pool(karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}), 10, int(^uint(0) >> 1)},
	} {
		if got := budgetCeiling(tc.np, tc.total, karpv1.DisruptionReasonUnderutilized); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSettleDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 20, 0, 0, time.UTC)
	limit, quiet := 30*time.Minute, 5*time.Minute
	until := start.Add(limit)
	claim := func(deleted time.Duration, tgp *time.Duration) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{}
		if deleted >= 0 {
			nc.DeletionTimestamp = &metav1.Time{Time: start.Add(deleted)}
		}
		if tgp != nil {
			nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: *tgp}
		}
		return nc
	}
	ten, hour := 10*time.Minute, time.Hour
	for _, tc := range []struct {
		name   string
		claims []karpv1.NodeClaim
		want   time.Time
	}{
		{"nothing deleting", []karpv1.NodeClaim{claim(-1, &ten)}, until},
		{"deleting without a grace period", []karpv1.NodeClaim{claim(20*time.Minute, nil)}, until},
		{"a grace period ending early keeps the limit", []karpv1.NodeClaim{claim(5*time.Minute, &ten)}, until},
		// CI seed 101: drift deleted a claim 20 minutes in, a do-not-disrupt
		// pod held it for its 10-minute grace period.
		{"a grace period ending late moves it", []karpv1.NodeClaim{claim(20*time.Minute, &ten)}, start.Add(38 * time.Minute)},
		{"never past twice the limit", []karpv1.NodeClaim{claim(20*time.Minute, &hour)}, start.Add(2 * limit)},
	} {
		if got := settleDeadline(tc.claims, start, limit, quiet, until); !got.Equal(tc.want) {
			t.Errorf("%s: settle until %s, want %s", tc.name, got.Sub(start), tc.want.Sub(start))
		}
	}
}

// TestActiveStep: while invocations run, the clock moves by the real time
// they worked times activeSpeed and the CPU share, never more than
// busyStep times the share; a call outstanding for two seconds moves it
// by that ceiling.
func TestActiveStep(t *testing.T) {
	for _, tc := range []struct {
		worked time.Duration
		share  float64
		want   time.Duration
	}{
		{5 * time.Millisecond, 1, 100 * time.Millisecond},
		{5 * time.Millisecond, 0.5, 50 * time.Millisecond},
		{time.Second, 1, busyStep},
		{time.Second, 0.1, busyStep / 10},
		{0, 1, 0},
		{-1, 1, busyStep},
		{-1, 0.25, busyStep / 4},
	} {
		if got := activeStep(tc.worked, tc.share); got != tc.want {
			t.Errorf("activeStep(%s, %.2f) = %s, want %s", tc.worked, tc.share, got, tc.want)
		}
	}
}
