package poolstatus

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1 pkg/controllers/nodepool/registrationhealth, ported:
// the reset of NodeRegistrationHealthy the disruption pass stamps with the
// NodePool's status (Status), and the buffer the lifecycle tick then
// starts from (StoredRegistrationOutcomes, RecordRegistration).
func TestConformanceNodePoolRegistrationHealth(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodepool/registrationhealth", File: "pkg/controllers/nodepool/registrationhealth/suite_test.go", Spec: "RegistrationHealth > " + spec}
	}
	// healthPool is the suite's BeforeEach: test.NodePool() without
	// NodeRegistrationHealthy, set by each case as it says, its class's
	// generation 1 observed, and a buffer of two failures kept for it.
	healthPool := func(status metav1.ConditionStatus) *karpv1.NodePool {
		np := testPool()
		np.UID = "np-uid"
		np.Status.NodeClassObservedGeneration = 1
		if status != "" {
			meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeRegistrationHealthy, Status: status, Reason: "unhealthy", ObservedGeneration: np.Generation})
		}
		np.Annotations = map[string]string{RegistrationOutcomesAnnotation: RegistrationOutcomes{Generation: np.Generation, NodeClassGeneration: 1,
			Outcomes: []RegistrationOutcome{{NodeClaim: "a"}, {NodeClaim: "b"}}}.Encode()}
		return np
	}
	nodeClass := func(generation int64) *awsv1.EC2NodeClass {
		cl := class(metav1.ConditionTrue, "Ready")
		cl.Generation = generation
		return cl
	}
	// stamped is np with the status the disruption pass writes.
	stamped := func(np *karpv1.NodePool, cl *awsv1.EC2NodeClass) *karpv1.NodePool {
		np = np.DeepCopy()
		np.Status = Status(np, cl, nil, nil, at)
		return np
	}
	expectReset := func(t *testing.T, np *karpv1.NodePool) {
		t.Helper()
		expectCondition(t, np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy, metav1.ConditionUnknown)
		if buf, ok := StoredRegistrationOutcomes(np); ok || buf.Health() != RegistrationHealthUnknown {
			t.Errorf("the buffer %+v outlived the reset", buf)
		}
	}
	conformance.Run(t, c("should ignore setting NodeRegistrationHealthy status condition on NodePools which aren't managed by this instance of Karpenter"), func(t *testing.T) {
		np := healthPool("")
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
		if c := meta.FindStatusCondition(stamped(np, nodeClass(1)).Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy); c != nil {
			t.Fatalf("set %+v", c)
		}
	})
	conformance.Run(t, c("should not set NodeRegistrationHealthy status condition on nodePool when nodeClass does not exist"), func(t *testing.T) {
		if c := meta.FindStatusCondition(stamped(healthPool(""), nil).Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy); c != nil {
			t.Fatalf("set %+v", c)
		}
	})
	conformance.Run(t, c("should set NodeRegistrationHealthy status condition on nodePool as Unknown and reset the NodeRegistrationHealthBuffer if the nodeClass observed generation doesn't match with that on nodePool"), func(t *testing.T) {
		np := stamped(healthPool(metav1.ConditionFalse), nodeClass(2))
		expectReset(t, np)
		if np.Status.NodeClassObservedGeneration != 2 {
			t.Errorf("nodeClassObservedGeneration %d, want 2", np.Status.NodeClassObservedGeneration)
		}
	})
	conformance.Run(t, c("should set NodeRegistrationHealthy status condition on nodePool as Unknown if the nodePool is updated"), func(t *testing.T) {
		np := healthPool(metav1.ConditionFalse)
		np.Generation++
		expectReset(t, stamped(np, nodeClass(1)))
	})
	// kept: the condition stays, and the buffer the next outcome is
	// recorded into is filled from it (Karpenter's hydration after a
	// restart): one outcome the other way leaves it as healthy as the
	// condition says, and the condition as it is.
	kept := func(status metav1.ConditionStatus, want RegistrationHealth) func(t *testing.T) {
		return func(t *testing.T) {
			np := healthPool(status)
			delete(np.Annotations, RegistrationOutcomesAnnotation) // Karpenter's buffer, empty after a restart
			np = stamped(np, nodeClass(1))
			expectCondition(t, np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy, status)
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{UID: "nc-uid", OwnerReferences: []metav1.OwnerReference{{Kind: "NodePool", UID: np.UID}}}}
			buf, next, ok := RecordRegistration(np, nodeClass(1), nc, want == RegistrationUnhealthy, at)
			if !ok || buf.Health() != want {
				t.Fatalf("buffer %+v, health %v want %v", buf, buf.Health(), want)
			}
			expectCondition(t, next.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy, status)
		}
	}
	conformance.Run(t, c("should not set NodeRegistrationHealthy status condition on nodePool as Unknown if it is already set to true"), kept(metav1.ConditionTrue, RegistrationHealthy))
	conformance.Run(t, c("should not set NodeRegistrationHealthy status condition on nodePool as Unknown if it is already set to false"), kept(metav1.ConditionFalse, RegistrationUnhealthy))
}
