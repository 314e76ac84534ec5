package provision

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/buffer"
)

// withBuffers is the pass's batch: the pending pods, then the
// CapacityBuffers' virtual pods, which are simulated like pending pods
// (Karpenter's GetPendingPods adds them the same way) and never bind: the
// NodeClaims made for them are the room kept.
func withBuffers(pending []*corev1.Pod, bufs []*buffer.Buffer) []*corev1.Pod {
	virtual := buffer.Pods(bufs)
	if len(virtual) == 0 {
		return pending
	}
	out := make([]*corev1.Pod, 0, len(pending)+len(virtual))
	return append(append(out, pending...), virtual...)
}

// recordBuffers writes each buffer's status where it changed: what
// Karpenter's capacitybuffer controller writes (ReadyForProvisioning,
// replicas, the observed reference) and what its provisioner writes
// (Provisioning, from where the pass's simulations put the virtual pods;
// when none ran, Provisioning is left as it is). A failed write is
// logged, not returned: the room is provisioned all the same, and the
// next pass writes again.
func (p *Provisioner) recordBuffers(ctx context.Context, bufs []*buffer.Buffer, tally *buffer.Tally) {
	if len(bufs) == 0 {
		return
	}
	var placed map[string]*buffer.Placement
	simulated := !tally.Empty()
	if simulated {
		placed = tally.Placements()
	}
	now := metav1.NewTime(p.Clock.Now())
	for _, b := range bufs {
		pl := placed[b.Key()]
		if simulated && pl == nil {
			pl = &buffer.Placement{}
		}
		wrote, err := p.Kube.SetCapacityBufferStatus(ctx, b.Source.Buffer, b.Status(pl, now))
		switch {
		case err != nil:
			p.Log.Warn("writing capacitybuffer status", "capacitybuffer", b.Key(), "error", err)
		case wrote && pl != nil:
			p.Log.Info("capacitybuffer", "capacitybuffer", b.Key(), "ready", b.Ready, "replicas", b.Replicas, "placed", pl.String())
		case wrote:
			p.Log.Info("capacitybuffer", "capacitybuffer", b.Key(), "ready", b.Ready, "replicas", b.Replicas)
		}
	}
}
