package provision_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/tick"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/kube/pause"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// TestPausedTickTakesNoAction: with the pause switch on (as `karpless
// pause` sets it), a provisioner tick on pending pods creates no
// NodeClaim and launches nothing; its summary says paused, its log has
// the paused line, and karpless_paused 1 is extracted at the minimal
// level. Once resumed, the next tick provisions.
func TestPausedTickTakesNoAction(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	w.Apply(deploy.DefaultNodePool("default"))
	w.Pods("app", 2, "1", nil)
	w.WaitUnschedulable(2)
	set := func(paused bool) {
		t.Helper()
		if _, err := pause.Set(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, pause.Change{Paused: paused, By: "test"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	set(true)
	t.Cleanup(func() {
		_ = w.E.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace).Delete(ctx, pause.ConfigMapName, metav1.DeleteOptions{})
	})

	var out syncBuffer
	p := w.App.Provisioner()
	p.Metrics, p.MetricsOut, p.Log = record.NewMetricsAt("Karpless", record.Minimal), &out, record.NewLogger(&out, "info")
	sum, err := p.Run(ctx, "paused-tick")
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Paused || sum.Passes != 0 || !strings.Contains(sum.Skipped, "paused") {
		t.Errorf("summary %+v, want paused with no pass", sum)
	}
	if n := len(w.Claims()); n != 0 {
		t.Errorf("%d NodeClaims created while paused", n)
	}
	if n := w.Emu.CallCount("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls while paused", n)
	}
	logs := out.String()
	for _, want := range []string{`"msg":"` + tick.PausedLog + `","paused":true`, `"msg":"provisioning tick done"`, `"skipped":"paused (karpless resume to resume)","paused":true,"passes":0`} {
		if !strings.Contains(logs, want) {
			t.Errorf("output lacks %s:\n%s", want, logs)
		}
	}
	var m testworld.Metrics
	_, _ = m.Write([]byte(logs))
	lines := m.Lines(tick.PausedMetric)
	if len(lines) != 1 || lines[0][tick.PausedMetric] != 1.0 || lines[0]["_aws"] == nil {
		t.Errorf("%s lines %v, want one extracted line of 1", tick.PausedMetric, lines)
	}

	set(false)
	// The world throttles by default: when its throttling outlasted the
	// SDK's attempts, Lambda retries the failed asynchronous invocation
	// (twice), and so does this test.
	for attempt := 0; attempt < 3; attempt++ {
		p = w.App.Provisioner()
		sum, err = p.Run(ctx, fmt.Sprintf("resumed-tick-%d", attempt))
		var exhausted *retry.MaxAttemptsError
		if err == nil || !errors.As(err, &exhausted) && !strings.Contains(err.Error(), "exceeded maximum number of attempts") {
			break
		}
		t.Logf("resumed tick failed on the world's throttling, invoked again: %v", err)
	}
	if err != nil {
		t.Logf("resumed tick: %v", err)
	}
	if sum.Paused || sum.NodeClaimsCreated == 0 || len(w.Claims()) == 0 {
		t.Errorf("resumed tick %+v created %d NodeClaims, want some", sum, len(w.Claims()))
	}
}

// killableOutput is an invocation's standard output, which CloudWatch
// reads: once the runtime kills the invocation (its timeout, memory),
// nothing it writes arrives.
type killableOutput struct {
	syncBuffer
	mu   sync.Mutex
	dead bool
}

func (k *killableOutput) Write(p []byte) (int, error) {
	k.mu.Lock()
	dead := k.dead
	k.mu.Unlock()
	if dead {
		return len(p), nil
	}
	return k.syncBuffer.Write(p)
}

func (k *killableOutput) kill() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
}

// TestKilledAfterAPassKeepsItsMetrics: a provisioner tick whose first pass
// launched capacity keeps watching; the runtime kills it in its watch
// window. What CloudWatch received still has that pass's metrics and its
// summary. And a tick that runs to its end writes each figure once: the
// lines written after each pass and at the end add up to what happened.
func TestKilledAfterAPassKeepsItsMetrics(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	w.Apply(deploy.DefaultNodePool("default"))
	w.Pods("app", 2, "1", nil)
	w.WaitUnschedulable(2)

	out := &killableOutput{}
	w.App.Config.WatchWindow, w.App.Config.BatchIdle = 10*time.Minute, 200*time.Millisecond
	p := w.App.Provisioner()
	p.Metrics, p.MetricsOut, p.Log = record.NewMetricsAt("Karpless", record.Full), out, record.NewLogger(out, "info")
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Run(runCtx, "killed-in-its-window")
	}()
	deadline := time.Now().Add(5 * time.Minute) // a condition, not a speed target
	for !strings.Contains(out.String(), `"msg":"provisioning pass done"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the first pass did not end: %s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Killed in the watch window: the deferred flush at the end writes
	// into the void.
	out.kill()
	cancel()
	<-done
	got := out.String()
	if strings.Contains(got, `"msg":"provisioning tick done"`) {
		t.Fatalf("the tick ended before it was killed: %s", got)
	}
	var m testworld.Metrics
	_, _ = m.Write([]byte(got))
	created := m.Sum("karpenter_nodeclaims_created_total", nil)
	if created < 1 {
		t.Errorf("the killed tick's output has %v NodeClaims created, want its first pass's: %s", created, got)
	}
	if len(m.Lines("karpenter_scheduler_queue_depth")) == 0 || len(m.Values("karpenter_scheduler_scheduling_duration_seconds")) == 0 {
		t.Errorf("the first pass's queue depth or scheduling duration is missing: %s", got)
	}
	if !strings.Contains(got, `"nodeClaimsCreated":`) {
		t.Errorf("no summary so far in the output: %s", got)
	}

	// A tick that is not killed: a pass at its start, another for a pod
	// that arrives in its window; every figure is written once.
	_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
	w.Pods("late", 1, "1", nil)
	//
	// The window is long and ended by events, not by time, so a loaded
	// machine only makes it slower: the pod arrives once the first pass
	// is done, and once a second pass is done the interruption function's
	// hand-over request ends the window, as it ends a real one.
	var whole syncBuffer
	w.App.Config.WatchWindow = 10 * time.Minute
	p = w.App.Provisioner()
	p.Metrics, p.MetricsOut, p.Log = record.NewMetricsAt("Karpless", record.Full), &whole, record.NewLogger(&whole, "info")
	before := len(w.Claims())
	passesDone := func() int { return strings.Count(whole.String(), `"msg":"provisioning pass done"`) }
	ended := make(chan struct{})
	go func() {
		waitFor := func(n int) bool {
			for deadline := time.Now().Add(5 * time.Minute); passesDone() < n; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					return false
				}
			}
			return true
		}
		if !waitFor(1) {
			return // the tick below fails the test
		}
		w.Pods("window", 1, "1", nil)
		if !waitFor(2) {
			return
		}
		// Asked until the holder has released: a request that met the
		// holder's renewal (a conflict) is dropped, as the interruption
		// function's next poll would ask again.
		asker := lease.New(w.E.Clients.Core.CoordinationV1(), config.DefaultNamespace, provision.LeaseName, "interruption", w.App.Config.LeaseDuration, w.Clock)
		for {
			if err := asker.RequestHandover(ctx); err != nil {
				t.Logf("requesting the hand-over: %v", err)
			}
			select {
			case <-ended:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	tickCtx, stop := context.WithTimeout(ctx, 8*time.Minute)
	defer stop()
	sum, err := p.Run(tickCtx, "whole")
	close(ended)
	if err != nil {
		t.Logf("tick: %v", err)
	}
	if tickCtx.Err() != nil {
		t.Fatalf("the tick was not handed over after its second pass (%d passes): %s", passesDone(), whole.String())
	}
	var mw testworld.Metrics
	_, _ = mw.Write([]byte(whole.String()))
	if got, want := mw.Sum("karpenter_nodeclaims_created_total", nil), float64(len(w.Claims())-before); got != want || got != float64(sum.NodeClaimsCreated) {
		t.Errorf("created_total lines add up to %v; the tick created %d NodeClaims (summary %d)", got, len(w.Claims())-before, sum.NodeClaimsCreated)
	}
	// One gauge per pass that simulated, written once: at most one line a
	// pass (Summary.Passes also counts the window's lifecycle rounds; a
	// pass the hostile API server failed simulates nothing).
	passes := strings.Count(whole.String(), `"msg":"provisioning pass done"`)
	if got := len(mw.Lines("karpenter_scheduler_queue_depth")); passes < 2 || got < 1 || got > passes {
		t.Errorf("%d queue depth lines for %d passes (want at least 2): each pass's gauge once", got, passes)
	}
}

// syncBuffer is a bytes.Buffer several goroutines write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
