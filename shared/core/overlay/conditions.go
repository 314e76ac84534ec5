package overlay

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
)

// Conditions are the status conditions an outcome earns, worded as
// Karpenter's (operatorpkg's) are: ValidationSucceeded, and Ready following
// it. now becomes the transition time of a condition whose status changes.
func Conditions(o Outcome, now time.Time) []metav1.Condition {
	at := metav1.NewTime(now.Truncate(time.Second))
	if o.Applied {
		return []metav1.Condition{
			{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeValidationSucceeded, LastTransitionTime: at},
			{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ConditionTypeReady, LastTransitionTime: at},
		}
	}
	msg := o.Message
	// A condition message is at most 32768 characters; keep well below.
	const maxMessage = 1024
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return []metav1.Condition{
		{Type: v1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: o.Reason, Message: msg, LastTransitionTime: at},
		{Type: v1alpha1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnhealthyDependents, Message: v1alpha1.ConditionTypeValidationSucceeded + "=False", LastTransitionTime: at},
	}
}
