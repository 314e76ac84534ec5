package provision_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// TestMinValuesZonesAndBestEffort: under Strict, a NodePool with zone
// minValues provisions (zones come from the types' offerings; they are
// no instance-type label) and its NodeClaim keeps minValues 2 over at least
// two zones. Under MIN_VALUES_POLICY=BestEffort, a NodePool asking for
// three instance types of which two exist gets a NodeClaim relaxed to
// minValues 2 and annotated karpenter.sh/nodeclaim-min-values-relaxed=true,
// which the API server's NodeClaim CRD accepts and which launches.
func TestMinValuesZonesAndBestEffort(t *testing.T) {
	// The subject is what is written and launched, not the world's
	// hostility (IAM propagation alone takes most of a minute's budget).
	w := testworld.New(t, env, "provisioner", testworld.WithHostility(emulator.NoHostility()))
	two := 2
	zones := deploy.DefaultNodePool("zones", typesReq("m5.large", "c5.large"), capacityReq("on-demand"),
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpExists, MinValues: &two})
	w.Apply(zones)
	w.Pods("zonal", 1, "1", nil)
	w.WaitUnschedulable(1)
	claim := launchedClaim(t, w, "zones")
	if r := requirementOf(claim, wellknown.ZoneLabel); r == nil || r.MinValues == nil || *r.MinValues != 2 || len(r.Values) < 2 {
		t.Errorf("zone requirement %+v, want minValues 2 over at least 2 zones", r)
	}
	if got := claim.Annotations[wellknown.NodeClaimMinValuesRelaxedAnnotation]; got != "false" {
		t.Errorf("strict claim annotated %q, want \"false\"", got)
	}

	w.App.Config.MinValuesPolicy = config.MinValuesBestEffort
	three := 3
	relaxed := deploy.DefaultNodePool("relaxed", capacityReq("on-demand"),
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn,
			Values: []string{"m5.large", "c5.large", "no-such.large"}, MinValues: &three})
	w.Apply(relaxed)
	w.Pods("relaxed", 1, "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{wellknown.NodePoolLabel: "relaxed"} })
	w.WaitUnschedulable(1)
	claim = launchedClaim(t, w, "relaxed")
	if got := claim.Annotations[wellknown.NodeClaimMinValuesRelaxedAnnotation]; got != "true" {
		t.Errorf("BestEffort claim annotated %q, want \"true\"", got)
	}
	if r := requirementOf(claim, wellknown.InstanceTypeLabel); r == nil || r.MinValues == nil || *r.MinValues != 2 || len(r.Values) != 2 {
		t.Errorf("instance-type requirement %+v, want the 2 types there are with minValues 2", r)
	}
	w.AssertNoLeaks()
}

// launchedClaim runs provisioner passes until a claim of the NodePool is
// launched, and returns it.
func launchedClaim(t *testing.T, w *testworld.World, pool string) karpv1.NodeClaim {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := w.App.Provisioner().Pass(context.Background()); err != nil {
			t.Logf("pass: %v", err)
		}
		for _, nc := range w.Claims() {
			if nc.Labels[wellknown.NodePoolLabel] == pool && nc.DeletionTimestamp == nil && nc.IsTrue(karpv1.ConditionTypeLaunched) {
				return nc
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no claim of NodePool %s launched", pool)
	return karpv1.NodeClaim{}
}

func requirementOf(nc karpv1.NodeClaim, key string) *karpv1.NodeSelectorRequirementWithMinValues {
	for i := range nc.Spec.Requirements {
		if nc.Spec.Requirements[i].Key == key {
			return &nc.Spec.Requirements[i]
		}
	}
	return nil
}
