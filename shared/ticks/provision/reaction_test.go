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
	"k8s.io/apimachinery/pkg/watch"

	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

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
				marked[p.Name] = time.Now()
			}
			mu.Unlock()
		}
	}()

	w.Pods("first", 1, "3", nil)
	w.WaitUnschedulable(1)
	tick := w.App.Provisioner()
	tick.Config.WatchWindow = 25 * time.Second
	done := make(chan struct{})
	var busy provision.Summary
	go func() {
		defer close(done)
		s, err := tick.Run(ctx, "busy")
		if err != nil {
			t.Logf("busy tick: %v", err)
		}
		busy = s
	}()
	time.Sleep(2 * time.Second)
	const bursts = 8
	for b := range bursts {
		n := 1 + b%3
		w.Pods(fmt.Sprintf("burst-%d", b), n, "3", nil)
		time.Sleep(2500 * time.Millisecond)
	}
	<-done

	// The delay of a pod is from its unschedulable mark to the first
	// CreateFleet after it.
	var fleets []time.Time
	for _, c := range w.Emu.Calls() {
		if c.Action == "CreateFleet" {
			fleets = append(fleets, c.At)
		}
	}
	var delays []time.Duration
	mu.Lock()
	for name, at := range marked {
		if name == "first-0" {
			continue
		}
		for _, f := range fleets {
			if !f.Before(at) {
				delays = append(delays, f.Sub(at))
				break
			}
		}
	}
	mu.Unlock()
	if busy.Skipped != "" {
		t.Fatalf("the busy tick stood aside with the lease free: %s", busy.Skipped)
	}
	if len(delays) < bursts {
		t.Fatalf("only %d pods got a CreateFleet within the window (fleets at %v; busy tick %+v)", len(delays), fleets, busy)
	}
	med, p99 := percentile(delays, 0.5), percentile(delays, 0.99)
	t.Logf("unschedulable -> CreateFleet over %d pods: median %s, p99 %s (batch idle %s, max %s)",
		len(delays), med.Round(time.Millisecond), p99.Round(time.Millisecond), timing.DefaultBatchIdle, timing.DefaultBatchMax)
	idleMed := percentile(idle, 0.5)
	t.Logf("idle tick: median %s -> %.1f Lambda-seconds per hour at one tick a minute", idleMed.Round(time.Millisecond), idleMed.Seconds()*60)
	t.Logf("busy tick (watch window %s): %s -> %.0f Lambda-seconds per hour when every tick finds work", tick.Config.WatchWindow, busy.Duration.Round(time.Millisecond), busy.Duration.Seconds()*60)
	if med > timing.DefaultBatchMax {
		t.Errorf("median reaction %s exceeds the batch window", med)
	}
}
