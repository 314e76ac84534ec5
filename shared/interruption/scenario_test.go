package interruption_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/config"
	"github.com/karpless/karpless/shared/esm"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/kubetest"
	"github.com/karpless/karpless/shared/localaws"
	"github.com/karpless/karpless/shared/localrun"
	"github.com/karpless/karpless/shared/localrun/localruntest"
	"github.com/karpless/karpless/shared/wellknown"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true, ControllerManager: true}))
}

// setup provisions a Deployment whose pods need a node each (3 cpu on
// 4-vCPU types), and returns the world once every pod runs.
func setup(t *testing.T, replicas int32) *localruntest.World {
	w := localruntest.New(t, env, "interruption")
	w.Apply(localrun.DefaultNodePool("default", v1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge", "c5.xlarge", "m6i.xlarge"},
	}))
	w.Deployment("web", replicas, "3", nil)
	w.Converge(2*time.Minute, nil)
	return w
}

func mapping(t *testing.T, w *localruntest.World) *esm.Mapping {
	cfg, err := w.Emu.AWSConfig("interruption", 2)
	if err != nil {
		t.Fatal(err)
	}
	return &esm.Mapping{SQS: sqs.NewFromConfig(cfg), QueueURL: w.Emu.InterruptionQueueURL(), BatchSize: 10, VisibilityTimeout: time.Second}
}

// claimOnNode returns a launched, registered claim and its instance id.
func claimWithNode(t *testing.T, w *localruntest.World, skip ...string) (v1.NodeClaim, string) {
	for _, nc := range w.Claims() {
		id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)
		if nc.Status.NodeName != "" && id != "" && nc.DeletionTimestamp == nil && !slices.Contains(skip, nc.Name) {
			return nc, id
		}
	}
	t.Fatal("no registered NodeClaim")
	return v1.NodeClaim{}, ""
}

func drain(w *localruntest.World) func() {
	h := w.App.Interruption()
	return func() { _ = h.Drainer.Drain(context.Background()) }
}

func getClaim(t *testing.T, w *localruntest.World, name string) *v1.NodeClaim {
	nc, err := w.E.Clients.NodeClaims.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return nc
}

// A spot interruption: the node is tainted, its claim retired, a
// replacement launched in the same invocation, and the pods run on the
// replacement well within the two-minute warning.
func TestSpotInterruptionReplacesBeforeTheDeadline(t *testing.T) {
	w := setup(t, 3)
	ctx := context.Background()
	victim, id := claimWithNode(t, w)
	var podsOnVictim []string
	for _, p := range w.ListPods() {
		if p.Spec.NodeName == victim.Status.NodeName {
			podsOnVictim = append(podsOnVictim, p.Name)
		}
	}
	fleetsBefore := w.Emu.CallCount("CreateFleet")
	start := time.Now()
	if _, err := w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventSpotInterruption, InstanceIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	out, err := mapping(t, w).PollOnce(ctx, w.App.InterruptionHandler())
	if err != nil || out.Received != 1 || out.Deleted != 1 || out.Failed != 0 {
		t.Fatalf("poll: %+v, %v", out, err)
	}
	reacted := time.Since(start)
	if nc := getClaim(t, w, victim.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("interrupted NodeClaim not deleted")
	}
	node, err := w.E.Clients.Core.CoreV1().Nodes().Get(ctx, victim.Status.NodeName, metav1.GetOptions{})
	if err == nil && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) }) {
		t.Error("interrupted node not tainted karpenter.sh/disrupted:NoSchedule")
	}
	if w.Emu.CallCount("CreateFleet") <= fleetsBefore {
		t.Error("no replacement launched in the same invocation")
	}
	cache, _ := ice.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, time.Minute, w.App.Clock)
	if !cache.Unavailable("spot", victim.Labels[wellknown.InstanceTypeLabel], victim.Labels[wellknown.ZoneLabel]) && victim.Labels[wellknown.CapacityTypeLabel] == "spot" {
		t.Errorf("spot offering %s/%s not marked unavailable", victim.Labels[wellknown.InstanceTypeLabel], victim.Labels[wellknown.ZoneLabel])
	}
	w.Converge(2*time.Minute, drain(w))
	moved := time.Since(start)
	for _, p := range w.ListPods() {
		if p.Spec.NodeName == victim.Status.NodeName {
			t.Errorf("pod %s still on the interrupted node", p.Name)
		}
	}
	if moved > 2*time.Minute {
		t.Errorf("pods took %s to move; the spot warning gives two minutes", moved)
	}
	t.Logf("spot interruption: handled in %s (taint, retire, replacement CreateFleet), %d pods running elsewhere after %s", reacted.Round(time.Millisecond), len(podsOnVictim), moved.Round(time.Millisecond))
	waitGone(t, w, victim.Name)
	w.AssertNoLeaks()
}

func waitGone(t *testing.T, w *localruntest.World, claim string) {
	d := drain(w)
	deadline := time.Now().Add(time.Minute)
	for getClaim(t, w, claim) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("nodeclaim %s still exists", claim)
		}
		d()
		time.Sleep(300 * time.Millisecond)
	}
}

// Each event kind gets the action Karpenter takes for it.
func TestEventKinds(t *testing.T) {
	w := setup(t, 4)
	ctx := context.Background()
	m := mapping(t, w)
	handler := w.App.InterruptionHandler()
	poll := func() esm.Outcome {
		o, err := m.PollOnce(ctx, handler)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a, idA := claimWithNode(t, w)
	// Rebalance recommendation: an Event, no action.
	_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventRebalance, InstanceIDs: []string{idA}})
	if o := poll(); o.Deleted != 1 {
		t.Fatalf("rebalance: %+v", o)
	}
	if nc := getClaim(t, w, a.Name); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("a rebalance recommendation retired the NodeClaim")
	}
	// State change to running: ignored.
	_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventStateChange, State: "running", InstanceIDs: []string{idA}})
	poll()
	if nc := getClaim(t, w, a.Name); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("a state change to running retired the NodeClaim")
	}
	// State change to stopping: retired.
	_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventStateChange, State: "stopping", InstanceIDs: []string{idA}})
	poll()
	if nc := getClaim(t, w, a.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("a state change to stopping did not retire the NodeClaim")
	}
	// An AWS Health scheduled change naming two instances retires both.
	b, idB := claimWithNode(t, w, a.Name)
	c, idC := claimWithNode(t, w, a.Name, b.Name)
	_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventScheduledChange, InstanceIDs: []string{idB, idC}})
	if o := poll(); o.Received != 1 || o.Deleted != 1 {
		t.Fatalf("scheduled change: %+v", o)
	}
	for _, name := range []string{b.Name, c.Name} {
		if nc := getClaim(t, w, name); nc != nil && nc.DeletionTimestamp == nil {
			t.Errorf("scheduled change did not retire %s", name)
		}
	}
	// Messages that are not ours: an instance with no NodeClaim, and junk.
	_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventSpotInterruption, InstanceIDs: []string{"i-0123456789abcdef0"}})
	if _, err := w.Emu.SendEvent(w.Emu.InterruptionQueueURL(), []byte(`{"not":"an event"`)); err != nil {
		t.Fatal(err)
	}
	if o := poll(); o.Received != 2 || o.Deleted != 2 || o.Failed != 0 {
		t.Fatalf("foreign and malformed messages must be deleted, not retried: %+v", o)
	}
	w.Converge(2*time.Minute, drain(w))
	for _, name := range []string{a.Name, b.Name, c.Name} {
		waitGone(t, w, name)
	}
	w.AssertNoLeaks()
}

// The same interruption delivered twice, in one batch and again in the
// next: one retirement and one replacement.
func TestDuplicatesActOnce(t *testing.T) {
	w := setup(t, 2)
	ctx := context.Background()
	victim, id := claimWithNode(t, w)
	fleets := w.Emu.CallCount("CreateFleet")
	for range 2 {
		_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventSpotInterruption, InstanceIDs: []string{id}})
	}
	m := mapping(t, w)
	if o, err := m.PollOnce(ctx, w.App.InterruptionHandler()); err != nil || o.Received != 2 || o.Deleted != 2 {
		t.Fatalf("first batch: %+v %v", o, err)
	}
	_, _ = w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventSpotInterruption, InstanceIDs: []string{id}})
	if o, err := m.PollOnce(ctx, w.App.InterruptionHandler()); err != nil || o.Deleted != 1 {
		t.Fatalf("second batch: %+v %v", o, err)
	}
	if got := w.Emu.CallCount("CreateFleet") - fleets; got != 1 {
		t.Errorf("%d replacement launches for one interrupted node", got)
	}
	w.Converge(2*time.Minute, drain(w))
	waitGone(t, w, victim.Name)
	w.AssertNoLeaks()
}

// failDeletes fails DELETE requests for one NodeClaim, as if the API
// server refused them.
type failDeletes struct {
	next  http.RoundTripper
	claim string
	mu    sync.Mutex
	on    bool
}

func (f *failDeletes) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	on := f.on
	f.mu.Unlock()
	if on && r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/nodeclaims/"+f.claim) {
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{"Content-Type": []string{"application/json"}},
			Body: http.NoBody, Request: r}, nil
	}
	return f.next.RoundTrip(r)
}

// A batch where one message's action fails reports only that message;
// the others are deleted, and the failed one succeeds when redelivered.
func TestBatchReportsOnlyTheFailedMessage(t *testing.T) {
	w := setup(t, 3)
	ctx := context.Background()
	bad, idBad := claimWithNode(t, w)
	good, idGood := claimWithNode(t, w, bad.Name)
	f := &failDeletes{claim: bad.Name, on: true}
	cfg := rest.CopyConfig(w.E.Cluster.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	kc, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := localrun.NewEnv(w.Emu, kc, localrun.Options{Identity: "interruption", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventSpotInterruption, InstanceIDs: []string{idBad, idGood}})
	if _, err := w.Emu.SendEvent(w.Emu.InterruptionQueueURL(), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	var got lambdaevents.SQSEventResponse
	handler := func(ctx context.Context, b lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		r, err := a.InterruptionHandler()(ctx, b)
		got = r
		return r, err
	}
	m := mapping(t, w)
	o, err := m.PollOnce(ctx, handler)
	if err != nil || o.Received != 3 || o.Deleted != 2 || o.Failed != 1 {
		t.Fatalf("poll: %+v %v", o, err)
	}
	if len(got.BatchItemFailures) != 1 || !slices.Contains(ids, got.BatchItemFailures[0].ItemIdentifier) {
		t.Fatalf("batch item failures %+v; want only the message for %s", got.BatchItemFailures, idBad)
	}
	if nc := getClaim(t, w, good.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Error("the good message's NodeClaim was not retired")
	}
	if nc := getClaim(t, w, bad.Name); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("the failed message's NodeClaim changed")
	}
	// The failure clears; the message comes back after its visibility timeout.
	f.mu.Lock()
	f.on = false
	f.mu.Unlock()
	time.Sleep(1500 * time.Millisecond)
	o, err = m.PollOnce(ctx, handler)
	if err != nil || o.Received != 1 || o.Deleted != 1 {
		t.Fatalf("redelivery: %+v %v", o, err)
	}
	if nc := getClaim(t, w, bad.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Error("redelivered message did not retire its NodeClaim")
	}
	w.Converge(2*time.Minute, drain(w))
	waitGone(t, w, bad.Name)
	waitGone(t, w, good.Name)
	w.AssertNoLeaks()
}

// TestReactionTime measures, with the mapping polling continuously, the
// time from an event entering the queue to the node's taint and to the
// replacement CreateFleet call.
func TestReactionTime(t *testing.T) {
	const n = 5
	w := setup(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := mapping(t, w)
	m.Wait = time.Second
	var mu sync.Mutex
	tainted := map[string]time.Time{}
	handler := w.App.InterruptionHandler()
	go func() {
		_ = m.Run(ctx, func(ctx context.Context, b lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
			r, err := handler(ctx, b)
			now := time.Now()
			mu.Lock()
			for _, rec := range b.Records {
				tainted[rec.MessageId] = now
			}
			mu.Unlock()
			return r, err
		}, nil)
	}()
	var toTaint, toFleet []time.Duration
	var done []string
	for range n {
		victim, id := claimWithNode(t, w, done...)
		done = append(done, victim.Name)
		fleets := len(w.Emu.Calls())
		sent := time.Now()
		msgIDs, err := w.Emu.InjectEvent(localaws.Event{Kind: localaws.EventSpotInterruption, InstanceIDs: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			at, ok := tainted[msgIDs[0]]
			mu.Unlock()
			if ok {
				toTaint = append(toTaint, at.Sub(sent))
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("event not handled within 30 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, c := range w.Emu.Calls()[fleets:] {
			if c.Action == "CreateFleet" {
				toFleet = append(toFleet, c.At.Sub(sent))
				break
			}
		}
	}
	slices.Sort(toTaint)
	slices.Sort(toFleet)
	if len(toFleet) == 0 {
		t.Fatal("no replacement launched")
	}
	t.Logf("queue -> taint and retire: median %s, p99 %s; queue -> replacement CreateFleet: median %s, p99 %s (%d events)",
		toTaint[len(toTaint)/2].Round(time.Millisecond), toTaint[len(toTaint)-1].Round(time.Millisecond),
		toFleet[len(toFleet)/2].Round(time.Millisecond), toFleet[len(toFleet)-1].Round(time.Millisecond), n)
	if toFleet[len(toFleet)-1] > 5*time.Second {
		t.Errorf("p99 from queue to replacement CreateFleet is %s, target under 5 s", toFleet[len(toFleet)-1])
	}
}
