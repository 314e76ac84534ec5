// Package tick is the skeleton every invocation runs in: read the pause
// switch (and do nothing while paused), take the lease for its concern (or
// do nothing), bound the work by the Lambda deadline less a margin, and on
// the way out release the lease and flush Events and metrics before the
// runtime freezes the container. A tick also writes its metrics and the
// summary so far after each pass (Checkpoint), so an invocation killed at
// its timeout, or for memory, loses only the pass it was in.
package tick

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/clockctx"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/kube/pause"
)

// ErrPaused is what Run returns, without running the work, while the pause
// switch is on (karpless pause).
var ErrPaused = errors.New("karpless is paused")

// PausedMetric is 1 for each invocation that found Karpless paused; it is
// extracted at every metrics level (record.Alarmed), so an alarm can say
// that Karpless has been paused for too long. Not written while running:
// a running cluster pays for no series.
const PausedMetric = "karpless_paused"

// PausedLog is the message of the line a paused tick logs; its "paused"
// key is true.
const PausedLog = "tick paused"

// Skeleton says what one invocation holds and flushes.
type Skeleton struct {
	Leases    coordinationclient.LeasesGetter
	Namespace string
	// Lease names the concern (provisioning, disruption); Holder is the
	// invocation (the Lambda request id).
	Lease, Holder string
	Duration      time.Duration
	// Wait > 0 asks a holder to hand over and waits up to Wait for the
	// lease; 0 gives up at once when it is held.
	Wait time.Duration
	// Margin is kept free before the invocation's deadline for the flush
	// and the release.
	Margin time.Duration
	Clock  clock.WithTicker
	Log    *slog.Logger
	// Events and Metrics are flushed on the way out (nil: not this
	// invocation's to flush); metrics go to MetricsOut.
	Events     *record.Recorder
	Metrics    *record.Metrics
	MetricsOut io.Writer
	// Pause, when set, is read for the pause switch (pause.Read, in
	// Namespace) before the lease is taken. While it is on, Run takes no
	// lease and runs no work: it logs PausedLog, gauges PausedMetric 1 in
	// Metrics and returns ErrPaused. A switch that cannot be read is an
	// error, and no work runs either.
	Pause corev1client.ConfigMapsGetter
}

// Run runs work while holding the lease, with ctx bounded by the deadline
// less the margin. It returns false, without running work, when another
// invocation holds the lease.
func (s Skeleton) Run(ctx context.Context, work func(ctx context.Context, l *lease.Lease) error) (bool, error) {
	defer s.flush(ctx)
	if s.Pause != nil {
		st, err := pause.Read(ctx, s.Pause, s.Namespace)
		if err != nil {
			return false, err
		}
		if st.Paused {
			s.Log.Info(PausedLog, "paused", true, "lease", s.Lease, "switch", st.String())
			s.Metrics.Gauge(PausedMetric, 1, nil)
			return false, ErrPaused
		}
	}
	l := lease.New(s.Leases, s.Namespace, s.Lease, s.Holder, s.Duration, s.Clock)
	var ok bool
	var err error
	if s.Wait > 0 {
		ok, err = l.Acquire(ctx, s.Wait, timing.LeaseAcquirePoll, s.sleep)
	} else {
		ok, err = l.TryAcquire(ctx)
	}
	if err != nil || !ok {
		return false, err
	}
	defer func() {
		rel, cancel := context.WithTimeout(context.WithoutCancel(ctx), timing.FlushTimeout)
		defer cancel()
		if err := l.Release(rel); err != nil {
			s.Log.Warn("releasing lease", "lease", s.Lease, "error", err)
		}
	}()
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = clockctx.WithDeadline(ctx, s.Clock, d.Add(-s.Margin))
		defer cancel()
	}
	stop := s.keepAlive(ctx, l)
	defer stop()
	return true, work(ctx, l)
}

// keepAlive renews the lease in the background while work runs: the
// guards renew it only before the actions they guard, and one long step
// between them (a cluster's first pricing read, a snapshot of thousands
// of pods on a throttled API server) must not let it expire under the
// next tick. Hold renews only once a third of the lease has passed since
// the last renewal, so a tick that renews on its own adds no calls. It
// stops when the lease is lost; work's next guard then stops too.
func (s Skeleton) keepAlive(ctx context.Context, l *lease.Lease) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := s.Clock.NewTicker(timing.LeaseRenewEvery(s.Duration))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				err := l.Hold(ctx)
				if errors.Is(err, lease.ErrLost) {
					return
				}
				if err != nil && ctx.Err() == nil {
					s.Log.Warn("renewing lease", "lease", s.Lease, "error", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Checkpoint writes the metrics gathered since the last write (each line
// once: Metrics.Flush empties what it writes) and logs msg with the
// summary so far, so that an invocation killed later (its timeout, memory)
// loses only the figures of the pass under way. Ticks call it after each
// pass. Events wait for the end: repeats within an invocation are folded
// into one Event with a count.
func (s Skeleton) Checkpoint(msg string, summary any) {
	s.FlushMetrics()
	s.Log.Info(msg, "summary", summary)
}

// FlushMetrics writes the metrics gathered since the last write.
func (s Skeleton) FlushMetrics() {
	if s.Metrics != nil && s.MetricsOut != nil {
		if err := s.Metrics.Flush(s.MetricsOut, s.Clock.Now().UnixMilli()); err != nil {
			s.Log.Warn("writing metrics", "error", err)
		}
	}
}

// flush sends the invocation's Events and metrics.
func (s Skeleton) flush(ctx context.Context) {
	Flush(ctx, s.Events, s.Metrics, s.MetricsOut, s.Clock, s.Log)
}

// Flush sends an invocation's Events and metrics (nil: none), within
// timing.FlushTimeout even when ctx has ended: a Lambda may be frozen the moment
// it returns.
func Flush(ctx context.Context, events *record.Recorder, metrics *record.Metrics, out io.Writer, clk clock.PassiveClock, log *slog.Logger) {
	if events != nil {
		f, cancel := context.WithTimeout(context.WithoutCancel(ctx), timing.FlushTimeout)
		defer cancel()
		events.Flush(f)
	}
	if metrics != nil && out != nil {
		if err := metrics.Flush(out, clk.Now().UnixMilli()); err != nil {
			log.Warn("writing metrics", "error", err)
		}
	}
}

// sleep waits on the skeleton's clock (virtual in the soak).
func (s Skeleton) sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, s.Clock, d) }

// Sleep waits d on clk (virtual in the soak), or until ctx ends.
func Sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
