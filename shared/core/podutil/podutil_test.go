package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pending() *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable},
	}}}
}

func TestIsProvisionable(t *testing.T) {
	yes := true
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  func() *corev1.Pod
		want bool
	}{
		{"unschedulable", pending, true},
		{"not yet tried", func() *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}} }, false},
		{"bound", func() *corev1.Pod { p := pending(); p.Spec.NodeName = "n"; return p }, false},
		{"preempting", func() *corev1.Pod { p := pending(); p.Status.NominatedNodeName = "n"; return p }, false},
		{"deleting", func() *corev1.Pod { p := pending(); p.DeletionTimestamp = &now; return p }, false},
		{"daemonset", func() *corev1.Pod {
			p := pending()
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Controller: &yes}}
			return p
		}, false},
		{"mirror", func() *corev1.Pod {
			p := pending()
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
			return p
		}, false},
	} {
		if got := IsProvisionable(tc.pod()); got != tc.want {
			t.Errorf("%s: IsProvisionable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDoNotDisrupt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(v string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{StartTime: &metav1.Time{Time: start}}}
		if v != "" {
			p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": v}
		}
		return p
	}
	for _, tc := range []struct {
		v              string
		at             time.Duration
		blocked, valid bool
	}{
		{"", 0, false, true},
		{"true", 1000 * time.Hour, true, true},
		{"5m", 4 * time.Minute, true, true},
		{"5m", 6 * time.Minute, false, true},
		{"false", 0, false, false},
		{"soon", 0, false, false},
	} {
		b, v := DoNotDisrupt(pod(tc.v), start.Add(tc.at))
		if b != tc.blocked || v != tc.valid {
			t.Errorf("%q at +%s: blocked=%v valid=%v, want %v %v", tc.v, tc.at, b, v, tc.blocked, tc.valid)
		}
	}
}
