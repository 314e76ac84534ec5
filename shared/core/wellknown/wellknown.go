// Package wellknown names every label, annotation, taint, finalizer and EC2
// tag key Karpenter v1 uses, so Karpless reads and writes exactly the same ones.
package wellknown

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Karpenter's own labels (restricted domain karpenter.sh).
const (
	NodePoolLabel        = "karpenter.sh/nodepool"
	CapacityTypeLabel    = "karpenter.sh/capacity-type"
	InitializedLabel     = "karpenter.sh/initialized"
	RegisteredLabel      = "karpenter.sh/registered"
	DoNotSyncTaintsLabel = "karpenter.sh/do-not-sync-taints"
)

// Capacity types (values of CapacityTypeLabel).
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// AWS provider labels (restricted domain karpenter.k8s.aws).
const (
	InstanceTenancyLabel                      = "karpenter.k8s.aws/instance-tenancy"
	CapacityReservationTypeLabel              = "karpenter.k8s.aws/capacity-reservation-type"
	CapacityReservationIDLabel                = "karpenter.k8s.aws/capacity-reservation-id"
	CapacityReservationInterruptibleLabel     = "karpenter.k8s.aws/capacity-reservation-interruptible"
	EC2NodeClassLabel                         = "karpenter.k8s.aws/ec2nodeclass"
	InstanceEncryptionInTransitSupportedLabel = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
	InstanceCategoryLabel                     = "karpenter.k8s.aws/instance-category"
	InstanceHypervisorLabel                   = "karpenter.k8s.aws/instance-hypervisor"
	InstanceFamilyLabel                       = "karpenter.k8s.aws/instance-family"
	InstanceGenerationLabel                   = "karpenter.k8s.aws/instance-generation"
	InstanceLocalNVMeLabel                    = "karpenter.k8s.aws/instance-local-nvme"
	InstanceSizeLabel                         = "karpenter.k8s.aws/instance-size"
	InstanceCPULabel                          = "karpenter.k8s.aws/instance-cpu"
	InstanceCPUManufacturerLabel              = "karpenter.k8s.aws/instance-cpu-manufacturer"
	InstanceCPUSustainedClockSpeedMhzLabel    = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	InstanceMemoryLabel                       = "karpenter.k8s.aws/instance-memory"
	InstanceEBSBandwidthLabel                 = "karpenter.k8s.aws/instance-ebs-bandwidth"
	InstanceNetworkBandwidthLabel             = "karpenter.k8s.aws/instance-network-bandwidth"
	InstanceGPUNameLabel                      = "karpenter.k8s.aws/instance-gpu-name"
	InstanceGPUManufacturerLabel              = "karpenter.k8s.aws/instance-gpu-manufacturer"
	InstanceGPUCountLabel                     = "karpenter.k8s.aws/instance-gpu-count"
	InstanceGPUMemoryLabel                    = "karpenter.k8s.aws/instance-gpu-memory"
	InstanceAcceleratorNameLabel              = "karpenter.k8s.aws/instance-accelerator-name"
	InstanceAcceleratorManufacturerLabel      = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	InstanceAcceleratorCountLabel             = "karpenter.k8s.aws/instance-accelerator-count"
	InstanceCapabilityFlexLabel               = "karpenter.k8s.aws/instance-capability-flex"
	PlacementGroupIDLabel                     = "karpenter.k8s.aws/placement-group-id"
	PlacementGroupPartitionLabel              = "karpenter.k8s.aws/placement-group-partition"
	TopologyZoneIDLabel                       = "topology.k8s.aws/zone-id"
)

// Kubernetes labels Karpenter sets or reads.
const (
	ZoneLabel         = corev1.LabelTopologyZone       // topology.kubernetes.io/zone
	RegionLabel       = corev1.LabelTopologyRegion     // topology.kubernetes.io/region
	InstanceTypeLabel = corev1.LabelInstanceTypeStable // node.kubernetes.io/instance-type
	ArchLabel         = corev1.LabelArchStable         // kubernetes.io/arch
	OSLabel           = corev1.LabelOSStable           // kubernetes.io/os
	HostnameLabel     = corev1.LabelHostname           // kubernetes.io/hostname
	WindowsBuildLabel = corev1.LabelWindowsBuild       // node.kubernetes.io/windows-build
)

// Restricted label domains: users may not set labels under them in NodePools
// except the keys allowed below.
const (
	KarpenterDomain    = "karpenter.sh"
	KarpenterAWSDomain = "karpenter.k8s.aws"
)

// AWSLabels are the karpenter.k8s.aws keys a NodePool may use in requirements
// and labels (the CRD allow-list).
var AWSLabels = []string{
	InstanceTenancyLabel, CapacityReservationTypeLabel, CapacityReservationIDLabel,
	CapacityReservationInterruptibleLabel, EC2NodeClassLabel, InstanceEncryptionInTransitSupportedLabel,
	InstanceCategoryLabel, InstanceHypervisorLabel, InstanceFamilyLabel, InstanceGenerationLabel,
	InstanceLocalNVMeLabel, InstanceSizeLabel, InstanceCPULabel, InstanceCPUManufacturerLabel,
	InstanceCPUSustainedClockSpeedMhzLabel, InstanceMemoryLabel, InstanceEBSBandwidthLabel,
	InstanceNetworkBandwidthLabel, InstanceGPUNameLabel, InstanceGPUManufacturerLabel,
	InstanceGPUCountLabel, InstanceGPUMemoryLabel, InstanceAcceleratorNameLabel,
	InstanceAcceleratorManufacturerLabel, InstanceAcceleratorCountLabel, InstanceCapabilityFlexLabel,
	PlacementGroupIDLabel, PlacementGroupPartitionLabel,
}

// WellKnownLabels are the keys the scheduler can satisfy on a node it has not
// launched yet: pods may select on them and NodePools may constrain them.
var WellKnownLabels = append([]string{
	NodePoolLabel, CapacityTypeLabel, ZoneLabel, RegionLabel, InstanceTypeLabel,
	ArchLabel, OSLabel, WindowsBuildLabel, TopologyZoneIDLabel,
}, AWSLabels...)

// EBSCSIZoneLabel is the zone key of the EBS CSI driver's volume topology
// (its PersistentVolumes' node affinity, StorageClasses' allowedTopologies).
const EBSCSIZoneLabel = "topology.ebs.csi.aws.com/zone"

// NormalizedLabels maps deprecated and aliased label keys to the well-known
// ones: Karpenter's own list, plus the EBS CSI driver's zone key, which the
// AWS provider adds (its operator's init) so that volume topology on it
// selects the zone.
var NormalizedLabels = map[string]string{
	corev1.LabelFailureDomainBetaZone:   ZoneLabel,
	"beta.kubernetes.io/arch":           ArchLabel,
	"beta.kubernetes.io/os":             OSLabel,
	corev1.LabelInstanceType:            InstanceTypeLabel,
	corev1.LabelFailureDomainBetaRegion: RegionLabel,
	EBSCSIZoneLabel:                     ZoneLabel,
}

// IsRestrictedLabel reports whether a NodePool may not set the key as a
// label or requirement, mirroring the CRD's CEL rules.
func IsRestrictedLabel(key string) bool {
	if key == NodePoolLabel || key == HostnameLabel {
		return true
	}
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	switch {
	case strings.HasSuffix(domain, KarpenterDomain):
		return key != CapacityTypeLabel
	case strings.HasSuffix(domain, KarpenterAWSDomain):
		for _, k := range AWSLabels {
			if k == key {
				return false
			}
		}
		return true
	}
	return false
}

// Annotations.
const (
	DoNotDisruptAnnotation                  = "karpenter.sh/do-not-disrupt"
	NodePoolHashAnnotation                  = "karpenter.sh/nodepool-hash"
	NodePoolHashVersionAnnotation           = "karpenter.sh/nodepool-hash-version"
	NodeClaimTerminationTimestampAnnotation = "karpenter.sh/nodeclaim-termination-timestamp"
	NodeClaimMinValuesRelaxedAnnotation     = "karpenter.sh/nodeclaim-min-values-relaxed"
	RequestedDRADriversAnnotation           = "karpenter.sh/requested-dra-drivers"
	ProviderCompatibilityAnnotation         = "compatibility.karpenter.sh/provider"
	PriceOverlayAppliedAnnotation           = "karpenter.sh/price-overlay-applied"
	CapacityOverlayAppliedAnnotation        = "karpenter.sh/capacity-overlay-applied"
	CapacityBufferFakePodAnnotation         = "karpenter.sh/capacity-buffer-fake-pod"
	CapacityBufferNameAnnotation            = "karpenter.sh/capacity-buffer-name"
	CapacityBufferNamespaceAnnotation       = "karpenter.sh/capacity-buffer-namespace"
	EC2NodeClassHashAnnotation              = "karpenter.k8s.aws/ec2nodeclass-hash"
	EC2NodeClassHashVersionAnnotation       = "karpenter.k8s.aws/ec2nodeclass-hash-version"
	TaggedAnnotation                        = "karpenter.k8s.aws/tagged"
	ClusterNameTaggedAnnotation             = "compatibility.karpenter.k8s.aws/cluster-name-tagged"
	InstanceProfileNameAnnotation           = "karpenter.k8s.aws/instance-profile-name"
)

// NodePoolHashVersion is written next to karpenter.sh/nodepool-hash. The
// hash function is ours, so its values differ from Karpenter's (whose
// version is "v3"): a version of our own makes NodeClaims that Karpenter
// launched read as "stamped by another hasher" and be re-stamped, not
// drifted, when a cluster migrates (and the same in reverse on rollback).
// The EC2NodeClass hash carries nodeclass.HashVersion for the same reason.
const NodePoolHashVersion = "karpless-v1"

// Taint keys.
const (
	DisruptedTaintKey    = "karpenter.sh/disrupted"
	UnregisteredTaintKey = "karpenter.sh/unregistered"
)

// DisruptedNoScheduleTaint marks a node that is being disrupted or terminated.
var DisruptedNoScheduleTaint = corev1.Taint{Key: DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}

// UnregisteredNoExecuteTaint is registered by the kubelet and removed when
// Karpless registers the node.
var UnregisteredNoExecuteTaint = corev1.Taint{Key: UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}

// EphemeralTaints are expected to go away on their own before a node is
// initialized, so the scheduler ignores them.
var EphemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	UnregisteredNoExecuteTaint,
}

// EphemeralTaintPrefix is a family of readiness taints that are also ephemeral.
const EphemeralTaintPrefix = "readiness.k8s.io/"

// Finalizers.
const (
	TerminationFinalizer    = "karpenter.sh/termination"
	AWSTerminationFinalizer = "karpenter.k8s.aws/termination"
)

// EC2 and IAM tag keys.
const (
	NodePoolTagKey       = NodePoolLabel
	NodeClaimTagKey      = "karpenter.sh/nodeclaim"
	EC2NodeClassTagKey   = EC2NodeClassLabel
	EKSClusterNameTagKey = "eks:eks-cluster-name"
	NameTagKey           = "Name"
	ClusterTagKeyPrefix  = "kubernetes.io/cluster/"
	OwnedTagValue        = "owned"
	// DiscoveryTagKey is the conventional selector tag of Karpenter's examples.
	DiscoveryTagKey = "karpenter.sh/discovery"
)

// ClusterTagKey is the kubernetes.io/cluster/<name> tag key.
func ClusterTagKey(clusterName string) string { return ClusterTagKeyPrefix + clusterName }

// Extended resources Karpenter knows about on AWS.
const (
	ResourceNVIDIAGPU     corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU        corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron     corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceAWSNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore"
	ResourceHabanaGaudi   corev1.ResourceName = "habana.ai/gaudi"
	ResourceEFA           corev1.ResourceName = "vpc.amazonaws.com/efa"
	ResourceAWSPodENI     corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	ResourcePrivateIPv4   corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"
	// ResourceNodes is the pseudo-resource NodePool limits count nodes with.
	ResourceNodes corev1.ResourceName = "nodes"
)

// ProviderIDPrefix is the scheme of AWS provider IDs: aws:///<zone>/<instance-id>.
const ProviderIDPrefix = "aws:///"

// ProviderID builds aws:///<zone>/<instance-id>.
func ProviderID(zone, instanceID string) string { return ProviderIDPrefix + zone + "/" + instanceID }

// InstanceIDFromProviderID returns the instance id of an AWS provider ID, or
// "" if it is not one.
func InstanceIDFromProviderID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '/')
	id := rest[i+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}
