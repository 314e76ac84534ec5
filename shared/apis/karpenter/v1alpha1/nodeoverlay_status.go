package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types and reasons of a NodeOverlay, as Karpenter writes them:
// ValidationSucceeded says whether the overlay is applied, Ready follows it.
const (
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	ConditionTypeReady               = "Ready"

	// ReasonRuntimeValidation: the spec passed the CRD's schema but not the
	// checks only code can make (a restricted requirement key or resource).
	ReasonRuntimeValidation = "RuntimeValidation"
	// ReasonConflict: another overlay of the same weight already sets the
	// price, or one of the same resources, of an instance type this one
	// selects; neither wins, so this one is not applied at all.
	ReasonConflict = "Conflict"
	// ReasonUnhealthyDependents is Ready's reason when ValidationSucceeded
	// is False (operatorpkg's wording, which Karpenter's status shows).
	ReasonUnhealthyDependents = "UnhealthyDependents"
)

// Annotations Karpenter puts on a NodeClaim whose instance types had an
// overlay's price or capacity applied.
const (
	PriceOverlayAppliedAnnotationKey    = Group + "/price-overlay-applied"
	CapacityOverlayAppliedAnnotationKey = Group + "/capacity-overlay-applied"
)

// NodeOverlayStatus defines the observed state of NodeOverlay
type NodeOverlayStatus struct {
	// Conditions contains signals for health and readiness
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
