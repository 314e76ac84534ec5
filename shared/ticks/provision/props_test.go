package provision_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// The properties a hostile world can still be held to: whatever EC2 throws
// (throttles, lost answers, capacity errors, an instance profile IAM has not
// propagated), a NodeClaim never gets two instances, a ClientToken is never
// sent again after an answer that launched nothing, and every claim
// launches within a few ticks.

// instancesByClaim groups every instance the emulator ever launched,
// terminated ones included, by its karpenter.sh/nodeclaim tag.
func instancesByClaim(emu *emulator.Emulator) map[string][]emulator.Instance {
	out := map[string][]emulator.Instance{}
	for _, i := range emu.Instances(nil) {
		out[i.Tags[wellknown.NodeClaimTagKey]] = append(out[i.Tags[wellknown.NodeClaimTagKey]], i)
	}
	return out
}

// doubleLaunches lists the NodeClaims that got more than one instance.
func doubleLaunches(emu *emulator.Emulator) []string {
	var out []string
	for claim, is := range instancesByClaim(emu) {
		if len(is) > 1 {
			var ids []string
			for _, i := range is {
				ids = append(ids, i.ID+" "+i.State)
			}
			out = append(out, fmt.Sprintf("nodeclaim %q has %d instances (%s)", claim, len(is), strings.Join(ids, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// assertOneInstancePerClaim fails for any NodeClaim that got two instances.
func assertOneInstancePerClaim(t testing.TB, emu *emulator.Emulator) {
	t.Helper()
	for _, p := range doubleLaunches(emu) {
		t.Error(p)
	}
}

// fleetCall is one CreateFleet as the emulator recorded it.
type fleetCall struct {
	emulator.Call
	Token string
	// Answered: EC2 applied the call and its answer reached the caller
	// (HTTP 200, connection not dropped).
	Answered bool
	// Launched: an instance carries this call's token.
	Launched bool
}

// Tags are the instance tags the call asked for.
func (c fleetCall) Tags() map[string]string {
	out := map[string]string{}
	for n := 1; ; n++ {
		spec := fmt.Sprintf("TagSpecification.%d.", n)
		rt := c.Params.Get(spec + "ResourceType")
		if rt == "" {
			return out
		}
		if rt != "instance" {
			continue
		}
		for m := 1; c.Params.Get(fmt.Sprintf("%sTag.%d.Key", spec, m)) != ""; m++ {
			out[c.Params.Get(fmt.Sprintf("%sTag.%d.Key", spec, m))] = c.Params.Get(fmt.Sprintf("%sTag.%d.Value", spec, m))
		}
	}
}

func fleetCalls(emu *emulator.Emulator) []fleetCall {
	launched := map[string]bool{}
	for _, i := range emu.Instances(nil) {
		launched[i.ClientToken] = true
	}
	var out []fleetCall
	for _, c := range emu.Calls() {
		if c.Action != "CreateFleet" {
			continue
		}
		tok := c.Params.Get("ClientToken")
		out = append(out, fleetCall{Call: c, Token: tok, Answered: c.Code == "" && !c.Dropped, Launched: launched[tok]})
	}
	return out
}

// tokenReuses lists the CreateFleet calls sent with a token whose earlier
// call was answered with nothing launched: EC2 replays that answer to the
// same token, so such a call can never launch.
func tokenReuses(emu *emulator.Emulator) []string {
	spent := map[string]bool{}
	var out []string
	for i, c := range fleetCalls(emu) {
		if spent[c.Token] {
			out = append(out, fmt.Sprintf("CreateFleet #%d reused token %s after an answer that launched nothing", i+1, c.Token))
		}
		if c.Answered && !c.Launched {
			spent[c.Token] = true
		}
	}
	return out
}

func assertNoTokenReuse(t testing.TB, emu *emulator.Emulator) {
	t.Helper()
	for _, p := range tokenReuses(emu) {
		t.Error(p)
	}
}

// allLaunched says whether there are claims and each is launched.
func allLaunched(w *testworld.World) bool {
	claims := w.Claims()
	if len(claims) == 0 {
		return false
	}
	for _, nc := range claims {
		if !nc.IsTrue(karpv1.ConditionTypeLaunched) {
			return false
		}
	}
	return true
}

// tickUntil runs provisioner ticks until done, skipping step of the
// world's clock between them (an instance profile propagating, an instance
// EC2 lists late), and fails after max ticks. It returns how many ran.
func tickUntil(w *testworld.World, holder string, max int, step time.Duration, done func() bool) int {
	w.T.Helper()
	for i := 1; i <= max; i++ {
		provisionOnce(w, fmt.Sprintf("%s-%d", holder, i))
		if done() {
			return i
		}
		w.Skip(step)
	}
	w.T.Fatalf("%s: not done after %d ticks %s apart", holder, max, step)
	return max
}

// idleClaims lists the claims no pod of the namespace is bound to (by node
// name): after convergence, a claim created for pods another claim already
// took. The simulation packs pods into as few claims as fit, so every
// claim it creates is for at least one pod.
func idleClaims(w *testworld.World) []string {
	used := map[string]bool{}
	for _, p := range w.ListPods() {
		if p.Spec.NodeName != "" {
			used[p.Spec.NodeName] = true
		}
	}
	var out []string
	for _, nc := range w.Claims() {
		if nc.DeletionTimestamp == nil && !used[nc.Status.NodeName] {
			out = append(out, fmt.Sprintf("%s (node %q)", nc.Name, nc.Status.NodeName))
		}
	}
	return out
}

// waitUnschedulable waits until kube-scheduler has marked the named pods
// of the namespace unschedulable (others may still be pending).
func waitUnschedulable(w *testworld.World, names ...string) {
	w.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		marked := map[string]bool{}
		for _, p := range w.ListPods() {
			if podutil.IsUnschedulable(&p) {
				marked[p.Name] = true
			}
		}
		missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return marked[n] })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var state []string
			for _, p := range w.ListPods() {
				state = append(state, fmt.Sprintf("%s on %q (%s)", p.Name, p.Spec.NodeName, p.Status.Phase))
			}
			w.T.Fatalf("pods %v not marked unschedulable: %v; claims %v", missing, state, claimNames(w))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
