package tick

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/kube/pause"
)

func TestSkeleton(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		heldBy    string // another invocation holds the lease
		deadline  time.Duration
		workErr   error
		wantRun   bool
		wantCtxIn time.Duration // the work's deadline, from now (0: none)
	}{
		{name: "free lease, no deadline", wantRun: true},
		{name: "free lease, deadline less the margin", deadline: time.Minute, wantRun: true, wantCtxIn: time.Minute - 5*time.Second},
		{name: "work fails", wantRun: true, workErr: errors.New("boom")},
		{name: "held by another", heldBy: "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			cs := fake.NewClientset()
			ctx := context.Background()
			if tc.heldBy != "" {
				other := lease.New(cs.CoordinationV1(), "ns", "concern", tc.heldBy, time.Minute, clk)
				if ok, err := other.TryAcquire(ctx); !ok || err != nil {
					t.Fatalf("setting up the other holder: %v %v", ok, err)
				}
			}
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.deadline))
				defer cancel()
			}
			metrics := record.NewMetrics("Test")
			metrics.Count("ticks", 1, nil)
			var out bytes.Buffer
			sk := Skeleton{
				Leases: cs.CoordinationV1(), Namespace: "ns", Lease: "concern", Holder: "me", Duration: time.Minute,
				Margin: 5 * time.Second, Clock: clk, Log: slog.New(slog.DiscardHandler), Metrics: metrics, MetricsOut: &out,
			}
			ran := false
			held, err := sk.Run(ctx, func(ctx context.Context, l *lease.Lease) error {
				ran = true
				d, ok := ctx.Deadline()
				switch {
				case tc.wantCtxIn == 0 && ok:
					t.Errorf("work has a deadline %s, want none", d)
				case tc.wantCtxIn > 0 && (!ok || !d.Equal(now.Add(tc.wantCtxIn))):
					t.Errorf("work's deadline %v, want %v", d, now.Add(tc.wantCtxIn))
				}
				if err := l.Hold(ctx); err != nil {
					t.Errorf("the work does not hold the lease: %v", err)
				}
				return tc.workErr
			})
			if held != tc.wantRun || ran != tc.wantRun || !errors.Is(err, tc.workErr) {
				t.Fatalf("held %v, ran %v, err %v; want %v, %v, %v", held, ran, err, tc.wantRun, tc.wantRun, tc.workErr)
			}
			if out.Len() == 0 {
				t.Error("metrics not flushed")
			}
			l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "concern", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.heldBy
			if got := l.Spec.HolderIdentity; got == nil || *got != want {
				t.Errorf("lease holder after the run %v, want %q (released, or still the other's)", got, want)
			}
		})
	}
}

// While the pause switch is on, Run reads it before anything else: no
// lease is taken, the work does not run, the line and the metric say so.
// A switch that cannot be read is an error, and the work does not run
// either. Off or absent, the work runs.
func TestSkeletonPaused(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		value   string // "": no ConfigMap
		wantRun bool
		wantErr string
	}{
		{name: "no switch", wantRun: true},
		{name: "off", value: "false", wantRun: true},
		{name: "on", value: "true", wantErr: ErrPaused.Error()},
		{name: "unreadable", value: "perhaps", wantErr: "not true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			ctx := context.Background()
			if tc.value != "" {
				if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: pause.ConfigMapName, Namespace: "ns"},
					Data:       map[string]string{pause.KeyPaused: tc.value, pause.KeyChangedBy: "alice"},
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var out, logs bytes.Buffer
			sk := Skeleton{
				Leases: cs.CoordinationV1(), Namespace: "ns", Lease: "concern", Holder: "me", Duration: time.Minute,
				Clock: clocktesting.NewFakeClock(now), Log: record.NewLogger(&logs, "info"),
				Metrics: record.NewMetricsAt("Test", record.Minimal), MetricsOut: &out, Pause: cs.CoreV1(),
			}
			ran := false
			held, err := sk.Run(ctx, func(context.Context, *lease.Lease) error { ran = true; return nil })
			if ran != tc.wantRun || held != tc.wantRun {
				t.Errorf("ran %v, held %v; want %v", ran, held, tc.wantRun)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr == ErrPaused.Error() && !errors.Is(err, ErrPaused) {
				t.Errorf("err %v is not ErrPaused", err)
			}
			paused := tc.value == "true"
			if got := strings.Contains(logs.String(), `"msg":"`+PausedLog+`","paused":true`); got != paused {
				t.Errorf("paused line logged %v, want %v: %s", got, paused, logs.String())
			}
			if got := strings.Contains(out.String(), `"`+PausedMetric+`":1`) && strings.Contains(out.String(), `"_aws"`); got != paused {
				t.Errorf("%s 1 extracted %v, want %v: %s", PausedMetric, got, paused, out.String())
			}
			if _, err := cs.CoordinationV1().Leases("ns").Get(ctx, "concern", metav1.GetOptions{}); tc.wantRun == apierrors.IsNotFound(err) {
				t.Errorf("lease read: %v, want taken only when the work ran", err)
			}
		})
	}
}

// Checkpoint writes what the metrics gathered since the last write, once,
// and the summary so far; the flush at the end writes only what came after.
func TestCheckpoint(t *testing.T) {
	var out, logs bytes.Buffer
	m := record.NewMetrics("Test")
	sk := Skeleton{Clock: clocktesting.NewFakeClock(time.Now()), Log: record.NewLogger(&logs, "info"), Metrics: m, MetricsOut: &out}
	m.Count("first_pass", 2, nil)
	sk.Checkpoint("pass done", map[string]int{"passes": 1})
	m.Count("second_pass", 1, nil)
	sk.Checkpoint("pass done", map[string]int{"passes": 2})
	sk.flush(context.Background())
	if n := strings.Count(out.String(), `"metric":"first_pass"`); n != 1 {
		t.Errorf("first_pass written %d times, want once: %s", n, out.String())
	}
	if n := strings.Count(out.String(), `"metric":"second_pass"`); n != 1 {
		t.Errorf("second_pass written %d times, want once: %s", n, out.String())
	}
	if !strings.Contains(logs.String(), `"summary":{"passes":1}`) || !strings.Contains(logs.String(), `"summary":{"passes":2}`) {
		t.Errorf("summaries so far not logged: %s", logs.String())
	}
}

// TestLeaseNeverLapsesDuringLongWork runs work that outlasts its lease
// several times over, for lease durations down to the 5 s the
// configuration allows: the skeleton renews the lease at every interval
// derived from its duration, so a rival never takes it. A fixed 10 s
// interval let a 5 s lease lapse under a long pass.
func TestLeaseNeverLapsesDuringLongWork(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{5 * time.Second, 7 * time.Second, 30 * time.Second, 2 * time.Minute} {
		t.Run(d.String(), func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			cs := fake.NewClientset()
			ctx := context.Background()
			sk := Skeleton{
				Leases: cs.CoordinationV1(), Namespace: "ns", Lease: "concern", Holder: "me", Duration: d,
				Clock: clk, Log: slog.New(slog.DiscardHandler),
			}
			rival := lease.New(cs.CoordinationV1(), "ns", "concern", "rival", d, clk)
			// waitFor polls cond, which the skeleton's renewal goroutine
			// makes true; the clock stands still meanwhile.
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
					if time.Since(start) > 30*time.Second {
						t.Fatalf("%s at %s into the work", what, clk.Since(now))
					}
				}
			}
			held, err := sk.Run(ctx, func(ctx context.Context, l *lease.Lease) error {
				waitFor("the renewal ticker was never started", clk.HasWaiters)
				step := timing.LeaseRenewEvery(d)
				for clk.Since(now) < 4*d {
					clk.Step(step)
					waitFor("the lease was not renewed when due", func() bool {
						got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "concern", metav1.GetOptions{})
						return err == nil && got.Spec.RenewTime.Time.Equal(clk.Now())
					})
					if ok, err := rival.TryAcquire(ctx); ok || err != nil {
						t.Fatalf("%s into the work a rival took the lease (err %v)", clk.Since(now), err)
					}
				}
				return l.Hold(ctx)
			})
			if !held || err != nil {
				t.Fatalf("held %v, err %v", held, err)
			}
		})
	}
}
