package tick

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube/lease"
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
