package poolstatus

import (
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// RegistrationOutcomesAnnotation holds, on a NodePool, the outcomes of its
// NodeClaims' latest registrations: Karpenter's registration health buffer
// (pkg/state/nodepoolhealth), from which the lifecycle tick sets the
// NodePool's NodeRegistrationHealthy condition.
//
// Karpenter keeps the buffer in memory, per NodePool UID. A tick keeps
// nothing between invocations, so the buffer is kept where the least new
// machinery makes it durable: on the NodePool itself. There it goes with
// the NodePool (a NodePool made again under the same name starts empty,
// as Karpenter's UID-keyed buffer does), the one read that the condition
// needs reads it too, no ConfigMap has to be created, granted and pruned
// of deleted NodePools, and a write guarded by the NodePool's
// resourceVersion keeps two ticks from losing each other's outcome.
// Outcomes are keyed by NodeClaim UID, so a tick killed after recording
// one and run again records nothing new.
const RegistrationOutcomesAnnotation = "karpless.dev/registration-outcomes"

const (
	// registrationBufferSize is how many outcomes are kept
	// (nodepoolhealth.BufferSize).
	registrationBufferSize = 4
	// unhealthyShare of failures among registrationBufferSize makes the
	// NodePool unhealthy (nodepoolhealth.ThresholdFalse): two failures.
	unhealthyShare = 0.5
)

// Reasons of the NodeRegistrationHealthy condition (Karpenter's, and
// operatorpkg's for a condition awaiting its controller).
const (
	RegistrationFailedReason     = "RegistrationFailed"
	AwaitingReconciliationReason = "AwaitingReconciliation"
)

// RegistrationOutcomes is the NodePool's buffer: the latest outcomes,
// oldest first, for the NodePool generation and EC2NodeClass generation
// they were recorded under. A change to either resets the buffer, as
// Karpenter's registrationhealth controller does.
type RegistrationOutcomes struct {
	Generation          int64                 `json:"generation"`
	NodeClassGeneration int64                 `json:"nodeClassGeneration"`
	Outcomes            []RegistrationOutcome `json:"outcomes"`
}

// RegistrationOutcome is one NodeClaim's outcome. A NodeClaim UID is empty
// for the outcomes read back from the condition when there was no buffer
// (Karpenter's hydration after a restart).
type RegistrationOutcome struct {
	NodeClaim  types.UID `json:"nodeClaim,omitempty"`
	Registered bool      `json:"registered"`
}

// RegistrationHealth is what the buffer says (nodepoolhealth.Status).
type RegistrationHealth int

const (
	// RegistrationHealthUnknown: no outcome since the last reset.
	RegistrationHealthUnknown RegistrationHealth = iota
	RegistrationHealthy
	RegistrationUnhealthy
)

// Health is Unknown for an empty buffer, Unhealthy when failures are at
// least half of the buffer's capacity (not of the outcomes it holds: two
// failures are unhealthy even among three outcomes), else Healthy.
func (o RegistrationOutcomes) Health() RegistrationHealth {
	if len(o.Outcomes) == 0 {
		return RegistrationHealthUnknown
	}
	failed := 0
	for _, r := range o.Outcomes {
		if !r.Registered {
			failed++
		}
	}
	if float64(failed)/registrationBufferSize >= unhealthyShare {
		return RegistrationUnhealthy
	}
	return RegistrationHealthy
}

// with is o with nc's outcome last, unless nc's outcome is there already,
// keeping the newest registrationBufferSize.
func (o RegistrationOutcomes) with(uid types.UID, registered bool) RegistrationOutcomes {
	if uid != "" && slices.ContainsFunc(o.Outcomes, func(r RegistrationOutcome) bool { return r.NodeClaim == uid }) {
		return o
	}
	o.Outcomes = append(slices.Clone(o.Outcomes), RegistrationOutcome{NodeClaim: uid, Registered: registered})
	if n := len(o.Outcomes); n > registrationBufferSize {
		o.Outcomes = o.Outcomes[n-registrationBufferSize:]
	}
	return o
}

// StoredRegistrationOutcomes is the NodePool's buffer, and whether it is
// one: present, readable, and recorded under the NodePool's generation and
// the EC2NodeClass generation its status last observed.
func StoredRegistrationOutcomes(np *karpv1.NodePool) (RegistrationOutcomes, bool) {
	var o RegistrationOutcomes
	v, ok := np.Annotations[RegistrationOutcomesAnnotation]
	if !ok || json.Unmarshal([]byte(v), &o) != nil {
		return RegistrationOutcomes{}, false
	}
	if o.Generation != np.Generation || o.NodeClassGeneration != np.Status.NodeClassObservedGeneration {
		return RegistrationOutcomes{}, false
	}
	return o, true
}

// Encode is the annotation's value.
func (o RegistrationOutcomes) Encode() string {
	b, _ := json.Marshal(o) // plain data: cannot fail
	return string(b)
}

// OwnedBy reports whether np is nc's NodePool: nc names it and its owner
// reference has np's UID. A NodePool deleted and made again under the same
// name is another NodePool: its claims' outcomes are not its own.
func OwnedBy(nc *karpv1.NodeClaim, np *karpv1.NodePool) bool {
	return slices.ContainsFunc(nc.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "NodePool" && o.UID == np.UID
	})
}

// RecordRegistration is nc's registration outcome recorded on np, as
// Karpenter's lifecycle controller records it (registration.go and
// liveness.go, updateNodePoolRegistrationHealth): registered when its Node
// registered, not when it was given up on (launch or registration
// timeout). class is np's EC2NodeClass (nil when there is none). It
// returns np's buffer and status with the outcome in, and ok false when np
// is not nc's NodePool (OwnedBy), which leaves np as it is.
//
// A success sets NodeRegistrationHealthy True if the buffer, with it, is
// healthy; a failure sets it False (with the launch's reason when the
// launch failed, else RegistrationFailed) if the buffer, with it, is
// unhealthy and it is not False already. A reset that is due (see
// registrationResetDue) is done first, as Karpenter's registrationhealth
// controller, which resets when the NodePool or class changes, would have
// done it before the outcome came; with no buffer for the NodePool's
// generations, the buffer starts from the condition (True one success,
// False two failures), as Karpenter's does after a restart. Recording the
// same claim again changes nothing.
func RecordRegistration(np *karpv1.NodePool, class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim, registered bool, now time.Time) (RegistrationOutcomes, karpv1.NodePoolStatus, bool) {
	if !OwnedBy(nc, np) {
		return RegistrationOutcomes{}, karpv1.NodePoolStatus{}, false
	}
	status := *np.Status.DeepCopy()
	cond := meta.FindStatusCondition(status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
	reset := registrationResetDue(np, class, cond)
	if class != nil {
		status.NodeClassObservedGeneration = class.Generation
	}
	buf, ok := StoredRegistrationOutcomes(np)
	if reset || !ok {
		buf = RegistrationOutcomes{Generation: np.Generation, NodeClassGeneration: status.NodeClassObservedGeneration}
		if !reset && cond != nil {
			switch cond.Status {
			case metav1.ConditionTrue:
				buf = buf.with("", true)
			case metav1.ConditionFalse:
				for range int(registrationBufferSize * unhealthyShare) {
					buf = buf.with("", false)
				}
			}
		}
	}
	buf = buf.with(nc.UID, registered)
	set := func(s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: karpv1.ConditionTypeNodeRegistrationHealthy, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: np.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	switch health := buf.Health(); {
	case registered && health == RegistrationHealthy:
		set(metav1.ConditionTrue, karpv1.ConditionTypeNodeRegistrationHealthy, "")
	case !registered && health == RegistrationUnhealthy && (reset || cond == nil || cond.Status != metav1.ConditionFalse):
		reason, msg := RegistrationFailedReason, "Failed to register node"
		if launched := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); launched != nil && launched.Status != metav1.ConditionTrue {
			reason, msg = launched.Reason, launched.Message
		}
		set(metav1.ConditionFalse, reason, msg)
	case reset:
		set(metav1.ConditionUnknown, AwaitingReconciliationReason, "object is awaiting reconciliation")
	}
	return buf, status, true
}

// registrationResetDue is the rule of Karpenter's registrationhealth
// controller: a NodePool of an existing EC2NodeClass whose
// NodeRegistrationHealthy is missing, was set under an earlier NodePool
// generation, or whose class changed since its status last observed it
// (a new NodePool's never was) has it reset to Unknown and its buffer
// emptied. Both writers of the condition, the disruption pass (Status)
// and the lifecycle tick (RecordRegistration), apply it and write the
// class generation they observed, so a buffer, stamped with the
// generations it was recorded under, is read only while no reset came
// after it (StoredRegistrationOutcomes).
func registrationResetDue(np *karpv1.NodePool, class *awsv1.EC2NodeClass, cond *metav1.Condition) bool {
	return class != nil && (cond == nil || cond.ObservedGeneration != np.Generation || np.Status.NodeClassObservedGeneration != class.Generation)
}

// registrationHealthReset resets NodeRegistrationHealthy when a reset is
// due (registrationResetDue), for the disruption pass's status.
func registrationHealthReset(np *karpv1.NodePool, class *awsv1.EC2NodeClass, conds *[]metav1.Condition, now time.Time) {
	if !registrationResetDue(np, class, meta.FindStatusCondition(*conds, karpv1.ConditionTypeNodeRegistrationHealthy)) {
		return
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: karpv1.ConditionTypeNodeRegistrationHealthy, Status: metav1.ConditionUnknown,
		Reason: AwaitingReconciliationReason, Message: "object is awaiting reconciliation",
		ObservedGeneration: np.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}
