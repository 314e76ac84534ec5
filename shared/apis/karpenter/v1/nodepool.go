package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool describes the nodes Karpless may launch for unschedulable pods and
// how it may disrupt them.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name",description=""
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1,description=""
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1,description=""
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is what a NodePool may launch and how it may disrupt it.
//
// +kubebuilder:validation:XValidation:rule="has(self.replicas) == has(oldSelf.replicas)",message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",message="only 'limits.nodes' is supported on static NodePools"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.weight)",message="'weight' is not supported on static NodePools"
type NodePoolSpec struct {
	// Template is the shape of the NodeClaims launched from this NodePool.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when nodes from this NodePool may be consolidated.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption,omitzero"`
	// Limits caps the total resources (cpu, memory, nodes, ...) of the nodes
	// this NodePool owns. Only limits.nodes applies to static NodePools.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders NodePools: higher weights are tried first.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the NodePool static: it keeps exactly this many nodes.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Disruption configures consolidation and its budgets.
type Disruption struct {
	// ConsolidateAfter is how long a node must stay without pod churn before it
	// may be consolidated; "Never" turns consolidation off.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +required
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`
	// ConsolidationPolicy picks which nodes consolidation may act on.
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +kubebuilder:validation:Enum:=WhenEmpty;WhenEmptyOrUnderutilized;Balanced
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many nodes may be disrupted at once; the most
	// restrictive active budget wins.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget is a cap on concurrent voluntary disruptions, optionally active only
// in a cron window and only for some reasons.
type Budget struct {
	// Reasons this budget applies to; all reasons when unset.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage ("10%") of the NodePool's nodes.
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) at which the budget becomes active.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the budget stays active after each schedule hit
	// (hours and minutes only).
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// ConsolidationPolicy selects the nodes consolidation may act on.
type ConsolidationPolicy string

// Consolidation policies.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 ConsolidationPolicy = "Balanced"
)

// DisruptionReason is why a node is voluntarily disrupted.
// +kubebuilder:validation:Enum={Underutilized,Empty,Drifted}
type DisruptionReason string

// Disruption reasons a budget can name.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Limits caps resources a NodePool may own.
type Limits corev1.ResourceList

// NodeClaimTemplate is the NodePool's template for NodeClaims.
type NodeClaimTemplate struct {
	ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the part of object metadata a template may set.
type ObjectMeta struct {
	// Labels applied to the NodeClaim and its Node.
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self.all(x, x in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))"
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x != \"karpenter.sh/nodepool\")"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self.all(x, x != \"kubernetes.io/hostname\")"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self.all(x, x in [\"karpenter.k8s.aws/instance-tenancy\", \"karpenter.k8s.aws/capacity-reservation-type\", \"karpenter.k8s.aws/capacity-reservation-id\", \"karpenter.k8s.aws/capacity-reservation-interruptible\", \"karpenter.k8s.aws/ec2nodeclass\", \"karpenter.k8s.aws/instance-encryption-in-transit-supported\", \"karpenter.k8s.aws/instance-category\", \"karpenter.k8s.aws/instance-hypervisor\", \"karpenter.k8s.aws/instance-family\", \"karpenter.k8s.aws/instance-generation\", \"karpenter.k8s.aws/instance-local-nvme\", \"karpenter.k8s.aws/instance-size\", \"karpenter.k8s.aws/instance-cpu\", \"karpenter.k8s.aws/instance-cpu-manufacturer\", \"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz\", \"karpenter.k8s.aws/instance-memory\", \"karpenter.k8s.aws/instance-ebs-bandwidth\", \"karpenter.k8s.aws/instance-network-bandwidth\", \"karpenter.k8s.aws/instance-gpu-name\", \"karpenter.k8s.aws/instance-gpu-manufacturer\", \"karpenter.k8s.aws/instance-gpu-count\", \"karpenter.k8s.aws/instance-gpu-memory\", \"karpenter.k8s.aws/instance-accelerator-name\", \"karpenter.k8s.aws/instance-accelerator-manufacturer\", \"karpenter.k8s.aws/instance-accelerator-count\", \"karpenter.k8s.aws/instance-capability-flex\", \"karpenter.k8s.aws/placement-group-id\", \"karpenter.k8s.aws/placement-group-partition\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\"))"
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:additionalProperties:MaxLength=63
	// +kubebuilder:validation:additionalProperties:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +mapType=atomic
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations applied to the NodeClaim and its Node.
	// +mapType=granular
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is a NodeClaim spec without resource requests, which
// the scheduler fills in.
type NodeClaimTemplateSpec struct {
	// Taints applied to every node; pods must tolerate them.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are expected to be removed by someone else shortly after
	// the node starts; pods need not tolerate them.
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the labels (and so the instance types, zones and
	// capacity types) of the nodes. A requirement's key may not be
	// karpenter.sh/nodepool: hack/crdvalidation adds that rule to the key,
	// which the NodeClaim's requirements (the same type) leave free.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef names the EC2NodeClass that configures the instances.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod is the longest a node may take to drain once its
	// deletion starts; after it, PDBs and do-not-disrupt no longer hold pods.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the node lifetime after which it is replaced; "Never"
	// turns expiry off.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodeClassReference points at the provider configuration of a node.
type NodeClassReference struct {
	// Kind of the node class, EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name of the node class.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the node class, karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}

// NodePool condition types.
const (
	ConditionTypeValidationSucceeded     = "ValidationSucceeded"
	ConditionTypeNodeClassReady          = "NodeClassReady"
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
	ConditionTypeReady                   = "Ready"
)

// NodePoolStatus is what Karpless observed about a NodePool.
type NodePoolStatus struct {
	// Resources is the capacity of the nodes the NodePool owns.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// NodeClassObservedGeneration is the node class generation last checked.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// Conditions: ValidationSucceeded, NodeClassReady, NodeRegistrationHealthy, Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Nodes is how many nodes the NodePool owns.
	// +kubebuilder:default:=0
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
}
