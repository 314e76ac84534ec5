package garbagecollection_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/garbagecollection"
)

const gcCluster = "karpless-gc"

// The objects of a garbage world, by the names the test gives them.
const (
	healthyClaim = "gc-healthy" // registered, its instance runs, its node is Ready
	goneClaim    = "gc-gone"    // registered, its instance was terminated behind its back
	ghostClaim   = "gc-ghost"   // registered, EC2 never heard of its instance
	newClaim     = "gc-new"     // made between the kill and the next collection
	orphanNode   = "gc-orphan"  // a Node Karpless made, no NodeClaim
	// ghostID is an instance EC2 does not know.
	ghostID = "i-0a0b0c0d0e0f00001"
	// orphanNodeID is the (unknown) instance of the orphan Node.
	orphanNodeID = "i-0a0b0c0d0e0f00002"
)

// gcWorld is one garbage collection scenario: a hostile emulator on a fake
// clock (it acts only when the test steps it, so every collection in a case
// sees the same world), joined to the package's API server, holding an
// orphaned instance, a claim whose instance is gone, a claim whose
// instance EC2 never knew, a Node without NodeClaim and a healthy claim.
type gcWorld struct {
	t   *testing.T
	e   *kubetest.Env
	emu *emulator.Emulator
	clk *testingclock.FakeClock
	// ec2 builds the world (a careful client, outside the kill switch).
	ec2 *ec2.Client

	healthyID, goneID, orphanID, newID string
	healthyNode                        string

	mu sync.Mutex
	// terminated are the instance ids the collector's TerminateInstances
	// named; writes are the collector's Kubernetes writes ("METHOD path").
	terminated []string
	writes     []string
}

func newGCWorld(t *testing.T) *gcWorld {
	t.Helper()
	e := kubetest.Need(t, env)
	resetCluster(t, e)
	t.Cleanup(func() { resetCluster(t, e) })
	clk := emulatortest.FakeClock()
	emu := emulatortest.New(t, e.Clients, clk, func(c *emulator.Config) {
		c.ClusterName = gcCluster
		c.PendingDelay, c.JoinDelay, c.ReadyDelay, c.TerminateDelay = time.Second, time.Second, time.Second, time.Second
	})
	w := &gcWorld{t: t, e: e, emu: emu, clk: clk, ec2: ec2.NewFromConfig(emulatortest.CarefulAWSConfig(t, emu, ""))}
	w.healthyID = w.launch(healthyClaim)
	w.goneID = w.launch(goneClaim)
	w.orphanID = w.launch("gc-deleted-long-ago")
	w.advance(10 * time.Second) // running, nodes registered and Ready
	healthy, _ := emu.Instance(w.healthyID)
	gone, _ := emu.Instance(w.goneID)
	if healthy.NodeName == "" || gone.NodeName == "" {
		t.Fatalf("nodes did not join: %+v %+v", healthy, gone)
	}
	w.healthyNode = healthy.NodeName
	w.claim(healthyClaim, healthy.Zone, w.healthyID, healthy.NodeName)
	w.claim(goneClaim, gone.Zone, w.goneID, gone.NodeName)
	w.claim(ghostClaim, "us-west-2a", ghostID, "gc-ghost-node")
	if _, err := e.Clients.Core.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: orphanNode, Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
		Spec:       corev1.NodeSpec{ProviderID: wellknown.ProviderID("us-west-2a", orphanNodeID)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The instance of gc-gone goes behind Karpless's back.
	if err := emu.TerminateInstance(w.goneID, ""); err != nil {
		t.Fatal(err)
	}
	// Everything is older than the collector's grace (30 s) and EC2's
	// answers show it (describe lags, stale states).
	w.advance(time.Minute)
	return w
}

// resetCluster removes every NodeClaim and Node (finalizers first).
func resetCluster(t *testing.T, e *kubetest.Env) {
	t.Helper()
	ctx := context.Background()
	c := e.Clients
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	for range 100 {
		left := 0
		if l, err := c.NodeClaims.List(ctx, metav1.ListOptions{}); err == nil {
			for _, nc := range l.Items {
				left++
				_, _ = c.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				_ = c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
			}
		}
		if l, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			for _, n := range l.Items {
				left++
				_, _ = c.Core.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				_ = c.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("reset: nodeclaims or nodes still present after 5s")
}

// advance moves the clock on by d in five steps, letting the emulator act
// after each (instances change state, nodes register, then become Ready).
func (w *gcWorld) advance(d time.Duration) {
	w.t.Helper()
	for range 5 {
		emulatortest.Step(w.t, w.emu, w.clk, d/5)
	}
}

// launch starts an instance tagged as Karpless tags them, for claim.
func (w *gcWorld) launch(claim string) string {
	w.t.Helper()
	var image, subnet string
	for _, im := range w.emu.Images() {
		if im.Arch == "x86_64" && im.Family == "AL2023" {
			image = im.ID
			break
		}
	}
	subnet = w.emu.Subnets()[0].ID
	out, err := w.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(subnet),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(wellknown.ClusterTagKey(gcCluster)), Value: aws.String(wellknown.OwnedTagValue)},
			{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")},
			{Key: aws.String(wellknown.NodeClaimTagKey), Value: aws.String(claim)},
		}}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

// claim creates a NodeClaim; with an instance it is launched, and with a
// node also registered and initialized.
func (w *gcWorld) claim(name, zone, id, node string) {
	w.t.Helper()
	ctx := context.Background()
	nc, err := w.e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	if id == "" {
		return
	}
	w.adopt(nc, zone, id, node)
}

// adopt records the claim's instance (and node) as the provisioner does.
func (w *gcWorld) adopt(nc *karpv1.NodeClaim, zone, id, node string) {
	w.t.Helper()
	now := metav1.NewTime(w.clk.Now())
	nc.Status.ProviderID = wellknown.ProviderID(zone, id)
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", now)
	if node != "" {
		nc.Status.NodeName = node
		nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", now)
		nc.SetCondition(karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "", now)
	}
	if _, err := w.e.Clients.NodeClaims.UpdateStatus(context.Background(), nc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// collect runs one garbage collection as the disruption tick does (the
// cluster read, then the instances listed, then Run, then the Events
// flushed), with k in front of its Kubernetes writes and AWS calls.
func (w *gcWorld) collect(k *deploy.KillSwitch) (garbagecollection.Summary, error) {
	w.t.Helper()
	ctx := context.Background()
	restCfg := rest.CopyConfig(w.e.Cluster.RESTConfig)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &kubeEdge{next: rt, w: w, k: k} })
	kc, err := kube.NewClients(restCfg)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg, err := w.emu.AWSConfig("disruption", 1)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg.HTTPClient = &awsEdge{next: cfg.HTTPClient, w: w, k: k}
	api := ec2.NewFromConfig(cfg)
	log := slog.New(slog.DiscardHandler)
	events := record.NewRecorder(kc.Core.CoreV1(), w.clk, log)
	instances := instance.NewProvider(api, gcCluster)
	c := &garbagecollection.Collector{
		Kube: kc, Instances: instances, Templates: &launchtemplate.Provider{EC2: api, Now: w.clk.Now}, Cluster: gcCluster,
		Clock: w.clk, Log: log, Events: events, Metrics: record.NewMetrics("Test"),
	}
	defer events.Flush(ctx)
	snapTime := w.clk.Now()
	snap, err := snapshot.Take(ctx, kc, w.clk)
	if err != nil {
		return garbagecollection.Summary{}, err
	}
	live, err := instances.List(ctx)
	if err != nil {
		return garbagecollection.Summary{}, err
	}
	return c.Run(ctx, snap, snapTime, live)
}

// kubeEdge passes the collector's writes through the kill switch and
// records them.
type kubeEdge struct {
	next http.RoundTripper
	w    *gcWorld
	k    *deploy.KillSwitch
}

func (r *kubeEdge) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return r.next.RoundTrip(req)
	}
	desc := "kube " + req.Method + " " + req.URL.Path
	return r.k.Do(desc, func() (*http.Response, error) {
		r.w.mu.Lock()
		r.w.writes = append(r.w.writes, req.Method+" "+req.URL.Path)
		r.w.mu.Unlock()
		return r.next.RoundTrip(req)
	})
}

// awsEdge passes the collector's AWS calls through the kill switch, records
// the instances TerminateInstances names, and retries each call as the
// functions' SDK retryer does (so that one call is one kill point,
// whatever the hostile emulator does to its attempts).
type awsEdge struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	w *gcWorld
	k *deploy.KillSwitch
}

func (c *awsEdge) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	return c.k.Do("aws "+action, func() (*http.Response, error) {
		if action == "TerminateInstances" {
			c.w.mu.Lock()
			for key, v := range form {
				if strings.HasPrefix(key, "InstanceId.") {
					c.w.terminated = append(c.w.terminated, v[0])
				}
			}
			c.w.mu.Unlock()
		}
		for attempt := 1; ; attempt++ {
			r := req.Clone(req.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			resp, err := c.next.Do(r)
			if attempt >= awsconfig.MaxAttempts || req.Context().Err() != nil {
				return resp, err
			}
			if err != nil {
				continue
			}
			if resp.StatusCode < 400 {
				return resp, nil
			}
			answer, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr != nil || resp.StatusCode >= 500 || bytes.Contains(answer, []byte("Throttling")) || bytes.Contains(answer, []byte("RequestLimitExceeded")) {
				continue
			}
			resp.Body = io.NopCloser(bytes.NewReader(answer))
			return resp, nil
		}
	})
}

var instanceIDRE = regexp.MustCompile(`i-[0-9a-f]{8,17}`)

// gcChange is what happens between the killed collection and the next.
type gcChange struct {
	name  string
	apply func(w *gcWorld)
}

var gcChanges = []gcChange{
	{"a new claim launches an instance it records later", func(w *gcWorld) { w.newLaunch(false) }},
	{"a new claim launches an instance and records it at once; the healthy node turns NotReady", func(w *gcWorld) {
		w.newLaunch(true)
		ctx := context.Background()
		n, err := w.e.Clients.Core.CoreV1().Nodes().Get(ctx, w.healthyNode, metav1.GetOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		if _, err := w.e.Clients.Core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}},
}

// newLaunch is the provisioner at work between two collections: a new
// NodeClaim and its instance, recorded on the claim at once (EC2 does not
// list it yet) or after the next collection (adopt false).
func (w *gcWorld) newLaunch(adopt bool) {
	w.t.Helper()
	w.claim(newClaim, "", "", "")
	w.newID = w.launch(newClaim)
	if adopt {
		w.adoptNew()
	}
}

func (w *gcWorld) adoptNew() {
	w.t.Helper()
	nc, err := w.e.Clients.NodeClaims.Get(context.Background(), newClaim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // collected: untouched reports it
	}
	if err != nil {
		w.t.Fatalf("new claim: %v", err)
	}
	if nc.Status.ProviderID != "" {
		return
	}
	i, _ := w.emu.Instance(w.newID)
	w.adopt(nc, i.Zone, w.newID, "")
}

// converge runs fresh collections, the first 2 s of the clock after the
// change (EC2 does not list the new instance yet), the others 40 s apart
// (past the grace of the new instance, and past timing.NotFoundPatience
// in two), recording the new instance on its claim after the first if the
// change did not, until the garbage is gone; then it checks that nothing
// else was touched.
func (w *gcWorld) converge() {
	w.t.Helper()
	for round := 0; ; round++ {
		if round == 6 {
			w.t.Fatalf("garbage left after %d collections: %s", round, w.describe())
		}
		if round == 0 {
			w.advance(2 * time.Second)
		} else {
			w.advance(40 * time.Second)
		}
		if _, err := w.collect(nil); err != nil {
			w.t.Logf("collection: %v", err)
		}
		if w.newID != "" {
			w.adoptNew()
		}
		if w.collected() {
			break
		}
	}
	w.untouched()
}

func (w *gcWorld) claimGone(name string) bool {
	_, err := w.e.Clients.NodeClaims.Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// collected reports whether the garbage is gone: the orphaned instance
// terminated, the claims of gone instances and the orphan Node deleted.
func (w *gcWorld) collected() bool {
	i, _ := w.emu.Instance(w.orphanID)
	if i.State != emulator.StateShuttingDown && i.State != emulator.StateTerminated {
		return false
	}
	if !w.claimGone(goneClaim) || !w.claimGone(ghostClaim) {
		return false
	}
	_, err := w.e.Clients.Core.CoreV1().Nodes().Get(context.Background(), orphanNode, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// untouched checks that the collector terminated only the orphaned
// instance, deleted only the garbage, and wrote nothing to the healthy or
// new claims, their nodes or their instances; and that nothing leaked.
func (w *gcWorld) untouched() {
	w.t.Helper()
	w.mu.Lock()
	terminated, writes := slices.Clone(w.terminated), slices.Clone(w.writes)
	w.mu.Unlock()
	for _, id := range terminated {
		if id != w.orphanID {
			w.t.Errorf("TerminateInstances named %s (healthy %s, new %s, orphan %s)", id, w.healthyID, w.newID, w.orphanID)
		}
	}
	for _, wr := range writes {
		method, path, _ := strings.Cut(wr, " ")
		name := path[strings.LastIndex(path, "/")+1:]
		switch {
		case strings.HasPrefix(path, "/api/v1/namespaces/") && strings.Contains(path, "/events"):
		case strings.Contains(path, "/nodeclaims/") && (name == goneClaim || name == ghostClaim):
		case strings.HasPrefix(path, "/api/v1/nodes/") && name == orphanNode && method == http.MethodDelete:
		default:
			w.t.Errorf("the collector wrote %s", wr)
		}
	}
	ctx := context.Background()
	for _, c := range []struct{ claim, id string }{{healthyClaim, w.healthyID}, {newClaim, w.newID}} {
		if c.id == "" {
			continue
		}
		nc, err := w.e.Clients.NodeClaims.Get(ctx, c.claim, metav1.GetOptions{})
		if err != nil || nc.DeletionTimestamp != nil {
			w.t.Errorf("claim %s was collected (%v)", c.claim, err)
		}
		if i, _ := w.emu.Instance(c.id); i.State != emulator.StateRunning {
			w.t.Errorf("instance %s of %s is %s", c.id, c.claim, i.State)
		}
	}
	if _, err := w.e.Clients.Core.CoreV1().Nodes().Get(ctx, w.healthyNode, metav1.GetOptions{}); err != nil {
		w.t.Errorf("healthy node %s: %v", w.healthyNode, err)
	}
	emulatortest.AssertNoLeaks(w.t, w.emu, w.e.Clients)
}

func (w *gcWorld) describe() string {
	var b strings.Builder
	if l, err := w.e.Clients.NodeClaims.List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, nc := range l.Items {
			fmt.Fprintf(&b, "\n  claim %s provider=%s deleting=%v annotations=%v", nc.Name, nc.Status.ProviderID, nc.DeletionTimestamp != nil, nc.Annotations)
		}
	}
	if l, err := w.e.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			fmt.Fprintf(&b, "\n  node %s provider=%s", n.Name, n.Spec.ProviderID)
		}
	}
	for _, i := range w.emu.Instances(nil) {
		fmt.Fprintf(&b, "\n  instance %s %s %v", i.ID, i.State, i.Tags[wellknown.NodeClaimTagKey])
	}
	return b.String()
}

// TestCollectKilledAtEveryCall kills a garbage collection before and after
// each of its external calls in turn (Kubernetes writes and AWS calls, as
// the undisturbed collection makes them), then a new claim launches an
// instance (and, every other case, the healthy claim's node turns
// NotReady, so that the collector looks at it), then fresh collections
// run: the orphaned instance ends terminated, the claims whose instance is
// gone deleted, the orphan Node deleted; nothing healthy or new is
// touched; nothing leaks.
func TestCollectKilledAtEveryCall(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the calls of a real control plane's world")
	}
	var baseline []string
	t.Run("undisturbed", func(t *testing.T) {
		// A throttle the SDK does not retry here (one attempt) ends a
		// collection early: the baseline is taken in a world where none did.
		var w *gcWorld
		var counter *deploy.KillSwitch
		var s garbagecollection.Summary
		for try := 1; ; try++ {
			w, counter = newGCWorld(t), &deploy.KillSwitch{}
			var err error
			if s, err = w.collect(counter); err == nil {
				break
			}
			if try == 3 {
				t.Fatalf("collection: %v", err)
			}
			t.Logf("the world's hostility ended the collection (%v); a new world", err)
		}
		for _, c := range counter.Calls() {
			baseline = append(baseline, instanceIDRE.ReplaceAllString(c, "<id>"))
		}
		t.Logf("an undisturbed collection makes %d external calls: %v; it collected %+v", len(baseline), baseline, s)
		w.converge()
	})
	if len(baseline) == 0 {
		t.FailNow()
	}
	gaps := deploy.Gaps(baseline)
	sample := deploy.SampleGaps(baseline, gaps) // every gap with make test-kills
	for i, gap := range gaps {
		if !sample[i] {
			continue
		}
		at, when := gap.At, gap.Side()
		ch := gcChanges[i%len(gcChanges)]
		name := fmt.Sprintf("%s call %d (%s)", when, at, baseline[at-1])
		testworld.KillCase(t, name, 3, func(t *testing.T, diverged func(string, ...any)) {
			w := newGCWorld(t)
			k := gap.Switch()
			w.collect(k)
			got := k.Calls()
			if !k.Dead() || len(got) != at || instanceIDRE.ReplaceAllString(got[at-1], "<id>") != baseline[at-1] {
				diverged("the killed collection did not reach call %d of the baseline; it made %v", at, got)
			}
			ch.apply(w)
			t.Logf("killed %s call %d; then %s", when, at, ch.name)
			w.converge()
		})
	}
}
