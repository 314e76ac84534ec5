package garbagecollection_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/ticks/garbagecollection"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }

type fakeInstances struct {
	byID       map[string]instance.Instance
	terminated []string
}

func (f *fakeInstances) Get(_ context.Context, id string) (*instance.Instance, error) {
	i, ok := f.byID[id]
	if !ok {
		return nil, fmt.Errorf("instance %s: %w", id, instance.ErrNotFound)
	}
	return &i, nil
}

func (f *fakeInstances) Delete(_ context.Context, _ instance.Counter, insts ...instance.Instance) error {
	for _, i := range insts {
		f.terminated = append(f.terminated, i.ID)
	}
	return nil
}

type fakeTemplates struct{ calls int }

func (f *fakeTemplates) DeleteUnused(_ context.Context, cluster string, inUse func(string) bool, minAge time.Duration) ([]string, error) {
	f.calls++
	return []string{"karpenter.k8s.aws/1"}, nil
}

func TestCollect(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	clk := testingclock.NewFakeClock(now)
	old := now.Add(-10 * time.Minute)
	young := now.Add(-5 * time.Second)
	pid := func(id string) string { return wellknown.ProviderID("us-west-2a", id) }
	claim := func(name, providerID string, launched bool, registered ...string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: kubetest.Name(t) + "-" + name, Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
			Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
		}
		created, err := e.Clients.NodeClaims.Create(ctx, nc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.ProviderID = providerID
		if launched {
			created.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(now))
		}
		for _, nodeName := range registered {
			created.Status.NodeName = nodeName
			created.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(now))
		}
		if created, err = e.Clients.NodeClaims.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return created
	}
	healthy := claim("healthy", pid("i-healthy"), true)
	pending := claim("pending", "", false)
	// EC2 does not know these instances: only registered claims whose
	// instance stays unknown for timing.NotFoundPatience, with no Ready
	// node, go; a terminated instance is final at once.
	gone := claim("gone", pid("i-gone"), true, "no-such-node")
	unregistered := claim("unregistered", pid("i-just-launched"), true)
	reclaimed := claim("reclaimed", pid("i-reclaimed"), true, "reclaimed-node")
	node := func(name, providerID string, ready ...bool) *corev1.Node {
		n, err := e.Clients.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: kubetest.Name(t) + "-" + name, Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
			Spec:       corev1.NodeSpec{ProviderID: providerID},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ready) > 0 {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if n, err = e.Clients.Core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	readyGone := claim("ready", pid("i-ready-gone"), true, node("ready", pid("i-ready-gone"), true).Name)
	orphanNode := node("orphan", pid("i-orphan-node"))
	healthyNode := node("healthy", pid("i-healthy"))
	tag := func(claim string) map[string]string { return map[string]string{wellknown.NodeClaimTagKey: claim} }
	live := []instance.Instance{
		{ID: "i-healthy", State: "running", LaunchTime: old, Tags: tag(healthy.Name)},
		{ID: "i-leaked", State: "running", LaunchTime: old, Tags: tag("deleted-long-ago")},
		{ID: "i-untagged", State: "running", LaunchTime: old, Tags: map[string]string{}},
		{ID: "i-young", State: "pending", LaunchTime: young, Tags: tag("not-created-yet")},
		{ID: "i-adopt", State: "running", LaunchTime: old, Tags: tag(pending.Name)},
		{ID: "i-leaving", State: "shutting-down", LaunchTime: old, Tags: tag("x")},
	}
	terminated := instance.Instance{ID: "i-reclaimed", State: "terminated", LaunchTime: old, Tags: tag(reclaimed.Name)}
	fi := &fakeInstances{byID: map[string]instance.Instance{}}
	for _, i := range live {
		fi.byID[i.ID] = i
	}
	fi.byID[terminated.ID] = terminated
	ft := &fakeTemplates{}
	log := slog.New(slog.DiscardHandler)
	c := &garbagecollection.Collector{
		Kube: e.Clients, Instances: fi, Templates: ft, Cluster: "test", Clock: clk, Log: log,
		Events: record.NewRecorder(e.Clients.Core.CoreV1(), clk, log), Metrics: record.NewMetrics("Test"),
	}
	snap, err := snapshot.Take(ctx, e.Clients, clk)
	if err != nil {
		t.Fatal(err)
	}
	// The API server sets creation timestamps now; the test clock is now.
	for _, n := range snap.Nodes {
		if n.Name == orphanNode.Name || n.Name == healthyNode.Name {
			n.CreationTimestamp = metav1.NewTime(old)
		}
	}
	s, err := c.Run(ctx, snap, now, live)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(fi.terminated)
	if !slices.Equal(fi.terminated, []string{"i-leaked", "i-untagged"}) {
		t.Errorf("terminated %v, want the leaked and untagged instances only", fi.terminated)
	}
	if !slices.Equal(s.NodeClaims, []string{reclaimed.Name}) {
		t.Errorf("first run deleted nodeclaims %v, want only %s (its instance is terminated); one NotFound proves nothing", s.NodeClaims, reclaimed.Name)
	}
	if ft.calls != 1 || len(s.Templates) != 1 {
		t.Errorf("launch templates: %d calls, %v", ft.calls, s.Templates)
	}
	// Still unknown to EC2 after the patience: the registered claim goes,
	// the unregistered one (registration timeout's job) and the one with a
	// Ready node stay.
	clk.Step(timing.NotFoundPatience + time.Second)
	snap2, err := snapshot.Take(ctx, e.Clients, clk)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.Run(ctx, snap2, clk.Now(), live)
	if err != nil {
		t.Fatal(err)
	}
	// NodeClaims are cluster-scoped and the package's tests share one API
	// server: judge only this test's claims (named for it).
	prefix := strings.TrimSuffix(gone.Name, "gone")
	var ours []string
	for _, name := range s2.NodeClaims {
		if strings.HasPrefix(name, prefix) {
			ours = append(ours, name)
		}
	}
	if !slices.Equal(ours, []string{gone.Name}) {
		t.Errorf("second run deleted nodeclaims %v, want %s", s2.NodeClaims, gone.Name)
	}
	for _, keep := range []*karpv1.NodeClaim{unregistered, readyGone} {
		if got, err := e.Clients.NodeClaims.Get(ctx, keep.Name, metav1.GetOptions{}); err != nil || got.DeletionTimestamp != nil {
			t.Errorf("%s was collected (%v)", keep.Name, err)
		}
	}
	if !slices.Equal(s.Nodes, []string{orphanNode.Name}) {
		t.Errorf("deleted nodes %v, want %s", s.Nodes, orphanNode.Name)
	}
	if _, err := e.Clients.NodeClaims.Get(ctx, healthy.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("healthy claim: %v", err)
	}
}
