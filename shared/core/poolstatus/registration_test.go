package poolstatus

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// record applies RecordRegistration to np as the lifecycle tick writes it.
func record(t *testing.T, np *karpv1.NodePool, uid string, registered bool) {
	t.Helper()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), OwnerReferences: []metav1.OwnerReference{{Kind: "NodePool", UID: np.UID}}}}
	buf, conds, ok := RecordRegistration(np, nc, registered, at)
	if !ok {
		t.Fatalf("%s is not %s's", uid, np.Name)
	}
	if np.Annotations == nil {
		np.Annotations = map[string]string{}
	}
	np.Annotations[RegistrationOutcomesAnnotation] = buf.Encode()
	np.Status.Conditions = conds
}

func registrationHealth(np *karpv1.NodePool) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy); c != nil {
		return c.Status
	}
	return ""
}

func outcomes(np *karpv1.NodePool) string {
	buf, _ := StoredRegistrationOutcomes(np)
	s := ""
	for _, o := range buf.Outcomes {
		s += map[bool]string{true: "+", false: "-"}[o.Registered]
	}
	return s
}

// TestRecordRegistration: the buffer keeps the latest four outcomes, one
// per NodeClaim however often it is recorded; two failures among them
// make the NodePool unhealthy, three successes after them healthy again.
func TestRecordRegistration(t *testing.T) {
	np := pool(func(np *karpv1.NodePool) { np.UID = "np" })
	np.Status.NodeClassObservedGeneration = 1
	record(t, np, "a", false)
	if got := registrationHealth(np); got != metav1.ConditionUnknown {
		t.Fatalf("a missing condition is reset to Unknown first, and one failure leaves it: %q", got)
	}
	record(t, np, "a", false) // a tick killed before deleting the claim, run again
	if got := outcomes(np); got != "-" {
		t.Fatalf("outcomes %q: the same claim counted twice", got)
	}
	record(t, np, "b", false)
	if got := registrationHealth(np); got != metav1.ConditionFalse {
		t.Fatalf("two failures: %q", got)
	}
	c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
	if c.Reason != RegistrationFailedReason || c.ObservedGeneration != np.Generation {
		t.Fatalf("condition %+v", c)
	}
	for i, want := range []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue} {
		record(t, np, fmt.Sprint("ok-", i), true)
		if got := registrationHealth(np); got != want {
			t.Fatalf("after %d successes (%s): %q, want %q", i+1, outcomes(np), got, want)
		}
	}
	if got := outcomes(np); got != "-+++" {
		t.Fatalf("outcomes %q, want the latest four", got)
	}
	// Another NodePool's claim, or a namesake's: nothing.
	other := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{UID: "z", OwnerReferences: []metav1.OwnerReference{{Kind: "NodePool", UID: "old"}}}}
	if _, _, ok := RecordRegistration(np, other, false, at); ok {
		t.Fatal("recorded a claim of another NodePool")
	}
}

// TestRegistrationHealthResets: a new NodePool generation, or a new class
// generation once the disruption pass observes it, resets the condition
// and drops the buffer.
func TestRegistrationHealthResets(t *testing.T) {
	failing := func() *karpv1.NodePool {
		np := pool(func(np *karpv1.NodePool) { np.UID = "np" })
		np.Status.NodeClassObservedGeneration = 4
		record(t, np, "a", false)
		record(t, np, "b", false)
		return np
	}
	cl := class(metav1.ConditionTrue, "Ready")
	cl.Generation = 4

	// The class as observed: kept.
	np := failing()
	np.Status = Status(np, cl, nil, nil, at.Add(time.Minute))
	if got := registrationHealth(np); got != metav1.ConditionFalse || outcomes(np) != "--" {
		t.Fatalf("class unchanged: %q %q, want the condition and buffer kept", got, outcomes(np))
	}
	// The class changes: reset.
	cl.Generation = 5
	np.Status = Status(np, cl, nil, nil, at.Add(2*time.Minute))
	if got := registrationHealth(np); got != metav1.ConditionUnknown || outcomes(np) != "" {
		t.Fatalf("class changed: %q %q, want Unknown and no buffer", got, outcomes(np))
	}
	record(t, np, "c", false)
	if got := registrationHealth(np); got != metav1.ConditionUnknown || outcomes(np) != "-" {
		t.Fatalf("after the reset: %q %q", got, outcomes(np))
	}

	// The NodePool changes: the lifecycle tick resets it itself if it
	// records first.
	np = failing()
	np.Generation++
	record(t, np, "c", true)
	if got := registrationHealth(np); got != metav1.ConditionTrue || outcomes(np) != "+" {
		t.Fatalf("pool changed: %q %q, want the buffer started again", got, outcomes(np))
	}
}
