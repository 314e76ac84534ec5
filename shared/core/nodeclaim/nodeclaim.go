// Package nodeclaim decides a NodeClaim's lifecycle from plain objects, as
// Karpenter's nodeclaim/lifecycle controller does: which Node is its, what
// registration makes of that Node, when it is initialized, and when a claim
// that never registered is given up on. The lifecycle tick reads the
// cluster, asks these functions and writes what they say.
package nodeclaim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// LaunchTimeout gives up on a claim whose launch has been failing this long
// (Karpenter's LaunchTimeout): its pods get a new claim.
const LaunchTimeout = 5 * time.Minute

// LaunchTimeoutFor is the launch timeout under a registration timeout:
// Karpenter's 5 minutes of its 15, and as much more as a longer
// REGISTRATION_TTL gives (a third of it), so that an operator who gives
// slow nodes longer to register gives their launches longer too.
func LaunchTimeoutFor(registrationTTL time.Duration) time.Duration {
	return max(LaunchTimeout, registrationTTL/3)
}

// Reasons a claim is deleted for a timeout (karpenter_nodeclaims_disrupted_total's reason).
const (
	LaunchTimeoutReason       = "launch_timeout"
	RegistrationTimeoutReason = "registration_timeout"
)

// NodeFor is the Node of the claim among nodes: the one with its provider
// ID. duplicate reports several such Nodes, an invariant broken that
// registration must not guess at (Karpenter's MultipleNodesFound).
func NodeFor(nc *karpv1.NodeClaim, nodes []*corev1.Node) (node *corev1.Node, duplicate bool) {
	if nc.Status.ProviderID == "" {
		return nil, false
	}
	for _, n := range nodes {
		if n.Spec.ProviderID != nc.Status.ProviderID {
			continue
		}
		if node != nil {
			return nil, true
		}
		node = n
	}
	return node, false
}

// RegisteredNode is node as registration leaves it (Karpenter's syncNode):
// the termination finalizer, the claim as owner, the claim's labels and
// annotations, karpenter.sh/registered, the karpenter.sh/unregistered taint
// gone, and the claim's taints and startup taints added, unless the Node
// itself carries karpenter.sh/do-not-sync-taints=true (set by its kubelet)
// and the claim does not say otherwise. unregisteredTaintMissing reports a
// Node that came up without the unregistered taint (its kubelet was not
// configured with it; Karpenter warns of the race that opens).
func RegisteredNode(nc *karpv1.NodeClaim, node *corev1.Node) (next *corev1.Node, unregisteredTaintMissing bool) {
	next = node.DeepCopy()
	_, registered := node.Labels[wellknown.RegisteredLabel]
	unregisteredTaintMissing = !registered && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.MatchTaint(&wellknown.UnregisteredNoExecuteTaint)
	})
	if !slices.Contains(next.Finalizers, wellknown.TerminationFinalizer) {
		next.Finalizers = append(next.Finalizers, wellknown.TerminationFinalizer)
	}
	if !slices.ContainsFunc(next.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == nc.UID }) {
		next.OwnerReferences = append(next.OwnerReferences, metav1.OwnerReference{
			APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: new(true),
		})
	}
	// Karpenter syncs twice, before and after the labels: the taints stay
	// off only if both the Node's own label and the merged one say so.
	nodeSaysNo := node.Labels[wellknown.DoNotSyncTaintsLabel] == "true"
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	maps.Copy(next.Labels, nc.Labels)
	next.Labels[wellknown.RegisteredLabel] = "true"
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	maps.Copy(next.Annotations, nc.Annotations)
	taints := slices.DeleteFunc(slices.Clone(next.Spec.Taints), func(t corev1.Taint) bool {
		return t.MatchTaint(&wellknown.UnregisteredNoExecuteTaint)
	})
	if !nodeSaysNo || next.Labels[wellknown.DoNotSyncTaintsLabel] != "true" {
		for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
			if !slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
				taints = append(taints, t)
			}
		}
	}
	next.Spec.Taints = taints
	return next, unregisteredTaintMissing
}

// NotInitializedReason says why a registered node is not initialized yet,
// or "" when it is: Ready, its startup and ephemeral taints gone, and the
// extended resources it was launched for advertised.
func NotInitializedReason(nc *karpv1.NodeClaim, node *corev1.Node) string {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, t := range node.Spec.Taints {
		for _, st := range nc.Spec.StartupTaints {
			if t.MatchTaint(&st) {
				return fmt.Sprintf("startup taint %s is still present", t.ToString())
			}
		}
		if wellknown.IsEphemeralTaint(&t) {
			return fmt.Sprintf("taint %s is still present", t.ToString())
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourcePods || name == corev1.ResourceEphemeralStorage || q.IsZero() {
			continue
		}
		if have, ok := node.Status.Allocatable[name]; !ok || have.IsZero() {
			return fmt.Sprintf("resource %s is not registered yet", name)
		}
	}
	return ""
}

// Timeout says why a claim whose node never registered is given up on now
// (LaunchTimeoutReason, RegistrationTimeoutReason), or "": one whose launch
// failed (Launched False) LaunchTimeoutFor(registrationTTL) ago, as Karpenter's liveness
// controller, or one not registered registrationTTL after its registration
// began (the Registered condition's transition, else its creation). A
// launch that has neither succeeded nor failed yet (no Launched condition:
// Karpless sets none while it launches, where Karpenter sets Unknown and
// times that out after LaunchTimeout too) falls under registrationTTL.
func Timeout(nc *karpv1.NodeClaim, now time.Time, registrationTTL time.Duration) string {
	if nc.IsTrue(karpv1.ConditionTypeRegistered) {
		return ""
	}
	launched := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched)
	if launched != nil && launched.Status != metav1.ConditionTrue {
		if now.Sub(launched.LastTransitionTime.Time) >= LaunchTimeoutFor(registrationTTL) {
			return LaunchTimeoutReason
		}
		return ""
	}
	since := nc.CreationTimestamp.Time
	if r := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRegistered); r != nil {
		since = r.LastTransitionTime.Time
	}
	if now.Sub(since) >= registrationTTL {
		return RegistrationTimeoutReason
	}
	return ""
}
