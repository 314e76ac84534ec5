package provision_test

import (
	"os"
	"testing"
	"time"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
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
}
