package crds_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/overlay"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/kubetest"
)

func celOverlay(rs ...v1alpha1.NodeSelectorRequirement) *v1alpha1.NodeOverlay {
	if rs == nil {
		rs = []v1alpha1.NodeSelectorRequirement{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpExists}}
	}
	return &v1alpha1.NodeOverlay{Spec: v1alpha1.NodeOverlaySpec{Requirements: rs}}
}

func orq(key string, op corev1.NodeSelectorOperator, values ...string) v1alpha1.NodeSelectorRequirement {
	return v1alpha1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func overlayVerdict(t *testing.T, o *v1alpha1.NodeOverlay) error {
	t.Helper()
	return verdict(t, kubetest.Need(t, env).Clients.NodeOverlays, o.DeepCopy())
}

func TestConformanceNodeOverlayAdmission(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/apis/v1alpha1", File: "pkg/apis/v1alpha1/nodeoverlay_validation_test.go", Spec: "CEL/Validation > " + spec}
	}
	// Admission, then (where Karpenter's case calls it) RuntimeValidate.
	both := func(t *testing.T, o *v1alpha1.NodeOverlay, ok bool) {
		t.Helper()
		if ok {
			admitted(t, overlayVerdict(t, o))
			valid(t, overlay.Validate(o))
		} else {
			refused(t, overlayVerdict(t, o))
			invalid(t, overlay.Validate(o))
		}
	}
	expect := func(t *testing.T, o *v1alpha1.NodeOverlay, ok bool) {
		t.Helper()
		if ok {
			admitted(t, overlayVerdict(t, o))
		} else {
			refused(t, overlayVerdict(t, o))
		}
	}

	r := "Requirements > "
	conformance.Run(t, c(r+"should fail for no values for In operator"), func(t *testing.T) {
		both(t, celOverlay(orq("Test", corev1.NodeSelectorOpIn)), false)
	})
	conformance.Run(t, c(r+"should fail for no values for NotIn operator"), func(t *testing.T) {
		both(t, celOverlay(orq("Test", corev1.NodeSelectorOpNotIn)), false)
	})
	conformance.Run(t, c(r+"should succeed for valid requirement keys"), func(t *testing.T) {
		both(t, celOverlay(orq("Test", corev1.NodeSelectorOpExists)), true)
	})
	// Karpenter's suite has a second case of the same title.
	conformance.Run(t, c(r+"should succeed for valid requirement keys"), func(t *testing.T) {
		both(t, celOverlay(
			orq("Test", corev1.NodeSelectorOpExists), orq("test.com/Test", corev1.NodeSelectorOpExists),
			orq("test.com.com/test", corev1.NodeSelectorOpExists), orq("key-only", corev1.NodeSelectorOpExists),
		), true)
	})
	conformance.Run(t, c(r+"should fail for invalid requirement keys"), func(t *testing.T) {
		for _, key := range []string{"test.com.com}", "Test.com/test", "test/test/test", "test/", "/test"} {
			both(t, celOverlay(orq(key, corev1.NodeSelectorOpExists)), false)
		}
	})
	conformance.Run(t, c(r+"should allow for the karpenter.sh/nodepool label"), func(t *testing.T) {
		both(t, celOverlay(orq(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "Pinkwhip")), true)
	})
	conformance.Run(t, c(r+"should fail at runtime for requirement keys that are too long"), func(t *testing.T) {
		for _, key := range []string{"test.com.test." + long250 + "/test", "test.com.test/test-" + long250} {
			o := celOverlay(orq(key, corev1.NodeSelectorOpExists))
			admitted(t, overlayVerdict(t, o))
			invalid(t, overlay.Validate(o))
		}
	})
	conformance.Run(t, c(r+"should allow supported ops"), func(t *testing.T) {
		both(t, celOverlay(
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test"),
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpGt, "1"),
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpLt, "1"),
			orq(corev1.LabelTopologyZone, karpv1.NodeSelectorOpGte, "1"),
			orq(corev1.LabelTopologyZone, karpv1.NodeSelectorOpLte, "1"),
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "1"),
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpExists),
		), true)
	})
	conformance.Run(t, c(r+"should fail for unsupported ops"), func(t *testing.T) {
		both(t, celOverlay(orq(corev1.LabelTopologyZone, "unknown", "test")), false)
	})
	conformance.Run(t, c(r+"should fail for restricted domains"), func(t *testing.T) {
		for _, label := range coreRestrictedLabelDomains {
			both(t, celOverlay(orq(label+"/test", corev1.NodeSelectorOpIn, "test")), false)
		}
	})
	conformance.Run(t, c(r+"should allow kubernetes domains exceptions"), func(t *testing.T) {
		for _, label := range []string{"kubernetes.io", "k8s.io"} {
			both(t, celOverlay(orq(label+"/test", corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow kubernetes subdomains exceptions"), func(t *testing.T) {
		for _, label := range []string{"kubernetes.io", "k8s.io"} {
			both(t, celOverlay(orq("subdomain."+label+"/test", corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow well known label exceptions"), func(t *testing.T) {
		// Capacity type is runtime validated.
		for _, label := range coreWellKnownLabels {
			if label != wellknown.NodePoolLabel && label != wellknown.CapacityTypeLabel {
				both(t, celOverlay(orq(label, corev1.NodeSelectorOpIn, "test")), true)
			}
		}
	})
	conformance.Run(t, c(r+"should allow non-empty set after removing overlapped value"), func(t *testing.T) {
		both(t, celOverlay(
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test", "foo"),
			orq(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "test", "bar"),
		), true)
	})
	conformance.Run(t, c(r+"should allow empty requirements"), func(t *testing.T) {
		both(t, celOverlay(orq("test", corev1.NodeSelectorOpExists)), true)
	})
	numeric := func(gt, lt corev1.NodeSelectorOperator) []v1alpha1.NodeSelectorRequirement {
		var out []v1alpha1.NodeSelectorRequirement
		for _, r := range invalidNumericRequirements(gt, lt) {
			out = append(out, v1alpha1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
		}
		return out
	}
	conformance.Run(t, c(r+"should fail with invalid GT or LT values"), func(t *testing.T) {
		for _, req := range numeric(corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt) {
			both(t, celOverlay(req), false)
		}
	})
	conformance.Run(t, c(r+"should fail with invalid GTE or LTE values"), func(t *testing.T) {
		for _, req := range numeric(karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte) {
			both(t, celOverlay(req), false)
		}
	})

	conformance.Run(t, c("shout not be able to set both price and priceAdjustment"), func(t *testing.T) {
		o := celOverlay()
		o.Spec.Price, o.Spec.PriceAdjustment = new("0.432"), new("+10%")
		expect(t, o, false)
	})
	withPrice := func(price string) *v1alpha1.NodeOverlay {
		o := celOverlay()
		o.Spec.Price = &price
		return o
	}
	withAdjustment := func(adj string) *v1alpha1.NodeOverlay {
		o := celOverlay()
		o.Spec.PriceAdjustment = &adj
		return o
	}
	invalidInput := []struct{ name, value string }{
		{"No explicit plus sign allowed", "+42"}, {"Must have leading digit", ".5"}, {"Must have trailing digits after decimal", "42."},
		{"No percentage sign allowed", "42%"}, {"No commas allowed", "3,14"}, {"No scientific notation", "1e10"},
		{"No hex notation", "0x42"}, {"No text", "forty-two"}, {"No letters", "42a"}, {"No spaces", "42 "}, {"No spaces", " 42"},
		{"Multiple decimal points", "42.0.0"}, {"Just a sign", "-"}, {"Just a decimal point", "."},
	}
	pa := "priceAdjustment > "
	// Karpenter's priceAdjustment table sets price, as written.
	for _, e := range append(invalidInput, []struct{ name, value string }{
		{"No leading digit after sign", "-100.0%"}, {"less -100% float ", "-101.1%"}, {"less -100% integer ", "-129"},
	}...) {
		conformance.Run(t, c(pa+"Invalid Input > "+e.name), func(t *testing.T) { expect(t, withPrice(e.value), false) })
	}
	for _, e := range []struct {
		title, value string
		ok           bool
	}{
		{"should not allow an unsigned priceAdjustment percentage", "1%", false},
		{"should not allow an unsigned priceAdjustment integer", "1", false},
		{"should not allow an unsigned priceAdjustment float", "1.3", false},
		{"should allow positive percentage value for priceAdjustment field", "+1%", true},
		{"should allow negative percentage less then 0%", "-1%", true},
		{"should allow negative percentage -100%", "-100%", true},
		{"should allow positive percentage greater then 100%", "+100.102%", true},
		{"should allow positive percentage greater then 100% with an integer", "+298%", true},
		{"should allow positive integer value", "+43", true},
		{"should allow negative integer value", "-43", true},
		{"should allow positive float value", "+34.43", true},
		{"should allow negative float value", "-34.43", true},
	} {
		conformance.Run(t, c(pa+e.title), func(t *testing.T) { expect(t, withAdjustment(e.value), e.ok) })
	}
	p := "price > "
	for _, e := range append(invalidInput, struct{ name, value string }{"No leading digit after sign", "-.42"}) {
		conformance.Run(t, c(p+"Invalid Input > "+e.name), func(t *testing.T) { expect(t, withPrice(e.value), false) })
	}
	conformance.Run(t, c(p+"should allow integer value"), func(t *testing.T) { expect(t, withPrice("43"), true) })
	conformance.Run(t, c(p+"should allow float value"), func(t *testing.T) { expect(t, withPrice("34.43"), true) })

	cp := "Capacity > "
	withCapacity := func(name corev1.ResourceName, q string) *v1alpha1.NodeOverlay {
		o := celOverlay()
		o.Spec.Capacity = corev1.ResourceList{name: resource.MustParse(q)}
		return o
	}
	conformance.Run(t, c(cp+"should allow custom resources"), func(t *testing.T) {
		both(t, withCapacity("smarter-devices/fuse", "1"), true)
	})
	conformance.Run(t, c(cp+"should not allow cpu resources override"), func(t *testing.T) {
		both(t, withCapacity(corev1.ResourceCPU, "1"), false)
	})
	conformance.Run(t, c(cp+"should not allow memory resources override"), func(t *testing.T) {
		both(t, withCapacity(corev1.ResourceMemory, "34Gi"), false)
	})
	conformance.Run(t, c(cp+"should not allow pod resources override"), func(t *testing.T) {
		both(t, withCapacity(corev1.ResourcePods, "324"), false)
	})
}
