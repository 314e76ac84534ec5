package demo

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWorkloadMoved: the interruption step's note judges the two-minute
// deadline by the first moment the workload ran elsewhere; DaemonSet pods,
// the reclaimed node's own or a new node's pending one, do not hold it back.
func TestWorkloadMoved(t *testing.T) {
	pod := func(name, node string, phase corev1.PodPhase, owner string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if owner != "" {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: owner, Name: owner, Controller: &yes}}
		}
		return p
	}
	interrupted := map[string]bool{"n1": true}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want bool
	}{
		{"a web pod is still on the reclaimed node", []corev1.Pod{pod("web-1", "n1", corev1.PodRunning, "ReplicaSet"), pod("web-2", "n2", corev1.PodRunning, "ReplicaSet")}, false},
		{"its replacement is pending", []corev1.Pod{pod("web-1", "", corev1.PodPending, "ReplicaSet"), pod("web-2", "n2", corev1.PodRunning, "ReplicaSet")}, false},
		{"a workload pod elsewhere is pending", []corev1.Pod{pod("web-1", "n3", corev1.PodPending, "ReplicaSet")}, false},
		{"everything runs elsewhere", []corev1.Pod{pod("web-1", "n3", corev1.PodRunning, "ReplicaSet"), pod("api-1", "n2", corev1.PodRunning, "ReplicaSet")}, true},
		{"only the node's agent is left on it", []corev1.Pod{pod("agent-1", "n1", corev1.PodRunning, "DaemonSet"), pod("web-1", "n3", corev1.PodRunning, "ReplicaSet")}, true},
		{"a new node's agent is pending", []corev1.Pod{pod("agent-2", "", corev1.PodPending, "DaemonSet"), pod("web-1", "n3", corev1.PodRunning, "ReplicaSet")}, true},
		{"a finished pod on the reclaimed node", []corev1.Pod{pod("train-1", "n1", corev1.PodSucceeded, "Job"), pod("web-1", "n3", corev1.PodRunning, "ReplicaSet")}, true},
	} {
		if got := workloadMoved(tc.pods, interrupted); got != tc.want {
			t.Errorf("%s: workloadMoved = %v, want %v", tc.name, got, tc.want)
		}
	}
}
