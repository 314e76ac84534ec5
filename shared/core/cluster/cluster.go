// Package cluster is the cluster as one tick sees it: the objects a
// decision reads, as plain values trimmed to the fields used.
package cluster

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Snapshot is the cluster as one tick sees it. Pods and Nodes are trimmed
// copies: only scheduling, disruption and termination fields are kept.
type Snapshot struct {
	// Pods are all pods that are not finished (pending and bound).
	Pods        []*corev1.Pod
	Nodes       []*corev1.Node
	NodeClaims  []*karpv1.NodeClaim
	NodePools   []*karpv1.NodePool
	NodeClasses []*awsv1.EC2NodeClass
	// NodeOverlays change the instance types' prices and capacities
	// before a simulation (core/overlay).
	NodeOverlays   []*v1alpha1.NodeOverlay
	DaemonSets     []*appsv1.DaemonSet
	PDBs           []*policyv1.PodDisruptionBudget
	PVCs           []*corev1.PersistentVolumeClaim
	PVs            []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	CSINodes       []*storagev1.CSINode
	// VolumeAttachments say which volumes are still attached to which node.
	VolumeAttachments []*storagev1.VolumeAttachment
	// CapacityBuffers are the buffers with what each refers to, read when
	// the snapshot was taken (core/buffer makes their virtual pods).
	CapacityBuffers []*CapacityBuffer
	Stats           Stats
}

// CapacityBuffer is a buffer and what its podTemplateRef or scalableRef
// resolved to: a pod template, or why there is none.
type CapacityBuffer struct {
	Buffer *autoscalingv1beta1.CapacityBuffer `json:"buffer"`
	// Template is the referent's pod template, trimmed as pods are; nil
	// when it could not be read.
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`
	// TemplateGeneration is the PodTemplate's generation (podTemplateRef).
	TemplateGeneration int64 `json:"templateGeneration,omitempty"`
	// ScalableReplicas is the workload's spec.replicas, 1 when unset as
	// the API server defaults it (scalableRef).
	ScalableReplicas int32 `json:"scalableReplicas,omitempty"`
	// NotFound says the referent does not exist.
	NotFound bool `json:"notFound,omitempty"`
	// Error says why else there is no template (an unsupported kind, a
	// read that failed).
	Error string `json:"error,omitempty"`
}

// Stats is what taking the snapshot cost.
type Stats struct {
	BytesRead int64
	Duration  time.Duration
	Requests  int
}

// keptAnnotations are the only annotations decisions read.
var keptAnnotations = []string{
	wellknown.DoNotDisruptAnnotation,
	corev1.MirrorPodAnnotationKey,
	wellknown.NodeClaimTerminationTimestampAnnotation,
	// Disruption cost of evicting the pod (consolidation orders candidates by it).
	"controller.kubernetes.io/pod-deletion-cost",
}

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
	}
	for _, k := range keptAnnotations {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out[i].Ports = append(out[i].Ports, p)
			}
		}
	}
	return out
}

// TrimPod keeps what scheduling, disruption and eviction read of a pod.
func TrimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: trimMeta(p.ObjectMeta)}
	out.Spec = corev1.PodSpec{
		NodeName: p.Spec.NodeName, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity,
		Tolerations: p.Spec.Tolerations, TopologySpreadConstraints: p.Spec.TopologySpreadConstraints,
		Containers: trimContainers(p.Spec.Containers), InitContainers: trimContainers(p.Spec.InitContainers),
		Overhead: p.Spec.Overhead, PriorityClassName: p.Spec.PriorityClassName, Priority: p.Spec.Priority,
		TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds, SchedulerName: p.Spec.SchedulerName,
		HostNetwork: p.Spec.HostNetwork, PreemptionPolicy: p.Spec.PreemptionPolicy, Resources: p.Spec.Resources,
		// A pod with resource claims is not provisioned for (scheduling/dra.go).
		ResourceClaims: p.Spec.ResourceClaims,
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral,
			}})
		}
	}
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, NominatedNodeName: p.Status.NominatedNodeName, StartTime: p.Status.StartTime}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled || c.Type == corev1.PodReady {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out
}

// TrimNode keeps what scheduling, registration and disruption read of a node.
func TrimNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: trimMeta(n.ObjectMeta),
		Spec:       corev1.NodeSpec{ProviderID: n.Spec.ProviderID, Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status:     corev1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Conditions: n.Status.Conditions},
	}
}

// TrimDaemonSet keeps what the simulator reads of a DaemonSet: its pod template.
func TrimDaemonSet(d *appsv1.DaemonSet) *appsv1.DaemonSet {
	tmpl := TrimPod(&corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec})
	return &appsv1.DaemonSet{
		ObjectMeta: trimMeta(d.ObjectMeta),
		Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: corev1.PodTemplateSpec{
			ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec,
		}},
	}
}
