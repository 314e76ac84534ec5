package poolstatus

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/nodepool/{readiness,validation},
// ported: the conditions Karpless writes on a NodePool (Conditions, as the
// disruption pass stamps them) given its EC2NodeClass.

var at = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// testPool is test.NodePool(): ValidationSucceeded and NodeClassReady set
// True in its stored status.
func testPool() *karpv1.NodePool {
	np := pool()
	np.Status.Conditions = []metav1.Condition{
		{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeValidationSucceeded, ObservedGeneration: np.Generation},
		{Type: karpv1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeNodeClassReady, ObservedGeneration: np.Generation},
		{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeReady, ObservedGeneration: np.Generation},
	}
	return np
}

func condition(conds []metav1.Condition, typ string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

func expectCondition(t *testing.T, conds []metav1.Condition, typ string, want metav1.ConditionStatus) {
	t.Helper()
	if got := condition(conds, typ); got != want {
		t.Errorf("%s = %s, want %s (%v)", typ, got, want, conds)
	}
}

func TestConformanceNodePoolReadiness(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodepool/readiness", File: "pkg/controllers/nodepool/readiness/suite_test.go", Spec: "Readiness > " + spec}
	}
	readyClass := func() *awsv1.EC2NodeClass { return class(metav1.ConditionTrue, "Ready") }
	conformance.Run(t, c("should ignore NodePools which aren't managed by this instance of Karpenter"), func(t *testing.T) {
		np := testPool()
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
		// The EC2NodeClass named default is not this pool's class: nothing
		// changes, not even with no class at all.
		for _, cl := range []*awsv1.EC2NodeClass{nil, class(metav1.ConditionFalse, "NotReady")} {
			expectCondition(t, Conditions(np, cl, at), karpv1.ConditionTypeReady, metav1.ConditionTrue)
		}
		if err := Usable(np); err == nil {
			t.Error("provisioning may use another provider's NodePool")
		}
	})
	conformance.Run(t, c("should have status condition on nodePool as not ready when nodeClass does not exist"), func(t *testing.T) {
		expectCondition(t, Conditions(testPool(), nil, at), karpv1.ConditionTypeReady, metav1.ConditionFalse)
	})
	conformance.Run(t, c("should have status condition on nodePool as ready if nodeClass is ready"), func(t *testing.T) {
		expectCondition(t, Conditions(testPool(), readyClass(), at), karpv1.ConditionTypeReady, metav1.ConditionTrue)
	})
	conformance.Run(t, c("should have status condition on nodePool as not ready if nodeClass is not ready"), func(t *testing.T) {
		conds := Conditions(testPool(), class(metav1.ConditionFalse, "reason"), at)
		expectCondition(t, conds, karpv1.ConditionTypeReady, metav1.ConditionFalse)
		if c := meta.FindStatusCondition(conds, karpv1.ConditionTypeNodeClassReady); c.Reason != "reason" {
			t.Errorf("NodeClassReady reason %q, want the class's", c.Reason)
		}
	})
	conformance.Run(t, c("should have status condition on nodePool as not ready if nodeClass does not have status conditions"), func(t *testing.T) {
		expectCondition(t, Conditions(testPool(), class("", ""), at), karpv1.ConditionTypeReady, metav1.ConditionFalse)
	})
	conformance.Run(t, c("should mark NodeClassReady status condition on nodePool as NotReady if nodeClass is terminating"), func(t *testing.T) {
		cl := readyClass()
		cl.DeletionTimestamp = &metav1.Time{Time: at}
		conds := Conditions(testPool(), cl, at)
		expectCondition(t, conds, karpv1.ConditionTypeReady, metav1.ConditionFalse)
		expectCondition(t, conds, karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse)
	})
}

func TestConformanceNodePoolValidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodepool/validation", File: "pkg/controllers/nodepool/validation/suite_test.go", Spec: "Counter > " + spec}
	}
	// The suite's BeforeEach: ValidationSucceeded Unknown; its cases then
	// set NodeClassReady True before reading Ready.
	unknown := func(mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
		np := pool(mutate...)
		np.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionUnknown, Reason: "AwaitingReconciliation"}}
		return np
	}
	capacityTypes := func(values ...string) func(*karpv1.NodePool) {
		return func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: values}}
		}
	}
	readyClass := class(metav1.ConditionTrue, "Ready")
	expectValid := func(t *testing.T, np *karpv1.NodePool, want bool) {
		t.Helper()
		conds := Conditions(np, readyClass, at)
		status := map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[want]
		expectCondition(t, conds, karpv1.ConditionTypeValidationSucceeded, status)
		expectCondition(t, conds, karpv1.ConditionTypeReady, status)
	}
	conformance.Run(t, c("should fail validation with only invalid capacity types"), func(t *testing.T) {
		expectValid(t, unknown(capacityTypes("xspot")), false)
	})
	conformance.Run(t, c("should pass validation with valid capacity types"), func(t *testing.T) {
		expectValid(t, unknown(capacityTypes(wellknown.CapacityTypeOnDemand)), true)
	})
	conformance.Run(t, c("should fail open if invalid and valid capacity types are present"), func(t *testing.T) {
		expectValid(t, unknown(capacityTypes(wellknown.CapacityTypeOnDemand, "xspot")), true)
	})
	conformance.Run(t, c("should ignore NodePools which aren't managed by this instance of Karpenter"), func(t *testing.T) {
		np := unknown(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
		})
		expectCondition(t, Conditions(np, readyClass, at), karpv1.ConditionTypeValidationSucceeded, metav1.ConditionUnknown)
	})
	conformance.Run(t, c("should set the NodePoolValidationSucceeded status condition to true if nodePool healthy checks succeed"), func(t *testing.T) {
		expectValid(t, unknown(), true)
	})
	conformance.Run(t, c("should set the NodePoolValidationSucceeded status condition to false if nodePool validation failed"), func(t *testing.T) {
		expectValid(t, unknown(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "test.com.test." + strings.Repeat("a", 250) + "/test", Effect: corev1.TaintEffectNoSchedule}}
		}), false)
	})
}

// TestUsable: provisioning's filter follows the stored Ready condition
// where the pool's own state cannot say otherwise.
func TestUsable(t *testing.T) {
	set := func(np *karpv1.NodePool, typ string, status metav1.ConditionStatus, gen int64) {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: "R", ObservedGeneration: gen})
	}
	for _, tc := range []struct {
		name   string
		mutate func(*karpv1.NodePool)
		usable bool
	}{
		{"ready", func(*karpv1.NodePool) {}, true},
		{"no status yet", func(np *karpv1.NodePool) { np.Status.Conditions = nil }, true},
		{"Ready set False", func(np *karpv1.NodePool) { set(np, karpv1.ConditionTypeReady, metav1.ConditionFalse, 3) }, false},
		{"validation failed for this generation", func(np *karpv1.NodePool) {
			set(np, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, 3)
			set(np, karpv1.ConditionTypeReady, metav1.ConditionFalse, 3)
		}, false},
		{"validation failed for an earlier generation", func(np *karpv1.NodePool) {
			set(np, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, 2)
			set(np, karpv1.ConditionTypeReady, metav1.ConditionFalse, 2)
		}, true},
		{"not ready for its class only: the class's own status decides", func(np *karpv1.NodePool) {
			set(np, karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, 3)
			set(np, karpv1.ConditionTypeReady, metav1.ConditionFalse, 3)
		}, true},
		{"invalid now", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"a": "b c"} }, false},
		{"no nodeClassRef", func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef = nil }, false},
		{"a reference without group and kind", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Name: "default"}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := testPool()
			tc.mutate(np)
			if err := Usable(np); (err == nil) != tc.usable {
				t.Errorf("Usable = %v, want usable %v", err, tc.usable)
			}
		})
	}
}
