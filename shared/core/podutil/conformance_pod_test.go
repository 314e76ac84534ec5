package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/utils/pod/suite_test.go, ported through
// DoNotDisrupt: blocked is IsDoNotDisruptActive, valid false is the
// invalid-annotation Event (Karpless's callers publish it). The Events of
// the grace period (will elapse at, has elapsed) are not asserted.
func TestConformancePodDoNotDisrupt(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/utils/pod", File: "pkg/utils/pod/suite_test.go", Spec: spec}
	}
	pod := func(annotation string, phase corev1.PodPhase, started *time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Status: corev1.PodStatus{Phase: phase}}
		if annotation != "" {
			p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": annotation}
		}
		if started != nil {
			p.Status.StartTime = &metav1.Time{Time: *started}
		}
		return p
	}
	tenAgo := now.Add(-10 * time.Minute)
	for _, tc := range []struct {
		spec           string
		annotation     string
		started        *time.Time
		blocked, valid bool
	}{
		{"should return false when no annotation exists", "", &tenAgo, false, true},
		{"should return true for 'true' annotation", "true", &tenAgo, true, true},
		{"should return false and emit event for invalid duration format", "invalid-format", &tenAgo, false, false},
		{"should return false and emit event for zero duration", "0s", &tenAgo, false, false},
		{"should return false and emit event for negative duration", "-5m", &tenAgo, false, false},
		{"should return true and emit disruptable-at event when duration has not expired", "15m", &tenAgo, true, true},
		{"should return false and emit grace period elapsed event when duration has expired", "5m", &tenAgo, false, true},
		{"should not emit disruptable-at event for indefinite protection", "true", &tenAgo, true, true},
		{"should fail safe when start time is nil", "5m", nil, true, true},
	} {
		conformance.Run(t, c("IsDoNotDisruptActive > "+tc.spec), func(t *testing.T) {
			blocked, valid := DoNotDisrupt(pod(tc.annotation, corev1.PodRunning, tc.started), now)
			if blocked != tc.blocked || valid != tc.valid {
				t.Errorf("blocked=%v valid=%v, want %v %v", blocked, valid, tc.blocked, tc.valid)
			}
		})
	}
	// IsDisruptable: not active, or no active do-not-disrupt.
	disruptable := func(p *corev1.Pod) bool {
		blocked, _ := DoNotDisrupt(p, now)
		return !IsActive(p) || !blocked
	}
	for _, tc := range []struct {
		spec       string
		annotation string
		phase      corev1.PodPhase
		want       bool
		wantValid  bool
	}{
		{"should be disruptable for active pod without annotation", "", corev1.PodRunning, true, true},
		{"should not be disruptable for active pod with 'true' annotation and not emit invalid annotation event", "true", corev1.PodRunning, false, true},
		{"should be disruptable for active pod with expired duration and not emit invalid annotation event", "5m", corev1.PodRunning, true, true},
		{"should not be disruptable for active pod with non-expired duration", "15m", corev1.PodRunning, false, true},
		{"should be disruptable for terminal pod even with annotation", "true", corev1.PodSucceeded, true, true},
	} {
		conformance.Run(t, c("IsDisruptable > "+tc.spec), func(t *testing.T) {
			p := pod(tc.annotation, tc.phase, &tenAgo)
			if got := disruptable(p); got != tc.want {
				t.Errorf("disruptable %v, want %v", got, tc.want)
			}
			if _, valid := DoNotDisrupt(p, now); valid != tc.wantValid {
				t.Errorf("annotation valid %v, want %v", valid, tc.wantValid)
			}
		})
	}
}

// TestIsReschedulable: Karpenter's IsReschedulable, a terminating
// StatefulSet pod included.
func TestIsReschedulable(t *testing.T) {
	deleting := &metav1.Time{Time: time.Unix(1, 0)}
	owned := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "o", Controller: new(true)}}
	}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"active", corev1.Pod{}, true},
		{"terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: deleting}}, false},
		{"terminating, of a StatefulSet", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: deleting, OwnerReferences: owned("StatefulSet")}}, true},
		{"finished, of a StatefulSet", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("StatefulSet")}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"of a DaemonSet", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("DaemonSet")}}, false},
	} {
		if got := IsReschedulable(&tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
