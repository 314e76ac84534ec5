package planning_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// TestLimitsLeaveDeletingNodesOut: a node being deleted (it or its
// NodeClaim) no longer counts against its NodePool's limits, as Karpenter
// leaves such nodes out of a provisioning pass, so its pods' replacement
// launches at a limit; a cordoned node still counts.
func TestLimitsLeaveDeletingNodesOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*karpv1.NodeClaim, *corev1.Node)
		want   bool
	}{
		{"the node is deleted", func(_ *karpv1.NodeClaim, n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: fixtureNow} }, true},
		{"its NodeClaim is deleted", func(nc *karpv1.NodeClaim, _ *corev1.Node) { nc.DeletionTimestamp = &metav1.Time{Time: fixtureNow} }, true},
		{"the node is cordoned", func(_ *karpv1.NodeClaim, n *corev1.Node) { n.Spec.Unschedulable = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, nil, fakePool("default", withPoolLimits("cpu", "4")))
			nc, n := claimAndNode("old", rl("cpu", "4", "memory", "4Gi", "pods", "5"))
			initialized(nc, n)
			nc.Finalizers, n.Finalizers = []string{"karpenter.sh/termination"}, []string{"karpenter.sh/termination"}
			w.snap.NodeClaims, w.snap.Nodes = append(w.snap.NodeClaims, nc), append(w.snap.Nodes, n)
			pod := fakePod(requests("cpu", "1"))
			w.bindPod(pod, n)
			tc.mutate(nc, n)
			pending := fakePod(requests("cpu", "1"))
			p := w.provision(pending)
			if _, ok := p[pending]; ok != tc.want {
				t.Fatalf("a new pod got a new node: %v, want %v", ok, tc.want)
			}
		})
	}
}
