package whatif

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func (f *fixture) buffer(name string, replicas int32, cpu string) *cluster.CapacityBuffer {
	cb := &cluster.CapacityBuffer{Buffer: &cbv1.CapacityBuffer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("cb-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: name}, Replicas: &replicas},
	}}
	if cpu == "" {
		cb.NotFound, cb.Error = true, `podtemplates "`+name+`" not found`
	} else {
		cb.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi"),
		}}}}}}
	}
	f.snap.CapacityBuffers = append(f.snap.CapacityBuffers, cb)
	return cb
}

// TestSimulateWithBuffers: simulate shows each CapacityBuffer, where its
// virtual pods go (existing room, a new NodeClaim) and what that costs,
// keeps an empty node that holds a buffer's room (as the disruption tick
// does), says why a buffer is not ready; explain answers for a virtual
// pod; the snapshot file keeps the buffers and what they refer to.
func TestSimulateWithBuffers(t *testing.T) {
	f := newFixture(t)
	f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, 2*time.Hour)
	f.buffer("small", 1, "1")
	f.buffer("big", 1, "3")
	f.buffer("orphan", 1, "")
	r := f.world().Simulate()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if testing.Verbose() {
		t.Log("\n" + text)
	}
	for _, s := range []string{
		"and 2 CapacityBuffer virtual pod(s), simulated as pending pods",
		"1 pod(s) fit existing node n1: team/capacity-buffer-small-1",
		"pods: team/capacity-buffer-big-1",
		"capacitybuffer team/small: 1 chunk(s) kept as virtual pods: 1 on existing capacity",
		"capacitybuffer team/big: 1 chunk(s) kept as virtual pods: 1 on new NodeClaims",
		`capacitybuffer team/orphan: not ready (PodTemplateNotFound: podtemplates "orphan" not found): no room kept`,
		`not consolidatable claim-n1: Node "n1" has buffer pods`,
		"no voluntary disruption now",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}
	if r.Provisioning.AddedPerHour <= 0 || r.Cost.AfterDisruption != r.Cost.AfterProvisioning {
		t.Errorf("cost %+v, added %v: the big buffer's claim adds to the bill, nothing is taken away", r.Cost, r.Provisioning.AddedPerHour)
	}
	// explain names a virtual pod's buffer and where it goes.
	pr, err := f.world().ExplainPod("team", "capacity-buffer-big-1")
	if err != nil {
		t.Fatal(err)
	}
	if pr.State != PodPending || !strings.Contains(strings.Join(pr.Notes, "\n"), "a virtual pod of CapacityBuffer team/big") || !strings.HasPrefix(pr.Outcome, "needs a new NodeClaim") {
		t.Errorf("explain: state %s outcome %q notes %v", pr.State, pr.Outcome, pr.Notes)
	}
	file := NewFile(f.snap, f.market, t0, "test", "kube-system")
	got := file.Snapshot().CapacityBuffers
	if len(got) != 3 || got[0].Template == nil || !got[2].NotFound {
		t.Errorf("the snapshot file kept buffers %+v", got)
	}

	// Without the buffer on it, n1 is empty and goes.
	f.snap.CapacityBuffers = nil
	b.Reset()
	if err := f.world().Simulate().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Emptiness") {
		t.Errorf("without buffers the empty node is kept:\n%s", b.String())
	}
}
