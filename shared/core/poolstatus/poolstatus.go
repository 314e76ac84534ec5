// Package poolstatus computes a NodePool's status as Karpenter keeps it:
// its conditions (ValidationSucceeded, NodeClassReady, Ready,
// NodeRegistrationHealthy) and the resources and node count of what it
// owns, from plain objects.
package poolstatus

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
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
		if err := validateRequirement(r); err != nil {
			errs = append(errs, fmt.Errorf("invalid value: %w in requirements, restricted", err))
		}
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

// wellKnownValues are the values a requirement's key may take at all
// (Karpenter's WellKnownValuesForRequirements, with the AWS provider's
// tenancies).
var wellKnownValues = map[string][]string{
	wellknown.CapacityTypeLabel:    {wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot, wellknown.CapacityTypeReserved},
	wellknown.InstanceTenancyLabel: {"default", "dedicated"},
}

// validateRequirement is Karpenter's ValidateRequirement: a supported
// operator, a key a NodePool may name, an In with a value and at least
// minValues of them, and of them at least one (and minValues) that the key
// can take when its values are known (an unknown value beside a known one
// is let through, as Karpenter fails open), a single non-negative integer
// for the numeric operators.
func validateRequirement(r karpv1.NodeSelectorRequirementWithMinValues) error {
	var errs []error
	key := r.Key
	if n, ok := wellknown.NormalizedLabels[key]; ok {
		key = n
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist,
		corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
	default:
		errs = append(errs, fmt.Errorf("key %s has an unsupported operator %s", key, r.Operator))
	}
	if key != wellknown.NodePoolLabel && wellknown.IsRestrictedLabel(key) {
		errs = append(errs, fmt.Errorf("label %s is restricted", key))
	}
	if known, ok := wellKnownValues[key]; ok && r.Operator == corev1.NodeSelectorOpIn {
		valid := 0
		for _, v := range r.Values {
			if slices.Contains(known, v) {
				valid++
			}
		}
		switch {
		case valid == 0:
			errs = append(errs, fmt.Errorf("no valid values found in %v for %s, expected one of: %v", r.Values, key, known))
		case r.MinValues != nil && valid < *r.MinValues:
			errs = append(errs, fmt.Errorf("not enough valid values found in %v for %s, expected at least %d valid values from: %v", r.Values, key, *r.MinValues, known))
		}
	}
	for _, msg := range validation.IsQualifiedName(key) {
		errs = append(errs, fmt.Errorf("key %s is not a qualified name, %s", key, msg))
	}
	for _, v := range r.Values {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("invalid value %s for key %s, %s", v, key, msg))
		}
	}
	if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 0 {
		errs = append(errs, fmt.Errorf("key %s with operator %s must have a value defined", key, r.Operator))
	}
	if r.Operator == corev1.NodeSelectorOpIn && r.MinValues != nil && len(r.Values) < *r.MinValues {
		errs = append(errs, fmt.Errorf("key %s with operator %s must have at least minimum number of values defined in 'values' field", key, r.Operator))
	}
	switch r.Operator {
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(r.Values) != 1 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a single positive integer value", key, r.Operator))
		} else if n, err := strconv.Atoi(r.Values[0]); err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a single positive integer value", key, r.Operator))
		}
	}
	return errors.Join(errs...)
}

// Managed reports whether Karpless manages the NodePool: its nodeClassRef
// names an EC2NodeClass (Karpenter's IsManaged, for the AWS provider's one
// kind of NodeClass). A reference without a group or kind is taken for an
// EC2NodeClass, the only kind there is here. Karpenter neither provisions
// for nor writes the status of a NodePool another provider manages.
func Managed(np *karpv1.NodePool) bool {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return false
	}
	return (ref.Group == "" || ref.Group == awsv1.SchemeGroupVersion.Group) && (ref.Kind == "" || ref.Kind == ec2NodeClassKind)
}

const ec2NodeClassKind = "EC2NodeClass"

// Usable says why provisioning may not use a NodePool, or nil: another
// provider's, invalid (Validate), or Ready=False as stored (Karpenter's
// provisioner takes only NodePools whose Ready condition is True). The
// EC2NodeClass's readiness is the caller's to check, from the class as it
// is now. A stored Ready=False is believed unless the class alone made it
// False (NodeClassReady=False): the class's own status is fresher. A
// stored ValidationSucceeded=False is believed for the generation it
// observed, as Karpenter's validation may refuse more than Validate does.
func Usable(np *karpv1.NodePool) error {
	if !Managed(np) {
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			return errors.New("it has no nodeClassRef")
		}
		return fmt.Errorf("its nodeClassRef names a %s.%s, which Karpless does not manage", ref.Kind, ref.Group)
	}
	if err := Validate(np); err != nil {
		return fmt.Errorf("its validation failed: %w", err)
	}
	ready := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		return nil
	}
	valid := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeValidationSucceeded)
	if valid != nil && valid.Status == metav1.ConditionFalse {
		if valid.ObservedGeneration != np.Generation {
			// Validated an earlier spec; Validate passes this one.
			return nil
		}
		return fmt.Errorf("its validation failed: %s", valid.Message)
	}
	if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeClassReady); c != nil && c.Status == metav1.ConditionFalse {
		return nil
	}
	return fmt.Errorf("its Ready condition is False (%s: %s)", ready.Reason, ready.Message)
}

// Conditions are the NodePool's conditions given its EC2NodeClass (nil
// when there is none): ValidationSucceeded, NodeClassReady, and Ready, true
// when both are (operatorpkg's root condition: False with reason
// UnhealthyDependents, listing them). Each keeps its lastTransitionTime
// while its status does not change. NodeRegistrationHealthy, which the
// lifecycle tick sets (RecordRegistration) and Ready does not depend on,
// is only reset here when the NodePool or its class changed.
//
// A NodePool Karpless does not manage (Managed) keeps its conditions.
func Conditions(np *karpv1.NodePool, class *awsv1.EC2NodeClass, now time.Time) []metav1.Condition {
	conds := slices.Clone(np.Status.Conditions)
	if !Managed(np) {
		return conds
	}
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
	registrationHealthReset(np, class, &conds, now)
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
// NodePool's nodes that are not being deleted, with a "nodes" count, and
// zero for cpu, memory, pods, ephemeral-storage and nodes when it owns none,
// as Karpenter's cluster state counts them: a NodeClaim with its Node (by
// provider ID) is one node, of the NodePool its Node is labelled with (else
// the claim's) and of the Node's capacity once it reports one (else the
// claim's); a NodeClaim without a Node and a NodePool's launched Node
// without a NodeClaim (its claim gone, or its provider ID changed) count
// alone.
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
	add := func(capacity corev1.ResourceList) {
		for name, q := range capacity {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
		count++
	}
	linked := map[*corev1.Node]bool{}
	for _, nc := range claims {
		var n *corev1.Node
		if nc.Status.ProviderID != "" {
			n = byProvider[nc.Status.ProviderID]
		}
		owner, capacity := nc.Labels[wellknown.NodePoolLabel], nc.Status.Capacity
		if n != nil {
			linked[n] = true
			if v, ok := n.Labels[wellknown.NodePoolLabel]; ok {
				owner = v
			}
			if len(n.Status.Capacity) > 0 {
				capacity = n.Status.Capacity
			}
		}
		if owner != pool || nc.DeletionTimestamp != nil || (n != nil && n.DeletionTimestamp != nil) {
			continue
		}
		add(capacity)
	}
	for _, n := range nodes {
		if !linked[n] && n.Spec.ProviderID != "" && n.Labels[wellknown.NodePoolLabel] == pool && n.DeletionTimestamp == nil {
			add(n.Status.Capacity)
		}
	}
	out[nodeResource] = *resource.NewQuantity(count, resource.DecimalSI)
	return out, count
}

// Status is the whole status of np now. A NodePool naming another
// provider's NodeClass keeps the status its own Karpenter writes (Karpenter's
// counter and status controllers ignore a NodePool they do not manage).
func Status(np *karpv1.NodePool, class *awsv1.EC2NodeClass, claims []*karpv1.NodeClaim, nodes []*corev1.Node, now time.Time) karpv1.NodePoolStatus {
	out := *np.Status.DeepCopy()
	if np.Spec.Template.Spec.NodeClassRef != nil && !Managed(np) {
		return out
	}
	out.Conditions = Conditions(np, class, now)
	var count int64
	out.Resources, count = Resources(np.Name, claims, nodes)
	out.Nodes = &count
	if class != nil {
		out.NodeClassObservedGeneration = class.Generation
	}
	return out
}
