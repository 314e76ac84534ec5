package provisioning_test

import (
	"os"
	"testing"
	"time"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/kube/kubetest"
	"github.com/karpless/karpless/shared/lifecycle"
	"github.com/karpless/karpless/shared/localrun"
	"github.com/karpless/karpless/shared/localrun/localruntest"
	"github.com/karpless/karpless/shared/wellknown"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true}))
}

func TestPendingPodsBecomeRunningOnNewNodes(t *testing.T) {
	w := localruntest.New(t, env, "provisioner")
	w.Apply(localrun.DefaultNodePool("default"))
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
			if !lifecycle.IsTrue(&nc, c) {
				t.Errorf("nodeclaim %s: %s is not true", nc.Name, c)
			}
		}
		for _, l := range []string{wellknown.NodePoolLabel, wellknown.InstanceTypeLabel, wellknown.ZoneLabel, wellknown.CapacityTypeLabel} {
			if nc.Labels[l] == "" {
				t.Errorf("nodeclaim %s has no %s label", nc.Name, l)
			}
		}
	}
	if got := w.Emu.CallCount("CreateFleet"); got != len(claims) {
		t.Errorf("%d CreateFleet calls for %d NodeClaims", got, len(claims))
	}
	w.AssertNoLeaks()
	for _, i := range w.Emu.Instances(nil) {
		for _, k := range []string{wellknown.ClusterTagKey("karpless-test"), wellknown.NodePoolTagKey, wellknown.EKSClusterNameTagKey, wellknown.NodeClaimTagKey, wellknown.EC2NodeClassTagKey, wellknown.NameTagKey} {
			if _, ok := i.Tags[k]; !ok {
				t.Errorf("instance %s lacks tag %s: %v", i.ID, k, i.Tags)
			}
		}
	}
}
