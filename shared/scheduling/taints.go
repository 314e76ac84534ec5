package scheduling

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/wellknown"
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

// isEphemeralTaint reports whether a taint is one a new node sheds on its own
// while it initializes (not-ready, unreachable, uninitialized, unregistered,
// readiness.k8s.io/*).
func isEphemeralTaint(t *corev1.Taint) bool {
	for i := range wellknown.EphemeralTaints {
		if wellknown.EphemeralTaints[i].MatchTaint(t) {
			return true
		}
	}
	return strings.HasPrefix(t.Key, wellknown.EphemeralTaintPrefix)
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
