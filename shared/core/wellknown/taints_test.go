package wellknown

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsEphemeralTaint(t *testing.T) {
	for _, tc := range []struct {
		taint corev1.Taint
		want  bool
	}{
		{corev1.Taint{Key: "readiness.k8s.io/net", Effect: corev1.TaintEffectNoSchedule}, true},
		{UnregisteredNoExecuteTaint, true},
		{corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}, true},
		{corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}, true},
		// A different effect is another taint.
		{corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, false},
		{corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}, false},
		{DisruptedNoScheduleTaint, false},
	} {
		if got := IsEphemeralTaint(&tc.taint); got != tc.want {
			t.Errorf("IsEphemeralTaint(%s) = %v, want %v", tc.taint.ToString(), got, tc.want)
		}
	}
}

func TestDisruptedSince(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stamped := DisruptedNoScheduleTaint
	stamped.TimeAdded = &metav1.Time{Time: at}
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		since  time.Time
		ok     bool
	}{
		{"untainted", nil, time.Time{}, false},
		{"another taint", []corev1.Taint{{Key: DisruptedTaintKey, Effect: corev1.TaintEffectNoExecute}}, time.Time{}, false},
		{"stamped", []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}, stamped}, at, true},
		{"unstamped (someone else's)", []corev1.Taint{DisruptedNoScheduleTaint}, time.Time{}, true},
	} {
		n := &corev1.Node{Spec: corev1.NodeSpec{Taints: tc.taints}}
		since, ok := DisruptedSince(n)
		if ok != tc.ok || !since.Equal(tc.since) || IsDisrupted(n) != tc.ok {
			t.Errorf("%s: DisruptedSince = %v, %v; want %v, %v", tc.name, since, ok, tc.since, tc.ok)
		}
	}
}
