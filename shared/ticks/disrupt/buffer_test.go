package disrupt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// buffer creates a PodTemplate of one cpu-sized chunk and a CapacityBuffer
// of n of them in the scenario's namespace.
func (w *world) buffer(name string, n int32, cpu string) {
	w.t.Helper()
	ctx := context.Background()
	if _, err := w.e.Clients.Core.CoreV1().PodTemplates(w.ns).Create(ctx, &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}},
	}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	client := w.e.Clients.CapacityBuffers(w.ns)
	if _, err := client.Create(ctx, &cbv1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: cbv1.CapacityBufferSpec{
		PodTemplateRef: &cbv1.LocalObjectRef{Name: name}, Replicas: &n,
	}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// TestBufferRoomIsKept: a 1-cpu web pod and a buffer of one 1500m chunk
// get their capacity in one pass. Minutes of disruption passes past
// consolidateAfter change nothing: the buffer's room is neither emptied
// (a node holding only buffer room has "buffer pods", as Karpenter's
// emptiness says) nor consolidated into a node too small for it. Once the
// buffer is deleted its room goes; the $/h it cost is logged.
func TestBufferRoomIsKept(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("10s")
	})
	w.deployment("web", 1, "1", nil)
	w.buffer("headroom", 1, "1500m")
	w.converge(1, 2*time.Minute)
	claims := func() int { return len(w.claims()) }
	// The buffer's room is provisioned by the passes of converge.
	for range 5 {
		if w.initialized() && w.cost() > 0 && claims() == len(w.live()) {
			break
		}
		w.provision()
		w.step(time.Second)
	}
	kept, keptTypes := w.cost(), typesOf(w)
	n := claims()
	start := time.Now()
	for range 8 {
		w.clk.Advance(20 * time.Second)
		w.step(time.Second)
		s := w.disrupt()
		if len(s.Commands) > 0 {
			t.Fatalf("disruption acted on the buffer's room: %+v\n%s", s.Commands, w.describe())
		}
		w.provision()
	}
	if got := w.cost(); got != kept || claims() != n {
		t.Fatalf("with the buffer: %v $%.4f/h -> %v $%.4f/h, %d -> %d claims", keptTypes, kept, typesOf(w), got, n, claims())
	}
	t.Logf("with the buffer, 8 disruption passes over 2.7 minutes (%s) kept %v at $%.4f/h", time.Since(start).Round(time.Millisecond), keptTypes, kept)

	if err := w.e.Clients.CapacityBuffers(w.ns).Delete(context.Background(), "headroom", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle(20*time.Second, 2*time.Minute, func() bool { return w.cost() < kept && w.noneDeleting() && w.running(1) })
	after := w.cost()
	t.Logf("buffer deleted: %v $%.4f/h -> %v $%.4f/h: the buffer cost $%.4f/h ($%.2f a month of 730 h)", keptTypes, kept, typesOf(w), after, kept-after, (kept-after)*730)
	w.assertInvariants()
}

// TestBufferOnlyNodeIsNotEmpty: a node that holds nothing but a buffer's
// room is not empty: emptiness leaves it ("has buffer pods") for as long
// as the buffer asks for it, and deletes it once the buffer is gone.
func TestBufferOnlyNodeIsNotEmpty(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("10s")
	})
	w.buffer("headroom", 1, "1")
	for range 20 {
		w.provision()
		if len(w.claims()) == 1 && w.initialized() && len(w.live()) == 1 {
			break
		}
		w.clk.Advance(10 * time.Second)
		w.step(time.Second)
		time.Sleep(settleSleep)
	}
	if !w.initialized() || len(w.live()) != 1 {
		t.Fatalf("the buffer's room was not provisioned: %s", w.describe())
	}
	kept := w.cost()
	noted := false
	for range 6 {
		w.clk.Advance(20 * time.Second)
		w.step(time.Second)
		s := w.disrupt()
		if len(s.Commands) > 0 {
			t.Fatalf("disruption took the buffer's room: %+v", s.Commands)
		}
		for _, u := range s.Unconsolidatable {
			noted = noted || strings.Contains(fmt.Sprint(u), "has buffer pods")
		}
		w.provision()
	}
	if !noted {
		t.Error(`no Unconsolidatable "has buffer pods" for the buffer's node`)
	}
	if err := w.e.Clients.CapacityBuffers(w.ns).Delete(context.Background(), "headroom", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle(20*time.Second, 2*time.Minute, func() bool { return len(w.live()) == 0 && len(w.claims()) == 0 })
	t.Logf("a node of buffer room only ($%.4f/h) kept through 6 passes, emptied once the buffer was deleted", kept)
	w.assertInvariants()
}
