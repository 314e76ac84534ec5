package scheduling

import (
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// untolerated returns the first taint the tolerations do not tolerate, or nil.
// Every effect counts, PreferNoSchedule included, as in Karpenter: a pod that
// does not tolerate a soft taint is only placed there after its preferences
// are relaxed.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration) *corev1.Taint {
	for i := range taints {
		if !tolerates(tolerations, &taints[i]) {
			return &taints[i]
		}
	}
	return nil
}

func tolerates(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), t, true) {
			return true
		}
	}
	return false
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
