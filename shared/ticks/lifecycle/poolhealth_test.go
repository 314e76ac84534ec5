package lifecycle

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestRegistrationHealthIsKeptOnTheNodePool: the lifecycle tick keeps the
// NodePool's NodeRegistrationHealthy across invocations, as Karpenter keeps
// it across reconciles. A NodePool that was healthy turns False after two
// given-up claims (with the failed launch's reason); a pass run again on
// the same claims (a tick killed before its deletes landed) counts
// nothing twice; one registration does not make it healthy again; two
// more, recorded by two passes at once, do, and neither is lost; a change
// to the EC2NodeClass starts it over.
func TestRegistrationHealthIsKeptOnTheNodePool(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	c := e.Clients
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	name := kubetest.Name(t)
	ref := &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: name}
	discovery := map[string]string{wellknown.DiscoveryTagKey: "test"}
	class, err := c.EC2NodeClasses.Create(ctx, &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{Role: "node-role", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.EC2NodeClasses.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	np, err := c.NodePools.Create(ctx, &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: ref, Requirements: []karpv1.NodeSelectorRequirementWithMinValues{},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.NodePools.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	np.Status.NodeClassObservedGeneration = class.Generation
	np.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeNodeRegistrationHealthy, Status: metav1.ConditionTrue,
		Reason: karpv1.ConditionTypeNodeRegistrationHealthy, ObservedGeneration: np.Generation, LastTransitionTime: metav1.NewTime(clk.Now())}}
	if np, err = c.NodePools.UpdateStatus(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// claim is one of the pool's claims, launched (with an instance) or
	// failing to launch since six minutes ago.
	claim := func(suffix string, launched bool) *karpv1.NodeClaim {
		t.Helper()
		nc, err := c.NodeClaims.Create(ctx, &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Labels: map[string]string{wellknown.NodePoolLabel: name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: name, UID: np.UID}}},
			Spec: karpv1.NodeClaimSpec{NodeClassRef: ref,
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.NodeClaims.Delete(context.Background(), nc.Name, metav1.DeleteOptions{}) })
		if launched {
			nc.Status.ProviderID = wellknown.ProviderID("us-west-2a", "i-"+suffix)
			nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(clk.Now()))
		} else {
			nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", "no capacity", metav1.NewTime(clk.Now().Add(-6*time.Minute)))
		}
		if nc, err = c.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	// nodeOf is the Node that comes up for a launched claim.
	nodeOf := func(nc *karpv1.NodeClaim) *corev1.Node {
		t.Helper()
		n, err := c.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: map[string]string{}},
			Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: []corev1.Taint{wellknown.UnregisteredNoExecuteTaint}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Core.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
		return n
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pass := func() *Lifecycle {
		return &Lifecycle{Kube: c, Clock: clk, Log: log, Events: record.NewRecorder(c.Core.CoreV1(), clk, log),
			Metrics: record.NewMetrics("test"), RegistrationTTL: 15 * time.Minute}
	}
	// pool is the NodePool's condition and buffer as stored.
	pool := func() (*metav1.Condition, poolstatus.RegistrationOutcomes) {
		t.Helper()
		got, err := c.NodePools.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf poolstatus.RegistrationOutcomes
		if err := json.Unmarshal([]byte(got.Annotations[poolstatus.RegistrationOutcomesAnnotation]), &buf); err != nil {
			t.Fatalf("buffer %q: %v", got.Annotations[poolstatus.RegistrationOutcomesAnnotation], err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy), buf
	}

	// Two launches given up on: False, with the launch's reason.
	failed := []*karpv1.NodeClaim{claim("a", false), claim("b", false)}
	stale := []*karpv1.NodeClaim{failed[0].DeepCopy(), failed[1].DeepCopy()}
	if s, err := pass().Reconcile(ctx, failed, nil); err != nil || s.Retired != 2 {
		t.Fatalf("retired %d, err %v; want both claims given up on", s.Retired, err)
	}
	cond, buf := pool()
	if cond.Status != metav1.ConditionFalse || cond.Reason != "LaunchFailed" || cond.Message != "no capacity" {
		t.Fatalf("after two failures: %+v", cond)
	}
	// The condition's True, read back as one success, then the two.
	if len(buf.Outcomes) != 3 || buf.Outcomes[1].NodeClaim != failed[0].UID || buf.Outcomes[2].NodeClaim != failed[1].UID {
		t.Fatalf("buffer %+v", buf)
	}

	// The same claims again, as a pass killed before its deletes landed
	// would find them: nothing counted twice.
	if _, err := pass().Reconcile(ctx, stale, nil); err != nil {
		t.Fatal(err)
	}
	if _, again := pool(); len(again.Outcomes) != 3 {
		t.Fatalf("outcomes counted twice: %+v", again)
	}

	// One registration: still unhealthy (two failures among the last four).
	ok := claim("c", true)
	if s, err := pass().Reconcile(ctx, []*karpv1.NodeClaim{ok}, []*corev1.Node{nodeOf(ok)}); err != nil || s.Registered != 1 {
		t.Fatalf("registered %d, err %v", s.Registered, err)
	}
	if cond, buf := pool(); cond.Status != metav1.ConditionFalse || len(buf.Outcomes) != 4 {
		t.Fatalf("after one registration: %+v %+v", cond, buf)
	}

	// Two more, by two passes at once: the failures age out, and both
	// outcomes are kept.
	more := []*karpv1.NodeClaim{claim("d", true), claim("e", true)}
	nodes := []*corev1.Node{nodeOf(more[0]), nodeOf(more[1])}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range more {
		wg.Go(func() { _, errs[i] = pass().Reconcile(ctx, []*karpv1.NodeClaim{more[i]}, nodes) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cond, buf = pool()
	if cond.Status != metav1.ConditionTrue {
		t.Fatalf("after three registrations: %+v (%+v)", cond, buf)
	}
	if len(buf.Outcomes) != 4 || buf.Outcomes[0].NodeClaim != failed[1].UID || buf.Outcomes[1].NodeClaim != ok.UID {
		t.Fatalf("buffer %+v, want %s's failure and %s's registration first", buf, failed[1].Name, ok.Name)
	}
	last := map[string]bool{}
	for _, o := range buf.Outcomes[2:] {
		last[string(o.NodeClaim)] = o.Registered
	}
	if !last[string(more[0].UID)] || !last[string(more[1].UID)] {
		t.Fatalf("buffer %+v lost a concurrent outcome", buf)
	}

	// The class changes: the next outcome starts the buffer again.
	class.Spec.Tags = map[string]string{"team": "a"}
	if class, err = c.EC2NodeClasses.Update(ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pass().Reconcile(ctx, []*karpv1.NodeClaim{claim("f", false)}, nil); err != nil {
		t.Fatal(err)
	}
	cond, buf = pool()
	if cond.Status != metav1.ConditionUnknown || len(buf.Outcomes) != 1 || buf.NodeClassGeneration != class.Generation {
		t.Fatalf("after the class changed and one failure: %+v %+v", cond, buf)
	}
}
