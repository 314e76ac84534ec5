package poolstatus

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// record applies RecordRegistration to np as the lifecycle tick writes it,
// its class at generation classGeneration (none when 0).
func record(t *testing.T, np *karpv1.NodePool, classGeneration int64, uid string, registered bool) {
	t.Helper()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), OwnerReferences: []metav1.OwnerReference{{Kind: "NodePool", UID: np.UID}}}}
	var cl *awsv1.EC2NodeClass
	if classGeneration != 0 {
		cl = class(metav1.ConditionTrue, "Ready")
		cl.Generation = classGeneration
	}
	buf, status, ok := RecordRegistration(np, cl, nc, registered, at)
	if !ok {
		t.Fatalf("%s is not %s's", uid, np.Name)
	}
	if np.Annotations == nil {
		np.Annotations = map[string]string{}
	}
	np.Annotations[RegistrationOutcomesAnnotation] = buf.Encode()
	np.Status = status
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
	record(t, np, 1, "a", false)
	if got := registrationHealth(np); got != metav1.ConditionUnknown {
		t.Fatalf("a missing condition is reset to Unknown first, and one failure leaves it: %q", got)
	}
	record(t, np, 1, "a", false) // a tick killed before deleting the claim, run again
	if got := outcomes(np); got != "-" {
		t.Fatalf("outcomes %q: the same claim counted twice", got)
	}
	record(t, np, 1, "b", false)
	if got := registrationHealth(np); got != metav1.ConditionFalse {
		t.Fatalf("two failures: %q", got)
	}
	c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
	if c.Reason != RegistrationFailedReason || c.ObservedGeneration != np.Generation {
		t.Fatalf("condition %+v", c)
	}
	for i, want := range []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue} {
		record(t, np, 1, fmt.Sprint("ok-", i), true)
		if got := registrationHealth(np); got != want {
			t.Fatalf("after %d successes (%s): %q, want %q", i+1, outcomes(np), got, want)
		}
	}
	if got := outcomes(np); got != "-+++" {
		t.Fatalf("outcomes %q, want the latest four", got)
	}
	// Another NodePool's claim, or a namesake's: nothing.
	other := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{UID: "z", OwnerReferences: []metav1.OwnerReference{{Kind: "NodePool", UID: "old"}}}}
	if _, _, ok := RecordRegistration(np, nil, other, false, at); ok {
		t.Fatal("recorded a claim of another NodePool")
	}
}

// TestRegistrationHealthResets: a new NodePool generation, or a new class
// generation, resets the condition and drops the buffer, whichever of the
// disruption pass (Status) and the lifecycle tick (RecordRegistration)
// sees it first; the one that did writes the class generation, so the
// other does not reset again.
func TestRegistrationHealthResets(t *testing.T) {
	cl := class(metav1.ConditionTrue, "Ready")
	cl.Generation = 4
	stamp := func(np *karpv1.NodePool) { np.Status = Status(np, cl, nil, nil, at.Add(time.Minute)) }

	// A new NodePool, whose class the disruption pass has not observed
	// yet: its first outcomes are kept when it does.
	np := pool(func(np *karpv1.NodePool) { np.UID = "np" })
	record(t, np, 4, "a", false)
	record(t, np, 4, "b", false)
	stamp(np)
	if got := registrationHealth(np); got != metav1.ConditionFalse || outcomes(np) != "--" {
		t.Fatalf("first stamp: %q %q, want the condition and buffer kept", got, outcomes(np))
	}
	// The class changes, seen by the disruption pass first: reset.
	cl.Generation = 5
	stamp(np)
	if got := registrationHealth(np); got != metav1.ConditionUnknown || outcomes(np) != "" {
		t.Fatalf("class changed: %q %q, want Unknown and no buffer", got, outcomes(np))
	}
	record(t, np, 5, "c", false)
	if got := registrationHealth(np); got != metav1.ConditionUnknown || outcomes(np) != "-" {
		t.Fatalf("after the reset: %q %q", got, outcomes(np))
	}
	// Changed again, seen by the lifecycle tick first: reset there, and
	// not again by the disruption pass.
	record(t, np, 6, "d", true)
	if got := registrationHealth(np); got != metav1.ConditionTrue || outcomes(np) != "+" || np.Status.NodeClassObservedGeneration != 6 {
		t.Fatalf("class changed under the lifecycle tick: %q %q %d", got, outcomes(np), np.Status.NodeClassObservedGeneration)
	}
	cl.Generation = 6
	stamp(np)
	if got := registrationHealth(np); got != metav1.ConditionTrue || outcomes(np) != "+" {
		t.Fatalf("reset twice: %q %q", got, outcomes(np))
	}

	// The NodePool changes: the lifecycle tick resets it if it records
	// first.
	np.Generation++
	record(t, np, 6, "e", false)
	if got := registrationHealth(np); got != metav1.ConditionUnknown || outcomes(np) != "-" {
		t.Fatalf("pool changed: %q %q, want the buffer started again", got, outcomes(np))
	}
}
