package lease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{NoCRDs: true})) }

func TestLeaseLifecycle(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Now())
	leases := e.Clients.Core.CoordinationV1()
	a := New(leases, ns, "provisioner", "tick-a", 30*time.Second, clk)
	b := New(leases, ns, "provisioner", "tick-b", 30*time.Second, clk)

	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a: first acquire = %v, %v", ok, err)
	}
	if ok, err := b.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("b acquired a live lease: %v, %v", ok, err)
	}
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a: re-acquire own lease = %v, %v", ok, err)
	}
	clk.Step(20 * time.Second)
	if _, err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(20 * time.Second) // 20 s after renewal: still valid
	if ok, _ := b.TryAcquire(ctx); ok {
		t.Fatal("b took a renewed lease")
	}
	clk.Step(11 * time.Second) // a stalled past expiry (killed Lambda)
	if ok, err := b.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("b could not take an expired lease: %v, %v", ok, err)
	}
	if _, err := a.Renew(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("a renewed a lease b took: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("releasing a lost lease must be a no-op: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a could not take a released lease: %v, %v", ok, err)
	}
}

func TestHandover(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Now())
	leases := e.Clients.Core.CoordinationV1()
	holder := New(leases, ns, "provisioner", "provisioner-tick", 30*time.Second, clk)
	waiter := New(leases, ns, "provisioner", "interruption", 30*time.Second, clk)
	if ok, _ := holder.TryAcquire(ctx); !ok {
		t.Fatal("holder could not acquire")
	}
	if asked, err := holder.Renew(ctx); asked || err != nil {
		t.Fatalf("renew before any request: asked=%v err=%v", asked, err)
	}
	polls := 0
	sleep := func(ctx context.Context, d time.Duration) error {
		polls++
		// The holder notices the request at its next renewal and releases.
		if asked, err := holder.Renew(ctx); err != nil {
			return err
		} else if asked {
			return holder.Release(ctx)
		}
		clk.Step(d)
		return nil
	}
	ok, err := waiter.Acquire(ctx, 10*time.Second, time.Second, sleep)
	if !ok || err != nil {
		t.Fatalf("waiter did not get the lease by hand-over: %v, %v", ok, err)
	}
	if polls != 1 {
		t.Errorf("hand-over took %d polls, want 1", polls)
	}
}

func TestConcurrentAcquireHasOneWinner(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Now())
	for round := range 5 {
		name := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := New(e.Clients.Core.CoordinationV1(), ns, name, fmt.Sprintf("tick-%d", i), 30*time.Second, clk)
				ok, err := l.TryAcquire(ctx)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					winners++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if winners != 1 {
			t.Fatalf("round %d: %d invocations acquired the lease, want exactly 1", round, winners)
		}
	}
}

// TestReleaseAfterHandoverRequest: a hand-over request rewrites the lease,
// so the holder's copy is stale when it releases; the release must still
// free the lease, or the waiter gives up and the next tick is skipped.
func TestReleaseAfterHandoverRequest(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Now())
	leases := e.Clients.Core.CoordinationV1()
	holder := New(leases, ns, "provisioner", "provisioner-tick", 30*time.Second, clk)
	waiter := New(leases, ns, "provisioner", "interruption", 30*time.Second, clk)
	if ok, err := holder.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("holder could not acquire: %v, %v", ok, err)
	}
	if err := waiter.RequestHandover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("release after a hand-over request: %v", err)
	}
	if ok, err := waiter.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("the lease is still held after its holder released it: %v, %v", ok, err)
	}
}

// TestHold renews a lease that a long pass would otherwise outlive and
// reports a lease another invocation took.
func TestHold(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Now())
	leases := e.Clients.Core.CoordinationV1()
	a := New(leases, ns, "provisioner", "pass", 30*time.Second, clk)
	b := New(leases, ns, "provisioner", "other", 30*time.Second, clk)
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	// A pass that holds before each action every 8 s for two minutes keeps
	// the lease the whole time.
	for range 15 {
		clk.Step(8 * time.Second)
		if err := a.Hold(ctx); err != nil {
			t.Fatalf("hold: %v", err)
		}
		if ok, _ := b.TryAcquire(ctx); ok {
			t.Fatal("another invocation took a lease its holder kept holding")
		}
	}
	// A holder that stalls past expiry learns it lost the lease.
	clk.Step(31 * time.Second)
	if ok, err := b.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("b could not take an expired lease: %v, %v", ok, err)
	}
	if err := a.Hold(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("hold after a takeover = %v, want ErrLost", err)
	}
}

func TestGuardCheck(t *testing.T) {
	cases := []struct {
		name    string
		g       Guard
		wantErr error
	}{
		{name: "no lease", g: nil},
		{name: "held", g: func(context.Context) error { return nil }},
		{name: "lost", g: func(context.Context) error { return ErrLost }, wantErr: ErrLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.Check(context.Background(), "launching")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if err != nil && err.Error() != "before launching: "+tc.wantErr.Error() {
				t.Errorf("error %q does not name the action it stopped", err)
			}
		})
	}
}

// raceRT runs before once, ahead of the first lease update it carries.
type raceRT struct {
	next   http.RoundTripper
	once   sync.Once
	before func()
}

func (r *raceRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/") {
		r.once.Do(r.before)
	}
	return r.next.RoundTrip(req)
}

// TestTakeAfterAConflictRereads: the old holder releases its expired lease
// between this invocation's read and its take. The API server answers the
// take 409; the lease is free, so the invocation must read it again and
// take it, not stand aside for a minute with nobody holding it.
func TestTakeAfterAConflictRereads(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Now())
	old := New(e.Clients.Core.CoordinationV1(), ns, "provisioner", "old", 30*time.Second, clk)
	if ok, err := old.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("old holder: %v, %v", ok, err)
	}
	clk.Step(31 * time.Second)
	cfg := rest.CopyConfig(e.Cluster.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &raceRT{next: rt, before: func() {
			if err := old.Release(ctx); err != nil {
				t.Errorf("old holder's release: %v", err)
			}
		}}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := New(cs.CoordinationV1(), ns, "provisioner", "next", 30*time.Second, clk)
	if ok, err := next.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("take after the old holder's release raced it: %v, %v; want the lease taken", ok, err)
	}
	if err := next.Hold(ctx); err != nil {
		t.Fatalf("the new holder does not hold the lease: %v", err)
	}
}
