package static

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/controllers/static/provisioning: a static NodePool
// whose root (Ready) condition is not True creates no NodeClaims.
func TestConformanceStaticNotReady(t *testing.T) {
	conformance.Run(t, conformance.Case{Suite: "core/static/provisioning", File: "pkg/controllers/static/provisioning/suite_test.go",
		Spec: "Static Provisioning Controller > Reconcile > should return early if nodepool root condition is not true"}, func(t *testing.T) {
		np := staticPool("static", 1, func(np *karpv1.NodePool) {
			// StatusConditions().SetFalse(ValidationSucceeded) also sets
			// the root condition False.
			for _, c := range []metav1.Condition{
				{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: "ValidationFailed", Message: "Validation failed"},
				{Type: karpv1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeNodeClassReady},
				{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "UnhealthyDependents"},
			} {
				c.ObservedGeneration = np.Generation
				meta.SetStatusCondition(&np.Status.Conditions, c)
			}
		})
		plan := Plan(newWorld(np).input())
		if len(plan) != 1 || plan[0].Create != 0 || plan[0].Claim != nil {
			t.Fatalf("plan %+v, want no NodeClaim created", plan)
		}
	})
}
