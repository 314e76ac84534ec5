package bootstrap

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/ticks/provision"
	"github.com/karpless/karpless/shared/ticks/watch"
)

type countInvoker struct{ n atomic.Int32 }

func (c *countInvoker) InvokeAsync(context.Context, []byte) error { c.n.Add(1); return nil }

// TestWatcherRBAC runs the watcher's own code as its group: with only the
// watcher's grants, its informers sync and a pod turning unschedulable
// starts the provisioner; it may list and watch NodePools and buffers; it
// can write nothing and read no other Lease.
func TestWatcherRBAC(t *testing.T) {
	if emulator.WatcherGroup != WatcherGroup {
		t.Fatalf("the emulator maps the watcher to %s, the bootstrap binds %s", emulator.WatcherGroup, WatcherGroup)
	}
	if ProvisioningLease != provision.LeaseName {
		t.Fatalf("the watcher's Role names lease %s; the provisioner's is %s", ProvisioningLease, provision.LeaseName)
	}
	e := kubetest.Need(t, env)
	reset(t, e.Clients)
	ctx := testCtx(t)
	o := Options{}.withDefaults()
	if _, err := Install(ctx, e.Clients, o); err != nil {
		t.Fatal(err)
	}
	c := controllerClients(t, e, WatcherGroup)

	inv := &countInvoker{}
	w := &watch.Watcher{
		Core: c.Core, NodePools: c.NodePools, CapacityBuffers: c.CapacityBuffers(""),
		Invoker: inv, Namespace: o.Namespace, Lease: provision.LeaseName,
		Window: 30 * time.Second, BatchIdle: 200 * time.Millisecond, BatchMax: time.Second,
		Clock: clock.RealClock{}, Log: slog.New(slog.DiscardHandler),
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan watch.Summary)
	go func() {
		s, err := w.Run(wctx)
		if err != nil {
			t.Errorf("watcher: %v", err)
		}
		done <- s
	}()
	time.Sleep(time.Second) // listed
	// A pod the scheduler would mark unschedulable (none runs here).
	pods := e.Clients.Core.CoreV1().Pods(metav1.NamespaceDefault)
	p, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "watched"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), "watched", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}}
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for inv.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	s := <-done
	if inv.n.Load() == 0 {
		t.Fatalf("the watcher, with its grants only, never started the provisioner (%+v)", s)
	}

	// Read-only, and only its lease.
	if _, err := c.Core.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nope"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a pod: want Forbidden, got %v", err)
	}
	if err := c.Core.CoreV1().Nodes().Delete(ctx, "any", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a node: want Forbidden, got %v", err)
	}
	if _, err := c.Core.CoordinationV1().Leases(o.Namespace).Get(ctx, "karpless-disruption", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading another lease: want Forbidden, got %v", err)
	}
	if _, err := c.NodeClaims.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing NodeClaims: want Forbidden, got %v", err)
	}
	// Its informers' list (and watch) of NodePools and buffers, nothing
	// more of them.
	if _, err := c.NodePools.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing NodePools: %v", err)
	}
	if _, err := c.CapacityBuffers("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing CapacityBuffers: %v", err)
	}
	if _, err := c.NodePools.Get(ctx, "default", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading a NodePool by name: want Forbidden, got %v", err)
	}
	if _, err := c.Core.CoreV1().Secrets(o.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets: want Forbidden, got %v", err)
	}
}
