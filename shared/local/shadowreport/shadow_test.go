package shadowreport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/shadowreport"
	"github.com/karpless/karpless/shared/local/testworld"
)

var env *kubetest.Env

// kube-scheduler binds the pods to the nodes of the second actor's
// NodeClaims.
func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true}))
}

// wire records the writes that leave the shadow functions' Kubernetes
// clients, under the shadow transport: what reached the API server.
type wire struct {
	mu     sync.Mutex
	writes []string
}

func (w *wire) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			w.mu.Lock()
			w.writes = append(w.writes, r.Method+" "+r.URL.Path)
			w.mu.Unlock()
		}
		return next.RoundTrip(r)
	})
}

func (w *wire) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestShadowBesideKarpenter runs Karpless in shadow mode beside a second
// actor that plays Karpenter (it creates the NodeClaims, and an active
// engine launches them through the emulator's CreateFleet): Karpless
// writes nothing it must not (no NodeClaim, no instance launched or
// terminated, no taint, no eviction; its Kubernetes writes are Events and
// its own Lease and ConfigMaps), records a launch for the pending pods and
// a consolidation of Karpenter's oversized node, and `shadow report` puts
// both sides side by side with their $/h.
func TestShadowBesideKarpenter(t *testing.T) {
	start := time.Now()
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	pool := deploy.DefaultNodePool("general")
	w.Apply(pool)
	karpenter := w.App
	// Karpenter has resolved its EC2NodeClass before any of this: an
	// active pass with nothing pending does it. Karpenter requeues a
	// reconcile that failed, and so does this (the world's throttling can
	// outlast one pass's retries: the shadow pass below then finds the
	// class unresolved and decides nothing).
	for try := 1; ; try++ {
		_, err := karpenter.Provisioner().Pass(ctx)
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("karpenter's first pass, 5 times: %v", err)
		}
		t.Logf("karpenter's first pass: %v; again", err)
	}
	t.Cleanup(func() {
		cms := env.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace)
		for _, fn := range []string{"provisioner", "disruption"} {
			_ = cms.Delete(context.Background(), shadow.StoreName(fn), metav1.DeleteOptions{})
		}
	})

	// Karpless in shadow mode: its own clients (the shadow transports come
	// with MODE=shadow), their writes recorded on the wire, its log kept.
	var logs bytes.Buffer
	var logMu sync.Mutex
	wires := &wire{}
	rc := rest.CopyConfig(w.E.Cluster.RESTConfig)
	rc.Wrap(wires.wrap)
	kc, err := kube.NewClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	karpless, err := deploy.NewEnv(w.Emu, kc, deploy.Options{
		Identity: "provisioner", Clock: w.Clock, Log: record.NewLogger(lockedWriter{&logs, &logMu}, "info"),
		Configure: func(c *config.Config) { c.Mode, c.WatchWindow = config.ModeShadow, 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	assertNothingWritten := func(phase string) {
		t.Helper()
		for _, c := range w.Emu.Calls() {
			if !readOnly(c.Action) {
				t.Errorf("%s: Karpless called %s %s", phase, c.Service, c.Action)
			}
		}
		for _, wr := range wires.take() {
			if !allowedWrite(wr) {
				t.Errorf("%s: Karpless wrote %s", phase, wr)
			}
		}
		for _, n := range nodes(t) {
			if wellknown.IsDisrupted(&n) {
				t.Errorf("%s: node %s tainted %v", phase, n.Name, n.Spec.Taints)
			}
		}
	}

	// 1. Pods wait. Karpless decides what to launch, and launches nothing.
	w.Pods("web", 3, "500m", nil)
	w.WaitUnschedulable(3)
	w.Emu.ResetCalls()
	ps, err := karpless.Provisioner().Run(ctx, "shadow-provisioner-1")
	if err != nil || ps.ShadowDecisions == 0 || ps.NodeClaimsCreated != 0 || ps.Launched != 0 {
		t.Fatalf("shadow provisioner: %+v, %v", ps, err)
	}
	if n := len(w.Claims()); n != 0 {
		t.Fatalf("shadow mode created %d NodeClaims", n)
	}
	assertNothingWritten("provisioning")

	// 2. Karpenter acts its own way: one on-demand m5.xlarge for the three
	// pods (its NodeClaim, launched and registered by an active engine as
	// Karpenter's lifecycle would).
	claim := karpenterClaim("general-k7q2x", "m5.xlarge", wellknown.CapacityTypeOnDemand)
	if _, err := w.E.Clients.NodeClaims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Converge(90*time.Second, nil)
	karpenterClaims := w.Claims()
	if len(karpenterClaims) != 1 || karpenterClaims[0].Labels[wellknown.InstanceTypeLabel] != "m5.xlarge" {
		t.Fatalf("karpenter's claims: %v", names(karpenterClaims))
	}
	instances := len(w.Emu.Instances(nil))

	// 3. Two pods go; the m5.xlarge is mostly idle. Karpless would
	// consolidate it, and does not.
	for _, p := range []string{"web-1", "web-2"} {
		if err := w.E.Clients.Core.CoreV1().Pods(w.NS).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Skip(3 * time.Minute) // past consolidateAfter (1m)
	w.Emu.ResetCalls()
	wires.take()
	ds, err := karpless.Disrupter().Run(ctx, "shadow-disruption-1")
	if err != nil {
		t.Errorf("shadow disruption: %v", err)
	}
	if ds.ShadowDecisions == 0 || len(ds.Commands) == 0 || ds.Commands[0].Action != "shadow" {
		t.Fatalf("shadow disruption recorded nothing: %+v", ds)
	}
	assertNothingWritten("disruption")
	after := w.Claims()
	if len(after) != 1 || after[0].DeletionTimestamp != nil || len(w.Emu.Instances(nil)) != instances {
		t.Errorf("after the shadow disruption: claims %v, %d instances (was %d)", names(after), len(w.Emu.Instances(nil)), instances)
	}
	if n := len(pods(t, w)); n != 1 {
		t.Errorf("%d pods left, want web-0 alone (no eviction)", n)
	}

	// 4. The records: log lines, Events, the stores.
	logMu.Lock()
	lines := logs.String()
	logMu.Unlock()
	logged, _, err := shadow.ParseLogs(strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	var consolidation *shadow.Decision
	launched := 0
	for i, d := range logged {
		t.Logf("Karpless would: %s", d.Text())
		switch d.Kind {
		case shadow.KindLaunch:
			if d.Offering == nil || d.NodePool != "general" {
				t.Errorf("launch decision %s", d.Marshal())
			}
			launched += d.PodCount
		case shadow.KindConsolidate:
			consolidation = &logged[i]
		}
	}
	if launched != 3 {
		t.Fatalf("launch decisions for %d pods, want 3: %v", launched, logged)
	}
	if consolidation == nil || len(consolidation.Candidates) != 1 || consolidation.Candidates[0].NodeClaim != "general-k7q2x" || consolidation.Savings <= 0 {
		t.Fatalf("no consolidation of general-k7q2x in the log: %v", logged)
	}

	// 5. The report, as `karpless shadow report --since 1h --logs FILE`
	// reads it: read-only clients, the log lines as a file.
	ro := rest.CopyConfig(w.E.Cluster.RESTConfig)
	ro.Wrap(shadow.Kube("nowhere", shadow.Own{})) // nothing to write: every write refused
	roc, err := kube.NewClients(ro)
	if err != nil {
		t.Fatal(err)
	}
	src, err := shadowreport.Read(ctx, roc, config.DefaultNamespace, "test cluster")
	if err != nil {
		t.Fatal(err)
	}
	src.AddLogs(logged, 0)
	if src.FromStore < 2 || src.FromEvents < 2 {
		t.Errorf("records: %d from the stores, %d from Events", src.FromStore, src.FromEvents)
	}
	now := w.Clock.Now()
	r, err := shadowreport.Build(src, shadowreport.Window{Since: now.Add(-time.Hour), Until: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("karpless shadow report --since 1h:\n%s", text.String())
	var consolidateRow *shadowreport.Row
	launchRows := 0
	for i, row := range r.Rows {
		switch {
		case row.Kind == shadow.KindLaunch && row.Decision != nil:
			launchRows++
			if row.Karpless.PerHour <= 0 || row.Karpenter.PerHour <= 0 || len(row.Karpenter.NodeClaims) != 1 || row.Karpenter.NodeClaims[0] != "general-k7q2x" {
				t.Errorf("launch row: %+v", row)
			}
		case row.Kind == shadow.KindLaunch:
			t.Errorf("a launch of Karpenter's no decision accounts for: %+v", row)
		case row.Kind == shadow.KindConsolidate:
			consolidateRow = &r.Rows[i]
		}
	}
	if launchRows == 0 || r.Totals.KarplessLaunches <= 0 || r.Totals.KarplessLaunches >= r.Totals.KarpenterLaunches {
		t.Errorf("%d launch rows; launches: Karpless $%.4f/h, Karpenter $%.4f/h", launchRows, r.Totals.KarplessLaunches, r.Totals.KarpenterLaunches)
	}
	if consolidateRow == nil || !strings.HasPrefix(consolidateRow.Karpenter.Action, "kept general-k7q2x") ||
		consolidateRow.Karpless.PerHour >= consolidateRow.Karpenter.PerHour {
		t.Errorf("consolidation row: %+v", consolidateRow)
	}
	for _, want := range []string{"KARPLESS WOULD", "KARPENTER DID", "launched general-k7q2x (m5.xlarge on-demand", "kept general-k7q2x", "What this report cannot know"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if b, err := json.Marshal(r); err != nil || !bytes.Contains(b, []byte(`"karpenter":{"action":"launched general-k7q2x`)) {
		t.Errorf("-o json: %v %s", err, b)
	}
	t.Logf("wall time %s", time.Since(start).Round(time.Millisecond))
}

// karpenterClaim is a NodeClaim as Karpenter's provisioner creates one.
func karpenterClaim(name, instanceType, capacityType string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: "general"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"general"}},
				{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}},
				{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{capacityType}},
			},
		},
	}
}

// readOnly: an AWS action that changes nothing.
func readOnly(action string) bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

// allowedWrite: Events, and Karpless's own Lease and ConfigMaps in its
// namespace.
func allowedWrite(w string) bool {
	_, path, _ := strings.Cut(w, " ")
	switch {
	case strings.Contains(path, "/events"):
		return true
	case strings.HasPrefix(path, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"):
		return path == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases" || strings.Contains(path, "/leases/karpless-")
	case strings.HasPrefix(path, "/api/v1/namespaces/kube-system/configmaps"):
		return path == "/api/v1/namespaces/kube-system/configmaps" || strings.Contains(path, "/configmaps/karpless-")
	}
	return false
}

func nodes(t *testing.T) []corev1.Node {
	l, err := env.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func pods(t *testing.T, w *testworld.World) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range w.ListPods() {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func names(ncs []karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range ncs {
		out = append(out, nc.Name)
	}
	return out
}

// lockedWriter serializes writes to a buffer the test reads.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
