// Package v1beta1 holds the autoscaling.x-k8s.io/v1beta1 API (CapacityBuffer)
// as Karpenter v1.14 ships it (copied from kubernetes/autoscaler's buffers API).
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
