// Package poolstatus computes a NodePool's status as Karpenter keeps it:
// its conditions (ValidationSucceeded, NodeClassReady, Ready) and the
// resources and node count of what it owns, from plain objects.
package poolstatus

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// nodeResource counts nodes in status.resources, as Karpenter's "nodes".
const nodeResource corev1.ResourceName = "nodes"

// Validate is Karpenter's runtime validation of a NodePool, what its CRD's
// rules cannot check: template labels are qualified names with valid values
// and not restricted, no requirement or label names karpenter.sh/nodepool,
// and taints have qualified keys, valid values and known effects.
func Validate(np *karpv1.NodePool) error {
	var errs []error
	for key, value := range np.Spec.Template.Labels {
		if key == wellknown.NodePoolLabel {
			errs = append(errs, fmt.Errorf("invalid key name %q in labels, restricted", key))
		}
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, fmt.Errorf("invalid key name %q in labels, %q", key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(value) {
			errs = append(errs, fmt.Errorf("invalid value: %s for label[%s], %s", value, key, msg))
		}
		if key != wellknown.NodePoolLabel && wellknown.IsRestrictedLabel(key) {
			errs = append(errs, fmt.Errorf("invalid key name %q in labels, label is restricted", key))
		}
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == wellknown.NodePoolLabel {
			errs = append(errs, fmt.Errorf("invalid key: %q in requirements, restricted", r.Key))
		}
	}
	taints := append(slices.Clone(np.Spec.Template.Spec.Taints), np.Spec.Template.Spec.StartupTaints...)
	for _, t := range taints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, fmt.Errorf("invalid taint key %q, %s", t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, fmt.Errorf("invalid taint value %q, %s", t.Value, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("invalid taint effect %q", t.Effect))
		}
	}
	return errors.Join(errs...)
}

// Conditions are the NodePool's conditions given its EC2NodeClass (nil
// when there is none): ValidationSucceeded, NodeClassReady, and Ready, true
// when both are (operatorpkg's root condition: False with reason
// UnhealthyDependents, listing them). Each keeps its lastTransitionTime
// while its status does not change.
func Conditions(np *karpv1.NodePool, class *awsv1.EC2NodeClass, now time.Time) []metav1.Condition {
	conds := slices.Clone(np.Status.Conditions)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: np.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	if err := Validate(np); err != nil {
		set(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "NodePoolValidationFailed", err.Error())
	} else {
		set(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, karpv1.ConditionTypeValidationSucceeded, "")
	}
	switch ready := classReady(class); {
	case class == nil:
		set(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, "NodeClassNotFound", "NodeClass not found on cluster")
	case class.DeletionTimestamp != nil:
		set(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, "NodeClassTerminating", "NodeClass is Terminating")
	case ready == nil || ready.Status == metav1.ConditionUnknown:
		set(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, "NodeClassReadinessUnknown", "Node Class Readiness Unknown")
	case ready.Status == metav1.ConditionFalse:
		set(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, ready.Reason, ready.Message)
	default:
		set(karpv1.ConditionTypeNodeClassReady, metav1.ConditionTrue, karpv1.ConditionTypeNodeClassReady, "")
	}
	var unhealthy []string
	for _, typ := range []string{karpv1.ConditionTypeValidationSucceeded, karpv1.ConditionTypeNodeClassReady} {
		if c := meta.FindStatusCondition(conds, typ); c.Status != metav1.ConditionTrue {
			unhealthy = append(unhealthy, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
	}
	if len(unhealthy) == 0 {
		set(karpv1.ConditionTypeReady, metav1.ConditionTrue, karpv1.ConditionTypeReady, "")
	} else {
		set(karpv1.ConditionTypeReady, metav1.ConditionFalse, "UnhealthyDependents", strings.Join(unhealthy, ", "))
	}
	return conds
}

func classReady(class *awsv1.EC2NodeClass) *metav1.Condition {
	if class == nil {
		return nil
	}
	return meta.FindStatusCondition(class.Status.Conditions, awsv1.ConditionTypeReady)
}

// Resources are status.resources and status.nodes: the capacity of the
// NodePool's NodeClaims that are not being deleted (a node's own capacity
// once it has registered, the claim's before), with a "nodes" count, and
// zero for cpu, memory, pods, ephemeral-storage and nodes when it owns none.
func Resources(pool string, claims []*karpv1.NodeClaim, nodes []*corev1.Node) (corev1.ResourceList, int64) {
	out := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, nodeResource} {
		out[name] = resource.MustParse("0")
	}
	byProvider := map[string]*corev1.Node{}
	for _, n := range nodes {
		if n.Spec.ProviderID != "" {
			byProvider[n.Spec.ProviderID] = n
		}
	}
	var count int64
	for _, nc := range claims {
		if nc.Labels[wellknown.NodePoolLabel] != pool || nc.DeletionTimestamp != nil {
			continue
		}
		capacity := nc.Status.Capacity
		if n := byProvider[nc.Status.ProviderID]; nc.Status.ProviderID != "" && n != nil && len(n.Status.Capacity) > 0 {
			capacity = n.Status.Capacity
		}
		for name, q := range capacity {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
		count++
	}
	out[nodeResource] = *resource.NewQuantity(count, resource.DecimalSI)
	return out, count
}

// Status is the whole status of np now.
func Status(np *karpv1.NodePool, class *awsv1.EC2NodeClass, claims []*karpv1.NodeClaim, nodes []*corev1.Node, now time.Time) karpv1.NodePoolStatus {
	out := *np.Status.DeepCopy()
	out.Conditions = Conditions(np, class, now)
	var count int64
	out.Resources, count = Resources(np.Name, claims, nodes)
	out.Nodes = &count
	if class != nil {
		out.NodeClassObservedGeneration = class.Generation
	}
	return out
}
