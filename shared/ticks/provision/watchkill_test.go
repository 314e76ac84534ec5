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

	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// armedKill kills the invocation at the nth call whose description starts
// with match, counting only once armed: a call made inside the watch
// window, after the first pass.
type armedKill struct {
	match string
	nth   int
	after bool

	mu           sync.Mutex
	armed, dead  bool
	seen         int
	fired        string
	callsAtArmed int
	calls        int
}

func (a *armedKill) arm() {
	a.mu.Lock()
	a.armed, a.callsAtArmed = true, a.calls
	a.mu.Unlock()
}

func (a *armedKill) Dead() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

func (a *armedKill) Do(desc string, send func() (*http.Response, error)) (*http.Response, error) {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		return nil, testworld.ErrKilled
	}
	a.calls++
	fire := false
	if a.armed && strings.HasPrefix(desc, a.match) {
		a.seen++
		fire = a.seen == a.nth
	}
	if fire && !a.after {
		a.dead, a.fired = true, desc
		a.mu.Unlock()
		return nil, testworld.ErrKilled
	}
	a.mu.Unlock()
	resp, err := send()
	if fire {
		a.mu.Lock()
		a.dead, a.fired = true, desc
		a.mu.Unlock()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, testworld.ErrKilled
	}
	return resp, err
}

// TestKilledWatchWindowThenFreshTick: a provisioner invocation keeps
// watching pending pods after its first pass; pods arrive, and the
// invocation dies at a call of the pass it runs for them (creating their
// claims, launching them, recording the launch). The next ticks must give
// every pod a launched claim, with no instance launched twice for a claim
// and none leaked.
func TestKilledWatchWindowThenFreshTick(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large", "m6i.large", "c6i.large", "r5.large"), capacityReq("spot", "on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	c := newCrashWorld(t, w)
	setWebPods(t, w, 1)
	if n := freshTicks(t, w, c, "warm-up", 1, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	nodeclaims := "kube POST /apis/karpenter.sh/v1/nodeclaims"
	for _, kp := range []struct {
		match string
		nth   int
		after bool
	}{
		{nodeclaims, 1, false},
		{nodeclaims, 1, true},
		{nodeclaims, 2, true},
		{"aws CreateFleet", 1, false},
		{"aws CreateFleet", 1, true},
		{"aws CreateFleet", 2, true},
		{"kube PATCH /apis/karpenter.sh/v1/nodeclaims/", 1, true},
		{"kube PUT /apis/karpenter.sh/v1/nodeclaims/", 1, true},
	} {
		when := "before"
		if kp.after {
			when = "after"
		}
		name := fmt.Sprintf("%s %s #%d", when, kp.match, kp.nth)
		t.Run(name, func(t *testing.T) {
			c.reset(t, w)
			setWebPods(t, w, 1)
			k := &armedKill{match: kp.match, nth: kp.nth, after: kp.after}
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan struct{})
			// A batch closes 200 ms after its last pod (1 s in Lambda), so
			// that the case does not wait for it.
			env := killableEnvWith(t, w, c, k, func(cfg *config.Config) {
				cfg.WatchWindow, cfg.BatchIdle = 10*time.Minute, 200*time.Millisecond
			})
			go func() {
				defer close(done)
				_, _ = env.Provisioner().Run(runCtx, "watching")
			}()
			// The first pass launches web-0's claim; the window opens.
			deadline := time.Now().Add(20 * time.Second)
			for inspect(w, c.emu).launched < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("the first pass did not launch: %+v", inspect(w, c.emu))
				}
				time.Sleep(50 * time.Millisecond)
			}
			k.arm()
			for _, name := range []string{"web-1", "web-2"} {
				if _, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(ctx, webPod(w.NS, name), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			deadline = time.Now().Add(20 * time.Second)
			for !k.Dead() {
				if time.Now().After(deadline) {
					t.Fatalf("the watch window's pass never made the call (%+v)", inspect(w, c.emu))
				}
				time.Sleep(50 * time.Millisecond)
			}
			// Dead: nothing of the invocation runs on.
			cancel()
			<-done
			before := inspect(w, c.emu)
			// The dead invocation's lease would expire before the next
			// scheduled tick; remove it rather than skip its 30 s.
			_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
			ticks := freshTicks(t, w, c, "fresh", 3, 3, 4*time.Second)
			if ticks > 3 {
				ticks = 3 + freshTicks(t, w, c, "fresh-late", 3, 3, 30*time.Second)
			}
			got := inspect(w, c.emu)
			switch {
			case ticks > 6:
				t.Errorf("killed at %s: not converged after 6 ticks: %+v (the killed invocation left %+v)", k.fired, got, before)
			case len(got.problems) > 0:
				t.Errorf("killed at %s: %v", k.fired, got.problems)
			case got.live > 3:
				t.Errorf("killed at %s: %d live claims for 3 pods (the killed invocation left %d)", k.fired, got.live, before.live)
			default:
				t.Logf("killed at %s (%d calls into the window) leaving %d claims, %d launched; converged in %d tick(s)", k.fired, k.calls-k.callsAtArmed, before.live, before.launched, ticks)
			}
		})
	}
}
