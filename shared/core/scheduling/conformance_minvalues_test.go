package scheduling

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go, Context
// "MinValuesPolicy", ported whole: Karpenter's MIN_VALUES_POLICY is
// Options.MinValues; its minValues-relaxed annotation is
// NewNodeClaim.MinValuesRelaxed (planning writes the annotation from it).
func TestConformanceMinValuesPolicy(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/provisioning", File: provisioningSuiteFile, Spec: "Provisioning > MinValuesPolicy > " + spec}
	}
	in := corev1.NodeSelectorOpIn
	spot := wellknown.CapacityTypeSpot
	// arm is the Context's instance types: 4 CPU, 4Gi, arm64, one spot
	// offering each at 0.52 (or the prices given), in the zones given.
	arm := func(name string, offers ...Offering) *InstanceType {
		return fakeType(name, fakeTypeOpts{arch: "arm64", resources: rl("cpu", "4", "memory", "4Gi"), offerings: offers})
	}
	twoTypes := func() []*InstanceType {
		return []*InstanceType{arm("instance-type-1", fakeOffer(spot, "test-zone-1-spot", 0.52)), arm("instance-type-2", fakeOffer(spot, "test-zone-2-spot", 0.52))}
	}
	oneTypeTwoZones := func() []*InstanceType {
		return []*InstanceType{arm("instance-type-1", fakeOffer(spot, fakeZone1, 0.52), fakeOffer(spot, fakeZone2, 0.54))}
	}
	minReq := func(key string, n int, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		r := npReq(key, in, vals...)
		if n > 0 {
			r.MinValues = &n
		}
		return r
	}
	types3 := []string{"instance-type-1", "instance-type-2", "instance-type-3"}
	zones3 := []string{fakeZone1, fakeZone2, fakeZone3}
	pool := func(name string, weight int32, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
		return mkPool(name, withWeight(weight), withReqs(reqs...))
	}
	podReq := requests("cpu", "0.9", "memory", "0.9Gi")
	run := func(t *testing.T, policy MinValuesPolicy, its []*InstanceType, pools ...*karpv1.NodePool) (*corev1.Pod, *Results, *Snapshot) {
		t.Helper()
		p := fakePod(podReq)
		s := fakeSnapshot(its, pools, p)
		opts := Provisioning()
		opts.MinValues = policy
		r := Solve(s, opts)
		checkInvariants(t, s, r)
		return p, r, s
	}
	// relaxed checks the claim of p: scheduled on instance-type-1 from
	// NodePool pool, marked relaxed, with the requirements given among its
	// own.
	relaxed := func(t *testing.T, s *Snapshot, r *Results, p *corev1.Pod, pool string, want ...karpv1.NodeSelectorRequirementWithMinValues) {
		t.Helper()
		_, labels := expectScheduled(t, s, r, p)
		expectLabel(t, labels, wellknown.InstanceTypeLabel, "instance-type-1")
		cl := claimOf(r, p)
		if cl.NodePool != pool || !cl.MinValuesRelaxed {
			t.Fatalf("claim of NodePool %s, relaxed %v; want %s, relaxed", cl.NodePool, cl.MinValuesRelaxed, pool)
		}
		for _, w := range want {
			if !slices.ContainsFunc(cl.Requirements, func(h karpv1.NodeSelectorRequirementWithMinValues) bool {
				return h.Key == w.Key && h.Operator == w.Operator && slices.Equal(h.Values, w.Values) && h.MinValues != nil && *h.MinValues == *w.MinValues
			}) {
				t.Fatalf("requirements %v lack %v minValues %d", cl.Requirements, w, *w.MinValues)
			}
		}
	}

	conformance.Run(t, c("with instance type requirements > with MinValuesPolicy set to Strict > should not schedule when minValues requirement is not met"), func(t *testing.T) {
		p, r, _ := run(t, MinValuesStrict, twoTypes(), pool("default", 100, minReq(wellknown.InstanceTypeLabel, 3, types3...)))
		expectNotScheduled(t, r, p)
	})
	conformance.Run(t, c("with instance type requirements > with MinValuesPolicy set to BestEffort > should schedule even when minValues requirement is not met"), func(t *testing.T) {
		p, r, s := run(t, MinValuesBestEffort, twoTypes(), pool("default", 100, minReq(wellknown.InstanceTypeLabel, 3, types3...)))
		relaxed(t, s, r, p, "default", minReq(wellknown.InstanceTypeLabel, 2, "instance-type-1", "instance-type-2"))
	})
	conformance.Run(t, c("with instance type requirements > with MinValuesPolicy set to BestEffort > should relax minValues before falling back to other nodepools"), func(t *testing.T) {
		p, r, s := run(t, MinValuesBestEffort, twoTypes(),
			pool("default", 100, minReq(wellknown.InstanceTypeLabel, 3, types3...)),
			pool("no-min-values", 10, minReq(wellknown.InstanceTypeLabel, 0, types3...)))
		relaxed(t, s, r, p, "default", minReq(wellknown.InstanceTypeLabel, 2, "instance-type-1", "instance-type-2"))
	})
	conformance.Run(t, c("with instance type requirements > with MinValuesPolicy set to BestEffort > should choose nodepool with higher weight when relaxing minValues"), func(t *testing.T) {
		p, r, s := run(t, MinValuesBestEffort, twoTypes(),
			pool("default", 100, minReq(wellknown.InstanceTypeLabel, 3, types3...)),
			pool("lower-weight", 10, minReq(wellknown.InstanceTypeLabel, 3, types3...)))
		relaxed(t, s, r, p, "default", minReq(wellknown.InstanceTypeLabel, 2, "instance-type-1", "instance-type-2"))
	})
	conformance.Run(t, c("with zone requirements > with MinValuesPolicy set to Strict > should not schedule when zone minValues requirement is not met"), func(t *testing.T) {
		p, r, _ := run(t, MinValuesStrict, oneTypeTwoZones(), pool("default", 0, minReq(wellknown.ZoneLabel, 3, zones3...)))
		expectNotScheduled(t, r, p)
	})
	conformance.Run(t, c("with zone requirements > with MinValuesPolicy set to BestEffort > should schedule even when zone minValues requirement is not met"), func(t *testing.T) {
		p, r, s := run(t, MinValuesBestEffort, oneTypeTwoZones(), pool("default", 0, minReq(wellknown.ZoneLabel, 3, zones3...)))
		relaxed(t, s, r, p, "default", minReq(wellknown.ZoneLabel, 2, zones3...))
		_, labels := expectScheduled(t, s, r, p)
		if z := labels[wellknown.ZoneLabel]; z != fakeZone1 && z != fakeZone2 {
			t.Fatalf("zone %s", z)
		}
	})
	conformance.Run(t, c("with both instance type and zone requirements > with MinValuesPolicy set to BestEffort > should schedule when minValues requirement is not met"), func(t *testing.T) {
		p, r, s := run(t, MinValuesBestEffort, oneTypeTwoZones(),
			pool("default", 100, minReq(wellknown.InstanceTypeLabel, 3, types3...), minReq(wellknown.ZoneLabel, 3, zones3...)))
		relaxed(t, s, r, p, "default", minReq(wellknown.InstanceTypeLabel, 1, "instance-type-1"), minReq(wellknown.ZoneLabel, 2, zones3...))
	})
}
