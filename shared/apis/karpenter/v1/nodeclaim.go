package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one node Karpless launched or is launching: the durable record
// of the intent, the instance behind it and its lifecycle.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type",description=""
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type",description=""
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone",description=""
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1,description=""
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1,description=""
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1,description=""
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1,description=""
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1,description=""
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	// +required
	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaimSpec is the node that was asked for.
type NodeClaimSpec struct {
	// Taints applied to the node.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are removed by others shortly after the node starts.
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the node's labels must satisfy; the instance types the
	// NodeClaim may launch as are the ones that satisfy them.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources the pods scheduled to this node request.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// NodeClassRef names the EC2NodeClass that configures the instance.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds the drain once deletion starts.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the node lifetime; "Never" turns expiry off.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// ResourceRequirements are the requests a NodeClaim must satisfy.
type ResourceRequirements struct {
	// Requests is the minimum the node must offer.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaim condition types, as Karpenter v1 names them.
const (
	ConditionTypeLaunched             = "Launched"
	ConditionTypeRegistered           = "Registered"
	ConditionTypeInitialized          = "Initialized"
	ConditionTypeConsolidatable       = "Consolidatable"
	ConditionTypeDrifted              = "Drifted"
	ConditionTypeDrained              = "Drained"
	ConditionTypeVolumesDetached      = "VolumesDetached"
	ConditionTypeInstanceTerminating  = "InstanceTerminating"
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
	ConditionTypeDisruptionReason     = "DisruptionReason"
	// Karpenter sets these on NodeClaims through the disruption conditions
	// the issue asks for; Karpenter v1 reports them as reasons.
	ConditionTypeEmpty   = "Empty"
	ConditionTypeExpired = "Expired"
)

// NodeClaimStatus is what happened to the NodeClaim.
type NodeClaimStatus struct {
	// NodeName is the Node that registered for this NodeClaim.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the instance, aws:///<zone>/<instance-id>.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is the AMI the instance runs.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the node's expected capacity.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is the node's expected allocatable resources.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions: Launched, Registered, Initialized, Ready and the disruption ones.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is the last time a pod was bound to or left the node.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
}
