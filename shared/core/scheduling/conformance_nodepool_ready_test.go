package scheduling

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// the case of a NodePool that is not Ready (its stored Ready condition
// False): provisioning takes only Ready NodePools.
func TestConformanceNodePoolNotReady(t *testing.T) {
	conformance.Run(t, conformance.Case{Suite: "core/provisioning/scheduling", File: "pkg/controllers/provisioning/scheduling/suite_test.go",
		Spec: "Scheduling > Custom Constraints > Scheduling Logic > should not schedule pods with nodePool which is not ready "}, func(t *testing.T) {
		np := mkPool("default")
		np.Status.Conditions = []metav1.Condition{
			{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: "ValidationSucceeded"},
			{Type: karpv1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: "NodeClassReady"},
			{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "NodePoolNotReady", Message: "Node Pool Not Ready"},
		}
		pod := mkPod("p", "1", "1Gi")
		r := solve(t, snapshot([]*karpv1.NodePool{np}, pod))
		if where := placementOf(r, pod); where != "" {
			t.Errorf("the pod was placed on %s", where)
		}
	})
}
