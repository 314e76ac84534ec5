package garbagecollection_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/ticks/garbagecollection"
)

// Karpenter v1.14.1's nodeclaim garbage collection suite
// (pkg/controllers/nodeclaim/garbagecollection/suite_test.go) through
// Collector.Run: one run is Karpenter's singleton reconcile. The cloud
// provider's deleting an instance is, on EC2, the instance listed no more
// and described as terminated.
func TestConformanceNodeClaimGarbageCollection(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	clk := testingclock.NewFakeClock(now)
	log := slog.New(slog.DiscardHandler)
	type world struct {
		fi   *fakeInstances
		live []instance.Instance
		c    *garbagecollection.Collector
	}
	newWorld := func() *world {
		fi := &fakeInstances{byID: map[string]instance.Instance{}}
		return &world{fi: fi, c: &garbagecollection.Collector{
			Kube: e.Clients, Instances: fi, Cluster: "test", Clock: clk, Log: log,
			Events: record.NewRecorder(e.Clients.Core.CoreV1(), clk, log), Metrics: record.NewMetrics("Test"),
		}}
	}
	seq := 0
	// deploy is ExpectNodeClaimDeployed: a launched claim with its running
	// instance and, when node, a registered node (Ready or not).
	deploy := func(t *testing.T, w *world, node bool, ready corev1.ConditionStatus) (*karpv1.NodeClaim, string) {
		seq++
		name := fmt.Sprintf("%s-%d", kubetest.Name(t), seq)
		id := fmt.Sprintf("i-%017x", seq)
		nc, err := e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
			Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nc.Status.ProviderID = wellknown.ProviderID("us-west-2a", id)
		nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(now))
		if node {
			n, err := e.Clients.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: "default"}},
				Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
			if _, err := e.Clients.Core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			nc.Status.NodeName = n.Name
			nc.SetCondition(karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(now))
		}
		if nc, err = e.Clients.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		inst := instance.Instance{ID: id, State: "running", LaunchTime: now.Add(-time.Minute), Tags: map[string]string{wellknown.NodeClaimTagKey: name}}
		w.fi.byID[id] = inst
		w.live = append(w.live, inst)
		return nc, id
	}
	// gone is cloudProvider.Delete: EC2 lists the instance no more and
	// describes it terminated.
	gone := func(w *world, id string) {
		inst := w.fi.byID[id]
		inst.State = "terminated"
		w.fi.byID[id] = inst
		for i, l := range w.live {
			if l.ID == id {
				w.live = append(w.live[:i], w.live[i+1:]...)
				break
			}
		}
	}
	reconcile := func(t *testing.T, w *world) {
		clk.Step(20 * time.Second) // past the eventual-consistency wait, as Karpenter's suite
		snap, err := snapshot.Take(ctx, e.Clients, clk)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.c.Run(ctx, snap, clk.Now(), w.live); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(t *testing.T, nc *karpv1.NodeClaim) bool {
		got, err := e.Clients.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return got.DeletionTimestamp == nil
	}
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "core/nodeclaim/garbagecollection", File: "pkg/controllers/nodeclaim/garbagecollection/suite_test.go",
			Spec: "GarbageCollection > " + spec}, body)
	}
	run("should delete the NodeClaim when the Node is there in a NotReady state and the instance is gone", func(t *testing.T) {
		w := newWorld()
		nc, id := deploy(t, w, true, corev1.ConditionFalse)
		gone(w, id)
		reconcile(t, w)
		if exists(t, nc) {
			t.Error("NodeClaim kept")
		}
	})
	run("shouldn't delete the NodeClaim when the Node is there in a Ready state and the instance is gone", func(t *testing.T) {
		w := newWorld()
		nc, id := deploy(t, w, true, corev1.ConditionTrue)
		gone(w, id)
		reconcile(t, w)
		if !exists(t, nc) {
			t.Error("NodeClaim deleted although its node is Ready")
		}
	})
	run("should delete many NodeClaims when the Nodes are there in a NotReady state and the instances are gone", func(t *testing.T) {
		w := newWorld()
		var claims []*karpv1.NodeClaim
		for range 100 {
			nc, id := deploy(t, w, true, corev1.ConditionFalse)
			gone(w, id)
			claims = append(claims, nc)
		}
		reconcile(t, w)
		for _, nc := range claims {
			if exists(t, nc) {
				t.Errorf("NodeClaim %s kept", nc.Name)
			}
		}
	})
	run("shouldn't delete the NodeClaim when the Node isn't there and the instance is gone", func(t *testing.T) {
		w := newWorld()
		nc, id := deploy(t, w, false, "")
		gone(w, id)
		reconcile(t, w)
		if !exists(t, nc) {
			t.Error("NodeClaim deleted although it never registered")
		}
	})
	run("shouldn't delete the NodeClaim when the Node isn't there but the instance is there", func(t *testing.T) {
		w := newWorld()
		nc, _ := deploy(t, w, true, corev1.ConditionTrue)
		if err := e.Clients.Core.CoreV1().Nodes().Delete(ctx, nc.Status.NodeName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		reconcile(t, w)
		if !exists(t, nc) {
			t.Error("NodeClaim deleted although its instance runs")
		}
	})
}
