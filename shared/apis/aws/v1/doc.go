// Package v1 holds the karpenter.k8s.aws/v1 API (EC2NodeClass) exactly as
// Karpenter's AWS provider serves it, so existing manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1
