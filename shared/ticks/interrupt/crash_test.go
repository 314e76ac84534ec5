package interrupt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/eventsource"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// evictions counts the successful pod evictions sent through a recorder,
// by pod name (pods of a ReplicaSet never share a name).
type evictions struct {
	mu    sync.Mutex
	count map[string]int
}

func (e *evictions) add(path string) {
	if !strings.HasSuffix(path, "/eviction") {
		return
	}
	parts := strings.Split(path, "/")
	pod := parts[len(parts)-2]
	e.mu.Lock()
	e.count[pod]++
	e.mu.Unlock()
}

func (e *evictions) twice() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for pod, n := range e.count {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s evicted %d times", pod, n))
		}
	}
	slices.Sort(out)
	return out
}

// edgeRT is the function's Kubernetes edge: writes go through the kill
// switch (reads change nothing), and successful evictions are counted.
type edgeRT struct {
	next http.RoundTripper
	k    *testworld.KillSwitch
	ev   *evictions
}

func (r edgeRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return r.next.RoundTrip(req)
	}
	resp, err := r.k.Do("kube "+req.Method+" "+req.URL.Path, func() (*http.Response, error) { return r.next.RoundTrip(req) })
	if err == nil && resp.StatusCode/100 == 2 && req.Method == http.MethodPost {
		r.ev.add(req.URL.Path)
	}
	return resp, err
}

type killHTTP struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	k *testworld.KillSwitch
}

func (c killHTTP) Do(req *http.Request) (*http.Response, error) {
	return c.k.Do(awsCallName(req), func() (*http.Response, error) { return c.next.Do(req) })
}

// awsCallName names an SDK request by its action.
func awsCallName(req *http.Request) string {
	if t := req.Header.Get("X-Amz-Target"); t != "" {
		return "aws " + t
	}
	if req.Body != nil && req.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		if q, qerr := url.ParseQuery(string(body)); err == nil && qerr == nil && q.Get("Action") != "" {
			return "aws " + q.Get("Action")
		}
	}
	return "aws " + req.URL.Path
}

// edgeEnv is the interruption function's environment with both edges
// behind k (a nil KillSwitch sends everything), counting evictions in ev.
// AWS calls are retried as in production (awsconfig.MaxAttempts) without
// the waiting: the emulator's throttling bursts count calls, not time.
func edgeEnv(t *testing.T, w *testworld.World, k *testworld.KillSwitch, ev *evictions) *app.Env {
	t.Helper()
	restCfg := rest.CopyConfig(w.E.Cluster.RESTConfig)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return edgeRT{next: rt, k: k, ev: ev} })
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := deploy.NewEnv(w.Emu, kc, deploy.Options{Identity: "interruption", Clock: w.Clock, Log: w.Logger("interruption")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := a.AWS.Config.Copy()
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = awsconfig.MaxAttempts
			o.MaxBackoff = 5 * time.Millisecond
			o.RateLimiter = ratelimit.None
		})
	}
	cfg.HTTPClient = killHTTP{next: cfg.HTTPClient, k: k}
	a.AWS = awsconfig.NewClients(cfg)
	return a
}

var errKilled = errors.New("the invocation was killed (Lambda timeout): the batch returns to the queue")

// invoke is one Lambda invocation of the handler: a killed one reports a
// function error, so the event source mapping returns the whole batch to
// the queue, as it does for a timed-out invocation.
func invoke(env *app.Env, k *testworld.KillSwitch) eventsource.Handler {
	h := env.InterruptionHandler()
	return func(ctx context.Context, b lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		r, err := h(ctx, b)
		if k != nil && k.Dead() {
			return lambdaevents.SQSEventResponse{}, errKilled
		}
		return r, err
	}
}

// victimOf picks a launched claim whose untainted node runs a web pod.
func victimOf(t *testing.T, w *testworld.World) (v1.NodeClaim, string, string) {
	t.Helper()
	onNode := map[string]string{}
	for _, p := range w.ListPods() {
		if p.Labels["app"] == "web" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			onNode[p.Spec.NodeName] = p.Name
		}
	}
	for _, nc := range w.Claims() {
		id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID)
		if nc.DeletionTimestamp != nil || nc.Status.NodeName == "" || id == "" || onNode[nc.Status.NodeName] == "" {
			continue
		}
		node, err := w.E.Clients.Core.CoreV1().Nodes().Get(context.Background(), nc.Status.NodeName, metav1.GetOptions{})
		if err != nil || slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) }) {
			continue
		}
		return nc, id, onNode[nc.Status.NodeName]
	}
	t.Fatal("no claim with a web pod on an untainted node")
	return v1.NodeClaim{}, "", ""
}

// batchChange is what happens between the killed invocation and the
// redelivery of its batch.
type batchChange struct {
	name  string
	apply func(t *testing.T, w *testworld.World, i int, victim v1.NodeClaim, pod string)
}

var batchChanges = []batchChange{{
	// A small pod that prefers the interrupted node lands there (or, if it
	// is already tainted, elsewhere).
	name: "the node gets another pod",
	apply: func(t *testing.T, w *testworld.World, i int, victim v1.NodeClaim, _ string) {
		w.Deployment(fmt.Sprintf("side-%d", i), 1, "100m", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: wellknown.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{victim.Status.NodeName},
				}}},
			}}}}
		})
	},
}, {
	name: "its web pod is deleted (its ReplicaSet makes another)",
	apply: func(t *testing.T, w *testworld.World, _ int, _ v1.NodeClaim, pod string) {
		if err := w.E.Clients.Core.CoreV1().Pods(w.NS).Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	},
}, {
	// The replacement's offerings differ from those of a CreateFleet the
	// killed invocation sent.
	name: "the interrupted node's instance type runs out",
	// EC2 runs out of the type, and the unavailable offerings say so (as
	// after a capacity error).
	apply: func(t *testing.T, w *testworld.World, _ int, victim v1.NodeClaim, _ string) {
		typ := victim.Labels[wellknown.InstanceTypeLabel]
		w.Emu.Inject(emulator.ICE("", typ, ""))
		ctx := context.Background()
		cache, err := unavailable.Load(ctx, w.E.Clients.Core.CoreV1(), config.DefaultNamespace, timing.DefaultUnavailableOfferingsTTL, w.Clock)
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range w.Emu.Config().Zones {
			for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
				cache.Mark(ct, typ, z.Name, "test: out of capacity")
			}
		}
		if err := cache.Save(ctx); err != nil {
			t.Fatal(err)
		}
	},
}, {
	name: "the next launch's answer is lost",
	apply: func(t *testing.T, w *testworld.World, _ int, _ v1.NodeClaim, _ string) {
		w.Emu.Inject(emulator.DropAfterApply("CreateFleet", 1))
	},
}}

// TestKilledBatchThenRedelivery kills the interruption function before and
// after each external call of an undisturbed batch (a spot interruption of
// one node) in turn, in the hostile world; the world changes (the node
// gets another pod, its pod is replaced, its type runs out, the next
// launch's answer is lost); the event source mapping redelivers the batch
// until it is handled. The interrupted claim must be retired and no other,
// exactly one replacement launched, the pods end Running, no instance leak
// and no pod be evicted twice.
func TestKilledBatchThenRedelivery(t *testing.T) {
	w := testworld.New(t, env, "interruption")
	// Many 4-vCPU types: the cases' capacity marks (each interruption
	// marks its spot offering for three minutes) never use them all up.
	w.Apply(deploy.DefaultNodePool("default", v1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn,
		Values: []string{"m5.xlarge", "c5.xlarge", "m6i.xlarge", "c6i.xlarge", "m5a.xlarge", "c5a.xlarge", "m7i.xlarge", "c7i.xlarge"},
	}))
	w.Deployment("web", 2, "3", nil)
	w.Converge(2*time.Minute, nil)
	ctx := context.Background()
	ev := &evictions{count: map[string]int{}}
	m := mapping(t, w)
	// The ESM's own calls are not the function's: they are never killed.
	fresh := func() eventsource.Handler { return invoke(edgeEnv(t, w, nil, ev), nil) }
	// Time moves on between the world's checks (pods' grace periods, the
	// taint settling, instances shutting down); the skew stays far under
	// the registration timeout, which compares it with the API server's
	// clock.
	drainer := edgeEnv(t, w, nil, ev).Interruption().Drainer
	every := func() {
		_ = drainer.Drain(ctx)
		if w.Clock.Skew() < 10*time.Minute {
			w.Clock.Advance(time.Second)
		}
	}

	var victims []string
	runCase := func(name string, k *testworld.KillSwitch, change *batchChange, i int) {
		victim, id, pod := victimOf(t, w)
		victims = append(victims, victim.Name)
		before := map[string]bool{}
		for _, nc := range w.Claims() {
			if nc.DeletionTimestamp == nil && nc.Name != victim.Name {
				before[nc.Name] = true
			}
		}
		instancesBefore := map[string]bool{}
		for _, in := range w.Emu.Instances(nil) {
			instancesBefore[in.ID] = true
		}
		if _, err := w.Emu.InjectEvent(emulator.Event{Kind: emulator.EventSpotInterruption, InstanceIDs: []string{id}}); err != nil {
			t.Fatal(err)
		}
		if k != nil {
			// The invocation that receives the batch dies at call k.
			for range 5 {
				o, err := m.PollOnce(ctx, invoke(edgeEnv(t, w, k, ev), k))
				if err != nil {
					t.Logf("%s: poll: %v", name, err)
				}
				if o.Received > 0 {
					break
				}
			}
			if change != nil {
				change.apply(t, w, i, victim, pod)
			}
			// The dead invocation's provisioning lease would have expired
			// before the redelivery (the queue's visibility is 360 s);
			// remove it rather than skip its 30 s.
			_ = w.E.Clients.Core.CoordinationV1().Leases(config.DefaultNamespace).Delete(ctx, provision.LeaseName, metav1.DeleteOptions{})
			w.Emu.EndVisibility(m.QueueURL) // the dead invocation's batch is visible again
		}
		// A record may fail and come back (a busy machine's slow start
		// outlives a one-second visibility, a launch meets the changed
		// world): deliver waits until the queue is empty, and the checks
		// below judge the outcome.
		if o := deliver(t, w, m, fresh()); o.HandlerErr != nil {
			t.Errorf("%s: redelivery: %+v", name, o)
		} else if o.Failed != 0 {
			t.Logf("%s: redelivered %d time(s) before it was handled: %+v", name, o.Failed, o)
		}
		w.Converge(2*time.Minute, every)
		w.Emu.ClearFaults()
		if nc := getClaim(t, w, victim.Name); nc != nil && nc.DeletionTimestamp == nil {
			t.Errorf("%s: the interrupted claim %s was not retired", name, victim.Name)
		}
		var replacements []string
		for _, nc := range w.Claims() {
			switch {
			case before[nc.Name] && nc.DeletionTimestamp != nil:
				t.Errorf("%s: claim %s was retired too", name, nc.Name)
			case !before[nc.Name] && nc.Name != victim.Name && !slices.Contains(victims, nc.Name):
				if nc.IsTrue(v1.ConditionTypeLaunched) {
					replacements = append(replacements, nc.Name)
				}
			}
		}
		for claim := range before {
			if getClaim(t, w, claim) == nil {
				t.Errorf("%s: claim %s is gone", name, claim)
			}
		}
		var launched []string
		for _, in := range w.Emu.Instances(nil) {
			if !instancesBefore[in.ID] {
				launched = append(launched, in.ID+" "+in.Tags[wellknown.NodeClaimTagKey])
			}
		}
		if len(replacements) != 1 || len(launched) != 1 {
			t.Errorf("%s: replacement claims %v, new instances %v; want one of each; the world: %s", name, replacements, launched, describeWorld(w))
		}
		if twice := ev.twice(); len(twice) > 0 {
			t.Errorf("%s: %v", name, twice)
		}
		w.AssertNoLeaks()
	}

	// The undisturbed batch: which calls it makes.
	counter := &testworld.KillSwitch{}
	runCase("undisturbed", counter, nil, 0)
	calls := counter.Calls()
	t.Logf("an undisturbed batch makes %d external calls: %v", len(calls), calls)
	n := 0
	// Each gap between calls is killed once (deploy.Gaps) and meets the
	// changes in turn; right after a CreateFleet (an instance may run that
	// the dead invocation never heard of), every change.
	gaps := deploy.Gaps(calls)
	sample := deploy.SampleGaps(calls, gaps) // every gap with make test-kills
	for i, gap := range gaps {
		if !sample[i] {
			continue
		}
		at, when := gap.At, gap.Side()
		made := at - 1 // the last call the dead invocation sent
		if gap.After {
			made = at
		}
		cases := []batchChange{batchChanges[i%len(batchChanges)]}
		if made > 0 && strings.Contains(calls[made-1], "CreateFleet") {
			cases = batchChanges
		}
		for _, change := range cases {
			n++
			k := gap.Switch()
			start := time.Now()
			name := fmt.Sprintf("%s call %d (%s), then %s", when, at, calls[at-1], change.name)
			runCase(name, k, &change, n)
			if !k.Dead() {
				t.Logf("%s: the invocation ended before its kill point", name)
			}
			if testing.Verbose() {
				t.Logf("%s: done in %s", name, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	for _, v := range victims {
		waitGone(t, w, v)
	}
	w.AssertNoLeaks()
	t.Logf("%d kill cases; the clock ran %s ahead", n, w.Clock.Skew().Round(time.Second))
}

// describeWorld lists the claims (created, type, node, deleting) and the
// pods (node, nominated node, deleting), for a failure's message.
func describeWorld(w *testworld.World) string {
	var b strings.Builder
	for _, nc := range w.Claims() {
		fmt.Fprintf(&b, "\nclaim %s created %s type %s/%s/%s node %q launched %v deleting %v",
			nc.Name, nc.CreationTimestamp.Format("15:04:05"), nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.CapacityTypeLabel],
			nc.Labels[wellknown.ZoneLabel], nc.Status.NodeName, nc.IsTrue(v1.ConditionTypeLaunched), nc.DeletionTimestamp != nil)
	}
	for _, p := range w.ListPods() {
		fmt.Fprintf(&b, "\npod %s created %s node %q nominated %q phase %s deleting %v",
			p.Name, p.CreationTimestamp.Format("15:04:05"), p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	}
	return b.String()
}
