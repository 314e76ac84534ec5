package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass condition types.
const (
	ConditionTypeSubnetsReady              = "SubnetsReady"
	ConditionTypeSecurityGroupsReady       = "SecurityGroupsReady"
	ConditionTypeAMIsReady                 = "AMIsReady"
	ConditionTypeInstanceProfileReady      = "InstanceProfileReady"
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	ConditionTypeValidationSucceeded       = "ValidationSucceeded"
	ConditionTypePlacementGroupReady       = "PlacementGroupReady"
	ConditionTypeReady                     = "Ready"
)

// EC2NodeClassStatus is the class's selectors resolved against EC2.
type EC2NodeClassStatus struct {
	// Subnets matched by the subnet selector terms.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups matched by the security group selector terms.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// CapacityReservations matched by the capacity reservation selector terms.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// AMIs matched by the AMI selector terms, with the instance types each suits.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile resolved from spec.role or spec.instanceProfile.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// PlacementGroups holds the placement group spec.placementGroupSelector
	// matched (at most one). Karpenter keeps it in memory; Karpless has no
	// memory between invocations, so it is recorded here for the launches.
	// +optional
	PlacementGroups []PlacementGroup `json:"placementGroups,omitempty"`
	// Conditions: SubnetsReady, SecurityGroupsReady, AMIsReady,
	// InstanceProfileReady, ValidationSucceeded and Ready.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// ID of the subnet.
	// +required
	ID string `json:"id"`
	// Zone of the subnet.
	// +required
	Zone string `json:"zone"`
	// ZoneID of the subnet.
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID of the security group.
	// +required
	ID string `json:"id"`
	// Name of the security group.
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved image and the instance types it is for.
type AMI struct {
	// ID of the AMI.
	// +required
	ID string `json:"id"`
	// Deprecated is true once EC2 marks the image deprecated.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Name of the AMI.
	// +optional
	Name string `json:"name,omitempty"`
	// Requirements an instance type must meet to use this AMI (arch, GPU, ...).
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	// AvailabilityZone of the reservation.
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// EndTime after which the reservation is released.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// ID of the reservation.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceMatchCriteria is open or targeted.
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// InstanceType the reservation is for.
	// +required
	InstanceType string `json:"instanceType"`
	// OwnerID is the owning account.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// ReservationType is default or capacity-block.
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType string `json:"reservationType,omitempty"`
	// Interruptible reservations may be reclaimed.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
	// State is active or expiring.
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State string `json:"state,omitempty"`
}

// PlacementGroup is a resolved placement group.
type PlacementGroup struct {
	// ID of the placement group.
	// +required
	ID string `json:"id"`
	// Name of the placement group.
	// +optional
	Name string `json:"name,omitempty"`
	// Strategy is cluster, partition or spread.
	// +kubebuilder:validation:Enum:={cluster,partition,spread}
	// +required
	Strategy string `json:"strategy"`
	// PartitionCount is the number of partitions of a partition group.
	// +optional
	PartitionCount int32 `json:"partitionCount,omitempty"`
	// SpreadLevel is host or rack for a spread group.
	// +optional
	SpreadLevel string `json:"spreadLevel,omitempty"`
}
