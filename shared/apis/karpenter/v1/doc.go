// Package v1 holds the karpenter.sh/v1 API (NodePool, NodeClaim) exactly as
// Karpenter v1 serves it, so existing manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1
