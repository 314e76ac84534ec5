package v1beta1

import "math"

// Names Karpenter v1.14 gives the strategy, the conditions, their reasons
// and the marks of a virtual pod (its pkg/apis/autoscaling/v1beta1 and
// pkg/controllers/capacitybuffer constants), so status readers and
// dashboards written for Karpenter read Karpless's the same way.
const (
	// ActiveProvisioningStrategy keeps the buffer's room provisioned for
	// as long as the buffer exists (the only strategy there is).
	ActiveProvisioningStrategy = "buffer.x-k8s.io/active-capacity"

	// ConditionReadyForProvisioning: the pod template was resolved and the
	// number of chunks computed.
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	// ConditionProvisioning: True once every chunk fits on capacity that
	// exists (nodes, or NodeClaims already made), without a new NodeClaim.
	ConditionProvisioning = "Provisioning"

	ReasonResolved            = "Resolved"
	ReasonScalableRefNotFound = "ScalableRefNotFound"
	ReasonPodTemplateNotFound = "PodTemplateNotFound"
	ReasonResolutionFailed    = "ResolutionFailed"

	ReasonFitsExistingCapacity    = "FitsExistingCapacity"
	ReasonRequiresNewCapacity     = "RequiresNewCapacity"
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferEmpty             = "BufferEmpty"

	// The scalableRef kinds Karpenter resolves (group apps, or empty).
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindReplicaSet  = "ReplicaSet"

	// FakePodAnnotationKey marks a virtual pod made from a CapacityBuffer.
	FakePodAnnotationKey   = "karpenter.sh/capacity-buffer-fake-pod"
	FakePodAnnotationValue = "true"
	// BufferNameAnnotation and BufferNamespaceAnnotation name the buffer a
	// virtual pod belongs to.
	BufferNameAnnotation      = "karpenter.sh/capacity-buffer-name"
	BufferNamespaceAnnotation = "karpenter.sh/capacity-buffer-namespace"

	// VirtualPodPriority is the lowest priority there is: buffer room is
	// worth less than any real pod.
	VirtualPodPriority int32 = math.MinInt32
)
