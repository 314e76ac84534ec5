package drain

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestExpiring ports the cases of Karpenter's termination suite for a
// NodeClaim's terminationGracePeriod (the pod deleted once less than its
// own grace is left, granted what is left, at least a second; a pod
// terminating past the deadline deleted again) and the pods a drain never
// waits for.
func TestExpiring(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pod := func(name string, grace int64, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name)}, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	deleting := func(at time.Time) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: at} }
	}
	for _, tc := range []struct {
		name     string
		deadline time.Time
		pod      *corev1.Pod
		want     int64 // grace of the deletion; 0: not deleted
	}{
		{"no terminationGracePeriod", time.Time{}, pod("p", 30), 0},
		{"more than its grace left", now.Add(31 * time.Second), pod("p", 30), 0},
		{"exactly its grace left", now.Add(30 * time.Second), pod("p", 30), 0},
		{"less than its grace left: deleted with what is left", now.Add(20 * time.Second), pod("p", 30), 20},
		{"a long grace: deleted early", now.Add(50 * time.Minute), pod("p", 3600), 3000},
		{"past the deadline: a second, never forced", now.Add(-time.Minute), pod("p", 30), 1},
		{"do-not-disrupt: deleted all the same", now.Add(10 * time.Second), pod("p", 30, func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}), 10},
		{"terminating, ending by the deadline", now.Add(10 * time.Second), pod("p", 30, deleting(now.Add(5*time.Second))), 0},
		{"terminating past the deadline: deleted again with less", now.Add(10 * time.Second), pod("p", 30, deleting(now.Add(25*time.Second))), 10},
		{"stuck terminating: not waited for, not deleted", now.Add(-time.Hour), pod("p", 30, deleting(now.Add(-2*time.Minute))), 0},
		{"done", now.Add(-time.Minute), pod("p", 30, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), 0},
		{"tolerates the disrupted taint", now.Add(-time.Minute), pod("p", 30, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), 0},
		{"static pod", now.Add(-time.Minute), pod("p", 30, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n"}}
		}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Expiring([]*corev1.Pod{tc.pod}, tc.deadline, now)
			switch {
			case tc.want == 0 && len(got) > 0:
				t.Errorf("deleted with grace %d, want kept", got[0].Grace)
			case tc.want > 0 && len(got) != 1:
				t.Errorf("kept, want deleted with grace %d", tc.want)
			case tc.want > 0 && got[0].Grace != tc.want:
				t.Errorf("grace %d, want %d", got[0].Grace, tc.want)
			}
		})
	}
}
