package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// Describe "Custom Constraints", ported whole: the NodePool and pods of
// each It through Solve on the fake cloud provider's types, Karpenter's
// expected placement and node labels (those of the NodeClaim and of the
// type and offering its launch picks). The Describe repeats three of its
// Contexts almost word for word; both copies are ported, as both run.
const schedulingSuiteFile = "pkg/controllers/provisioning/scheduling/suite_test.go"

// constraintCase is one It: a NodePool (the suite's, changed by pool),
// pods, and what Karpenter expects of them.
type constraintCase struct {
	spec  string
	pool  []poolOpt
	pods  [][]podOpt
	ready func(*NodeClass)       // changes the NodeClass (readiness)
	types func() []*InstanceType // nil: the fake's default types
	check func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod)
}

// scheduledWith: every pod scheduled, on nodes with these labels.
func scheduledWith(kv ...string) func(*testing.T, *Snapshot, *Results, []*corev1.Pod) {
	return func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
		t.Helper()
		for _, p := range pods {
			_, labels := expectScheduled(t, s, r, p)
			for i := 0; i+1 < len(kv); i += 2 {
				expectLabel(t, labels, kv[i], kv[i+1])
			}
		}
	}
}

// scheduledWithout: every pod scheduled, on nodes without key=value (any
// value when value is "").
func scheduledWithout(key, value string) func(*testing.T, *Snapshot, *Results, []*corev1.Pod) {
	return func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
		t.Helper()
		for _, p := range pods {
			_, labels := expectScheduled(t, s, r, p)
			if got, ok := labels[key]; ok && (value == "" || got == value) {
				t.Fatalf("node of %s has %s=%s", p.Name, key, got)
			}
		}
	}
}

func notScheduled(t *testing.T, _ *Snapshot, r *Results, pods []*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		expectNotScheduled(t, r, p)
	}
}

func pods1(opts ...podOpt) [][]podOpt { return [][]podOpt{opts} }

func TestConformanceCustomConstraints(t *testing.T) {
	in, notIn, exists, dne := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist
	zone, it := wellknown.ZoneLabel, wellknown.InstanceTypeLabel
	testKey := withReqs(npReq("test-key", in, "test-value"))

	var cases []constraintCase
	add := func(ctx string, cs ...constraintCase) {
		for _, c := range cs {
			c.spec = "Scheduling > Custom Constraints > " + ctx + " > " + c.spec
			cases = append(cases, c)
		}
	}
	add("NodePool with Labels",
		constraintCase{spec: "should schedule unconstrained pods that don't have matching node selectors",
			pool: []poolOpt{withLabel("test-key", "test-value")}, pods: pods1(), check: scheduledWith("test-key", "test-value")},
		constraintCase{spec: "should not schedule pods that have conflicting node selectors",
			pool: []poolOpt{withLabel("test-key", "test-value")}, pods: pods1(nodeSelector("test-key", "different-value")), check: notScheduled},
		constraintCase{spec: "should not schedule pods that have node selectors with undefined key",
			pods: pods1(nodeSelector("test-key", "test-value")), check: notScheduled},
		constraintCase{spec: "should schedule pods that have matching requirements",
			pool: []poolOpt{withLabel("test-key", "test-value")}, pods: pods1(nodeRequirements(expr("test-key", in, "test-value", "another-value"))),
			check: scheduledWith("test-key", "test-value")},
		constraintCase{spec: "should not schedule pods that have conflicting requirements",
			pool: []poolOpt{withLabel("test-key", "test-value")}, pods: pods1(nodeRequirements(expr("test-key", in, "another-value"))), check: notScheduled},
	)
	wellKnown := func(withBounds bool) []constraintCase {
		cs := []constraintCase{
			{spec: "should use NodePool constraints", pool: []poolOpt{withReqs(npReq(zone, in, fakeZone2))}, pods: pods1(), check: scheduledWith(zone, fakeZone2)},
			{spec: "should use node selectors", pool: []poolOpt{withReqs(npReq(zone, in, fakeZone1, fakeZone2))},
				pods: pods1(nodeSelector(zone, fakeZone2)), check: scheduledWith(zone, fakeZone2)},
			{spec: "should not schedule nodes with a hostname selector", pods: pods1(nodeSelector(wellknown.HostnameLabel, "red-node")), check: notScheduled},
			{spec: "should not schedule the pod if nodeselector unknown", pool: []poolOpt{withReqs(npReq(zone, in, fakeZone1))},
				pods: pods1(nodeSelector(zone, "unknown")), check: notScheduled},
			{spec: "should not schedule if node selector outside of NodePool constraints", pool: []poolOpt{withReqs(npReq(zone, in, fakeZone1))},
				pods: pods1(nodeSelector(zone, fakeZone2)), check: notScheduled},
			{spec: "should schedule compatible requirements with Operator=In", pods: pods1(nodeRequirements(expr(zone, in, fakeZone3))), check: scheduledWith(zone, fakeZone3)},
			{spec: "should schedule compatible requirements with Operator=Gt", pool: []poolOpt{withReqs(npReq(fakeIntegerKey, corev1.NodeSelectorOpGt, "8"))},
				pods: pods1(), check: scheduledWith(fakeIntegerKey, "16")},
			{spec: "should schedule compatible requirements with Operator=Lt", pool: []poolOpt{withReqs(npReq(fakeIntegerKey, corev1.NodeSelectorOpLt, "8"))},
				pods: pods1(), check: scheduledWith(fakeIntegerKey, "2")},
		}
		if withBounds {
			cs = append(cs,
				constraintCase{spec: "should schedule compatible requirements with Operator=Gte", pool: []poolOpt{withReqs(npReq(fakeIntegerKey, karpv1.NodeSelectorOpGte, "16"))},
					pods: pods1(), check: scheduledWith(fakeIntegerKey, "16")},
				constraintCase{spec: "should schedule compatible requirements with Operator=Lte", pool: []poolOpt{withReqs(npReq(fakeIntegerKey, karpv1.NodeSelectorOpLte, "2"))},
					pods: pods1(), check: scheduledWith(fakeIntegerKey, "2")},
			)
		}
		all3 := []string{fakeZone1, fakeZone2, fakeZone3, "unknown"}
		return append(cs,
			constraintCase{spec: "should not schedule incompatible preferences and requirements with Operator=In",
				pods: pods1(nodeRequirements(expr(zone, in, "unknown"))), check: notScheduled},
			constraintCase{spec: "should schedule compatible requirements with Operator=NotIn",
				pods: pods1(nodeRequirements(expr(zone, notIn, fakeZone1, fakeZone2, "unknown"))), check: scheduledWith(zone, fakeZone3)},
			constraintCase{spec: "should not schedule incompatible preferences and requirements with Operator=NotIn",
				pods: pods1(nodeRequirements(expr(zone, notIn, all3...))), check: notScheduled},
			constraintCase{spec: "should schedule compatible preferences and requirements with Operator=In",
				pods: pods1(nodeRequirements(expr(zone, in, all3...)), nodePreferences(expr(zone, in, fakeZone2, "unknown"))), check: scheduledWith(zone, fakeZone2)},
			constraintCase{spec: "should schedule incompatible preferences and requirements with Operator=In",
				pods: pods1(nodeRequirements(expr(zone, in, all3...)), nodePreferences(expr(zone, in, "unknown"))), check: scheduledWith()},
			constraintCase{spec: "should schedule compatible preferences and requirements with Operator=NotIn",
				pods: pods1(nodeRequirements(expr(zone, in, all3...)), nodePreferences(expr(zone, notIn, fakeZone1, fakeZone3))), check: scheduledWith(zone, fakeZone2)},
			constraintCase{spec: "should schedule incompatible preferences and requirements with Operator=NotIn",
				pods: pods1(nodeRequirements(expr(zone, in, all3...)), nodePreferences(expr(zone, notIn, fakeZone1, fakeZone2, fakeZone3))), check: scheduledWith()},
			constraintCase{spec: "should schedule compatible node selectors, preferences and requirements",
				pods:  pods1(nodeSelector(zone, fakeZone3), nodeRequirements(expr(zone, in, fakeZone1, fakeZone2, fakeZone3)), nodePreferences(expr(zone, in, fakeZone1, fakeZone2, fakeZone3))),
				check: scheduledWith(zone, fakeZone3)},
			constraintCase{spec: "should combine multidimensional node selectors, preferences and requirements",
				pods: pods1(nodeSelector(zone, fakeZone3, it, "arm-instance-type"),
					nodeRequirements(expr(zone, in, fakeZone1, fakeZone3), expr(it, in, "default-instance-type", "arm-instance-type")),
					nodePreferences(expr(zone, notIn, "unknown"), expr(it, notIn, "unknown"))),
				check: scheduledWith(zone, fakeZone3, it, "arm-instance-type")},
		)
	}
	validation := func(kubeDomainsTitle string) []constraintCase {
		kubeDomains := func(prefix string) constraintCase {
			return constraintCase{
				pool: []poolOpt{withReqs(npReq(prefix+"kubernetes.io/test", in, "test-value"), npReq(prefix+"k8s.io/test", in, "test-value"))},
				// The It provisions one pod per domain, in turn.
				pods:  [][]podOpt{nil, nil},
				check: scheduledWith(prefix+"kubernetes.io/test", "test-value", prefix+"k8s.io/test", "test-value"),
			}
		}
		k, sub := kubeDomains(""), kubeDomains("subdomain.")
		k.spec = kubeDomainsTitle
		sub.spec = "should schedule pods that have node selectors with label in subdomain from kubernetes domains"
		return []constraintCase{
			// Karpenter's RestrictedLabels: the hostname.
			{spec: "should not schedule pods that have node selectors with restricted labels",
				pods: pods1(nodeRequirements(expr(wellknown.HostnameLabel, in, "test"))), check: notScheduled},
			// Karpenter's RestrictedLabelDomains: karpenter.sh.
			{spec: "should not schedule pods that have node selectors with restricted domains",
				pods: pods1(nodeRequirements(expr(wellknown.KarpenterDomain+"/test", in, "test"))), check: notScheduled},
			k, sub,
			{spec: "should schedule pods that have node selectors with label in wellknown label list",
				pods: [][]podOpt{
					{nodeSelector(zone, fakeZone1)},
					{nodeSelector(it, "default-instance-type")},
					{nodeSelector(wellknown.ArchLabel, "arm64")},
					{nodeSelector(wellknown.OSLabel, "linux")},
					{nodeSelector(wellknown.CapacityTypeLabel, wellknown.CapacityTypeSpot)},
				},
				check: scheduledWith()},
		}
	}
	logic := func(withNotReady bool) []constraintCase {
		var cs []constraintCase
		if withNotReady {
			// Karpenter sets the NodePool's Ready condition False; a
			// Karpless NodePool is not ready when its EC2NodeClass is not.
			cs = append(cs, constraintCase{spec: "should not schedule pods with nodePool which is not ready ",
				ready: func(nc *NodeClass) { nc.Ready = false }, pods: pods1(), check: notScheduled})
		}
		two := withReqs(npReq("test-key", in, "test-value", "another-value"))
		return append(cs,
			constraintCase{spec: "should not schedule pods that have node selectors with In operator and undefined key",
				pods: pods1(nodeRequirements(expr("test-key", in, "test-value"))), check: notScheduled},
			constraintCase{spec: "should schedule pods that have node selectors with NotIn operator and undefined key",
				pods: pods1(nodeRequirements(expr("test-key", notIn, "test-value"))), check: scheduledWithout("test-key", "test-value")},
			constraintCase{spec: "should not schedule pods that have node selectors with Exists operator and undefined key",
				pods: pods1(nodeRequirements(expr("test-key", exists))), check: notScheduled},
			constraintCase{spec: "should schedule pods that with DoesNotExists operator and undefined key",
				pods: pods1(nodeRequirements(expr("test-key", dne))), check: scheduledWithout("test-key", "")},
			constraintCase{spec: "should schedule unconstrained pods that don't have matching node selectors",
				pool: []poolOpt{testKey}, pods: pods1(), check: scheduledWith("test-key", "test-value")},
			constraintCase{spec: "should schedule pods that have node selectors with matching value and In operator",
				pool: []poolOpt{testKey}, pods: pods1(nodeRequirements(expr("test-key", in, "test-value"))), check: scheduledWith("test-key", "test-value")},
			constraintCase{spec: "should not schedule pods that have node selectors with matching value and NotIn operator",
				pool: []poolOpt{testKey}, pods: pods1(nodeRequirements(expr("test-key", notIn, "test-value"))), check: notScheduled},
			constraintCase{spec: "should schedule the pod with Exists operator and defined key",
				pool: []poolOpt{testKey}, pods: pods1(nodeRequirements(expr("test-key", exists))), check: scheduledWith()},
			constraintCase{spec: "should not schedule the pod with DoesNotExists operator and defined key",
				pool: []poolOpt{testKey}, pods: pods1(nodeRequirements(expr("test-key", dne))), check: notScheduled},
			constraintCase{spec: "should not schedule pods that have node selectors with different value and In operator",
				pool: []poolOpt{testKey}, pods: pods1(nodeRequirements(expr("test-key", in, "another-value"))), check: notScheduled},
			constraintCase{spec: "should schedule pods that have node selectors with different value and NotIn operator",
				pool: []poolOpt{testKey}, pods: pods1(nodeRequirements(expr("test-key", notIn, "another-value"))), check: scheduledWith("test-key", "test-value")},
			constraintCase{spec: "should schedule compatible pods to the same node",
				pool: []poolOpt{two}, pods: [][]podOpt{{nodeRequirements(expr("test-key", in, "test-value"))}, {nodeRequirements(expr("test-key", notIn, "another-value"))}},
				check: func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
					scheduledWith("test-key", "test-value")(t, s, r, pods)
					if a, b := placementOf(r, pods[0]), placementOf(r, pods[1]); a != b {
						t.Fatalf("pods on %s and %s, want one node", a, b)
					}
				}},
			constraintCase{spec: "should schedule incompatible pods to the different node",
				pool: []poolOpt{two}, pods: [][]podOpt{{nodeRequirements(expr("test-key", in, "test-value"))}, {nodeRequirements(expr("test-key", in, "another-value"))}},
				check: func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
					scheduledWith("test-key", "test-value")(t, s, r, pods[:1])
					scheduledWith("test-key", "another-value")(t, s, r, pods[1:])
					if a, b := placementOf(r, pods[0]), placementOf(r, pods[1]); a == b {
						t.Fatalf("both pods on %s, want two nodes", a)
					}
				}},
			constraintCase{spec: "Exists operator should not overwrite the existing value",
				pods: pods1(nodeRequirements(expr(zone, in, "non-existent-zone"), expr(zone, exists))), check: notScheduled},
		)
	}
	add("Well Known Labels", wellKnown(true)...)
	add("Constraints Validation", validation("should schedule pods that have node selectors with label in the kubernetes domains")...)
	add("Scheduling Logic", logic(true)...)
	add("Well Known Labels", wellKnown(false)...)
	add("Constraints Validation", validation("should schedule pods that have node selectors with label in kubernetes domains")...)
	add("Scheduling Logic", logic(false)...)

	runConstraintCases(t, cases)
}

func runConstraintCases(t *testing.T, cases []constraintCase) {
	t.Helper()
	for _, tc := range cases {
		conformance.Run(t, conformance.Case{Suite: "core/provisioning/scheduling", File: schedulingSuiteFile, Spec: tc.spec}, func(t *testing.T) {
			var pods []*corev1.Pod
			for _, opts := range tc.pods {
				pods = append(pods, fakePod(opts...))
			}
			var its []*InstanceType
			if tc.types != nil {
				its = tc.types()
			}
			s := fakeSnapshot(its, []*karpv1.NodePool{fakePool(tc.pool...)}, pods...)
			if tc.ready != nil {
				tc.ready(s.NodeClasses["default"])
			}
			r := solve(t, s)
			tc.check(t, s, r, pods)
		})
	}
}

// onDifferentNodes: every pod scheduled, each on a node of its own.
func onDifferentNodes(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range pods {
		where, _ := expectScheduled(t, s, r, p)
		if seen[where] {
			t.Fatalf("two pods on %s, want one node each", where)
		}
		seen[where] = true
	}
}

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// Describes "Preferential Fallback" and "Instance Type Compatibility",
// ported whole.
func TestConformanceFallbackAndCompatibility(t *testing.T) {
	in, notIn := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn
	zone, it, arch, os := wellknown.ZoneLabel, wellknown.InstanceTypeLabel, wellknown.ArchLabel, wellknown.OSLabel
	pf := "Scheduling > Preferential Fallback > "
	ic := "Scheduling > Instance Type Compatibility > "
	bothArchs := withReqs(npReq(arch, in, "arm64", "amd64"))
	amd := withReqs(npReq(arch, in, "amd64"))
	terms := func(zones ...string) podOpt {
		var ts [][]corev1.NodeSelectorRequirement
		for _, z := range zones {
			ts = append(ts, []corev1.NodeSelectorRequirement{expr(zone, in, z)})
		}
		return requiredAffinity(ts...)
	}
	// gpuTypes is fake.InstanceTypes(5) with 25 of one made-up GPU on the
	// first type and 25 of another on the second.
	const gpu1, gpu2 = "karpenter.sh/super-great-gpu", "karpenter.sh/even-better-gpu"
	gpuTypes := func() []*InstanceType {
		its := fakeInstanceTypes(5)
		for i, g := range []corev1.ResourceName{gpu1, gpu2} {
			its[i].Capacity[g] = resourceQty("25")
			its[i].Allocatable[g] = resourceQty("25")
		}
		return its
	}
	five := func() []*InstanceType { return fakeInstanceTypes(5) }
	// withWindows adds the fake's default type as a windows one: a fake
	// type lists several operating systems, a Karpless type one.
	withWindows := func() []*InstanceType {
		w := fakeType("default-instance-type-windows", fakeTypeOpts{})
		w.Labels[os] = "windows"
		return append(fakeTypes(), w)
	}
	runConstraintCases(t, []constraintCase{
		{spec: pf + "Required > should not relax the final term", pool: []poolOpt{withReqs(npReq(zone, in, fakeZone1), npReq(it, in, "default-instance-type"))},
			pods: pods1(terms("invalid")), check: notScheduled},
		{spec: pf + "Required > should relax multiple terms", pods: pods1(terms("invalid", "invalid", fakeZone1, fakeZone2)), check: scheduledWith(zone, fakeZone1)},
		{spec: pf + "Preferred > should relax all terms",
			pods: pods1(preferredAffinity(1, expr(zone, in, "invalid")), preferredAffinity(1, expr(it, in, "invalid"))), check: scheduledWith()},
		{spec: pf + "Preferred > should relax to use lighter weights", pool: []poolOpt{withReqs(npReq(zone, in, fakeZone1, fakeZone2))},
			pods:  pods1(preferredAffinity(100, expr(it, in, "test-zone-3")), preferredAffinity(50, expr(zone, in, fakeZone2)), preferredAffinity(1, expr(zone, in, fakeZone1))),
			check: scheduledWith(zone, fakeZone2)},
		{spec: pf + "Preferred > should schedule even if preference is conflicting with requirement",
			pods: pods1(preferredAffinity(1, expr(zone, notIn, fakeZone3)), func(p *corev1.Pod) {
				p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{expr(zone, in, fakeZone3)}}}}
			}),
			check: scheduledWith(zone, fakeZone3)},
		{spec: pf + "Preferred > should schedule even if preference requirements are conflicting",
			pods: pods1(nodePreferences(expr(zone, in, "invalid"), expr(zone, notIn, "invalid"))), check: scheduledWith()},

		{spec: ic + "should not schedule if requesting more resources than any instance type has", pods: pods1(requests("cpu", "512")), check: notScheduled},
		{spec: ic + "should launch pods with different archs on different instances", pool: []poolOpt{bothArchs},
			pods: [][]podOpt{{nodeSelector(arch, "amd64")}, {nodeSelector(arch, "arm64")}}, check: onDifferentNodes},
		{spec: ic + "should exclude instance types that are not supported by the pod constraints (node affinity/instance type)", pool: []poolOpt{amd},
			pods: pods1(nodeRequirements(expr(it, in, "arm-instance-type"))), check: notScheduled},
		{spec: ic + "should exclude instance types that are not supported by the pod constraints (node affinity/operating system)", pool: []poolOpt{amd},
			pods: pods1(nodeRequirements(expr(os, in, "ios"))), check: notScheduled},
		// The pod's CPU limit is its request (the API server's defaulting).
		{spec: ic + "should exclude instance types that are not supported by the provider constraints (arch)", pool: []poolOpt{amd},
			pods: pods1(requests("cpu", "14")), check: notScheduled},
		{spec: ic + "should launch pods with different operating systems on different instances", pool: []poolOpt{bothArchs}, types: withWindows,
			pods: [][]podOpt{{nodeSelector(os, "linux")}, {nodeSelector(os, "windows")}}, check: onDifferentNodes},
		// The deprecated instance-type key, normalised.
		{spec: ic + "should launch pods with different instance type node selectors on different instances", pool: []poolOpt{bothArchs},
			pods: [][]podOpt{{nodeSelector(corev1.LabelInstanceType, "small-instance-type")}, {nodeSelector(it, "default-instance-type")}}, check: onDifferentNodes},
		{spec: ic + "should launch pods with different zone selectors on different instances", pool: []poolOpt{bothArchs},
			pods: [][]podOpt{{nodeSelector(zone, fakeZone1)}, {nodeSelector(zone, fakeZone2)}}, check: onDifferentNodes},
		{spec: ic + "should launch pods with resources that aren't on any single instance type on different instances", types: gpuTypes,
			pods: [][]podOpt{{requests(gpu1, "1")}, {requests(gpu2, "1")}}, check: onDifferentNodes},
		{spec: ic + "should fail to schedule a pod with resources requests that aren't on a single instance type", types: gpuTypes,
			pods: pods1(requests(gpu1, "1", gpu2, "1")), check: notScheduled},
		{spec: ic + "Provider Specific Labels > should filter instance types that match labels", types: five,
			pods: [][]podOpt{{nodeSelector(fakeSizeKey, "large")}, {nodeSelector(fakeSizeKey, "small")}},
			check: func(t *testing.T, s *Snapshot, r *Results, pods []*corev1.Pod) {
				scheduledWith(it, "fake-it-4")(t, s, r, pods[:1])
				scheduledWith(it, "fake-it-0")(t, s, r, pods[1:])
			}},
		{spec: ic + "Provider Specific Labels > should not schedule with incompatible labels", types: five,
			pods: [][]podOpt{{nodeSelector(fakeSizeKey, "large", it, "fake-it-0")}, {nodeSelector(fakeSizeKey, "small", it, "fake-it-4")}}, check: notScheduled},
		{spec: ic + "Provider Specific Labels > should schedule optional labels", types: five,
			pods: pods1(nodeRequirements(expr(fakeExoticKey, corev1.NodeSelectorOpExists))), check: scheduledWith(fakeExoticKey, "optional", it, "fake-it-4")},
		{spec: ic + "Provider Specific Labels > should schedule without optional labels if disallowed", types: five, pool: []poolOpt{withReqs()},
			pods: pods1(nodeRequirements(expr(fakeExoticKey, corev1.NodeSelectorOpDoesNotExist))), check: scheduledWithout(fakeExoticKey, "")},
	})
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

// Karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go, Context
// "Labels", ported whole: a NodeClaim carries a label for every custom key
// its requirements name, a value meeting them.
func TestConformanceProvisioningLabels(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/provisioning", File: provisioningSuiteFile, Spec: "Provisioning > Labels > " + spec}
	}
	in := corev1.NodeSelectorOpIn
	launch := func(t *testing.T, np *karpv1.NodePool, opts ...podOpt) map[string]string {
		t.Helper()
		p := fakePod(opts...)
		s := fakeSnapshot(nil, []*karpv1.NodePool{np}, p)
		_, labels := expectScheduled(t, s, solve(t, s), p)
		return labels
	}
	conformance.Run(t, c("should label nodes"), func(t *testing.T) {
		np := mkPool("default", withLabel("test-key-1", "test-value-1"), withReqs(
			npReq("test-key-2", in, "test-value-2"),
			npReq("test-key-3", corev1.NodeSelectorOpNotIn, "test-value-3"),
			npReq("test-key-4", corev1.NodeSelectorOpLt, "4"),
			npReq("test-key-5", corev1.NodeSelectorOpGt, "5"),
			npReq("test-key-6", corev1.NodeSelectorOpExists),
			npReq("test-key-7", corev1.NodeSelectorOpDoesNotExist),
		))
		labels := launch(t, np)
		expectLabel(t, labels, wellknown.NodePoolLabel, "default")
		expectLabel(t, labels, "test-key-1", "test-value-1")
		expectLabel(t, labels, "test-key-2", "test-value-2")
		for k, excluded := range map[string]string{"test-key-3": "test-value-3", "test-key-4": "test-value-4", "test-key-5": "test-value-5"} {
			if v, ok := labels[k]; !ok || v == excluded {
				t.Fatalf("label %s = %q (present %v), want a value other than %q", k, v, ok, excluded)
			}
		}
		// And one the requirement admits.
		for _, k := range []string{"test-key-3", "test-key-4", "test-key-5", "test-key-6"} {
			if r := RequirementsFromNodePool(np.Spec.Template.Spec.Requirements)[k]; !r.Has(labels[k]) {
				t.Fatalf("label %s=%s does not meet %s", k, labels[k], r)
			}
		}
		if _, ok := labels["test-key-7"]; ok {
			t.Fatalf("label test-key-7 set, its requirement is DoesNotExist")
		}
	})
	for _, e := range []struct{ spec, prefix string }{
		{"should label nodes with labels in the kubernetes domains", ""},
		{"should label nodes with labels in the subdomain from kubernetes domains", "subdomain."},
	} {
		conformance.Run(t, c(e.spec), func(t *testing.T) {
			for _, domain := range []string{"kubernetes.io", "k8s.io"} {
				key := e.prefix + domain + "/test"
				labels := launch(t, mkPool("default", withLabel(key, "test-value")), nodeRequirements(expr(key, in, "test-value")))
				expectLabel(t, labels, key, "test-value")
			}
		})
	}
	conformance.Run(t, c("should not label nodes with well-known labels from requirements"), func(t *testing.T) {
		labels := launch(t, mkPool("default", withReqs(npReq("foo", in, "bar"), npReq(wellknown.WindowsBuildLabel, corev1.NodeSelectorOpNotIn, "test-value"))))
		if labels[wellknown.WindowsBuildLabel] == "test-value" {
			t.Fatalf("node labelled %s=test-value", wellknown.WindowsBuildLabel)
		}
		expectLabel(t, labels, "foo", "bar")
	})
}

// Pods that select a custom key the NodePool only constrains (Exists,
// bounds) get a node that carries it: the NodeClaim's label is written
// from the merged requirement.
func TestCustomKeyLabelMeetsPods(t *testing.T) {
	np := fakePool(withReq("team", corev1.NodeSelectorOpExists), withReq("tier", corev1.NodeSelectorOpGt, "2"))
	exists := fakePod(nodeRequirements(expr("team", corev1.NodeSelectorOpExists), expr("tier", corev1.NodeSelectorOpLt, "9")))
	s := fakeSnapshot(nil, []*karpv1.NodePool{np}, exists)
	r := solve(t, s)
	_, labels := expectScheduled(t, s, r, exists)
	if PodRequirements(exists, true).MatchesLabels(labels) != nil {
		t.Fatalf("node labels %v do not meet the pod's requirements", labels)
	}
	if labels["tier"] != "3" {
		t.Fatalf("tier = %q, want the smallest value the bounds admit, 3", labels["tier"])
	}
}
