package overlay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// restrictedDomains are the label domains an overlay may only use through
// well-known keys: Karpenter v1.14.1's RestrictedLabelDomains, with the AWS
// provider's (kubernetes.io and k8s.io are free since Karpenter v1).
var restrictedDomains = []string{wellknown.KarpenterDomain, wellknown.KarpenterAWSDomain}

// wellKnownResources may not be set by capacity: an overlay only adds
// extended resources.
var wellKnownResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods}

// Validate is Karpenter's RuntimeValidate: what the CRD's schema cannot
// check (restricted keys, operators and their values, restricted
// resources), plus the price strings, which Apply must be able to parse.
func Validate(o *v1alpha1.NodeOverlay) error {
	var errs []error
	for _, r := range o.Spec.Requirements {
		if err := validateRequirement(r); err != nil {
			errs = append(errs, fmt.Errorf("invalid value: %w in requirements, restricted", err))
		}
	}
	for name := range o.Spec.Capacity {
		for _, wk := range wellKnownResources {
			if name == wk {
				errs = append(errs, fmt.Errorf("invalid capacity: %s in resource, restricted", name))
			}
		}
	}
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		errs = append(errs, errors.New("cannot set both 'price' and 'priceAdjustment'"))
	}
	if c := priceChange(o); c != "" {
		if _, err := parseChange(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func validateRequirement(r v1alpha1.NodeSelectorRequirement) error {
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
	if restricted(key) {
		errs = append(errs, fmt.Errorf("using label %s is not allowed as it might interfere with the internal provisioning logic; specify a well known label or a custom label that does not use a restricted domain", key))
	}
	for _, e := range validation.IsQualifiedName(key) {
		errs = append(errs, fmt.Errorf("key %s is not a qualified name, %s", key, e))
	}
	for _, v := range r.Values {
		for _, e := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("invalid value %s for key %s, %s", v, key, e))
		}
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a value defined", key, r.Operator))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(r.Values) != 1 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a single positive integer value", key, r.Operator))
		} else if n, err := strconv.Atoi(r.Values[0]); err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a single positive integer value", key, r.Operator))
		}
	}
	return errors.Join(errs...)
}

// restricted is Karpenter's IsRestrictedLabel for an overlay: well-known
// keys are allowed, hostname and other keys under a restricted domain are
// not.
func restricted(key string) bool {
	for _, k := range wellknown.WellKnownLabels {
		if k == key {
			return false
		}
	}
	if key == wellknown.HostnameLabel {
		return true
	}
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, d := range restrictedDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}
