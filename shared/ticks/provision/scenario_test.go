package provision_test

import (
	"context"
	"os"
	"testing"
	"time"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/testworld"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true}))
}

func TestPendingPodsBecomeRunningOnNewNodes(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	w.Apply(deploy.DefaultNodePool("default"))
	w.Pods("app", 12, "1", nil)
	w.WaitUnschedulable(12)
	start := time.Now()
	w.Converge(90*time.Second, nil)
	t.Logf("12 pending pods running on new nodes after %s", time.Since(start).Round(100*time.Millisecond))

	claims := w.Claims()
	if len(claims) == 0 {
		t.Fatal("no NodeClaims")
	}
	for _, nc := range claims {
		for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady} {
			if !nc.IsTrue(c) {
				t.Errorf("nodeclaim %s: %s is not true", nc.Name, c)
			}
		}
		for _, l := range []string{wellknown.NodePoolLabel, wellknown.InstanceTypeLabel, wellknown.ZoneLabel, wellknown.CapacityTypeLabel} {
			if nc.Labels[l] == "" {
				t.Errorf("nodeclaim %s has no %s label", nc.Name, l)
			}
		}
	}
	// A launch may be tried several times (an instance profile IAM has not
	// propagated yet, capacity errors), but never launches twice.
	if got := len(w.Emu.Instances(nil)); got != len(claims) {
		t.Errorf("%d instances launched for %d NodeClaims", got, len(claims))
	}
	assertOneInstancePerClaim(t, w.Emu)
	assertNoTokenReuse(t, w.Emu)
	w.AssertNoLeaks()
	for _, i := range w.Emu.Instances(nil) {
		for _, k := range []string{wellknown.ClusterTagKey("karpless-test"), wellknown.NodePoolTagKey, wellknown.EKSClusterNameTagKey, wellknown.NodeClaimTagKey, wellknown.EC2NodeClassTagKey, wellknown.NameTagKey} {
			if _, ok := i.Tags[k]; !ok {
				t.Errorf("instance %s lacks tag %s: %v", i.ID, k, i.Tags)
			}
		}
	}
	assertPodTimings(t, w, 12)
}

// assertPodTimings runs the next scheduled tick and checks the startup
// and bound durations it observes of the pods that just started (at most
// pods of them): the tick's window is the minute that ends 10 s before
// it, so the clock moves on by those 10 s first.
func assertPodTimings(t *testing.T, w *testworld.World, pods int) {
	t.Helper()
	w.Skip(11 * time.Second)
	var metrics testworld.Metrics
	p := w.App.Provisioner()
	p.Metrics, p.MetricsOut = record.NewMetrics("Karpless"), &metrics
	if _, err := p.Run(context.Background(), "observer"); err != nil {
		t.Logf("observer tick: %v", err)
	}
	startup := metrics.Values("karpenter_pods_startup_duration_seconds")
	bound := metrics.Values("karpenter_pods_bound_duration_seconds")
	t.Logf("startup %v, bound %v (clock %s ahead)", startup, bound, w.Clock.Skew())
	// The kubelets stamp Ready on the world's clock, which runs ahead of
	// the API server's, the creation's; the scheduler's binding is on the
	// API server's, which the window (on the world's clock) may have left
	// behind if the test skipped much.
	if len(startup) == 0 || len(startup) > pods {
		t.Errorf("%d startup durations observed, want 1 to %d", len(startup), pods)
	}
	if (len(bound) == 0 && w.Clock.Skew() < 45*time.Second) || len(bound) > pods {
		t.Errorf("%d bound durations observed, want 1 to %d", len(bound), pods)
	}
	for _, v := range append(startup, bound...) {
		if v < 0 || v > (testworld.MaxSkew+2*time.Minute).Seconds() {
			t.Errorf("a duration of %v s for pods created in this test", v)
		}
	}
	for _, doc := range metrics.Lines("karpenter_pods_startup_duration_seconds") {
		if doc["_aws"] == nil {
			t.Errorf("not extracted at the full level: %v", doc)
		}
	}
	// A tick that comes later sees them no more.
	before := w.Clock.Skew()
	if w.Skip(time.Minute); w.Clock.Skew() == before {
		return // the clock may run no further ahead
	}
	var later testworld.Metrics
	p = w.App.Provisioner()
	p.Metrics, p.MetricsOut = record.NewMetrics("Karpless"), &later
	if _, err := p.Run(context.Background(), "later"); err != nil {
		t.Logf("later tick: %v", err)
	}
	if n := len(later.Values("karpenter_pods_startup_duration_seconds")); n != 0 {
		t.Errorf("the next tick observed %d startups again", n)
	}
}
