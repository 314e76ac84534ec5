package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/timing"
)

// Karpenter v1.14.1 pkg/controllers/state/suite_test.go, the cases whose
// state Karpless keeps for disruption: a node's nomination (an annotation
// on its NodeClaim, NominatedUntilAnnotation) and the consolidated state
// (ConsolidationState, a fingerprint of the cluster, trusted for
// timing.ConsolidatedTTL by the disruption tick).
func TestConformanceStateDisruption(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/state", File: "pkg/controllers/state/suite_test.go", Spec: spec}
	}
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	conformance.Run(t, c("Node Resource Level > should nominate the node until the nomination time passes"), func(t *testing.T) {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", Annotations: map[string]string{}}}
		// The provisioning pass nominates it (a batch of at most 10 s).
		nc.Annotations[NominatedUntilAnnotation] = Nomination(nc, now, NominationWindow(10*time.Second))
		for _, tc := range []struct {
			after time.Duration
			want  bool
		}{{0, true}, {10 * time.Second, true}, {21 * time.Second, false}} {
			if got := NominatedAt(nc, now.Add(tc.after)); got != tc.want {
				t.Fatalf("nominated %v after the nomination: %v, want %v", tc.after, got, tc.want)
			}
		}
	})
	state := func(snap *cluster.Snapshot) string { return ConsolidationState(&Input{Cluster: snap}) }
	base := func() *cluster.Snapshot {
		return &cluster.Snapshot{
			NodePools: []*karpv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}}},
			Nodes:     []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node", UID: "n1"}}},
			Pods:      []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p1"}, Spec: corev1.PodSpec{NodeName: "node"}}},
		}
	}
	conformance.Run(t, c("Consolidated State > should update the consolidated value when setting consolidation"), func(t *testing.T) {
		// Karpenter marks its state unconsolidated on a change of the
		// cluster; here the change is the state: a pod arriving.
		snap := base()
		before := state(snap)
		if state(snap) != before {
			t.Fatal("the state of an unchanged cluster changed")
		}
		snap.Pods = append(snap.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default", UID: "p2"}, Spec: corev1.PodSpec{NodeName: "node"}})
		if state(snap) == before {
			t.Fatal("the state did not change with the cluster")
		}
	})
	conformance.Run(t, c("Consolidated State > should update the consolidated value when state timeout (5m) has passed and state hasn't changed"), func(t *testing.T) {
		// The disruption tick trusts a consolidated verdict while the
		// state is the same and less than ConsolidatedTTL has passed.
		for _, tc := range []struct {
			after time.Duration
			held  bool
		}{{time.Minute, true}, {3 * time.Minute, true}, {5 * time.Minute, false}} {
			if held := tc.after < timing.ConsolidatedTTL; held != tc.held {
				t.Fatalf("a consolidated verdict holds %v later: %v, want %v", tc.after, held, tc.held)
			}
		}
	})
	conformance.Run(t, c("Consolidated State > should cause consolidation state to change when a NodePool is updated"), func(t *testing.T) {
		snap := base()
		before := state(snap)
		snap.NodePools[0].Generation++
		if state(snap) == before {
			t.Fatal("the state did not change with the NodePool")
		}
	})
}
