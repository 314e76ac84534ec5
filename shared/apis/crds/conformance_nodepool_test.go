package crds_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/kubetest"
)

const (
	coreAPISuite     = "core/apis/v1"
	nodePoolCELFile  = "pkg/apis/v1/nodepool_validation_cel_test.go"
	nodeClaimCELFile = "pkg/apis/v1/nodeclaim_validation_cel_test.go"
)

// Karpenter's core label sets (pkg/apis/v1/labels.go) as its core suite
// sees them, without the AWS provider's additions.
var (
	coreRestrictedLabelDomains = []string{"karpenter.sh"}
	coreRestrictedLabels       = []string{corev1.LabelHostname}
	coreWellKnownLabels        = []string{
		wellknown.NodePoolLabel, corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelInstanceTypeStable,
		corev1.LabelArchStable, corev1.LabelOSStable, wellknown.CapacityTypeLabel, corev1.LabelWindowsBuild,
	}
)

// never is what Karpenter's Go client sends for a NillableDuration left
// unset ("Never": its MarshalJSON, and the fields are not omitted), where
// Karpless's omits it so that the CRD's defaults apply.
var never = karpv1.MustParseNillableDuration("Never")

// celPool is the NodePool of Karpenter's CEL suite as its client sends it:
// a test node class, one capacity-type requirement, consolidateAfter and
// expireAfter "Never".
func celPool() *karpv1.NodePool {
	return &karpv1.NodePool{Spec: karpv1.NodePoolSpec{
		Disruption: karpv1.Disruption{ConsolidateAfter: never},
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "TestNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpExists}},
			ExpireAfter:  never,
		}},
	}}
}

func poolVerdict(t *testing.T, np *karpv1.NodePool) error {
	t.Helper()
	return verdict(t, kubetest.Need(t, env).Clients.NodePools, np.DeepCopy())
}

// poolVerdictWith sets spec.<path> to a raw value before the dry run.
func poolVerdictWith(t *testing.T, np *karpv1.NodePool, value string, path ...string) error {
	t.Helper()
	return verdictWith(t, karpv1.SchemeGroupVersion.WithKind("NodePool"), "nodepools", np, value, append([]string{"spec"}, path...)...)
}

func reqs(rs ...karpv1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	return rs
}

func rq(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func minValues(r karpv1.NodeSelectorRequirementWithMinValues, n int) karpv1.NodeSelectorRequirementWithMinValues {
	r.MinValues = &n
	return r
}

func dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

// long250 stands for Karpenter's strings.ToLower(randomdata.Alphanumeric(250)).
var long250 = strings.Repeat("a1", 125)

// invalidNumericRequirements are the Gt/Lt (or Gte/Lte) requirements
// Karpenter's CEL suites expect refused.
func invalidNumericRequirements(gt, lt corev1.NodeSelectorOperator) []karpv1.NodeSelectorRequirementWithMinValues {
	var out []karpv1.NodeSelectorRequirementWithMinValues
	for _, op := range []corev1.NodeSelectorOperator{gt, lt} {
		out = append(out,
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: op, Values: []string{}},
			rq(corev1.LabelTopologyZone, op, "1", "2"),
			rq(corev1.LabelTopologyZone, op, "a"),
			rq(corev1.LabelTopologyZone, op, "-1"),
		)
	}
	return out
}

func TestConformanceNodePoolValidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: coreAPISuite, File: nodePoolCELFile, Spec: "CEL/Validation > " + spec}
	}
	// Admission, then (where Karpenter's case calls it) RuntimeValidate.
	both := func(t *testing.T, np *karpv1.NodePool, ok bool) {
		t.Helper()
		if ok {
			admitted(t, poolVerdict(t, np))
			valid(t, poolstatus.Validate(np))
		} else {
			refused(t, poolVerdict(t, np))
			invalid(t, poolstatus.Validate(np))
		}
	}

	// Disruption
	d := "Disruption > "
	conformance.Run(t, c(d+"should succeed on a disabled expireAfter"), func(t *testing.T) {
		np := celPool()
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
		admitted(t, poolVerdict(t, np))
	})
	for _, e := range []struct{ name, value string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}, {"never", "Never"}} {
		conformance.Run(t, c(d+"should succeed on a valid expireAfter > "+e.name), func(t *testing.T) {
			admitted(t, poolVerdictWith(t, celPool(), e.value, "template", "spec", "expireAfter"))
		})
	}
	for _, e := range []struct{ name, value string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"partial match", "FooNever"}} {
		conformance.Run(t, c(d+"should fail on an invalid expireAfter > "+e.name), func(t *testing.T) {
			refused(t, poolVerdictWith(t, celPool(), e.value, "template", "spec", "expireAfter"))
		})
	}
	conformance.Run(t, c(d+"should succeed on a disabled consolidateAfter"), func(t *testing.T) {
		np := celPool()
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		admitted(t, poolVerdict(t, np))
	})
	for _, e := range []struct{ name, value string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}, {"never", "Never"}} {
		conformance.Run(t, c(d+"should succeed on a valid consolidateAfter > "+e.name), func(t *testing.T) {
			admitted(t, poolVerdictWith(t, celPool(), e.value, "disruption", "consolidateAfter"))
		})
	}
	for _, e := range []struct{ name, value string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"partial match", "FooNever"}} {
		conformance.Run(t, c(d+"should fail on an invalid consolidateAfter > "+e.name), func(t *testing.T) {
			refused(t, poolVerdictWith(t, celPool(), e.value, "disruption", "consolidateAfter"))
		})
	}
	for _, e := range []struct {
		title, after string
		policy       karpv1.ConsolidationPolicy
	}{
		{"should succeed when setting consolidateAfter with consolidationPolicy=WhenEmpty", "30s", karpv1.ConsolidationPolicyWhenEmpty},
		{"should succeed when setting consolidateAfter with consolidationPolicy=WhenUnderutilized", "30s", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized},
		{"should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenUnderutilized", "Never", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized},
		{"should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenEmpty", "Never", karpv1.ConsolidationPolicyWhenEmpty},
	} {
		conformance.Run(t, c(d+e.title), func(t *testing.T) {
			np := celPool()
			np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(e.after)
			np.Spec.Disruption.ConsolidationPolicy = e.policy
			admitted(t, poolVerdict(t, np))
		})
	}
	for _, p := range []string{"WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"} {
		conformance.Run(t, c(d+"should succeed on a valid consolidationPolicy > "+p), func(t *testing.T) {
			admitted(t, poolVerdictWith(t, celPool(), p, "disruption", "consolidationPolicy"))
		})
	}
	for _, e := range []struct{ name, value string }{
		{"quoted 1", "1"}, {"quoted 2", "2"}, {"quoted 3", "3"}, {"level 0", "0"}, {"level 4", "4"}, {"level 10", "10"},
		{"lowercase balanced", "balanced"}, {"lowercase whenempty", "whenempty"}, {"empty string", ""},
		{"WhenUnderutilized", "WhenUnderutilized"}, {"arbitrary string", "foo"},
	} {
		conformance.Run(t, c(d+"should fail on an invalid consolidationPolicy > "+e.name), func(t *testing.T) {
			refused(t, poolVerdictWith(t, celPool(), e.value, "disruption", "consolidationPolicy"))
		})
	}
	for _, p := range []karpv1.ConsolidationPolicy{karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, karpv1.ConsolidationPolicyBalanced} {
		conformance.Run(t, c(d+"should pass RuntimeValidate for valid consolidationPolicy > "+string(p)), func(t *testing.T) {
			np := celPool()
			np.Spec.Disruption.ConsolidationPolicy = p
			valid(t, poolstatus.Validate(np))
		})
	}
	budget := func(nodes string, schedule string, duration string, reasons ...karpv1.DisruptionReason) karpv1.Budget {
		b := karpv1.Budget{Nodes: nodes, Reasons: reasons}
		if schedule != "" {
			b.Schedule = &schedule
		}
		if duration != "" {
			b.Duration = dur(duration)
		}
		return b
	}
	for _, e := range []struct {
		title   string
		budgets []karpv1.Budget
		ok      bool
	}{
		{"should fail when creating a budget with an invalid cron", []karpv1.Budget{budget("10", "*", "20m")}, false},
		{"should fail when creating a schedule with less than 5 entries", []karpv1.Budget{budget("10", "* * * * ", "20m")}, false},
		{"should fail when creating a budget with a negative duration", []karpv1.Budget{budget("10", "* * * * *", "-20m")}, false},
		{"should fail when creating a budget with a seconds duration", []karpv1.Budget{budget("10", "* * * * *", "30s")}, false},
		{"should fail when creating a budget with a negative value int", []karpv1.Budget{budget("-10", "", "")}, false},
		{"should fail when creating a budget with a negative value percent", []karpv1.Budget{budget("-10%", "", "")}, false},
		{"should fail when creating a budget with a value percent with more than 3 digits", []karpv1.Budget{budget("1000%", "", "")}, false},
		{"should fail when creating a budget with a cron but no duration", []karpv1.Budget{budget("10", "* * * * *", "")}, false},
		{"should fail when creating a budget with a duration but no cron", []karpv1.Budget{budget("10", "", "20m")}, false},
		{"should succeed when creating a budget with both duration and cron", []karpv1.Budget{budget("10", "* * * * *", "20m")}, true},
		{"should succeed when creating a budget with hours and minutes in duration", []karpv1.Budget{budget("10", "* * * * *", "2h20m")}, true},
		{"should succeed when creating a budget with neither duration nor cron", []karpv1.Budget{budget("10", "", "")}, true},
		{"should succeed when creating a budget with special cased crons", []karpv1.Budget{budget("10", "@annually", "20m")}, true},
		{"should fail when creating two budgets where one has an invalid crontab", []karpv1.Budget{budget("10", "@annually", "20m"), budget("10", "*", "20m")}, false},
		{"should fail when creating multiple budgets where one doesn't have both schedule and duration", []karpv1.Budget{budget("10", "", "20m"), budget("10", "* * * * *", "20m"), budget("10", "", "")}, false},
		{"should succeed when creating a budget with valid reasons > should allow disruption reason Drifted", []karpv1.Budget{budget("10", "* * * * *", "20m", karpv1.DisruptionReasonDrifted)}, true},
		{"should succeed when creating a budget with valid reasons > should allow disruption reason Underutilized", []karpv1.Budget{budget("10", "* * * * *", "20m", karpv1.DisruptionReasonUnderutilized)}, true},
		{"should succeed when creating a budget with valid reasons > should allow disruption reason Empty", []karpv1.Budget{budget("10", "* * * * *", "20m", karpv1.DisruptionReasonEmpty)}, true},
		{"should fail when creating a budget with invalid reasons > should not allow invalid reason", []karpv1.Budget{budget("10", "* * * * *", "20m", "invalid")}, false},
		{"should fail when creating a budget with invalid reasons > should not allow expired disruption reason", []karpv1.Budget{budget("10", "* * * * *", "20m", "expired")}, false},
		{"should fail when creating a budget with invalid reasons > should not allow empty reason", []karpv1.Budget{budget("10", "* * * * *", "20m", "")}, false},
		{"should allow setting multiple reasons", []karpv1.Budget{budget("10", "* * * * *", "20m", karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonEmpty)}, true},
	} {
		conformance.Run(t, c(d+e.title), func(t *testing.T) {
			np := celPool()
			np.Spec.Disruption.Budgets = e.budgets
			if e.ok {
				admitted(t, poolVerdict(t, np))
			} else {
				refused(t, poolVerdict(t, np))
			}
		})
	}

	// Taints
	tn := "Taints > "
	taints := func(ts ...corev1.Taint) *karpv1.NodePool {
		np := celPool()
		np.Spec.Template.Spec.Taints = ts
		return np
	}
	conformance.Run(t, c(tn+"should succeed for valid taints"), func(t *testing.T) {
		both(t, taints(
			corev1.Taint{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: "c", Value: "d", Effect: corev1.TaintEffectNoExecute},
			corev1.Taint{Key: "e", Value: "f", Effect: corev1.TaintEffectPreferNoSchedule},
			corev1.Taint{Key: "Test", Value: "f", Effect: corev1.TaintEffectPreferNoSchedule},
			corev1.Taint{Key: "test.com/Test", Value: "f", Effect: corev1.TaintEffectPreferNoSchedule},
			corev1.Taint{Key: "test.com.com/test", Value: "f", Effect: corev1.TaintEffectPreferNoSchedule},
			corev1.Taint{Key: "key-only", Effect: corev1.TaintEffectNoExecute},
		), true)
	})
	conformance.Run(t, c(tn+"should fail for invalid taint keys"), func(t *testing.T) {
		for _, key := range []string{"test.com.com}", "Test.com/test", "test/test/test", "test/", "/test"} {
			both(t, taints(corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}), false)
		}
	})
	conformance.Run(t, c(tn+"should fail at runtime for taint keys that are too long"), func(t *testing.T) {
		for _, key := range []string{"test.com.test." + long250 + "/test", "test.com.test/test-" + long250} {
			np := taints(corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
			admitted(t, poolVerdict(t, np))
			invalid(t, poolstatus.Validate(np))
		}
	})
	conformance.Run(t, c(tn+"should fail for missing taint key"), func(t *testing.T) {
		both(t, taints(corev1.Taint{Effect: corev1.TaintEffectNoSchedule}), false)
	})
	conformance.Run(t, c(tn+"should fail for invalid taint value"), func(t *testing.T) {
		both(t, taints(corev1.Taint{Key: "invalid-value", Effect: corev1.TaintEffectNoSchedule, Value: "???"}), false)
	})
	conformance.Run(t, c(tn+"should fail for invalid taint effect"), func(t *testing.T) {
		both(t, taints(corev1.Taint{Key: "invalid-effect", Effect: "???"}), false)
	})
	conformance.Run(t, c(tn+"should not fail for same key with different effects"), func(t *testing.T) {
		both(t, taints(corev1.Taint{Key: "a", Effect: corev1.TaintEffectNoSchedule}, corev1.Taint{Key: "a", Effect: corev1.TaintEffectNoExecute}), true)
	})

	// Requirements
	r := "Requirements > "
	withReqs := func(rs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
		np := celPool()
		np.Spec.Template.Spec.Requirements = rs
		return np
	}
	conformance.Run(t, c(r+"should succeed for valid requirement keys"), func(t *testing.T) {
		both(t, withReqs(
			rq("Test", corev1.NodeSelectorOpExists), rq("test.com/Test", corev1.NodeSelectorOpExists),
			rq("test.com.com/test", corev1.NodeSelectorOpExists), rq("key-only", corev1.NodeSelectorOpExists),
		), true)
	})
	conformance.Run(t, c(r+"should fail for invalid requirement keys"), func(t *testing.T) {
		for _, key := range []string{"test.com.com}", "Test.com/test", "test/test/test", "test/", "/test"} {
			both(t, withReqs(rq(key, corev1.NodeSelectorOpExists)), false)
		}
	})
	conformance.Run(t, c(r+"should fail at runtime for requirement keys that are too long"), func(t *testing.T) {
		for _, key := range []string{"test.com.test." + long250 + "/test", "test.com.test/test-" + long250} {
			np := withReqs(rq(key, corev1.NodeSelectorOpExists))
			admitted(t, poolVerdict(t, np))
			invalid(t, poolstatus.Validate(np))
		}
	})
	conformance.Run(t, c(r+"should fail for the karpenter.sh/nodepool label"), func(t *testing.T) {
		both(t, withReqs(rq(wellknown.NodePoolLabel, corev1.NodeSelectorOpIn, "Pinkwhip")), false)
	})
	conformance.Run(t, c(r+"should allow supported ops"), func(t *testing.T) {
		both(t, withReqs(
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpGt, "1"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpLt, "1"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpExists),
		), true)
	})
	conformance.Run(t, c(r+"should fail for unsupported ops"), func(t *testing.T) {
		both(t, withReqs(rq(corev1.LabelTopologyZone, "unknown", "test")), false)
	})
	conformance.Run(t, c(r+"should fail for restricted domains"), func(t *testing.T) {
		for _, label := range coreRestrictedLabelDomains {
			both(t, withReqs(rq(label+"/test", corev1.NodeSelectorOpIn, "test")), false)
		}
	})
	conformance.Run(t, c(r+"should fail for restricted labels"), func(t *testing.T) {
		for _, label := range coreRestrictedLabels {
			both(t, withReqs(rq(label+"/test", corev1.NodeSelectorOpIn, "test")), false)
		}
	})
	conformance.Run(t, c(r+"should allow kubernetes domains"), func(t *testing.T) {
		for _, label := range []string{"kubernetes.io", "k8s.io"} {
			both(t, withReqs(rq(label+"/test", corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow kubernetes subdomains exceptions"), func(t *testing.T) {
		for _, label := range []string{"kubernetes.io", "k8s.io"} {
			both(t, withReqs(rq("subdomain."+label+"/test", corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow well known label exceptions"), func(t *testing.T) {
		// Capacity type is runtime validated.
		for _, label := range coreWellKnownLabels {
			if label == wellknown.NodePoolLabel || label == wellknown.CapacityTypeLabel {
				continue
			}
			both(t, withReqs(rq(label, corev1.NodeSelectorOpIn, "test")), true)
		}
	})
	conformance.Run(t, c(r+"should allow non-empty set after removing overlapped value"), func(t *testing.T) {
		both(t, withReqs(
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test", "foo"),
			rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "test", "bar"),
		), true)
	})
	conformance.Run(t, c(r+"should allow empty requirements"), func(t *testing.T) {
		both(t, withReqs([]karpv1.NodeSelectorRequirementWithMinValues{}...), true)
	})
	conformance.Run(t, c(r+"should fail with invalid GT or LT values"), func(t *testing.T) {
		for _, req := range invalidNumericRequirements(corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt) {
			both(t, withReqs(req), false)
		}
	})
	conformance.Run(t, c(r+"should fail with invalid GTE or LTE values"), func(t *testing.T) {
		for _, req := range invalidNumericRequirements(karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte) {
			both(t, withReqs(req), false)
		}
	})
	conformance.Run(t, c(r+"should error when minValues is negative"), func(t *testing.T) {
		refused(t, poolVerdict(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "insance-type-1"), -1))))
	})
	conformance.Run(t, c(r+"should error when minValues is zero"), func(t *testing.T) {
		refused(t, poolVerdict(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "insance-type-1"), 0))))
	})
	conformance.Run(t, c(r+"should error when minValues is more than 50"), func(t *testing.T) {
		refused(t, poolVerdict(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists), 51))))
	})
	conformance.Run(t, c(r+"should allow more than 50 values if minValues is not specified."), func(t *testing.T) {
		var types []string
		for i := range 90 {
			types = append(types, "instance"+strconv.Itoa(i))
		}
		admitted(t, poolVerdict(t, withReqs(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...))))
	})
	conformance.Run(t, c(r+"should error when minValues is greater than the number of unique values specified within In operator"), func(t *testing.T) {
		refused(t, poolVerdict(t, withReqs(minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "insance-type-1"), 2))))
	})

	// Labels
	l := "Labels > "
	withLabels := func(labels map[string]string) *karpv1.NodePool {
		np := celPool()
		np.Spec.Template.Labels = labels
		return np
	}
	conformance.Run(t, c(l+"should allow unrecognized labels"), func(t *testing.T) {
		both(t, withLabels(map[string]string{"foo": "Pinkwhip"}), true)
	})
	conformance.Run(t, c(l+"should fail for the karpenter.sh/nodepool label"), func(t *testing.T) {
		both(t, withLabels(map[string]string{wellknown.NodePoolLabel: "Pinkwhip"}), false)
	})
	conformance.Run(t, c(l+"should fail for invalid label keys"), func(t *testing.T) {
		np := withLabels(map[string]string{"spaces are not allowed": "Pinkwhip"})
		admitted(t, poolVerdict(t, np))
		invalid(t, poolstatus.Validate(np))
	})
	conformance.Run(t, c(l+"should fail at runtime for label keys that are too long"), func(t *testing.T) {
		for _, key := range []string{"test.com.test." + long250 + "/test", "test.com.test/test-" + long250} {
			np := withLabels(map[string]string{key: "Pinkwhip"})
			admitted(t, poolVerdict(t, np))
			invalid(t, poolstatus.Validate(np))
		}
	})
	conformance.Run(t, c(l+"should fail for invalid label values"), func(t *testing.T) {
		both(t, withLabels(map[string]string{"pinkwhip": "/ is not allowed"}), false)
	})
	conformance.Run(t, c(l+"should fail for restricted label domains"), func(t *testing.T) {
		for _, label := range coreRestrictedLabelDomains {
			both(t, withLabels(map[string]string{label + "/unknown": "Pinkwhip"}), false)
		}
	})
	conformance.Run(t, c(l+"should allow labels kOps require"), func(t *testing.T) {
		both(t, withLabels(map[string]string{"kops.k8s.io/instancegroup": "karpenter-nodes", "kops.k8s.io/gpu": "1"}), true)
	})
	for _, e := range []struct{ title, format string }{
		{"should allow labels in kubernetes domains", "%s"},
		{"should allow labels prefixed with the kubernetes domain", "%s/key"},
		{"should allow subdomain labels in restricted domains exceptions list", "subdomain.%s"},
		{"should allow subdomain labels prefixed with the kubernetes domain", "subdomain.%s/key"},
	} {
		conformance.Run(t, c(l+e.title), func(t *testing.T) {
			for _, label := range []string{"kubernetes.io", "k8s.io"} {
				both(t, withLabels(map[string]string{fmt.Sprintf(e.format, label): "test-value"}), true)
			}
		})
	}

	// TerminationGracePeriod
	g := "TerminationGracePeriod > "
	for _, e := range []struct{ name, value string }{{"single unit", "30s"}, {"multiple units", "1h30m5s"}} {
		conformance.Run(t, c(g+"should succeed on a valid terminationGracePeriod > "+e.name), func(t *testing.T) {
			admitted(t, poolVerdictWith(t, celPool(), e.value, "template", "spec", "terminationGracePeriod"))
		})
	}
	for _, e := range []struct{ name, value string }{{"negative", "-1s"}, {"invalid unit", "1hr"}, {"never", "Never"}, {"partial match", "FooNever"}} {
		conformance.Run(t, c(g+"should fail on an invalid terminationGracePeriod > "+e.name), func(t *testing.T) {
			refused(t, poolVerdictWith(t, celPool(), e.value, "template", "spec", "terminationGracePeriod"))
		})
	}

	// NodeClassRef
	n := "NodeClassRef > "
	// Karpenter's two mutation cases create the changed NodePool again under
	// the same name, which the API server refuses as already existing; the
	// ports update the stored NodePool instead, which is what the titles
	// (and the CRD's immutability rules) are about.
	mutate := func(t *testing.T, change func(*karpv1.NodeClassReference)) {
		e := kubetest.Need(t, env)
		np, err := store(t, e.Clients.NodePools, celPool())
		admitted(t, err)
		change(np.Spec.Template.Spec.NodeClassRef)
		_, err = e.Clients.NodePools.Update(context.Background(), np, metav1.UpdateOptions{})
		refused(t, err)
	}
	conformance.Run(t, c(n+"should fail to mutate group"), func(t *testing.T) {
		mutate(t, func(r *karpv1.NodeClassReference) { r.Group = "karpenter.test.mutated.sh" })
	})
	conformance.Run(t, c(n+"should fail to mutate kind"), func(t *testing.T) {
		mutate(t, func(r *karpv1.NodeClassReference) { r.Kind = "TestNodeClass2" })
	})
	for _, e := range []struct {
		title string
		unset func(*karpv1.NodeClassReference)
	}{
		{"should fail if group is unset", func(r *karpv1.NodeClassReference) { r.Group = "" }},
		{"should fail if kind is unset", func(r *karpv1.NodeClassReference) { r.Kind = "" }},
		{"should fail if name is unset", func(r *karpv1.NodeClassReference) { r.Name = "" }},
	} {
		conformance.Run(t, c(n+e.title), func(t *testing.T) {
			np := celPool()
			e.unset(np.Spec.Template.Spec.NodeClassRef)
			refused(t, poolVerdict(t, np))
		})
	}

	// Replicas
	rp := "Replicas > "
	static := func(n int64) *karpv1.NodePool {
		np := celPool()
		np.Spec.Replicas = &n
		return np
	}
	for _, e := range []struct {
		title string
		n     int64
	}{
		{"should succeed when replicas is set to a positive value", 5},
		{"should succeed when replicas is set to zero", 0},
		{"should succeed when replicas is set to a large value", 1000},
	} {
		conformance.Run(t, c(rp+"Valid Replicas Values > "+e.title), func(t *testing.T) {
			both(t, static(e.n), true)
		})
	}
	conformance.Run(t, c(rp+"Invalid Replicas Values > should fail when replicas is set to a negative value"), func(t *testing.T) {
		refused(t, poolVerdict(t, static(-100)))
	})
	for _, e := range []struct {
		name   string
		modify func(*karpv1.NodePool)
	}{
		{"limits.cpu", func(np *karpv1.NodePool) {
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1000")}
		}},
		{"limits.memory", func(np *karpv1.NodePool) {
			np.Spec.Limits = karpv1.Limits{corev1.ResourceMemory: resource.MustParse("2000Gi")}
		}},
		{"limits.pods", func(np *karpv1.NodePool) {
			np.Spec.Limits = karpv1.Limits{corev1.ResourcePods: resource.MustParse("10")}
		}},
		{"limits.ephemeral-storage", func(np *karpv1.NodePool) {
			np.Spec.Limits = karpv1.Limits{corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
		}},
		{"weight", func(np *karpv1.NodePool) { np.Spec.Weight = new(int32(25)) }},
	} {
		conformance.Run(t, c(rp+"should fail for incompatible fields > "+e.name), func(t *testing.T) {
			np := static(10)
			e.modify(np)
			refused(t, poolVerdict(t, np))
		})
	}
	for _, e := range []struct {
		name   string
		modify func(*karpv1.NodePool)
	}{
		{"limits.nodes", func(np *karpv1.NodePool) { np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("100")} }},
		{"disruption with multiple budgets", func(np *karpv1.NodePool) {
			np.Spec.Disruption = karpv1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter:    karpv1.MustParseNillableDuration("5m"),
				Budgets: []karpv1.Budget{
					budget("20%", "0 9 * * mon-fri", "8h", karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonEmpty),
					budget("30%", "0 22 * * sat,sun", "4h", karpv1.DisruptionReasonUnderutilized),
					budget("5", "", ""),
				},
			}
		}},
		{"template labels", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"environment": "production"} }},
		{"template annotations", func(np *karpv1.NodePool) {
			np.Spec.Template.Annotations = map[string]string{"example.com/last-updated": "2024-01-01"}
		}},
		{"taints", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu-workload", Value: "enabled", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{"startup taints", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/initializing", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{"requirements", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = reqs(
				minValues(rq(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "r5.large", "r5.xlarge"), 3),
				rq(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-west-2a", "us-west-2b", "us-west-2c"),
				rq(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, "on-demand", "spot"),
				rq(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
				rq("karpenter.k8s.aws/instance-memory", corev1.NodeSelectorOpGt, "8192"),
				rq("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpLt, "64"),
			)
		}},
		{"expireAfter", func(np *karpv1.NodePool) { np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("72h") }},
		{"terminationGracePeriod", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 300 * time.Second}
		}},
	} {
		conformance.Run(t, c(rp+"should succeed for compatible fields > "+e.name), func(t *testing.T) {
			np := static(10)
			e.modify(np)
			both(t, np, true)
		})
	}
	u := rp + "Update Scenarios > "
	update := func(t *testing.T, np *karpv1.NodePool, change func(*karpv1.NodePool)) (*karpv1.NodePool, error) {
		e := kubetest.Need(t, env)
		stored, err := store(t, e.Clients.NodePools, np)
		admitted(t, err)
		change(stored)
		return e.Clients.NodePools.Update(context.Background(), stored, metav1.UpdateOptions{})
	}
	conformance.Run(t, c(u+"should succeed when increasing replicas in a NodePool"), func(t *testing.T) {
		np, err := update(t, static(3), func(np *karpv1.NodePool) { np.Spec.Replicas = new(int64(5)) })
		admitted(t, err)
		valid(t, poolstatus.Validate(np))
	})
	conformance.Run(t, c(u+"should fail when changing the NodePool from static to dynamic"), func(t *testing.T) {
		_, err := update(t, static(3), func(np *karpv1.NodePool) { np.Spec.Replicas = nil })
		refused(t, err)
	})
	conformance.Run(t, c(u+"should fail when changing the NodePool from dynamic to static"), func(t *testing.T) {
		_, err := update(t, celPool(), func(np *karpv1.NodePool) { np.Spec.Replicas = new(int64(3)) })
		refused(t, err)
	})
	conformance.Run(t, c(u+"should succeed when changing the static NodePool nodes limit"), func(t *testing.T) {
		np := static(3)
		np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("10")}
		_, err := update(t, np, func(np *karpv1.NodePool) { np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("100")} })
		admitted(t, err)
	})
}
