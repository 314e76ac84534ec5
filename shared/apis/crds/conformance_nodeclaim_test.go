package crds_test

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// celClaim is the NodeClaim of Karpenter's CEL suite as its client sends it.
func celClaim() *karpv1.NodeClaim {
	return &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "TestNodeClaim", Name: "default"},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpExists}},
		ExpireAfter:  never,
	}}
}

func claimVerdict(t *testing.T, nc *karpv1.NodeClaim) error {
	t.Helper()
	return verdict(t, kubetest.Need(t, env).Clients.NodeClaims, nc.DeepCopy())
}

func claimVerdictWith(t *testing.T, nc *karpv1.NodeClaim, value string, path ...string) error {
	t.Helper()
	return verdictWith(t, karpv1.SchemeGroupVersion.WithKind("NodeClaim"), "nodeclaims", nc, value, append([]string{"spec"}, path...)...)
}

func TestConformanceNodeClaimValidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: coreAPISuite, File: nodeClaimCELFile, Spec: "Validation > " + spec}
	}
	expect := func(t *testing.T, nc *karpv1.NodeClaim, ok bool) {
		t.Helper()
		if ok {
			admitted(t, claimVerdict(t, nc))
		} else {
			refused(t, claimVerdict(t, nc))
		}
	}

	tn := "Taints > "
	taints := func(ts ...corev1.Taint) *karpv1.NodeClaim {
		nc := celClaim()
		nc.Spec.Taints = ts
		return nc
	}
	for _, e := range []struct {
		title  string
		taints []corev1.Taint
		ok     bool
	}{
		{"should succeed for valid taints", []corev1.Taint{
			{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule},
			{Key: "c", Value: "d", Effect: corev1.TaintEffectNoExecute},
			{Key: "e", Value: "f", Effect: corev1.TaintEffectPreferNoSchedule},
			{Key: "key-only", Effect: corev1.TaintEffectNoExecute},
		}, true},
		{"should fail for invalid taint keys", []corev1.Taint{{Key: "???"}}, false},
		{"should fail for missing taint key", []corev1.Taint{{Effect: corev1.TaintEffectNoSchedule}}, false},
		{"should fail for invalid taint value", []corev1.Taint{{Key: "invalid-value", Effect: corev1.TaintEffectNoSchedule, Value: "???"}}, false},
		{"should fail for invalid taint effect", []corev1.Taint{{Key: "invalid-effect", Effect: "???"}}, false},
		{"should not fail for same key with different effects", []corev1.Taint{
			{Key: "a", Effect: corev1.TaintEffectNoSchedule},
			{Key: "a", Effect: corev1.TaintEffectNoExecute},
		}, true},
	} {
		conformance.Run(t, c(tn+e.title), func(t *testing.T) { expect(t, taints(e.taints...), e.ok) })
	}

	n := "NodeClassRef > "
	conformance.Run(t, c(n+"should succeed for valid group"), func(t *testing.T) {
		nc := celClaim()
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Kind: "TestNodeClass", Name: "nodeclass-test", Group: "karpenter.test.sh"}
		expect(t, nc, true)
	})
	conformance.Run(t, c(n+"should fail for invalid group"), func(t *testing.T) {
		nc := celClaim()
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Kind: "TestNodeClass", Name: "nodeclass-test", Group: "karpenter.test.sh/v1"}
		expect(t, nc, false)
	})

	r := "Requirements > "
	withReqs := func(rs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
		nc := celClaim()
		nc.Spec.Requirements = rs
		return nc
	}
	conformance.Run(t, c(r+"should allow supported ops"), func(t *testing.T) {
		expect(t, withReqs(
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpGt, "1"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpLt, "1"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpExists),
		), true)
	})
	conformance.Run(t, c(r+"should fail for unsupported ops"), func(t *testing.T) {
		expect(t, withReqs(rq(corev1.LabelTopologyZone, "unknown", "test")), false)
	})
	conformance.Run(t, c(r+"should fail for restricted domains"), func(t *testing.T) {
		for _, label := range coreRestrictedLabelDomains {
			expect(t, withReqs(rq(label+"/test", corev1.NodeSelectorOpIn, "test")), false)
		}
	})
	conformance.Run(t, c(r+"should fail for restricted labels"), func(t *testing.T) {
		for _, label := range coreRestrictedLabels {
			expect(t, withReqs(rq(label+"/test", corev1.NodeSelectorOpIn, "test")), false)
		}
	})
	conformance.Run(t, c(r+"should allow kubernetes domains"), func(t *testing.T) {
		for _, label := range []string{"kubernetes.io", "k8s.io"} {
			expect(t, withReqs(rq(label+"/test", corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow kubernetes subdomains"), func(t *testing.T) {
		for _, label := range []string{"kubernetes.io", "k8s.io"} {
			expect(t, withReqs(rq("subdomain."+label+"/test", corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow well known label exceptions"), func(t *testing.T) {
		for _, label := range coreWellKnownLabels {
			if label != wellknown.NodePoolLabel {
				expect(t, withReqs(rq(label, corev1.NodeSelectorOpIn, "test")), true)
			}
		}
	})
	conformance.Run(t, c(r+"should allow non-empty set after removing overlapped value"), func(t *testing.T) {
		expect(t, withReqs(
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test", "foo"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "test", "bar"),
		), true)
	})
	conformance.Run(t, c(r+"should allow empty requirements"), func(t *testing.T) {
		expect(t, withReqs([]karpv1.NodeSelectorRequirementWithMinValues{}...), true)
	})
	conformance.Run(t, c(r+"should fail with invalid GT or LT values"), func(t *testing.T) {
		for _, req := range invalidNumericRequirements(corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt) {
			expect(t, withReqs(req), false)
		}
	})
	conformance.Run(t, c(r+"should fail with invalid GTE or LTE values"), func(t *testing.T) {
		for _, req := range invalidNumericRequirements(karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte) {
			expect(t, withReqs(req), false)
		}
	})
	conformance.Run(t, c(r+"should error when minValues is negative"), func(t *testing.T) {
		expect(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "insance-type-1"), -1)), false)
	})
	conformance.Run(t, c(r+"should error when minValues is zero"), func(t *testing.T) {
		expect(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "insance-type-1"), 0)), false)
	})
	conformance.Run(t, c(r+"should error when minValues is more than 50"), func(t *testing.T) {
		expect(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists), 51)), false)
	})
	conformance.Run(t, c(r+"should allow more than 50 values if minValues is not specified."), func(t *testing.T) {
		var types []string
		for i := range 90 {
			types = append(types, "instance"+strconv.Itoa(i))
		}
		expect(t, withReqs(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...)), true)
	})
	conformance.Run(t, c(r+"should error when minValues is greater than the number of unique values specified within In operator"), func(t *testing.T) {
		expect(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "insance-type-1"), 2)), false)
	})
	conformance.Run(t, c(r+"should error when requirements is greater than 100"), func(t *testing.T) {
		var rs []karpv1.NodeSelectorRequirementWithMinValues
		for i := range 101 {
			rs = append(rs, rq("pinkwhip-"+strconv.Itoa(i), corev1.NodeSelectorOpIn, "crowdfrost-"+strconv.Itoa(i)))
		}
		expect(t, withReqs(rs...), false)
	})

	g := "TerminationGracePeriod > "
	for _, e := range []struct{ name, value string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}} {
		conformance.Run(t, c(g+"should succeed on a valid terminationGracePeriod > "+e.name), func(t *testing.T) {
			admitted(t, claimVerdictWith(t, celClaim(), e.value, "terminationGracePeriod"))
		})
	}
	for _, e := range []struct{ name, value string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"never", "Never"}, {"partial match", "FooNever"}} {
		conformance.Run(t, c(g+"should fail on an invalid terminationGracePeriod > "+e.name), func(t *testing.T) {
			refused(t, claimVerdictWith(t, celClaim(), e.value, "terminationGracePeriod"))
		})
	}
	x := "ExpireAfter > "
	for _, e := range []struct{ name, value string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}, {"never", "Never"}} {
		conformance.Run(t, c(x+"should succeed on a valid expireAfter > "+e.name), func(t *testing.T) {
			admitted(t, claimVerdictWith(t, celClaim(), e.value, "expireAfter"))
		})
	}
	for _, e := range []struct{ name, value string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"partial match", "FooNever"}} {
		conformance.Run(t, c(x+"should fail on an invalid expireAfter > "+e.name), func(t *testing.T) {
			refused(t, claimVerdictWith(t, celClaim(), e.value, "expireAfter"))
		})
	}
}
