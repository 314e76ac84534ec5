package v1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsTrue reports whether the claim's condition t is True.
func (nc *NodeClaim) IsTrue(t string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, t)
}

// SetCondition sets condition t, keeping its transition time when the
// status does not change, and recomputes Ready as Karpenter does: True once
// Launched, Registered and Initialized all are, Unknown while one of them
// is missing, else False.
func (nc *NodeClaim) SetCondition(t string, status metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: nc.Generation,
	})
	if t == ConditionTypeReady {
		return
	}
	ready, reason, msg := metav1.ConditionTrue, "Ready", ""
	for _, c := range []string{ConditionTypeLaunched, ConditionTypeRegistered, ConditionTypeInitialized} {
		if !nc.IsTrue(c) {
			ready, reason, msg = metav1.ConditionFalse, "Not"+c, c+" is not true"
			if cond := meta.FindStatusCondition(nc.Status.Conditions, c); cond == nil {
				ready = metav1.ConditionUnknown
			}
			break
		}
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: ConditionTypeReady, Status: ready, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: nc.Generation,
	})
}
