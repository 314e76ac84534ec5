package provision

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodTimings: a pod is observed by the window in which its Ready
// (startup) or PodScheduled (bound) condition turned True, measured from its
// creation, as Karpenter's pod metrics controller measures it; the windows
// of consecutive ticks share no transition; a pod Ready again long after
// its start (a readiness probe that recovered) is not observed again.
func TestPodTimings(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	const no = -1 << 30 // no such time
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	pod := func(created, started, scheduled, ready int, readyStatus corev1.ConditionStatus) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(created)}}
		if started != no {
			st := at(started)
			p.Status.StartTime = &st
		}
		if scheduled != no {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(scheduled)})
		}
		if ready != no {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: at(ready)})
		}
		return p
	}
	for name, tc := range map[string]struct {
		pod            *corev1.Pod
		from, to       int // the window, seconds after t0
		startup, bound string
	}{
		"bound and ready within the window":           {pod(-30, 10, 5, 40, corev1.ConditionTrue), 0, 60, "[70]", "[35]"},
		"bound in the last window, ready in this one": {pod(-30, -10, -20, 40, corev1.ConditionTrue), 0, 60, "[70]", "[]"},
		"pending, never bound":                        {pod(10, no, no, no, ""), 0, 60, "[]", "[]"},
		"bound, not ready yet":                        {pod(10, 20, 15, 20, corev1.ConditionFalse), 0, 60, "[]", "[5]"},
		"ready in the next window":                    {pod(10, 20, 15, 61, corev1.ConditionTrue), 0, 60, "[]", "[5]"},
		// (from, to]: a transition on the boundary belongs to the window it ends.
		"ready at the window's end":   {pod(0, 1, 1, 60, corev1.ConditionTrue), 0, 60, "[60]", "[1]"},
		"ready at the window's start": {pod(-10, -5, -5, 0, corev1.ConditionTrue), 0, 60, "[]", "[]"},
		// A pod pending for an hour for capacity is observed with its hour.
		"long wait for capacity": {pod(-3600, 20, 10, 50, corev1.ConditionTrue), 0, 60, "[3650]", "[3610]"},
		// Ready again two days after its start: not a startup.
		"ready again after a probe failed": {pod(-172800, -172790, -172795, 30, corev1.ConditionTrue), 0, 60, "[]", "[]"},
		// Within podReadyAfterStartMax of its start, a slow start counts.
		"slow image pull": {pod(-1500, -1490, -1495, 30, corev1.ConditionTrue), 0, 60, "[1530]", "[]"},
		// A clock skew that puts the transition before the creation.
		"transition before creation": {pod(50, 50, 45, 45, corev1.ConditionTrue), 0, 60, "[]", "[]"},
	} {
		t.Run(name, func(t *testing.T) {
			startup, bound := podTimings([]*corev1.Pod{tc.pod}, t0.Add(time.Duration(tc.from)*time.Second), t0.Add(time.Duration(tc.to)*time.Second))
			if got := fmt.Sprint(startup); got != tc.startup {
				t.Errorf("startup %s, want %s", got, tc.startup)
			}
			if got := fmt.Sprint(bound); got != tc.bound {
				t.Errorf("bound %s, want %s", got, tc.bound)
			}
		})
	}
}
