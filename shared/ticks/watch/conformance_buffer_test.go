package watch

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter's capacitybuffer controller triggers its provisioner after it
// reconciles a buffer. Here the provisioner resolves buffers itself; the
// watcher's informer judges a buffer created or changed as work
// (buffer.Changed), and trigger invokes the provisioner a batch's wait
// later, as for a pending pod.
func TestConformanceCapacityBufferTrigger(t *testing.T) {
	c := conformance.Case{Suite: "core/capacitybuffer", File: "pkg/controllers/capacitybuffer/suite_test.go",
		Spec: "CapacityBuffer Controller > Provisioner trigger > should trigger the provisioner after a successful reconcile"}
	conformance.Run(t, c, func(t *testing.T) {
		t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		cb := &cbv1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "trig-buffer", Namespace: "default", UID: "uid-trig", Generation: 1},
			Spec:       cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "trig-template"}, Replicas: new(int32(1))},
		}
		tr := &trigger{batchIdle: time.Second, batchMax: 10 * time.Second, awaitAcquire: 5 * time.Second}
		tr.lease("")
		if !buffer.Changed(nil, cb) {
			t.Fatal("the buffer applied is no work for the watcher")
		}
		tr.work(t0)
		if tr.due(t0.Add(999 * time.Millisecond)) {
			t.Error("invoked before the batch closed")
		}
		if !tr.due(t0.Add(time.Second)) {
			t.Error("the provisioner not invoked a batch's wait after the buffer was applied")
		}
	})
}
