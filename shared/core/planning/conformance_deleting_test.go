package planning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// "Deleting Nodes": which pods of a node being deleted get replacement
// capacity ahead of their eviction (the pods PodsToProvision hands to the
// simulation; Karpenter's cases count the nodes the provisioner then makes).
func TestConformanceDeletingNodes(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/provisioning/scheduling", File: "pkg/controllers/provisioning/scheduling/suite_test.go", Spec: "Scheduling > Deleting Nodes > " + spec}
	}
	podLabels := map[string]string{"test": "value"}
	// world: one node marked for deletion with the pod bound to it.
	world := func(pod *corev1.Pod, pdbs ...*policyv1.PodDisruptionBudget) *cluster.Snapshot {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", DeletionTimestamp: &metav1.Time{Time: now}, Finalizers: []string{"karpenter.sh/termination"}}}
		pod.Spec.NodeName = node.Name
		return &cluster.Snapshot{Nodes: []*corev1.Node{node}, Pods: []*corev1.Pod{pod}, PDBs: pdbs}
	}
	mkPod := func(owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "default", Labels: podLabels, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: owner, Name: "owner", Controller: new(true), BlockOwnerDeletion: new(true)}}
		}
		return p
	}
	evicted := func(p *corev1.Pod) *corev1.Pod {
		// The eviction sets the deletion timestamp; a finalizer keeps it.
		p.DeletionTimestamp = &metav1.Time{Time: now}
		return p
	}
	expect := func(t *testing.T, snap *cluster.Snapshot, want bool) {
		t.Helper()
		got := len(PodsToProvision(snap, now)) == 1
		if got != want {
			t.Errorf("the pod gets replacement capacity: %v, want %v", got, want)
		}
	}
	conformance.Run(t, c("should re-schedule pods from a deleting node when pods are active"), func(t *testing.T) {
		expect(t, world(mkPod("")), true)
	})
	conformance.Run(t, c("should not re-schedule pods from a deleting node when pods are not active"), func(t *testing.T) {
		expect(t, world(evicted(mkPod(""))), false)
	})
	conformance.Run(t, c("should not re-schedule pods from a deleting node when pods are owned by a DaemonSet"), func(t *testing.T) {
		expect(t, world(mkPod("DaemonSet")), false)
	})
	conformance.Run(t, c("should not reschedule pods from a deleting node when pods are not active and they are owned by a ReplicaSet"), func(t *testing.T) {
		expect(t, world(evicted(mkPod("ReplicaSet"))), false)
	})
	conformance.Run(t, c("should reschedule pods from a deleting node when pods are not active and they are owned by a StatefulSet"), func(t *testing.T) {
		expect(t, world(evicted(mkPod("StatefulSet"))), true)
	})
	pdb := func(name string, maxUnavailable, minAvailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: podLabels}, MaxUnavailable: maxUnavailable, MinAvailable: minAvailable}}
	}
	intOrStr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	for _, e := range []struct {
		entry string
		pdbs  []*policyv1.PodDisruptionBudget
	}{
		{"0 max unavailable", []*policyv1.PodDisruptionBudget{pdb("pdb", intOrStr(intstr.FromInt32(0)), nil)}},
		{"0% max unavailable", []*policyv1.PodDisruptionBudget{pdb("pdb", intOrStr(intstr.FromString("0%")), nil)}},
		{"100% min available", []*policyv1.PodDisruptionBudget{pdb("pdb", nil, intOrStr(intstr.FromString("100%")))}},
		{"multiple PDBs on the same pod", []*policyv1.PodDisruptionBudget{
			pdb("pdb-1", nil, intOrStr(intstr.FromString("100%"))), pdb("pdb-2", nil, intOrStr(intstr.FromString("100%")))}},
	} {
		conformance.Run(t, c("should not reschedule pods from a deleting node when pods are blocked due to fully blocking PDBs > "+e.entry), func(t *testing.T) {
			expect(t, world(mkPod(""), e.pdbs...), false)
		})
	}
}

// TestPodsToProvisionOnLeavingNodes: what else holds a leaving node's pod
// back from new capacity, and what does not.
func TestPodsToProvisionOnLeavingNodes(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &metav1.Time{Time: now}}}
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "a"}},
			Spec:   corev1.PodSpec{NodeName: "n"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}}}
		mutate(p)
		return p
	}
	blocking := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, MaxUnavailable: &intstr.IntOrString{}}}
	always := policyv1.AlwaysAllow
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		pdbs []*policyv1.PodDisruptionBudget
		want bool
	}{
		{"do-not-disrupt holds it", pod(func(p *corev1.Pod) { p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "true"} }), nil, false},
		{"an elapsed do-not-disrupt does not", pod(func(p *corev1.Pod) { p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "30m"} }), nil, true},
		{"a PDB in another namespace does not", pod(func(p *corev1.Pod) { p.Namespace = "other" }), []*policyv1.PodDisruptionBudget{blocking}, true},
		{"an unready pod its PDB always lets go", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}), []*policyv1.PodDisruptionBudget{func() *policyv1.PodDisruptionBudget {
			b := blocking.DeepCopy()
			b.Spec.UnhealthyPodEvictionPolicy = &always
			return b
		}()}, true},
		{"a pod tolerating the disrupted taint is not evicted, so no PDB blocks it", pod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "karpenter.sh/disrupted", Operator: corev1.TolerationOpExists}}
		}), []*policyv1.PodDisruptionBudget{blocking}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &cluster.Snapshot{Nodes: []*corev1.Node{node}, Pods: []*corev1.Pod{tc.pod}, PDBs: tc.pdbs}
			if got := len(PodsToProvision(snap, now)) == 1; got != tc.want {
				t.Errorf("provisioned for: %v, want %v", got, tc.want)
			}
		})
	}
}
