package provision_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

func typesReq(types ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: types}
}

func capacityReq(cts ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: cts}
}

func provisionOnce(w *testworld.World, holder string) provision.Summary {
	w.T.Helper()
	s, err := w.App.Provisioner().Run(context.Background(), holder)
	if err != nil {
		w.T.Logf("tick %s: %v", holder, err)
	}
	return s
}

func launchedTypes(w *testworld.World) map[string]string {
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
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "m5.xlarge", "c5.large", "c5.xlarge"), capacityReq("on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	for _, it := range []string{"m5.large", "c5.large"} {
		w.Emu.Inject(emulator.ICE("on-demand", it, ""))
	}
	w.Pods("app", 1, "1", nil)
	w.WaitUnschedulable(1)
	// The first launches may fail for other reasons (the instance profile
	// IAM has not propagated yet, a throttle): the claim must launch
	// within a few ticks, on a type that had capacity.
	tickUntil(w, "first", 10, 5*time.Second, func() bool { return allLaunched(w) })
	for name, got := range launchedTypes(w) {
		if strings.HasPrefix(got, "m5.large/") || strings.HasPrefix(got, "c5.large/") || !strings.HasSuffix(got, "/on-demand") {
			t.Errorf("nodeclaim %s launched as %s despite the capacity errors", name, got)
		}
	}
	cache, err := unavailable.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, w.App.Clock)
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
	// The next claim does not even ask for them (the marks last three
	// minutes; the ticks above skipped less). Its pod may not join the
	// first one, so that it needs a claim of its own that the large
	// types would fit.
	w.Emu.ResetCalls()
	w.Pods("second", 1, "1", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}},
		}}}}
	})
	w.WaitUnschedulable(1)
	tickUntil(w, "second", 10, 5*time.Second, func() bool { return len(w.Claims()) == 2 && allLaunched(w) })
	fleets := 0
	for _, c := range w.Emu.Calls() {
		if c.Action != "CreateFleet" {
			continue
		}
		fleets++
		for k, vs := range c.Params {
			if strings.HasSuffix(k, ".InstanceType") && (vs[0] == "m5.large" || vs[0] == "c5.large") {
				t.Errorf("CreateFleet offered %s although it is marked unavailable", vs[0])
			}
		}
	}
	if fleets == 0 {
		t.Error("the second claim launched without a CreateFleet")
	}
	assertOneInstancePerClaim(t, w.Emu)
	assertNoTokenReuse(t, w.Emu)
	w.AssertNoLeaks()
}

// With every spot offering out of capacity, the claim falls back to
// on-demand with a new launch attempt (and so a new client token).
func TestSpotFallsBackToOnDemand(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large"), capacityReq("spot", "on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	w.Emu.Inject(emulator.ICE("spot", "", ""))
	w.Pods("app", 1, "1", nil)
	w.WaitUnschedulable(1)
	var metrics testworld.Metrics
	w.App.Out = &metrics
	// Other answers may launch nothing first (the instance profile IAM has
	// not propagated yet): each advances the attempt too.
	tickUntil(w, "tick", 10, 5*time.Second, func() bool { return allLaunched(w) })
	// Each spot CreateFleet that launched nothing failed Karpenter's Create
	// with an InsufficientCapacityError.
	if n := metrics.Sum(cloud.ErrorsMetric, map[string]string{"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "aws", "error": "InsufficientCapacityError"}); n < 1 {
		t.Errorf("%v spot launches counted as failed, want at least one: %v", n, metrics.Lines(cloud.ErrorsMetric))
	}
	claims := w.Claims()
	if len(claims) != 1 {
		t.Fatalf("%d claims", len(claims))
	}
	nc := claims[0]
	if nc.Labels[wellknown.CapacityTypeLabel] != wellknown.CapacityTypeOnDemand {
		t.Fatalf("launched as %q, want on-demand after spot ran out", nc.Labels[wellknown.CapacityTypeLabel])
	}
	// Spot was asked for and answered with nothing; on-demand launched
	// with another token, the one of the attempt recorded on the claim
	// (so that a tick dying now would repeat it, not launch again).
	var spotTokens []string
	var launchedWith string
	for _, c := range fleetCalls(w.Emu) {
		if c.Params.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" && c.Answered {
			spotTokens = append(spotTokens, c.Token)
		}
		if c.Launched {
			launchedWith = c.Token
		}
	}
	if len(spotTokens) == 0 {
		t.Error("no spot launch was answered before the on-demand one")
	}
	if slices.Contains(spotTokens, launchedWith) {
		t.Errorf("on-demand launched with the token %s of a spot attempt that launched nothing", launchedWith)
	}
	attempt, _ := strconv.Atoi(nc.Annotations[cloud.LaunchAttemptAnnotation])
	if attempt < 1 || launchedWith != instance.ClientToken(string(nc.UID), attempt) {
		t.Errorf("launched with token %s; the claim records attempt %d (token %s)", launchedWith, attempt, instance.ClientToken(string(nc.UID), attempt))
	}
	assertNoTokenReuse(t, w.Emu)
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// The heavier NodePool is tried first; a NodePool at its cpu limit stops
// launching and the next one takes the rest.
func TestWeightsAndLimits(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	preferred := deploy.DefaultNodePool("preferred", typesReq("m5.xlarge"))
	preferred.Spec.Weight = new(int32(50))
	preferred.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
	fallback := deploy.DefaultNodePool("fallback", typesReq("c5.xlarge"))
	fallback.Spec.Weight = new(int32(10))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), preferred, fallback); err != nil {
		t.Fatal(err)
	}
	// 8 pods of 1.5 cpu: an m5.xlarge (4 vCPU) holds 2, so the preferred
	// pool's 8 cpu limit allows 2 nodes (4 pods), the rest go to fallback.
	w.Pods("app", 8, "1500m", nil)
	w.WaitUnschedulable(8)
	// A tick may fail before it creates claims (a throttled node class
	// resolution); once claims exist, the preferred pool must never pass
	// its limit, at any tick, and the fallback takes the rest.
	perPool := func() map[string]int {
		per := map[string]int{}
		for _, nc := range w.Claims() {
			if nc.DeletionTimestamp == nil {
				per[nc.Labels[wellknown.NodePoolLabel]]++
			}
		}
		return per
	}
	tickUntil(w, "tick", 10, 5*time.Second, func() bool {
		per := perPool()
		if per["preferred"] > 2 {
			t.Fatalf("claims per nodepool %v: preferred is past its cpu limit (2 nodes)", per)
		}
		return per["preferred"]+per["fallback"] >= 4
	})
	if per := perPool(); per["preferred"] != 2 || per["fallback"] == 0 {
		t.Fatalf("claims per nodepool %v; want 2 on preferred (its cpu limit) and the rest on fallback", per)
	}
	w.Converge(90*time.Second, func() {
		if per := perPool(); per["preferred"] > 2 {
			t.Fatalf("claims per nodepool %v: preferred is past its cpu limit", per)
		}
	})
	if per := perPool(); per["preferred"] != 2 || per["fallback"] == 0 {
		t.Errorf("claims per nodepool after convergence %v; want 2 on preferred and the rest on fallback", per)
	}
	live := 0
	for _, i := range w.Emu.Instances(func(i emulator.Instance) bool { return i.State == "pending" || i.State == "running" }) {
		if i.Tags[wellknown.NodePoolTagKey] == "preferred" {
			live++
		}
	}
	if live > 2 {
		t.Errorf("%d live instances of the preferred pool, past its cpu limit", live)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// Two ticks started at the same moment: one takes the lease and launches,
// the other does nothing.
func TestTwoTicksAtOnceLaunchOnce(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), deploy.DefaultNodePool("default")); err != nil {
		t.Fatal(err)
	}
	w.Pods("app", 6, "1", nil)
	w.WaitUnschedulable(6)
	var wg sync.WaitGroup
	sums := make([]provision.Summary, 4)
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
	// The actor may not launch everything (a throttle, an instance profile
	// IAM has not propagated): later ticks finish, and no claim ever gets
	// a second instance, whichever tick launched it.
	w.Converge(90*time.Second, nil)
	if idle := idleClaims(w); len(idle) > 0 {
		t.Errorf("claims no pod landed on (provisioned twice for the same pods?): %v", idle)
	}
	assertOneInstancePerClaim(t, w.Emu)
	assertNoTokenReuse(t, w.Emu)
	w.AssertNoLeaks()
}
