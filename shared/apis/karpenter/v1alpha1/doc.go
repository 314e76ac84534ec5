// Package v1alpha1 holds the karpenter.sh/v1alpha1 API (NodeOverlay) exactly
// as Karpenter v1.14 serves it, so existing overlays apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1
