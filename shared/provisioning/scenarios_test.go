package provisioning_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/config"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/localaws"
	"github.com/karpless/karpless/shared/localrun"
	"github.com/karpless/karpless/shared/localrun/localruntest"
	"github.com/karpless/karpless/shared/provisioning"
	"github.com/karpless/karpless/shared/wellknown"
)

func typesReq(types ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: types}
}

func capacityReq(cts ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: cts}
}

func provisionOnce(w *localruntest.World, holder string) provisioning.Summary {
	w.T.Helper()
	s, err := w.App.Provisioner().Run(context.Background(), holder)
	if err != nil {
		w.T.Logf("tick %s: %v", holder, err)
	}
	return s
}

func launchedTypes(w *localruntest.World) map[string]string {
	out := map[string]string{}
	for _, nc := range w.Claims() {
		out[nc.Name] = nc.Labels[wellknown.InstanceTypeLabel] + "/" + nc.Labels[wellknown.CapacityTypeLabel]
	}
	return out
}

// An offering out of capacity fails inside the fleet; CreateFleet launches
// another type of the same request, and the cache keeps the next claim off
// the offering for three minutes. On-demand (lowest-price) tries pools
// cheapest first and reports each one it could not fill.
func TestInsufficientCapacityFallsBackToOtherTypes(t *testing.T) {
	w := localruntest.New(t, env, "provisioner")
	ctx := context.Background()
	pool := localrun.DefaultNodePool("default", typesReq("m5.large", "m5.xlarge", "c5.large", "c5.xlarge"), capacityReq("on-demand"))
	if err := localrun.Apply(ctx, w.E.Clients, localrun.DefaultNodeClass(localruntest.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	for _, it := range []string{"m5.large", "c5.large"} {
		w.Emu.Inject(localaws.ICE("on-demand", it, ""))
	}
	w.Pods("app", 1, "1", nil)
	w.WaitUnschedulable(1)
	provisionOnce(w, "first")
	for name, got := range launchedTypes(w) {
		if strings.HasPrefix(got, "m5.large/") || strings.HasPrefix(got, "c5.large/") || !strings.HasSuffix(got, "/on-demand") {
			t.Errorf("nodeclaim %s launched as %s despite the capacity errors", name, got)
		}
	}
	cache, err := ice.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, config.DefaultUnavailableOfferingsTTL, w.App.Clock)
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, e := range cache.Entries() {
		if strings.HasPrefix(e, "on-demand:m5.large:") || strings.HasPrefix(e, "on-demand:c5.large:") {
			marked++
		}
	}
	if marked == 0 {
		t.Fatalf("offerings not marked unavailable: %v", cache.Entries())
	}
	// The next claim does not even ask for them.
	w.Emu.ResetCalls()
	w.Pods("second", 1, "1", nil)
	w.WaitUnschedulable(1)
	provisionOnce(w, "second")
	for _, c := range w.Emu.Calls() {
		if c.Action != "CreateFleet" {
			continue
		}
		for k, vs := range c.Params {
			if strings.HasSuffix(k, ".InstanceType") && (vs[0] == "m5.large" || vs[0] == "c5.large") {
				t.Errorf("CreateFleet offered %s although it is marked unavailable", vs[0])
			}
		}
	}
}

// With every spot offering out of capacity, the claim falls back to
// on-demand with a new launch attempt (and so a new client token).
func TestSpotFallsBackToOnDemand(t *testing.T) {
	w := localruntest.New(t, env, "provisioner")
	ctx := context.Background()
	pool := localrun.DefaultNodePool("default", typesReq("m5.large", "c5.large"), capacityReq("spot", "on-demand"))
	if err := localrun.Apply(ctx, w.E.Clients, localrun.DefaultNodeClass(localruntest.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	w.Emu.Inject(localaws.ICE("spot", "", ""))
	w.Pods("app", 1, "1", nil)
	w.WaitUnschedulable(1)
	provisionOnce(w, "tick")
	claims := w.Claims()
	if len(claims) != 1 {
		t.Fatalf("%d claims", len(claims))
	}
	nc := claims[0]
	if nc.Labels[wellknown.CapacityTypeLabel] != wellknown.CapacityTypeOnDemand {
		t.Fatalf("launched as %q, want on-demand after spot ran out", nc.Labels[wellknown.CapacityTypeLabel])
	}
	if nc.Annotations[provisioning.LaunchAttemptAnnotation] != "1" {
		t.Errorf("launch attempt = %q, want 1", nc.Annotations[provisioning.LaunchAttemptAnnotation])
	}
	tokens := map[string]bool{}
	for _, c := range w.Emu.Calls() {
		if c.Action == "CreateFleet" {
			tokens[c.Params.Get("ClientToken")] = true
		}
	}
	if len(tokens) != 2 {
		t.Errorf("%d distinct client tokens over the two launch attempts, want 2", len(tokens))
	}
	w.AssertNoLeaks()
}

// The heavier NodePool is tried first; a NodePool at its cpu limit stops
// launching and the next one takes the rest.
func TestWeightsAndLimits(t *testing.T) {
	w := localruntest.New(t, env, "provisioner")
	ctx := context.Background()
	preferred := localrun.DefaultNodePool("preferred", typesReq("m5.xlarge"))
	preferred.Spec.Weight = new(int32(50))
	preferred.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
	fallback := localrun.DefaultNodePool("fallback", typesReq("c5.xlarge"))
	fallback.Spec.Weight = new(int32(10))
	if err := localrun.Apply(ctx, w.E.Clients, localrun.DefaultNodeClass(localruntest.Cluster, ""), preferred, fallback); err != nil {
		t.Fatal(err)
	}
	// 8 pods of 1.5 cpu: an m5.xlarge (4 vCPU) holds 2, so the preferred
	// pool's 8 cpu limit allows 2 nodes (4 pods), the rest go to fallback.
	w.Pods("app", 8, "1500m", nil)
	w.WaitUnschedulable(8)
	provisionOnce(w, "tick")
	per := map[string]int{}
	for _, nc := range w.Claims() {
		per[nc.Labels[wellknown.NodePoolLabel]]++
	}
	if per["preferred"] != 2 || per["fallback"] == 0 {
		t.Fatalf("claims per nodepool %v; want 2 on preferred (its cpu limit) and the rest on fallback", per)
	}
	w.Converge(90*time.Second, nil)
	w.AssertNoLeaks()
}

// Two ticks started at the same moment: one takes the lease and launches,
// the other does nothing.
func TestTwoTicksAtOnceLaunchOnce(t *testing.T) {
	w := localruntest.New(t, env, "provisioner")
	ctx := context.Background()
	if err := localrun.Apply(ctx, w.E.Clients, localrun.DefaultNodeClass(localruntest.Cluster, ""), localrun.DefaultNodePool("default")); err != nil {
		t.Fatal(err)
	}
	w.Pods("app", 6, "1", nil)
	w.WaitUnschedulable(6)
	var wg sync.WaitGroup
	sums := make([]provisioning.Summary, 4)
	for i := range sums {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = provisionOnce(w, "concurrent-"+string(rune('a'+i)))
		}()
	}
	wg.Wait()
	acted, skipped := 0, 0
	for _, s := range sums {
		if s.Skipped != "" {
			skipped++
		} else {
			acted++
		}
	}
	if acted != 1 || skipped != 3 {
		t.Fatalf("%d ticks acted and %d skipped; want exactly one actor", acted, skipped)
	}
	claims := w.Claims()
	if got := w.Emu.CallCount("CreateFleet"); got != len(claims) {
		t.Errorf("%d CreateFleet calls for %d claims", got, len(claims))
	}
	w.AssertNoLeaks()
	_ = metav1.Now
}
