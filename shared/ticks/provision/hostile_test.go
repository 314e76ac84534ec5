package provision_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// xlargePool is a NodePool of 4-vCPU types: a pod of 3 cpu needs a node of
// its own.
func xlargePool(name string, cts ...string) *karpv1.NodePool {
	if len(cts) == 0 {
		cts = []string{"spot", "on-demand"}
	}
	return deploy.DefaultNodePool(name, typesReq("m5.xlarge", "c5.xlarge", "m6i.xlarge"), capacityReq(cts...))
}

// newClaims are the live claims not in known.
func newClaims(w *testworld.World, known map[string]bool) []karpv1.NodeClaim {
	var out []karpv1.NodeClaim
	for _, nc := range w.Claims() {
		if !known[nc.Name] && nc.DeletionTimestamp == nil {
			out = append(out, nc)
		}
	}
	return out
}

func claimNames(w *testworld.World) map[string]bool {
	out := map[string]bool{}
	for _, nc := range w.Claims() {
		out[nc.Name] = true
	}
	return out
}

// warmAccount launches a claim on-demand, then one on spot, so that the
// node class's instance profile has propagated and the launch templates of
// both capacity types exist: the state of an account that has launched
// before, where one tick can launch. (The pods select no capacity type:
// a claim's templates depend on its labels.)
func warmAccount(w *testworld.World) {
	w.T.Helper()
	ctx := context.Background()
	cms := w.E.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
	for _, ct := range []string{wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot} {
		if ct == wellknown.CapacityTypeOnDemand {
			// Spot out of the picture, as the unavailable offerings would
			// have it after a capacity error.
			cache, err := unavailable.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, w.Clock)
			if err != nil {
				w.T.Fatal(err)
			}
			cache.MarkCapacityType(wellknown.CapacityTypeSpot, "warm-up")
			if err := cache.Save(ctx); err != nil {
				w.T.Fatal(err)
			}
		}
		known := claimNames(w)
		w.Pods("warm-"+ct, 1, "3", nil)
		waitUnschedulable(w, "warm-"+ct+"-0")
		tickUntil(w, "warm-up-"+ct, 15, 5*time.Second, func() bool {
			nc := newClaims(w, known)
			return len(nc) > 0 && nc[0].IsTrue(karpv1.ConditionTypeLaunched)
		})
		if got := newClaims(w, known)[0].Labels[wellknown.CapacityTypeLabel]; got != ct {
			w.T.Fatalf("warm-up claim launched %s, want %s", got, ct)
		}
		if err := cms.Delete(ctx, unavailable.ConfigMapName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			w.T.Fatal(err)
		}
	}
	// Every warm pod runs on its node before the test's pods come: the
	// scheduler cannot bind one of those to a warm node.
	w.Converge(90*time.Second, nil)
}

// fleetErrorCodes are the errorSet codes of a recorded CreateFleet.
func fleetErrorCodes(c emulator.Call) []string {
	var out []string
	for _, e := range c.FleetErrors {
		code, _, _ := strings.Cut(e, ":")
		out = append(out, strings.TrimSpace(code))
	}
	return out
}

// TestLaunchWaitsForIAMPropagation: the instance profile the node class
// resolution creates is rejected by EC2 until IAM propagates it. Each
// rejection is an answer that launched nothing, which EC2 would replay to
// the same ClientToken: the claim must try again with a new token each
// time, and launch within a few ticks of the propagation, not be left to
// the 15-minute registration timeout.
func TestLaunchWaitsForIAMPropagation(t *testing.T) {
	// Propagation takes a fixed 15 s (the default draws 5-20 s) so that
	// the first launches are certainly rejected.
	h := emulator.DefaultHostility()
	h.ProfilePropagationMin, h.ProfilePropagationMax = 15*time.Second, 15*time.Second
	w := testworld.New(t, env, "provisioner", testworld.WithHostility(h))
	w.Apply(deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large", "m6i.large"), capacityReq("spot", "on-demand")))
	w.Pods("app", 1, "1", nil)
	w.WaitUnschedulable(1)
	start := w.Clock.Now()
	var first string
	ticks := tickUntil(w, "tick", 12, 3*time.Second, func() bool {
		claims := w.Claims()
		if first == "" && len(claims) > 0 {
			first = claims[0].Name
		}
		return allLaunched(w)
	})
	claims := w.Claims()
	if len(claims) != 1 || claims[0].Name != first {
		t.Fatalf("claims %v; want the first claim, %s, launched (not retired and replaced)", claimNames(w), first)
	}
	nc := claims[0]
	rejected := 0
	for _, c := range fleetCalls(w.Emu) {
		if c.Answered && !c.Launched && slices.Contains(fleetErrorCodes(c.Call), "InvalidParameterValue") {
			rejected++
		}
	}
	if rejected == 0 || w.Emu.HostileEvents()[emulator.EventProfilePropagation] == 0 {
		t.Fatalf("no launch was rejected for the instance profile (%d answers, events %v): the test no longer reaches its state", rejected, w.Emu.HostileEvents())
	}
	// Every rejection moved the claim to a new token; the one that launched
	// is the one the claim records.
	assertNoTokenReuse(t, w.Emu)
	attempt, _ := strconv.Atoi(nc.Annotations[cloud.LaunchAttemptAnnotation])
	var launchedWith string
	for _, c := range fleetCalls(w.Emu) {
		if c.Launched {
			launchedWith = c.Token
		}
	}
	if launchedWith != instance.ClientToken(string(nc.UID), attempt) {
		t.Errorf("launched with token %s; the claim records attempt %d", launchedWith, attempt)
	}
	if took := w.Clock.Since(start); took > 2*time.Minute {
		t.Errorf("the claim took %s of clock (%d ticks) to launch after a 15 s propagation", took, ticks)
	}
	t.Logf("%d launches rejected for the instance profile, launched at tick %d (attempt %d)", rejected, ticks, attempt)
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// lostLaunch runs ticks whose SDK makes one attempt per call (so that it
// does not resend the dropped call itself) until the CreateFleet the
// DropAfterApply fault drops has been sent; it returns that call.
func lostLaunch(t *testing.T, w *testworld.World, holder string) fleetCall {
	t.Helper()
	one, err := deploy.NewEnv(w.Emu, w.E.Clients, deploy.Options{Identity: "provisioner", MaxAttempts: 1, Clock: w.Clock, Log: w.Logger("provisioner")})
	if err != nil {
		t.Fatal(err)
	}
	seen := len(fleetCalls(w.Emu))
	for i := range 5 {
		if _, err := one.Provisioner().Run(context.Background(), fmt.Sprintf("%s-%d", holder, i)); err != nil {
			t.Logf("tick %s-%d: %v", holder, i, err)
		}
		for _, c := range fleetCalls(w.Emu)[seen:] {
			if c.Dropped {
				if c.Code != "" {
					t.Fatalf("the dropped CreateFleet was not applied (%s): the test no longer reaches its state", c.Code)
				}
				return c
			}
		}
		w.Skip(2 * time.Second)
	}
	t.Fatal("no CreateFleet answer was lost")
	return fleetCall{}
}

// markOffering takes the first offering a CreateFleet asked for out, as the
// interruption function does on a spot interruption: the next launch of the
// claim computes other parameters.
func markOffering(t *testing.T, w *testworld.World, c fleetCall) string {
	t.Helper()
	ctx := context.Background()
	var typ, zone string
	for k, vs := range c.Params {
		if strings.HasPrefix(k, "LaunchTemplateConfigs.1.Overrides.1.") {
			switch strings.TrimPrefix(k, "LaunchTemplateConfigs.1.Overrides.1.") {
			case "InstanceType":
				typ = vs[0]
			case "AvailabilityZone":
				zone = vs[0]
			}
		}
	}
	ct := c.Params.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	if typ == "" || zone == "" || ct == "" {
		t.Fatalf("cannot read the first override of %v", c.Params)
	}
	cache, err := unavailable.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, w.Clock)
	if err != nil {
		t.Fatal(err)
	}
	cache.Mark(ct, typ, zone, "SpotInterruption")
	if err := cache.Save(ctx); err != nil {
		t.Fatal(err)
	}
	return unavailable.Key(ct, typ, zone)
}

// TestLostAnswerThenChangedOfferings: a CreateFleet is applied but its
// answer is lost, and the claim's next launch computes other offerings, so
// EC2 answers its token with IdempotentParameterMismatch. The claim must
// adopt the instance the lost call launched, never launch a second; and
// when the lost call launched nothing, launch with the next token once no
// instance has shown up for timing.TokenPatience, not sooner (that would be a
// guess) and not much later.
func TestLostAnswerThenChangedOfferings(t *testing.T) {
	// New instances stay out of DescribeInstances for 20 s at least, so
	// that the next tick cannot find the lost call's instance by its tag
	// and meets the reused token (well within timing.TokenPatience).
	w := testworld.New(t, env, "provisioner", func(c *emulator.Config) { c.DescribeLag = 20 * time.Second })
	w.Apply(xlargePool("default"))
	warmAccount(w)

	t.Run("the lost call launched", func(t *testing.T) {
		known := claimNames(w)
		w.Pods("launched", 1, "3", nil)
		waitUnschedulable(w, "launched-0")
		w.Emu.Inject(emulator.DropAfterApply("CreateFleet", 1))
		lost := lostLaunch(t, w, "lost")
		if !lost.Launched {
			t.Fatalf("the lost CreateFleet launched nothing (%v): the test no longer reaches its state", lost.FleetErrors)
		}
		mark := markOffering(t, w, lost)
		tickUntil(w, "after", 10, 5*time.Second, func() bool {
			nc := newClaims(w, known)
			return len(nc) == 1 && nc[0].IsTrue(karpv1.ConditionTypeLaunched)
		})
		nc := newClaims(w, known)[0]
		var lostInstance emulator.Instance
		for _, i := range w.Emu.Instances(nil) {
			if i.ClientToken == lost.Token {
				lostInstance = i
			}
		}
		if got := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); got != lostInstance.ID {
			t.Errorf("claim %s recorded instance %s; the lost call launched %s", nc.Name, got, lostInstance.ID)
		}
		mismatch := false
		for _, c := range fleetCalls(w.Emu) {
			if c.Token == lost.Token && c.Code == "IdempotentParameterMismatch" {
				mismatch = true
			}
			if c.At.After(lost.At) && c.Token != lost.Token && c.Tags()[wellknown.NodeClaimTagKey] == nc.Name {
				t.Errorf("claim %s launched again with token %s after its lost call", nc.Name, c.Token)
			}
		}
		if !mismatch {
			t.Errorf("the token of the lost call was never answered IdempotentParameterMismatch (offering %s marked): the test no longer reaches its state", mark)
		}
		assertOneInstancePerClaim(t, w.Emu)
		// Its pod runs before the next subtest's pod comes.
		w.Converge(90*time.Second, nil)
	})

	t.Run("the lost call launched nothing", func(t *testing.T) {
		known := claimNames(w)
		w.Pods("nothing", 1, "3", nil)
		waitUnschedulable(w, "nothing-0")
		noCapacity := w.Emu.Inject(emulator.ICE("", "", ""))
		w.Emu.Inject(emulator.DropAfterApply("CreateFleet", 1))
		lost := lostLaunch(t, w, "lost-nothing")
		w.Emu.RemoveFault(noCapacity)
		if lost.Launched {
			t.Fatal("the lost CreateFleet launched despite the capacity errors: the test no longer reaches its state")
		}
		markOffering(t, w, lost)
		tickUntil(w, "after-nothing", 15, 10*time.Second, func() bool {
			nc := newClaims(w, known)
			return len(nc) == 1 && nc[0].IsTrue(karpv1.ConditionTypeLaunched)
		})
		nc := newClaims(w, known)[0]
		var mismatchAt, launchAt time.Time
		for _, c := range fleetCalls(w.Emu) {
			if c.Tags()[wellknown.NodeClaimTagKey] != nc.Name {
				continue
			}
			if c.Token == lost.Token && c.Code == "IdempotentParameterMismatch" && mismatchAt.IsZero() {
				mismatchAt = c.At
			}
			if c.Token != lost.Token && c.At.After(lost.At) && launchAt.IsZero() {
				launchAt = c.At
			}
		}
		switch {
		case mismatchAt.IsZero():
			t.Fatal("the token of the lost call was never answered IdempotentParameterMismatch: the test no longer reaches its state")
		case launchAt.IsZero():
			t.Fatal("no CreateFleet with another token")
		case launchAt.Sub(mismatchAt) < timing.TokenPatience:
			t.Errorf("the next token was sent %s after the mismatch: a guess, before timing.TokenPatience (%s) without the lost call's instance", launchAt.Sub(mismatchAt), timing.TokenPatience)
		case launchAt.Sub(mismatchAt) > timing.TokenPatience+40*time.Second:
			t.Errorf("the next token was sent %s after the mismatch; timing.TokenPatience is %s", launchAt.Sub(mismatchAt), timing.TokenPatience)
		}
		assertOneInstancePerClaim(t, w.Emu)
	})
	w.AssertNoLeaks()
}

// TestSpotServiceLinkedRoleMissing: in an account without the spot
// service-linked role, every spot override fails with
// AuthFailure.ServiceLinkedRoleCreationNotPermitted. A claim that prefers
// spot must launch on-demand in the same tick, spot must be marked out as
// a whole capacity type (not offering by offering), and an Event must say
// why.
func TestSpotServiceLinkedRoleMissing(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	w.Apply(xlargePool("default"))
	// Both capacity types' templates exist and the profile has propagated,
	// so that one tick can launch; then the role goes.
	warmAccount(w)
	h := emulator.DefaultHostility()
	h.NoSpotServiceLinkedRole = true
	w.Emu.SetHostility(h)
	known := claimNames(w)
	w.Pods("app", 1, "3", nil)
	waitUnschedulable(w, "app-0")
	// One tick, unless a hostile answer (a throttle outlasting the retries)
	// ends it first: then the next, and the claim must not have tried spot
	// again.
	ticks := tickUntil(w, "tick", 3, 2*time.Second, func() bool {
		nc := newClaims(w, known)
		return len(nc) == 1 && nc[0].IsTrue(karpv1.ConditionTypeLaunched)
	})
	nc := newClaims(w, known)[0]
	if ct := nc.Labels[wellknown.CapacityTypeLabel]; ct != wellknown.CapacityTypeOnDemand {
		t.Errorf("launched as %q; want on-demand", ct)
	}
	if ticks > 1 {
		t.Logf("launched at tick %d (a hostile answer ended the first)", ticks)
	}
	spotAsks := 0
	for _, c := range fleetCalls(w.Emu) {
		if c.Tags()[wellknown.NodeClaimTagKey] == nc.Name && c.Params.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" && c.Answered {
			spotAsks++
			if codes := fleetErrorCodes(c.Call); !slices.ContainsFunc(codes, awserr.IsSpotServiceLinkedRoleMissing) {
				t.Errorf("a spot launch failed with %v, not the missing role", codes)
			}
		}
	}
	if spotAsks != 1 {
		t.Errorf("spot was answered %d times for the claim; after the first answer, the role's absence rules spot out everywhere", spotAsks)
	}
	ctx := context.Background()
	cache, err := unavailable.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, w.Clock)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cache.Entries(), unavailable.Key(wellknown.CapacityTypeSpot, "", "")) {
		t.Errorf("the unavailable offerings hold %v; want spot marked as a whole capacity type (%s)", cache.Entries(), unavailable.Key(wellknown.CapacityTypeSpot, "", ""))
	}
	evs, err := w.E.Clients.Core.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		if e.Reason == "SpotServiceLinkedRoleCreationFailure" && e.InvolvedObject.Name == nc.Name {
			found = true
		}
	}
	if !found {
		t.Error("no SpotServiceLinkedRoleCreationFailure Event for the claim")
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestZoneWideSpotOutage: every spot offering of the zone the pod needs
// answers InsufficientInstanceCapacity, hundreds of offerings where one
// CreateFleet names at most instance.MaxInstanceTypes types. Karpenter
// deletes a claim whose fleet launched nothing and provisions again within
// seconds, without the offerings it marked; a tick a minute apart must not
// spread the zone's offerings over many ticks (the soak's seed 7 took
// nearly four minutes). The claim launches on-demand in the tick that
// created it, or the next if a hostile answer ends the first, with new
// launch templates EC2 lists late on the way.
func TestZoneWideSpotOutage(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	w.Apply(deploy.DefaultNodePool("default"))
	warmAccount(w)
	w.Emu.Inject(emulator.ICE(wellknown.CapacityTypeSpot, "", "us-west-2a"))
	known := claimNames(w)
	w.Pods("pinned", 1, "1", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{wellknown.ZoneLabel: "us-west-2a"}
	})
	waitUnschedulable(w, "pinned-0")
	ticks := tickUntil(w, "tick", 4, time.Minute, func() bool {
		nc := newClaims(w, known)
		return len(nc) == 1 && nc[0].IsTrue(karpv1.ConditionTypeLaunched)
	})
	nc := newClaims(w, known)[0]
	if ct := nc.Labels[wellknown.CapacityTypeLabel]; ct != wellknown.CapacityTypeOnDemand {
		t.Errorf("launched as %q; want on-demand, every spot offering of the zone being out", ct)
	}
	iced := 0
	for _, c := range fleetCalls(w.Emu) {
		if c.Tags()[wellknown.NodeClaimTagKey] == nc.Name {
			iced += strings.Count(strings.Join(fleetErrorCodes(c.Call), " "), "InsufficientInstanceCapacity")
		}
	}
	if iced <= instance.MaxInstanceTypes {
		t.Fatalf("%d spot offerings answered InsufficientInstanceCapacity, no more than one CreateFleet names: the test no longer reaches its state", iced)
	}
	if ticks > 2 {
		t.Errorf("the claim launched at tick %d after %d spot offerings failed; want the tick that created it or the next", ticks, iced)
	}
	t.Logf("launched on-demand at tick %d after %d spot offerings failed", ticks, iced)
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestUnlaunchedClaimIsNotProvisionedTwice: while a claim waits to launch
// (here for its instance profile to propagate), it is the capacity of the
// pods it was created for; later ticks must not create another claim for
// them, whatever the pods select. A pod that selects a capacity type (or a
// zone, or any label a claim has only as a single-valued requirement until
// it launches) must not get a claim per tick. (No instance joins the
// cluster here, so kube-scheduler cannot bind a pod to the node made for
// another and make a second claim legitimate.)
func TestUnlaunchedClaimIsNotProvisionedTwice(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), xlargePool("default")); err != nil {
		t.Fatal(err)
	}
	// Propagation takes a fixed 25 s, so that the claims wait through
	// several ticks.
	h := emulator.DefaultHostility()
	h.ProfilePropagationMin, h.ProfilePropagationMax = 25*time.Second, 25*time.Second
	c := newCrashWorld(t, w, testworld.WithHostility(h))
	// Pods that select nothing come first (older), so that the simulation
	// places them before the ones that select a capacity type or a zone.
	w.Pods("plain", 3, "3", nil)
	time.Sleep(1100 * time.Millisecond)
	w.Pods("spot", 1, "3", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{wellknown.CapacityTypeLabel: "spot"} })
	w.Pods("zonal", 1, "3", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{wellknown.ZoneLabel: "us-west-2a"} })
	const pods = 5
	waitUnschedulable(w, "plain-0", "plain-1", "plain-2", "spot-0", "zonal-0")
	most, ticks := 0, 0
	for ticks = 1; ticks <= 12; ticks++ {
		if _, err := hookedEnv(t, w, c.emu, c.clk, nil, nil).Provisioner().Run(ctx, fmt.Sprintf("tick-%d", ticks)); err != nil {
			t.Logf("tick %d: %v", ticks, err)
		}
		o := inspect(w, c.emu)
		most = max(most, o.live)
		if o.launched >= pods && o.launched == o.live {
			break
		}
		c.clk.Advance(5 * time.Second)
	}
	var claims, instances []string
	for _, nc := range w.Claims() {
		claims = append(claims, fmt.Sprintf("%s (%s/%s) %v", nc.Name, nc.Labels[wellknown.CapacityTypeLabel], nc.Labels[wellknown.ZoneLabel], nc.Spec.Requirements))
	}
	for _, i := range c.emu.Instances(nil) {
		instances = append(instances, fmt.Sprintf("%s %s/%s of %s", i.ID, i.CapacityType, i.Zone, i.Tags[wellknown.NodeClaimTagKey]))
	}
	switch {
	case ticks > 12:
		t.Fatalf("not launched after 12 ticks: %v", claims)
	case ticks < 3:
		t.Fatalf("launched at tick %d: the claims did not wait through several ticks, the test no longer reaches its state", ticks)
	}
	if most > pods {
		t.Errorf("%d claims at once for %d pods, each needing a node: %v", most, pods, claims)
	}
	if len(instances) > pods {
		t.Errorf("%d instances launched for %d pods: %v", len(instances), pods, instances)
	}
	if o := inspect(w, c.emu); len(o.problems) > 0 {
		t.Error(o.problems)
	}
}

// TestInstanceTaggedAfterRegistration: once its node registers, a claim's
// instance gets the tags Karpenter writes then (Name = the node's name,
// karpenter.sh/nodeclaim, eks:eks-cluster-name). A CreateTags that fails
// (throttled past the retries, here throughout registration) must be tried
// again by a later tick, as Karpenter's tagging controller requeues until
// the instance is tagged.
func TestInstanceTaggedAfterRegistration(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	w.Apply(xlargePool("default"))
	throttled := w.Emu.Inject(emulator.Throttle("CreateTags", 0))
	w.Pods("app", 1, "3", nil)
	waitUnschedulable(w, "app-0")
	w.Converge(90*time.Second, nil)
	w.Emu.RemoveFault(throttled)
	for i := range 5 {
		provisionOnce(w, fmt.Sprintf("later-%d", i))
		w.Skip(5 * time.Second)
	}
	for _, nc := range w.Claims() {
		id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)
		i, ok := w.Emu.Instance(id)
		if !ok {
			t.Fatalf("claim %s: no instance %s", nc.Name, id)
		}
		if i.Tags[wellknown.NameTagKey] != nc.Status.NodeName {
			t.Errorf("instance %s of claim %s (node %s) has Name tag %q after 5 more ticks; the tags of registration were never written again", id, nc.Name, nc.Status.NodeName, i.Tags[wellknown.NameTagKey])
		}
	}
}
