// Package buffer turns CapacityBuffers into the virtual pods the simulations
// keep room for, and into the status each buffer should show.
package buffer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
)

// Buffer is one CapacityBuffer as this snapshot resolves it: how many
// chunks it wants, the virtual pods that stand for them, and the status
// fields that follow from its reference (all but Provisioning, which a
// simulation decides).
type Buffer struct {
	Source *cluster.CapacityBuffer
	// Ready is the ReadyForProvisioning condition's status: the pod
	// template was resolved and the count computed.
	Ready bool
	// Replicas is the number of chunks (status.replicas).
	Replicas int32
	// Pods are the virtual pods, Replicas of them when Ready.
	Pods []*corev1.Pod
	// status is the buffer's status with ReadyForProvisioning, replicas,
	// podTemplateRef, podTemplateGeneration and provisioningStrategy set.
	status cbv1.CapacityBufferStatus
}

// Key is "namespace/name" of the buffer.
func (b *Buffer) Key() string { return b.Source.Buffer.Namespace + "/" + b.Source.Buffer.Name }

// Resolve resolves every buffer of a snapshot, in the snapshot's order.
func Resolve(snap *cluster.Snapshot, now metav1.Time) []*Buffer {
	out := make([]*Buffer, 0, len(snap.CapacityBuffers))
	for _, cb := range snap.CapacityBuffers {
		out = append(out, resolve(cb, now))
	}
	return out
}

// Pods are the virtual pods of all buffers, to be simulated with the
// pending pods (provisioning) or as pods that must keep room
// (consolidation).
func Pods(bufs []*Buffer) []*corev1.Pod {
	var out []*corev1.Pod
	for _, b := range bufs {
		out = append(out, b.Pods...)
	}
	return out
}

// VirtualPods are the virtual pods of a snapshot's buffers (Resolve, then
// Pods), for callers that need no status.
func VirtualPods(snap *cluster.Snapshot) []*corev1.Pod {
	if len(snap.CapacityBuffers) == 0 {
		return nil
	}
	return Pods(Resolve(snap, metav1.Time{}))
}

// resolve is Karpenter's capacitybuffer controller's reconcile: the
// ReadyForProvisioning condition, the count, the observed reference.
func resolve(cb *cluster.CapacityBuffer, now metav1.Time) *Buffer {
	obj := cb.Buffer
	b := &Buffer{Source: cb}
	b.status = *obj.Status.DeepCopy()
	b.status.ProvisioningStrategy = obj.Spec.ProvisioningStrategy
	ready := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&b.status.Conditions, metav1.Condition{
			Type: cbv1.ConditionReadyForProvisioning, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: obj.Generation, LastTransitionTime: now,
		})
	}
	spec := obj.Spec
	switch {
	case spec.PodTemplateRef == nil && spec.ScalableRef == nil:
		ready(metav1.ConditionFalse, cbv1.ReasonResolutionFailed, "Neither podTemplateRef nor scalableRef is set")
		return b
	case cb.Template == nil:
		reason := cbv1.ReasonResolutionFailed
		if cb.NotFound && spec.PodTemplateRef != nil {
			reason = cbv1.ReasonPodTemplateNotFound
		} else if cb.NotFound {
			reason = cbv1.ReasonScalableRefNotFound
		}
		// Karpenter keeps the last replicas and reference in the status
		// and only turns the condition False; so does this.
		ready(metav1.ConditionFalse, reason, cb.Error)
		return b
	}
	var scalable *int32
	if spec.PodTemplateRef != nil {
		b.status.PodTemplateRef = &cbv1.LocalObjectRef{Name: spec.PodTemplateRef.Name}
		b.status.PodTemplateGeneration = &cb.TemplateGeneration
	} else {
		b.status.PodTemplateRef, b.status.PodTemplateGeneration = nil, nil
		scalable = &cb.ScalableReplicas
	}
	b.Replicas = Replicas(spec, &cb.Template.Spec, scalable)
	b.status.Replicas = &b.Replicas
	ready(metav1.ConditionTrue, cbv1.ReasonResolved, "Pod template resolved successfully")
	b.Ready = true
	b.Pods = virtualPods(obj, cb.Template, b.Replicas)
	return b
}

// Replicas is the number of chunks, as Karpenter v1.14 counts them: the
// larger of replicas and percentage (Cluster Autoscaler's rule; the API's
// description says the smaller, its code takes the larger), capped by
// limits; limits alone when neither is set. scalable is the workload's
// replicas, nil for a podTemplateRef (percentage then does not apply).
func Replicas(spec cbv1.CapacityBufferSpec, pod *corev1.PodSpec, scalable *int32) int32 {
	var candidates []int32
	if scalable != nil && spec.Percentage != nil && *scalable > 0 {
		candidates = append(candidates, percentageReplicas(*scalable, *spec.Percentage))
	}
	if spec.Replicas != nil {
		candidates = append(candidates, *spec.Replicas)
	}
	desired := int32(0)
	if len(candidates) > 0 {
		desired = slices.Max(candidates)
	}
	if spec.Limits != nil && pod != nil {
		if byLimits, ok := limitReplicas(corev1.ResourceList(spec.Limits), pod); ok {
			if len(candidates) > 0 {
				return min(desired, byLimits)
			}
			return byLimits
		}
	}
	return desired
}

// percentageReplicas is ceil(scalable × percentage / 100), at least 1 when
// both are positive.
func percentageReplicas(scalable, percentage int32) int32 {
	n := int32(math.Ceil(float64(scalable) * float64(percentage) / 100))
	if n < 1 && percentage > 0 && scalable > 0 {
		n = 1
	}
	return n
}

// limitReplicas is how many chunks fit in limits: per resource the pod
// requests, floor(limit / request), the least of them. false when no
// limited resource is requested (limits then bound nothing).
func limitReplicas(limits corev1.ResourceList, spec *corev1.PodSpec) (int32, bool) {
	requests := podRequests(spec)
	least, matched := int32(math.MaxInt32), false
	for name, limit := range limits {
		req, ok := requests[name]
		if !ok || req.IsZero() {
			continue
		}
		matched = true
		n := int64(math.Floor(float64(limit.MilliValue()) / float64(req.MilliValue())))
		least = min(least, int32(min(n, math.MaxInt32)))
	}
	return least, matched
}

// podRequests is what one chunk asks for, the scheduler's view of a pod's
// requests: the containers' sum, sidecars (restartable init containers)
// added to it, or the largest init container with the sidecars started
// before it when that is more, plus overhead (Karpenter's
// resources.RequestsForSpec).
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	return resourcehelper.PodRequests(&corev1.Pod{Spec: *spec}, resourcehelper.PodResourcesOptions{})
}

// virtualPods are n placeholder pods of the template, named and with UIDs
// derived from the buffer (so every tick, and the disruption function,
// make the same ones), created when the buffer was (so the simulation's
// order by age is stable), marked unschedulable so every provisionable
// check accepts them. They never exist in the API server.
func virtualPods(cb *cbv1.CapacityBuffer, tmpl *corev1.PodTemplateSpec, n int32) []*corev1.Pod {
	spec := sanitize(tmpl.Spec)
	spec.Priority = new(cbv1.VirtualPodPriority)
	out := make([]*corev1.Pod, 0, n)
	for i := 1; i <= int(n); i++ {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("capacity-buffer-%s-%d", cb.Name, i),
				Namespace: cb.Namespace,
				UID:       types.UID(fmt.Sprintf("%s-%d", cb.UID, i)),
				Labels:    tmpl.Labels,
				Annotations: map[string]string{
					cbv1.FakePodAnnotationKey:      cbv1.FakePodAnnotationValue,
					cbv1.BufferNameAnnotation:      cb.Name,
					cbv1.BufferNamespaceAnnotation: cb.Namespace,
				},
				CreationTimestamp: cb.CreationTimestamp,
			},
			Spec: *spec.DeepCopy(),
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}}},
		})
	}
	return out
}

// sanitize drops what a placeholder cannot have: a node name, and volumes
// backed by claims (a virtual pod's claim never exists, and an ephemeral
// volume's claim is named after the pod), with their mounts.
func sanitize(spec corev1.PodSpec) corev1.PodSpec {
	spec = *spec.DeepCopy()
	spec.NodeName = ""
	dropped := map[string]bool{}
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			dropped[v.Name] = true
			return true
		}
		return false
	})
	if len(dropped) > 0 {
		for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
			for i := range cs {
				cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return dropped[m.Name] })
			}
		}
	}
	return spec
}

// IsVirtual reports a buffer's virtual pod.
func IsVirtual(p *corev1.Pod) bool {
	return p != nil && p.Annotations[cbv1.FakePodAnnotationKey] == cbv1.FakePodAnnotationValue
}

// KeyOf is "namespace/name" of the buffer a virtual pod stands for, "" for
// a real pod, or for a virtual one that does not name both (no buffer can
// be told of it).
func KeyOf(p *corev1.Pod) string {
	if !IsVirtual(p) {
		return ""
	}
	ns, name := p.Annotations[cbv1.BufferNamespaceAnnotation], p.Annotations[cbv1.BufferNameAnnotation]
	if ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}

// WithoutVirtual is pods less the virtual ones (for Events and reports
// about real pods).
func WithoutVirtual(pods []*corev1.Pod) []*corev1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), IsVirtual)
}

// Placement is where a simulation put one buffer's virtual pods.
type Placement struct {
	// Existing on nodes and NodeClaims that exist; NewClaims on NodeClaims
	// the simulation would create; Failed nowhere.
	Existing, NewClaims, Failed int
	// Why is the first reason a pod fitted nowhere.
	Why string
}

// Status is the status the buffer should have after a simulation placed
// its pods as p (nil: no simulation ran, Provisioning is left as it is):
// Karpenter's provisioner's Provisioning condition on top of Resolve's.
func (b *Buffer) Status(p *Placement, now metav1.Time) cbv1.CapacityBufferStatus {
	st := *b.status.DeepCopy()
	set := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: cbv1.ConditionProvisioning, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: b.Source.Buffer.Generation, LastTransitionTime: now,
		})
	}
	switch {
	case !b.Ready:
		set(metav1.ConditionFalse, cbv1.ReasonNotReadyForProvisioning, "Buffer is not ReadyForProvisioning")
	case b.Replicas == 0:
		set(metav1.ConditionFalse, cbv1.ReasonBufferEmpty, "Buffer has zero desired replicas")
	case p == nil:
	case p.NewClaims > 0 || p.Failed > 0:
		msg := fmt.Sprintf("%d/%d virtual pods required new capacity, %d failed", p.NewClaims, b.Replicas, p.Failed)
		if p.Why != "" {
			msg += ": " + p.Why
		}
		set(metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity, msg)
	case p.Existing == int(b.Replicas):
		set(metav1.ConditionTrue, cbv1.ReasonFitsExistingCapacity, fmt.Sprintf("All %d virtual pods fit on existing capacity", b.Replicas))
	}
	return st
}

// String says where the virtual pods went, for logs and the CLI.
func (p *Placement) String() string {
	var parts []string
	if p.Existing > 0 {
		parts = append(parts, fmt.Sprintf("%d on existing capacity", p.Existing))
	}
	if p.NewClaims > 0 {
		parts = append(parts, fmt.Sprintf("%d on new NodeClaims", p.NewClaims))
	}
	if p.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d fit nowhere", p.Failed))
	}
	if len(parts) == 0 {
		return "no virtual pods"
	}
	return strings.Join(parts, ", ")
}
