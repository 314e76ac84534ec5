package provision_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// markedAt is when kube-scheduler marked the pod unschedulable: its
// PodScheduled condition's transition, which the API keeps to the second
// (rounded down, so a CreateFleet after the mark is never before it). Not
// the moment a watcher reads the event: on a loaded machine that can come
// after the tick's CreateFleet for the pod, which then never counts.
func markedAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return time.Now()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestReactionTime measures, while a tick keeps its watch window open, the
// time from a pod being marked unschedulable to the CreateFleet call that
// launches capacity for it, and how long a tick with nothing to do runs.
func TestReactionTime(t *testing.T) {
	// The measurement needs one tick that lives through its whole watch
	// window: a throttling burst that outlasts the retries ends the tick
	// (the next one goes on, as TestStaleBookWhenEC2Fails and the soak
	// show), so throttling is off here; every other hostility stays on.
	h := emulator.DefaultHostility()
	h.ThrottleRate = 0
	w := testworld.New(t, env, "provisioner", testworld.WithHostility(h))
	ctx := context.Background()

	// An idle tick: nothing pending, nothing in flight. Each takes the
	// free lease (a 409 on the take is read again, not a reason to stand
	// aside).
	var idle []time.Duration
	for i := range 5 {
		s := provisionOnce(w, fmt.Sprintf("idle-%d", i))
		if s.Skipped != "" {
			t.Fatalf("idle tick %d stood aside with the lease free: %s", i, s.Skipped)
		}
		idle = append(idle, s.Duration)
	}

	// Each pod needs a node of its own (3 cpu on 4 vCPU types), so every
	// burst launches.
	pool := deploy.DefaultNodePool("default", typesReq("m5.xlarge", "c5.xlarge", "m6i.xlarge"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), pool); err != nil {
		t.Fatal(err)
	}
	// Watch for the moment each pod becomes unschedulable.
	marked := map[string]time.Time{}
	var mu sync.Mutex
	wt, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Stop()
	go func() {
		for ev := range wt.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || !podutil.IsUnschedulable(p) {
				continue
			}
			mu.Lock()
			if _, seen := marked[p.Name]; !seen {
				marked[p.Name] = markedAt(p)
			}
			mu.Unlock()
		}
	}()

	w.Pods("first", 1, "3", nil)
	w.WaitUnschedulable(1)
	tick := w.App.Provisioner()
	// The window only bounds a stuck world: the test ends the tick (its
	// context) once every pod has had its launch, so that nothing here
	// depends on how fast a loaded machine creates and marks the pods.
	tick.Config.WatchWindow = 10 * time.Minute
	tickCtx, endTick := context.WithCancel(ctx)
	defer endTick()
	done := make(chan struct{})
	var busy provision.Summary
	go func() {
		defer close(done)
		s, err := tick.Run(tickCtx, "busy")
		if err != nil {
			t.Logf("busy tick: %v", err)
		}
		busy = s
	}()
	// firstFleets is, for each marked pod, the first CreateFleet at or after
	// its unschedulable mark (the delay of a pod).
	firstFleets := func() map[string]time.Duration {
		var fleets []time.Time
		for _, c := range w.Emu.Calls() {
			if c.Action == "CreateFleet" {
				fleets = append(fleets, c.At)
			}
		}
		out := map[string]time.Duration{}
		mu.Lock()
		defer mu.Unlock()
		for name, at := range marked {
			for _, f := range fleets {
				if !f.Before(at) {
					out[name] = f.Sub(at)
					break
				}
			}
		}
		return out
	}
	waitFor := func(what string, cond func() bool, state func() string) {
		t.Helper()
		// The bound only catches a stuck world. (Under make test's own
		// load, a load average of 20 on two cores, this wait once ran out
		// at 3 minutes, with what it lacked unreported; the marks were then
		// the moments the watcher read them, which can come after the
		// pod's CreateFleet.)
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 8*time.Minute, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("%s: %v (busy tick so far: done=%v; %s)", what, err, isClosed(done), state())
		}
	}
	const bursts = 8
	var names []string
	for b := range bursts {
		// Bursts a couple of seconds apart, so that some fall into a batch
		// already open and some open their own; the pacing is a shape, not
		// something the assertions rely on.
		time.Sleep(2500 * time.Millisecond)
		for _, p := range w.Pods(fmt.Sprintf("burst-%d", b), 1+b%3, "3", nil) {
			names = append(names, p.Name)
		}
	}
	// bound are the burst pods on a node. A pod the watcher never saw
	// marked (one run beside two busy loops: 1 of 15, with a claim for
	// every pod) is served when it is bound; it has no delay to report.
	bound := func() map[string]bool {
		out := map[string]bool{}
		for _, p := range w.ListPods() {
			if p.Spec.NodeName != "" {
				out[p.Name] = true
			}
		}
		return out
	}
	waitFor("every burst pod marked unschedulable and launched for by the running tick", func() bool {
		// A claim per pod (each needs a node of its own), so a retry of
		// an earlier launch is not taken for the tick's reaction to a pod.
		if len(w.Claims()) < 1+len(names) {
			return false
		}
		got, on := firstFleets(), bound()
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			_, isMarked := marked[n]
			if _, ok := got[n]; isMarked && !ok || !isMarked && !on[n] {
				return false
			}
		}
		return true
	}, func() string {
		got := firstFleets()
		var unmarked, unlaunched []string
		mu.Lock()
		for _, n := range names {
			if _, ok := marked[n]; !ok {
				unmarked = append(unmarked, n)
			} else if _, ok := got[n]; !ok {
				unlaunched = append(unlaunched, n)
			}
		}
		mu.Unlock()
		fleets := 0
		for _, c := range w.Emu.Calls() {
			if c.Action == "CreateFleet" {
				fleets++
			}
		}
		return fmt.Sprintf("%d claims for %d pods, %d CreateFleet calls; never marked unschedulable: %v; no CreateFleet since marked: %v",
			len(w.Claims()), 1+len(names), fleets, unmarked, unlaunched)
	})
	endTick()
	<-done

	var delays []time.Duration
	got := firstFleets()
	unmarked := 0
	for _, n := range names {
		if d, ok := got[n]; ok {
			delays = append(delays, d)
		} else {
			unmarked++
		}
	}
	if len(delays) == 0 {
		t.Fatalf("no burst pod was seen marked unschedulable: nothing measured")
	}
	if busy.Skipped != "" {
		t.Fatalf("the busy tick stood aside with the lease free: %s", busy.Skipped)
	}
	med, p99 := percentile(delays, 0.5), percentile(delays, 0.99)
	t.Logf("unschedulable -> CreateFleet over %d pods (%d bound before the watcher saw a mark): median %s, p99 %s (batch idle %s, max %s)",
		len(delays), unmarked, med.Round(time.Millisecond), p99.Round(time.Millisecond), timing.DefaultBatchIdle, timing.DefaultBatchMax)
	idleMed := percentile(idle, 0.5)
	t.Logf("idle tick: median %s -> %.1f Lambda-seconds per hour at one tick a minute", idleMed.Round(time.Millisecond), idleMed.Seconds()*60)
	// The reaction's figures are reported, not asserted: how fast a loaded
	// machine runs a pass is a benchmark's matter (bench/), and what this
	// test holds is that the one running tick called CreateFleet for every
	// pod (no other tick runs, so the wait above fails otherwise).
	t.Logf("busy tick: %s with its window open", busy.Duration.Round(time.Millisecond))
}
