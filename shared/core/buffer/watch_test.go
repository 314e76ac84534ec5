package buffer

import (
	"testing"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
)

// TestChanged: a buffer created or whose spec changed is work until the
// status the provisioner writes (Resolve, then Status) records its
// generation; that write is no work itself, so the watcher and the
// provisioner cannot start each other in a loop.
func TestChanged(t *testing.T) {
	created := inDefault("b", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "t"}, Replicas: new(int32(2))})
	created.Generation = 1
	// What the provisioner writes back, resolved or not.
	resolved := func(b *cbv1.CapacityBuffer, found bool) *cbv1.CapacityBuffer {
		cb := &cluster.CapacityBuffer{Buffer: b.DeepCopy(), NotFound: !found, Error: "not found"}
		if found {
			cb.Template, cb.NotFound, cb.Error = tmpl("cpu", "1"), false, ""
		}
		out := b.DeepCopy()
		out.Status = resolveOne(cb).Status(&Placement{Existing: 2}, confNow)
		return out
	}
	written := resolved(created, true)
	failed := resolved(created, false)
	scaled := written.DeepCopy()
	scaled.Spec.Replicas, scaled.Generation = new(int32(5)), 2
	deleting := created.DeepCopy()
	deleting.DeletionTimestamp = &confNow
	relabelled := written.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}

	for _, c := range []struct {
		name     string
		old, cur *cbv1.CapacityBuffer
		want     bool
	}{
		{"created", nil, created, true},
		{"its status written, resolved", created, written, false},
		{"its status written, not resolved", created, failed, false},
		{"listed, resolved", nil, written, false},
		{"listed, not resolved yet", nil, created, true},
		{"its spec changed", written, scaled, true},
		{"its metadata changed", written, relabelled, false},
		{"being deleted", nil, deleting, false},
		{"gone", created, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Changed(c.old, c.cur); got != c.want {
				t.Errorf("Changed %v, want %v", got, c.want)
			}
		})
	}
	if Unresolved(written) || Unresolved(failed) || !Unresolved(scaled) {
		t.Errorf("unresolved: written %v, failed %v, scaled %v; want false, false, true", Unresolved(written), Unresolved(failed), Unresolved(scaled))
	}
}
