package provision_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube/lease"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// hookHTTP calls before ahead of each AWS call, named by its action.
type hookHTTP struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	before func(action string)
}

func (h hookHTTP) Do(req *http.Request) (*http.Response, error) {
	h.before(strings.TrimPrefix(awsCallName(req), "aws "))
	return h.next.Do(req)
}

// hookedEnv is the provisioner's environment on clk with before called
// ahead of every AWS call, and config adjusted by configure.
func hookedEnv(t *testing.T, w *testworld.World, emu *emulator.Emulator, clk clock.WithTicker, before func(string), configure func(*config.Config)) *app.Env {
	t.Helper()
	a, err := deploy.NewEnv(emu, w.E.Clients, deploy.Options{Clock: clk, Configure: func(c *config.Config) {
		c.WatchWindow = 0
		if configure != nil {
			configure(c)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := a.AWS.Config.Copy()
	cfg.Retryer = fastRetryer
	if before != nil {
		cfg.HTTPClient = hookHTTP{next: cfg.HTTPClient, before: before}
	}
	a.AWS = awsconfig.NewClients(cfg)
	return a
}

// setWebPods leaves exactly n pending web pods, web-0..web-(n-1).
func setWebPods(t *testing.T, w *testworld.World, n int) {
	t.Helper()
	ctx := context.Background()
	pods := w.E.Clients.Core.CoreV1().Pods(w.NS)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for len(w.ListPods()) > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		if _, err := pods.Create(ctx, webPod(w.NS, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	waitUnschedulable(w, names...)
}

// TestLeaseHeldThroughALongPass: a pass that creates and launches many
// claims, each CreateFleet slow, outlasts the lease's 30 s; it must renew
// the lease as it goes, so that no other invocation can take it meanwhile.
// And once another invocation has taken it (this one stalled past its
// expiry), it must create and launch nothing more.
func TestLeaseHeldThroughALongPass(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large", "m6i.large", "c6i.large", "r5.large"), capacityReq("spot", "on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	c := newCrashWorld(t, w)
	setWebPods(t, w, 1)
	// The instance profile propagates, the templates are made.
	if n := freshTicks(t, w, c, "warm-up", 1, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	leases := w.E.Clients.Core.CoordinationV1()

	t.Run("renewed through a pass longer than the lease", func(t *testing.T) {
		const pods = 24
		c.reset(t, w)
		setWebPods(t, w, pods)
		// Each CreateFleet takes 1.5 s of the clock: with up to 8 in
		// flight at once, 24 of them take the pass about 36 s past its
		// start, longer than the lease lasts without a renewal. Before
		// each, another invocation tries to take the lease.
		var mu sync.Mutex
		fleets, taken := 0, []string{}
		began := c.clk.Now()
		intruder := lease.New(leases, config.DefaultNamespace, provision.LeaseName, "intruder", timing.DefaultLeaseDuration, c.clk)
		before := func(action string) {
			if action != "CreateFleet" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			fleets++
			if ok, err := intruder.TryAcquire(context.Background()); err != nil || ok {
				taken = append(taken, fmt.Sprintf("before CreateFleet %d, %s into the pass: %v %v", fleets, c.clk.Since(began), ok, err))
				if ok {
					_ = intruder.Release(context.Background())
				}
			}
			c.clk.Advance(1500 * time.Millisecond)
		}
		if _, err := hookedEnv(t, w, c.emu, c.clk, before, nil).Provisioner().Run(ctx, "long"); err != nil {
			t.Logf("long pass: %v", err)
		}
		o := inspect(w, c.emu)
		t.Logf("the pass sent %d CreateFleet over %s of the clock; %d of %d claims launched", fleets, c.clk.Since(began).Round(time.Second), o.launched, o.live)
		if len(taken) > 0 {
			t.Errorf("another invocation took the lease during the pass: %v", taken)
		}
		if c.clk.Since(began) < timing.DefaultLeaseDuration+5*time.Second || o.launched < pods/2 {
			t.Fatalf("the pass was not long enough to need renewals (%s, %d launched): the test no longer reaches its state", c.clk.Since(began), o.launched)
		}
		if n := freshTicks(t, w, c, "after-long", pods, 4, 5*time.Second); n > 4 {
			t.Errorf("not converged after the long pass: %+v", inspect(w, c.emu))
		}
		if o := inspect(w, c.emu); len(o.problems) > 0 || o.live != pods {
			t.Errorf("after the long pass: %+v, want %d claims", o, pods)
		}
	})

	t.Run("a lost lease stops the watch window's passes", func(t *testing.T) {
		c.reset(t, w)
		setWebPods(t, w, 1)
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			sum provision.Summary
			err error
		}
		done := make(chan result, 1)
		stale := hookedEnv(t, w, c.emu, c.clk, nil, func(cfg *config.Config) {
			cfg.WatchWindow, cfg.BatchIdle = 10*time.Minute, 200*time.Millisecond
		})
		go func() {
			s, err := stale.Provisioner().Run(runCtx, "stale")
			done <- result{s, err}
		}()
		// The first pass launches web-0's claim; the watch window opens.
		deadline := time.Now().Add(2 * time.Minute)
		for inspect(w, c.emu).launched < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the first pass did not launch: %+v", inspect(w, c.emu))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The invocation stalls past its lease's expiry; another takes it.
		c.clk.Advance(timing.DefaultLeaseDuration + time.Second)
		intruder := lease.New(leases, config.DefaultNamespace, provision.LeaseName, "intruder", timing.DefaultLeaseDuration, c.clk)
		if ok, err := intruder.TryAcquire(ctx); err != nil || !ok {
			t.Fatalf("the expired lease could not be taken: %v %v", ok, err)
		}
		claimsAtTakeover := len(w.Claims())
		// New pods arrive: the old holder's watch window sees them and runs
		// a pass, which must stop at its first NodeClaim.
		for _, name := range []string{"web-1", "web-2"} {
			if _, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(ctx, webPod(w.NS, name), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitUnschedulable(w, "web-1", "web-2")
		// The stale invocation ends by itself: its next renewal (every
		// third of the lease, on the real clock under the skew) finds the
		// lease taken, and a pass the new pods start before then stops at
		// its first guard. Either way it must report the lost lease; how
		// long that takes depends on the machine, so wait for it.
		var r result
		select {
		case r = <-done:
		case <-time.After(3 * time.Minute):
			cancel()
			r = <-done
			t.Errorf("the stale invocation kept running for 3 minutes after its lease was taken")
		}
		if got := len(w.Claims()); got != claimsAtTakeover {
			t.Errorf("%d claims created after the lease was lost", got-claimsAtTakeover)
		}
		stopped := false
		for _, e := range r.sum.Errors {
			if strings.Contains(e, lease.ErrLost.Error()) {
				stopped = true
			}
		}
		if !stopped {
			t.Errorf("the stale invocation's passes did not report the lost lease (errors %v, %v): the test no longer reaches its state", r.sum.Errors, r.err)
		}
		// The new holder provisions the new pods.
		if _, err := hookedEnv(t, w, c.emu, c.clk, nil, nil).Provisioner().Run(ctx, "intruder"); err != nil {
			t.Logf("new holder: %v", err)
		}
		if n := freshTicks(t, w, c, "after-takeover", 3, 4, 5*time.Second); n > 4 {
			t.Errorf("not converged after the takeover: %+v", inspect(w, c.emu))
		}
		if o := inspect(w, c.emu); len(o.problems) > 0 || o.live != 3 {
			t.Errorf("after the takeover: %+v, want 3 claims", o)
		}
	})
}
