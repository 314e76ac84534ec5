package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
)

// buffer adds a CapacityBuffer of n chunks of cpu.
func (f *fixture) buffer(name string, n int32, cpu string) {
	f.snap.CapacityBuffers = append(f.snap.CapacityBuffers, &cluster.CapacityBuffer{
		Buffer: &cbv1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "cb-uid"},
			Spec:       cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: name}, Replicas: &n},
		},
		Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}}},
	})
}

// TestBuffersKeepTheirRoom: as Karpenter v1.14 with CapacityBuffers, an
// empty node holding a buffer's room is not emptied ("has buffer pods"),
// and a node is not replaced by one too small for its pods and the
// buffer; without the buffer both go.
func TestBuffersKeepTheirRoom(t *testing.T) {
	cases := []struct {
		name string
		// setup builds the cluster, buffer then adds the buffer.
		setup  func(f *fixture)
		buffer func(f *fixture)
		// without is the method that acts when there is no buffer.
		without Method
		note    string
	}{
		{
			name:    "empty node of buffer room",
			setup:   func(f *fixture) { f.node("room", "m.large", "test-1a", "on-demand") },
			buffer:  func(f *fixture) { f.buffer("headroom", 1, "1") },
			without: Emptiness,
			note:    `Node "room" has buffer pods`,
		},
		{
			name: "replacement too small for the buffer",
			setup: func(f *fixture) {
				f.node("big", "m.xlarge", "test-1a", "on-demand")
				f.pod("web", "big", "1", "1Gi")
			},
			buffer:  func(f *fixture) { f.buffer("headroom", 1, "2") },
			without: SingleNodeConsolidation,
			note:    "Can't replace with a cheaper node",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.setup(f)
			if p := Compute(f.input()); p.Command == nil || p.Command.Method != c.without {
				t.Fatalf("without the buffer: %v, want %s", p.Command, c.without)
			}
			c.buffer(f)
			p := Compute(f.input())
			if p.Command != nil {
				t.Fatalf("with the buffer: %s", p.Command)
			}
			found := false
			for _, n := range p.Unconsolidatable {
				found = found || strings.Contains(n.Message, c.note)
			}
			if !found {
				t.Errorf("unconsolidatable %v lacks %q", p.Unconsolidatable, c.note)
			}
		})
	}
}

// TestBufferOnAnotherNodesRoom: when the buffer's chunk fits in room
// another node has, the empty node is not needed for it and goes.
func TestBufferOnAnotherNodesRoom(t *testing.T) {
	f := newFixture(t)
	f.node("a-busy", "m.xlarge", "test-1a", "on-demand")
	f.pod("web", "a-busy", "1", "1Gi")
	f.node("b-empty", "m.large", "test-1a", "on-demand")
	f.buffer("headroom", 1, "1")
	cmd := mustCommand(t, Compute(f.input()), Emptiness)
	if got := names(cmd.Candidates); got != "b-empty" {
		t.Fatalf("emptied %s, want b-empty (the chunk fits beside web)", got)
	}
}
