package disrupt_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// withoutTemplateLag is the default hostility but for launch templates,
// which EC2 lists as soon as they are created. A template listed late makes
// the executing pass retry its launch up to three times, a number of calls
// that changes from world to world with the random lag; the crash cases
// kill that pass at each of its calls, which needs the same calls in every
// world. The retry itself is shared/ticks/provision's to test.
func withoutTemplateLag() testworld.Option {
	h := emulator.DefaultHostility()
	h.LaunchTemplateLagMax = 0
	return testworld.WithHostility(h)
}

// crashSetup brings a world to the moment a single-node consolidation
// (one c5.xlarge holding 500m replaced by a cheaper node) is proposed and
// due: the next disruption pass validates and executes it.
func crashSetup(t *testing.T) *world {
	t.Helper()
	w := newWorld(t, withoutTemplateLag())
	w.tolerateNotReady = true
	// The kill points are the baseline pass's calls, counted at the kill
	// switch: a conflict the engine retries or a 429 client-go retries is
	// another call there, and a killed pass would leave the baseline's
	// path. Watch cuts and expired continue tokens stay; the scenario
	// tests meet conflicts and 429s.
	w.kubeChaos.ConflictRate, w.kubeChaos.TooManyRequestsRate = 0, 0
	// Only c5.xlarge at first: two small pods get one c5.xlarge.
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5.xlarge"},
		})
	})
	w.deployment("small", 2, "250m", nil)
	w.converge(2, 2*time.Minute)
	if n := len(w.live()); n != 1 {
		t.Fatalf("want one node, got %v", typesOf(w))
	}
	// Now c5.large is allowed too: the node can be replaced by a cheaper one.
	ctx := context.Background()
	np, err := w.e.Clients.NodePools.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := np.Spec.Template.Spec.Requirements
	reqs[len(reqs)-1].Values = []string{"c5.xlarge", "c5.large"}
	if _, err := w.e.Clients.NodePools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// consolidateAfter (30 s) has passed while converging; the proposal is
	// made by the next passes and due 15 s (the validation delay) after.
	w.settle(20*time.Second, 2*time.Minute, func() bool { return w.running(2) && w.proposal().rec != nil })
	w.clk.Advance(20 * time.Second)
	return w
}

// proposed is a proposal waiting for validation: its record, its one
// candidate and the candidate's node.
type proposed struct {
	rec         *disruption.Record
	claim, node string
}

// proposal finds the proposal (rec nil when there is none).
func (w *world) proposal() proposed {
	for _, nc := range w.claims() {
		if r, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation]); err == nil && r.Phase == disruption.Proposed {
			return proposed{rec: r, claim: nc.Name, node: nc.Status.NodeName}
		}
	}
	return proposed{}
}

// finish runs fresh passes until the cluster has converged on nodes
// instances running pods pods, checking on the way that replacements are
// initialized before candidates go, that no command ever has two live
// replacements and that no more than maxLive instances run at once; then
// that nothing of a command is left behind.
func (w *world) finish(nodes, pods, maxLive int) {
	w.t.Helper()
	w.killer = nil
	w.settle(10*time.Second, 3*time.Minute, func() bool {
		claims := w.claims()
		w.launchBeforeDeleteIn(claims)
		w.noDuplicateReplacementsIn(claims, maxLive)
		settled := true
		for _, nc := range claims {
			_, inFlight := nc.Annotations[disruption.CommandAnnotation]
			settled = settled && nc.DeletionTimestamp == nil && !inFlight
		}
		return settled && len(w.live()) == nodes && w.running(pods)
	})
	w.noCommandLeft()
}

func (w *world) commandsInFlight() bool {
	for _, nc := range w.claims() {
		if _, ok := nc.Annotations[disruption.CommandAnnotation]; ok && nc.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// noCommandLeft fails when a node keeps the disrupted taint or a claim the
// DisruptionReason condition with no command in flight.
func (w *world) noCommandLeft() {
	w.t.Helper()
	for _, nc := range w.claims() {
		if nc.DeletionTimestamp == nil && meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil {
			w.t.Errorf("claim %s keeps DisruptionReason with no command in flight", nc.Name)
		}
	}
	nodes, err := w.e.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil && hasDisrupted(n) {
			w.t.Errorf("node %s keeps the disrupted taint with no command in flight", n.Name)
		}
	}
}

// noDuplicateReplacements fails when a command has two live replacements,
// or more than maxLive instances run at once.
func (w *world) noDuplicateReplacements(maxLive int) {
	w.t.Helper()
	w.noDuplicateReplacementsIn(w.claims(), maxLive)
}

func (w *world) noDuplicateReplacementsIn(claims []karpv1.NodeClaim, maxLive int) {
	w.t.Helper()
	live := map[string]int{}
	for _, nc := range claims {
		if id, ok := nc.Annotations[disruption.ReplacementAnnotation]; ok && nc.DeletionTimestamp == nil {
			live[id]++
		}
	}
	for id, n := range live {
		if n > 1 {
			w.t.Errorf("command %s has %d live replacements", id, n)
		}
	}
	if n := len(w.live()); n > maxLive {
		w.t.Errorf("%d live instances, want at most %d", n, maxLive)
	}
}

// A change is what happens in the cluster between a killed pass and the
// next: the passes that resume must cope with it. It returns how many pods
// the namespace runs once things settle.
type change struct {
	name  string
	apply func(w *world, p proposed) int
}

var changes = []change{
	{"a new pod lands on the candidate", func(w *world, p proposed) int {
		w.landPreferring(p.node)
		return 3
	}},
	{"a pod of the candidate is deleted", func(w *world, p proposed) int {
		w.deletePodOn(p.node)
		return 2
	}},
}

// landPreferring creates the Deployment "late" of one 250m pod that
// prefers node (kube-scheduler puts it there unless the node is tainted)
// and waits until the scheduler has placed it or found no place.
func (w *world) landPreferring(node string) {
	w.t.Helper()
	n, err := w.e.Clients.Core.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	host := n.Labels[wellknown.HostnameLabel]
	w.deployment("late", 1, "250m", func(spec *corev1.PodSpec, _ map[string]string) {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: wellknown.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{host},
			}}},
		}}}}
	})
	waitFor(w.t, 30*time.Second, func() bool {
		for _, p := range w.pods() {
			if p.Labels["app"] == "late" && (p.Spec.NodeName != "" || podutil.IsUnschedulable(&p)) {
				return true
			}
		}
		return false
	})
}

// deletePodOn deletes one pod running on node (its Deployment makes
// another, which kube-scheduler places wherever it may).
func (w *world) deletePodOn(node string) {
	w.t.Helper()
	for _, p := range w.pods() {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			if err := w.e.Clients.Core.CoreV1().Pods(w.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
				w.t.Fatal(err)
			}
			return
		}
	}
	w.t.Fatalf("no pod on %s to delete: %s", node, w.describe())
}

// agreed is the first path another one equals, or nil.
func agreed(paths [][]string) []string {
	for i, p := range paths {
		for _, q := range paths[i+1:] {
			if len(p) > 0 && slices.Equal(p, q) {
				return p
			}
		}
	}
	return nil
}

var (
	nodeNameRE  = regexp.MustCompile(`ip-[0-9-]+\.[a-z0-9-]+\.compute\.internal`)
	claimNameRE = regexp.MustCompile(`default-[a-z0-9]{5}\b`)
)

// normalize names a call without the names of this world's objects.
func normalize(call string) string {
	return claimNameRE.ReplaceAllString(nodeNameRE.ReplaceAllString(call, "<node>"), "<claim>")
}

// TestCrashDuringExecution kills the pass that executes a consolidation
// before and after each of its external calls in turn (Kubernetes writes
// and AWS calls), changes the cluster (a pod lands on the candidate, or one
// of its pods is deleted), then lets fresh passes run: the cluster must
// settle on one node running every pod, with no command in flight and
// nothing of the command left (taint, DisruptionReason); on the way no pod
// is evicted twice, no instance terminated under a pod that was not
// evicted, no candidate deleted before its replacement is initialized,
// never two live replacements for one command; no instance leaks. (A
// command the kill or the change makes invalid is abandoned or rejected:
// the node it would have replaced is then the one left.)
//
// Killed after call i and killed before call i+1 leave the same world:
// the pass makes its calls one at a time, so the process dies between the
// two either way; and a read changes nothing. Each distinct gap (before
// the first call, after each write: deploy.Gaps) is killed once, and the
// gaps take the changes in turn.
func TestCrashDuringExecution(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the calls of a real control plane's world")
	}
	// The hostile world can take one pass off the usual path (an answer
	// lost and the call made again): a baseline recorded on such a pass
	// would send every killed world "off the path". The baseline is the
	// path two undisturbed passes agree on (each in its own world, the
	// first also followed to the end).
	var paths [][]string
	undisturbed := func(name string, finish bool) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			w := crashSetup(t)
			w.emu.Stop() // the rounds step it (fewer reads of the API server)
			setup := time.Since(start)
			counter := &testworld.KillSwitch{}
			w.killer = counter
			s := w.disrupt()
			if len(s.Commands) == 0 || s.Commands[0].Action != "executed" {
				t.Fatalf("the pass did not execute the proposal: %+v", s.Commands)
			}
			var path []string
			for _, c := range counter.Calls() {
				path = append(path, normalize(c))
			}
			paths = append(paths, path)
			t.Logf("an undisturbed execution pass makes %d external calls: %v", len(path), path)
			if !finish {
				return
			}
			start = time.Now()
			w.finish(1, 2, 2)
			t.Logf("undisturbed: setup %s, finish %s", setup.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
			w.assertInvariants()
		})
	}
	undisturbed("undisturbed", true)
	undisturbed("undisturbed again", false)
	if len(paths) == 2 && !slices.Equal(paths[0], paths[1]) {
		undisturbed("undisturbed a third time", false)
	}
	// Kills are named by their call (deploy.Landmark), so a killed pass that
	// takes another read on the way still dies at the same step; the
	// baseline only names the steps, and on a busy machine no two passes
	// may agree (then the first, followed to the end, names them).
	baseline := agreed(paths)
	if len(baseline) == 0 {
		t.Logf("no two undisturbed passes took the same path; the first names the kill points: %v", paths)
		baseline = paths[0]
	}
	gaps := deploy.Gaps(baseline)
	sample := deploy.SampleGaps(baseline, gaps) // every gap with make test-kills
	for i, gap := range gaps {
		if !sample[i] {
			continue
		}
		at, when := gap.At, gap.Side()
		ch := changes[i%len(changes)]
		t.Run(fmt.Sprintf("%s call %d (%s)", when, at, baseline[at-1]), func(t *testing.T) {
			var w *world
			var p proposed
			var k *testworld.KillSwitch
			// Hostility may take a pass off the baseline's path (an
			// answer lost four times): the case then runs in a new world.
			start := time.Now()
			for try := 1; ; try++ {
				w = crashSetup(t)
				w.emu.Stop() // the rounds step it (fewer reads of the API server)
				p = w.proposal()
				k = deploy.LandmarkOf(baseline, gap, nil).Switch(normalize, 0)
				w.killer = k
				w.disrupt()
				w.killer = nil
				got := k.Calls()
				if k.Dead() {
					break
				}
				// A pass may also refresh the pricing book, as load decides
				// how many passes the setup took: a few worlds.
				if try == 4 {
					t.Fatalf("the killed pass never made call %d of the baseline (%s); it made %v", at, baseline[at-1], got)
				}
				t.Logf("the killed pass left the baseline's path (%v); trying a new world", got)
			}
			setup := time.Since(start)
			pods := ch.apply(w, p)
			t.Logf("killed %s call %d; then %s", when, at, ch.name)
			start = time.Now()
			// The change may leave a pod pending while the candidate is
			// tainted and no replacement exists yet: the provisioner then
			// launches for it, a third instance.
			w.finish(1, pods, 3)
			t.Logf("setup and killed pass %s, change and finish %s", setup.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
			w.assertInvariants()
		})
	}
}

// TestCrashEveryPass runs a multi-node consolidation from proposal to the
// end while killing every disruption pass at a different call (cycling
// through before and after, call 1, 2, 3, ...), then lets fresh passes
// finish: the same promises must hold.
func TestCrashEveryPass(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("filler", 3, "3", spreadHard)
	w.converge(3, 2*time.Minute)
	w.deployment("app", 2, "300m", nil)
	w.converge(5, 2*time.Minute)
	before := w.cost()
	if err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Delete(context.Background(), "filler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kills := 0
	// A bound for a stuck run, not a timing claim: on a loaded machine
	// (CI runs the integration packages side by side on two cores) the
	// passes that need real time (kube-scheduler, the kubelets) are slow.
	deadline := time.Now().Add(8 * time.Minute)
	for pass := 0; ; pass++ {
		if len(w.live()) == 1 && w.noneDeleting() && w.running(2) && !w.commandsInFlight() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not converge: %s", w.describe())
		}
		if pass < 27 {
			w.clk.Advance(10 * time.Second) // at most 5 minutes (see maxSettleSkew)
			w.step(time.Second)
		} else {
			w.step(0)
		}
		k := &testworld.KillSwitch{At: pass/2%12 + 1, After: pass%2 == 1}
		w.killer = k
		w.disrupt()
		if k.Dead() {
			kills++
		}
		w.killer = nil
		w.launchBeforeDelete()
		w.noDuplicateReplacements(4) // three nodes and one replacement
		w.provision()
		time.Sleep(settleSleep)
	}
	t.Logf("converged through %d killed passes: $%.4f/h -> $%.4f/h (%v)", kills, before, w.cost(), typesOf(w))
	w.assertInvariants()
}

func TestAgreed(t *testing.T) {
	a, b, c := []string{"x", "y"}, []string{"x", "z"}, []string{"x", "y"}
	for _, tc := range []struct {
		paths [][]string
		want  []string
	}{
		{[][]string{a, c}, a},
		{[][]string{a, b, c}, a},
		{[][]string{b, a, c}, a},
		{[][]string{a, b}, nil},
		{[][]string{nil, nil}, nil},
		{[][]string{a}, nil},
	} {
		if got := agreed(tc.paths); !slices.Equal(got, tc.want) {
			t.Errorf("agreed(%v) = %v, want %v", tc.paths, got, tc.want)
		}
	}
}
