package lifecycle

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// IsTrue reports whether the claim's condition is True.
func IsTrue(nc *karpv1.NodeClaim, t string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, t)
}

// SetCondition sets a condition, keeping the transition time when the status
// does not change, and recomputes Ready = Launched ∧ Registered ∧ Initialized.
func SetCondition(nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: nc.Generation,
	})
	if t == karpv1.ConditionTypeReady {
		return
	}
	ready, reason, msg := metav1.ConditionTrue, "Ready", ""
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		if !IsTrue(nc, c) {
			ready, reason, msg = metav1.ConditionFalse, "Not"+c, c+" is not true"
			if cond := meta.FindStatusCondition(nc.Status.Conditions, c); cond == nil {
				ready = metav1.ConditionUnknown
			}
			break
		}
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: karpv1.ConditionTypeReady, Status: ready, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: nc.Generation,
	})
}
