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
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// staticPool is a static NodePool of two cheap amd64 types whose nodes a
// dynamic pool would consolidate at once (consolidateAfter 0s), with a
// drift budget of nodes.
func staticPool(replicas int64, budget string) *karpv1.NodePool {
	np := deploy.DefaultNodePool("fixed", typesReq("m5.large", "c5.large"), capacityReq("spot", "on-demand"))
	np.Spec.Replicas = &replicas
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
	return np
}

// staticState is the pool's claims: live (not deleting), initialized,
// drifted-away (without want's template label) and being disrupted.
type staticState struct {
	live, initialized, old, disrupting int
	names                              []string
}

func readStatic(w *testworld.World, label string) staticState {
	var s staticState
	for _, nc := range w.Claims() {
		if nc.Labels[wellknown.NodePoolLabel] != "fixed" || nc.DeletionTimestamp != nil {
			continue
		}
		s.live++
		s.names = append(s.names, nc.Name)
		if nc.IsTrue(karpv1.ConditionTypeInitialized) {
			s.initialized++
		}
		if label != "" && nc.Labels["rev"] != label {
			s.old++
		}
		if nc.IsTrue(karpv1.ConditionTypeDisruptionReason) {
			s.disrupting++
		}
	}
	return s
}

// until runs provisioner and disruption passes, the clock moving on two
// seconds between rounds (the hostile world's waits), until done holds.
func until(t *testing.T, w *testworld.World, timeout time.Duration, disrupt bool, done func() bool, each func()) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("not done after %s: %+v", timeout, readStatic(w, ""))
		}
		if _, err := w.App.Provisioner().Pass(ctx); err != nil {
			t.Logf("provisioner pass: %v", err)
		}
		if disrupt {
			if _, _, err := w.App.Disrupter().Pass(ctx); err != nil {
				t.Logf("disruption pass: %v", err)
			}
		}
		if each != nil {
			each()
		}
		w.Skip(2 * time.Second)
		time.Sleep(200 * time.Millisecond)
	}
}

func patchPool(t *testing.T, w *testworld.World, patch string) {
	t.Helper()
	if _, err := w.E.Clients.NodePools.Patch(context.Background(), "fixed", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A static NodePool, on the real API server and the emulator: replicas 3
// gives three nodes without a pod; more passes create no more; idle as
// they are, consolidation leaves them; a template change drifts them and
// they are replaced, at most the budget's two at a time; replicas 1
// deletes two through the termination path.
func TestStaticNodePool(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	w.Apply(staticPool(3, "2"))
	start := time.Now()
	until(t, w, 40*time.Second, false, func() bool { return readStatic(w, "").initialized == 3 }, nil)
	t.Logf("3 static nodes initialized after %s", time.Since(start).Round(100*time.Millisecond))

	// Passes and disruption passes again: nothing is created, emptied or
	// consolidated (a dynamic pool would take these empty nodes at once).
	ctx := context.Background()
	before := readStatic(w, "")
	for range 2 {
		if _, err := w.App.Provisioner().Pass(ctx); err != nil {
			t.Logf("provisioner pass: %v", err)
		}
		sum, _, err := w.App.Disrupter().Pass(ctx)
		if err != nil {
			t.Logf("disruption pass: %v", err)
		}
		if len(sum.Commands) > 0 || len(sum.ScaledDown) > 0 {
			t.Errorf("disruption acted on a static pool at its size: %+v", sum)
		}
		w.Skip(time.Minute)
	}
	if after := readStatic(w, ""); after.live != 3 || strings.Join(after.names, ",") != strings.Join(before.names, ",") {
		t.Fatalf("claims %v became %v", before.names, after.names)
	}
	if got := len(w.Emu.Instances(func(i emulator.Instance) bool { return i.State == "pending" || i.State == "running" })); got != 3 {
		t.Errorf("%d live instances for 3 replicas", got)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()

	// Drift: a new template label changes the pool's hash.
	patchPool(t, w, `{"spec":{"template":{"metadata":{"labels":{"rev":"2"}}}}}`)
	start = time.Now()
	most := 0
	until(t, w, 60*time.Second, true, func() bool {
		s := readStatic(w, "2")
		return s.old == 0 && s.initialized == 3 && s.live == 3
	}, func() {
		most = max(most, readStatic(w, "2").disrupting)
	})
	t.Logf("3 drifted static nodes replaced after %s, at most %d at a time", time.Since(start).Round(100*time.Millisecond), most)
	if most > 2 {
		t.Errorf("%d static nodes disrupted at once; the budget allows 2", most)
	}

	// Scale down to 1: two claims deleted, drained and terminated.
	patchPool(t, w, `{"spec":{"replicas":1}}`)
	start = time.Now()
	until(t, w, 40*time.Second, true, func() bool {
		live := w.Emu.Instances(func(i emulator.Instance) bool { return i.State == "pending" || i.State == "running" })
		return len(w.Claims()) == 1 && len(live) == 1
	}, nil)
	t.Logf("scaled down to 1 after %s", time.Since(start).Round(100*time.Millisecond))
	for range 2 {
		if _, err := w.App.Provisioner().Pass(ctx); err != nil {
			t.Logf("provisioner pass: %v", err)
		}
	}
	if s := readStatic(w, "2"); s.live != 1 || s.old != 0 {
		t.Errorf("after scale-down: %+v", s)
	}
	assertOneInstancePerClaim(t, w.Emu)
	assertNoTokenReuse(t, w.Emu)
	w.AssertNoLeaks()
}

// killAt stands for the Lambda runtime stopping the invocation at the
// nth call whose name starts with prefix: before it is sent, or once it
// was applied (its answer lost).
type killAt struct {
	prefix string
	nth    int
	after  bool

	mu         sync.Mutex
	seen       int
	dead, shot bool
}

func (k *killAt) Do(desc string, send func() (*http.Response, error)) (*http.Response, error) {
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return nil, testworld.ErrKilled
	}
	fire := false
	if strings.HasPrefix(desc, k.prefix) {
		k.seen++
		fire = k.seen == k.nth
	}
	if fire && !k.after {
		k.dead, k.shot = true, true
		k.mu.Unlock()
		return nil, testworld.ErrKilled
	}
	k.mu.Unlock()
	resp, err := send()
	if fire {
		k.mu.Lock()
		k.dead, k.shot = true, true
		k.mu.Unlock()
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, testworld.ErrKilled
	}
	return resp, err
}

// A static pool's tick killed between creating its NodeClaims and
// launching them (after the first or second creation was applied, before
// or after the first CreateFleet) leaves claims that fresh ticks launch:
// exactly the replicas, one instance each, nothing leaked.
func TestStaticKilledBetweenCreateAndLaunch(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	if err := deploy.Apply(context.Background(), w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), staticPool(2, "1")); err != nil {
		t.Fatal(err)
	}
	c := newCrashWorld(t, w)
	// The account's first launches wait for its instance profile to
	// propagate and its templates to be known.
	if n := freshTicks(t, w, c, "warm-up", 2, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	const create = "kube POST /apis/karpenter.sh/v1/nodeclaims"
	for _, k := range []*killAt{
		{prefix: create, nth: 1, after: true},
		{prefix: create, nth: 2, after: true},
		{prefix: "aws CreateFleet", nth: 1},
		{prefix: "aws CreateFleet", nth: 1, after: true},
	} {
		when := "before"
		if k.after {
			when = "after"
		}
		name := fmt.Sprintf("%s %s #%d", when, strings.TrimPrefix(k.prefix, "kube "), k.nth)
		t.Run(name, func(t *testing.T) {
			c.reset(t, w)
			_, _ = killableEnvWith(t, w, c, k, nil).Provisioner().Run(context.Background(), "killed")
			if !k.shot {
				t.Skipf("the tick ended before the kill point (a hostile answer): %+v", inspect(w, c.emu))
			}
			left := inspect(w, c.emu)
			// The dead tick's lease would expire before the next tick.
			_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(context.Background(), provision.LeaseName, metav1.DeleteOptions{})
			n := freshTicks(t, w, c, "fresh", 2, 6, 5*time.Second)
			if n > 6 {
				t.Fatalf("not converged after 6 ticks: %+v (the killed tick left %+v)", inspect(w, c.emu), left)
			}
			t.Logf("the killed tick left %d claim(s), %d launched; %d fresh tick(s) launched the rest", left.live, left.launched, n)
			// Ticks once more: a pool at its size gets nothing more.
			freshTicks(t, w, c, "again", 2, 1, time.Second)
			got := inspect(w, c.emu)
			if got.live != 2 || got.liveInstances != 2 || len(got.problems) > 0 {
				t.Errorf("after the kill and fresh ticks: %+v (the killed tick left %+v)", got, left)
			}
		})
	}
}
