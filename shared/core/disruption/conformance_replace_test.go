package disruption

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/disruption/consolidation_test.go's
// Metrics and Replace contexts, ported. A DescribeTable's "if the
// candidate is spot node" entry runs with spot-to-spot consolidation on
// (Karpenter's suite turns the gate on) and enough cheaper spot types for
// its rule; Karpenter's failed_validations_total is Validation.Failed,
// which the tick counts.
func TestConformanceConsolidationReplace(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: consolidationFile, Spec: "Consolidation > " + spec}
	}
	od, spot := wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot
	entries := []struct {
		name string
		spot bool
	}{{"if the candidate is on-demand node", false}, {"if the candidate is spot node", true}}
	// replaceFixture is Karpenter's suite for a table entry: spot-to-spot
	// is on and there are more than 15 spot types cheaper than m.4xlarge;
	// the pool allows spot for a spot candidate (Karpenter's on-demand
	// types have no spot offering).
	replaceFixture := func(t *testing.T, isSpot bool) (*fixture, string) {
		f := newFixture(t)
		f.types = manyTypes()
		f.opts.SpotToSpotConsolidation = true
		if isSpot {
			allowSpot(f.pool())
			return f, spot
		}
		return f, od
	}

	// Metrics
	conformance.Run(t, c("Metrics > should correctly report eligible nodes"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		p := f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		if got := f.eligible(SingleNodeConsolidation); got != 0 {
			t.Fatalf("%d eligible for underutilized, want 0", got)
		}
		p.Annotations = map[string]string{}
		if got := f.eligible(SingleNodeConsolidation); got != 1 {
			t.Fatalf("%d eligible for underutilized, want 1", got)
		}
	})
	// The validators' mutations during the wait (validation_test.go).
	mutations := []struct {
		name   string
		mutate func(f *fixture, nodes []string)
	}{
		{"blocked by budgets", func(f *fixture, _ []string) {
			f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0%"}}
		}},
		{"pod churn", func(f *fixture, nodes []string) {
			f.pod("churn", nodes[0], "100m", "64Mi")
			f.claim(nodes[0]).Annotations[NominatedUntilAnnotation] = f.now.Add(NominationWindow(0)).Format(time.RFC3339)
		}},
		{"nominated", func(f *fixture, nodes []string) {
			for _, n := range nodes {
				f.claim(n).Annotations[NominatedUntilAnnotation] = f.now.Add(NominationWindow(0)).Format(time.RFC3339)
			}
		}},
	}
	invalidated := func(table string, entries []string, setup func(f *fixture) ([]string, Method), want int) {
		for i, e := range entries {
			mut := mutations[i]
			conformance.Run(t, c("Metrics > "+table+" > "+e), func(t *testing.T) {
				f := newFixture(t)
				nodes, m := setup(f)
				cmd, rec := f.propose(t)
				if cmd.Method != m {
					t.Fatalf("proposed %s, want %s", cmd, m)
				}
				// The wait's mutation lands before validation runs.
				f.now = f.now.Add(rec.Method.ValidationDelay() + 1)
				mut.mutate(f, nodes)
				v := Revalidate(f.input(), rec)
				if v.Command != nil {
					t.Fatalf("validated %s, want it rejected", v.Command)
				}
				if v.Failed != want {
					t.Fatalf("%d failed validations (%s), want %d", v.Failed, v.Why, want)
				}
			})
		}
	}
	invalidated("should correctly report invalidated commands for emptiness disruption",
		[]string{"when a candidate is blocked by budgets", "when candidates are filtered out due to pod churn", "when candidates are filtered out due to candidate being nominated"},
		func(f *fixture) ([]string, Method) {
			f.node("n", "m.4xlarge", zones[0], od)
			return []string{"n"}, Emptiness
		}, 1)
	invalidated("should correctly report invalidated commands for multi node disruption",
		[]string{"when candidates are blocked by budgets", "when candidates are filtered out due to pod churn", "when candidates are filtered out due to candidate being nominated"},
		func(f *fixture) ([]string, Method) {
			f.node("n", "m.4xlarge", zones[0], od)
			f.node("n2", "m.4xlarge", zones[0], od)
			f.pod("p0", "n", "1", "1Gi")
			f.pod("p1", "n2", "1", "1Gi")
			return []string{"n", "n2"}, MultiNodeConsolidation
		}, 2)
	invalidated("should correctly report invalidated commands for single node disruption",
		[]string{"when a candidate is blocked by budgets", "when candidates are filtered out due to pod churn", "when candidates are filtered out due to candidate being nominated"},
		func(f *fixture) ([]string, Method) {
			f.node("n", "m.4xlarge", zones[0], od)
			f.pod("p", "n", "1", "1Gi")
			return []string{"n"}, SingleNodeConsolidation
		}, 1)

	// Replace
	for _, e := range entries {
		conformance.Run(t, c("Replace > can replace node > "+e.name), func(t *testing.T) {
			f, ct := replaceFixture(t, e.spot)
			f.node("n", "m.4xlarge", zones[0], ct)
			f.pod("p", "n", "1", "1Gi")
			_, rec := f.propose(t)
			cmd, why := f.validateAfterWait(rec)
			if cmd == nil || cmd.Decision() != "replace" || names(cmd.Candidates) != "n" {
				t.Fatalf("validated %v (%s), want n replaced", cmd, why)
			}
			if slices.ContainsFunc(cmd.Replacements[0].InstanceTypes, func(it *scheduling.InstanceType) bool { return it.Name == "m.4xlarge" }) {
				t.Fatalf("the replacement may launch the candidate's own type")
			}
		})
	}
	conformance.Run(t, c("Replace > cannot replace spot with spot if it is part of the 15 cheapest instance types."), func(t *testing.T) {
		// c0.xlarge is the second cheapest spot type that holds the pod:
		// one cheaper option only.
		f, _ := replaceFixture(t, true)
		f.node("n", "c0.xlarge", zones[0], spot)
		f.pod("p", "n", "1", "1Gi")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
	// spotTypes are Karpenter's 18 spot types priced 1.00, 1.10, ... with
	// the 17th made the cheapest of all (0.001): the candidate is the 18th.
	spotTypes := func() []*scheduling.InstanceType {
		var out []*scheduling.InstanceType
		for i := range 18 {
			price := 1.0 + float64(i)*0.1
			if i == 16 {
				price = 0.001
			}
			out = append(out, mkOfferings(fmt.Sprintf("s%02d.xlarge", i), 4, 16, offer(zones[0], spot, price, true)))
		}
		return out
	}
	truncation := func(spec string, minValues, want int) {
		conformance.Run(t, c("Replace > "+spec), func(t *testing.T) {
			f := newFixture(t)
			f.types = spotTypes()
			f.opts.SpotToSpotConsolidation = true
			allowSpot(f.pool())
			if minValues > 0 {
				f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpExists, MinValues: new(minValues)})
			}
			f.node("n", "s17.xlarge", zones[0], spot)
			f.pod("p", "n", "1", "1Gi")
			cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
			if cmd.Decision() != "replace" {
				t.Fatalf("command %s", cmd)
			}
			var got []string
			for _, it := range cmd.Replacements[0].InstanceTypes {
				got = append(got, it.Name)
			}
			// The cheapest first: s16, then s00, s01, ...
			wantNames := []string{"s16.xlarge"}
			for i := range want - 1 {
				wantNames = append(wantNames, fmt.Sprintf("s%02d.xlarge", i))
			}
			slices.Sort(got)
			slices.Sort(wantNames)
			if !slices.Equal(got, wantNames) {
				t.Fatalf("replacement types %v, want %v", got, wantNames)
			}
			reqs := scheduling.RequirementsFromNodePool(cmd.Replacements[0].Requirements)
			if v := reqs.Get(wellknown.InstanceTypeLabel).Values(); len(v) != want {
				t.Fatalf("the replacement's instance-type requirement has %d values, want %d", len(v), want)
			}
		})
	}
	truncation("spot to spot consolidation should order the instance types by price before enforcing minimum flexibility.", 0, 15)
	truncation("spot to spot consolidation should consider the max of default and minimum number of instanceTypeOptions from minValues in requirement for truncation if minimum number of instanceTypeOptions from minValues in requirement is greater than 15.", 16, 16)
	truncation("spot to spot consolidation should consider the default for truncation if minimum number of instanceTypeOptions from minValues in requirement is less than 15.", 10, 15)
	conformance.Run(t, c("Replace > should handle failing filterOutSameInstanceType correctly (without a panic) when minValues isn't satisfied"), func(t *testing.T) {
		f := newFixture(t)
		f.types = []*scheduling.InstanceType{
			mkOfferings("current.od", 4, 16, offer(zones[0], od, 0.5, true)),
			mkOfferings("other.od", 4, 16, offer(zones[0], od, 0.4, true)),
		}
		f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpExists, MinValues: new(2)})
		for _, n := range []string{"a", "b", "c"} {
			f.node(n, "current.od", zones[0], od)
		}
		f.pod("p0", "a", "2", "1Gi")
		f.pod("p1", "b", "2", "1Gi")
		f.pod("p2", "c", "2", "1Gi")
		f.pod("p3", "c", "2", "1Gi")
		// Merging two nodes needs a replacement cheaper than current.od,
		// which leaves one type for minValues 2: one node goes alone.
		p := Compute(f.input())
		if p.Command == nil || p.Command.Decision() != "delete" || len(p.Command.Candidates) != 1 {
			t.Fatalf("command %v, want one node deleted (two left)", p.Command)
		}
	})
	for _, e := range entries {
		conformance.Run(t, c("Replace > Consolidation should fail if filterByPrice breaks the minimum requirement from the NodePools. > "+e.name), func(t *testing.T) {
			// 18 types of the candidate's capacity type; it runs the 16th
			// cheapest, so 15 are cheaper, short of minValues 16.
			f := newFixture(t)
			ct := od
			if e.spot {
				ct = spot
			}
			f.types = nil
			for i := range 18 {
				f.types = append(f.types, mkOfferings(fmt.Sprintf("t%02d.xlarge", i), 4, 16, offer(zones[0], ct, 1.0+float64(i)*0.1, true)))
			}
			allowSpot(f.pool())
			f.opts.SpotToSpotConsolidation = true
			f.pool().Spec.Template.Spec.Requirements = append(f.pool().Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpExists, MinValues: new(16)})
			f.node("n", "t15.xlarge", zones[0], ct)
			f.pod("p", "n", "1", "1Gi")
			if p := Compute(f.input()); p.Command != nil {
				t.Fatalf("command %s", p.Command)
			}
		})
	}
	for _, e := range entries {
		conformance.Run(t, c("Replace > can replace nodes if another nodePool returns no instance types > "+e.name), func(t *testing.T) {
			f, ct := replaceFixture(t, e.spot)
			other := f.addPool("other")
			other.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Kind: "EC2NodeClass", Name: "none", Group: "karpenter.k8s.aws"}
			f.extraClasses = map[string]*scheduling.NodeClass{"none": {Name: "none", Ready: true}}
			f.node("n", "m.4xlarge", zones[0], ct)
			f.pod("p", "n", "1", "1Gi")
			cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
			if cmd.Decision() != "replace" || cmd.Replacements[0].NodePool != "default" {
				t.Fatalf("command %s, want a replacement from the default NodePool", cmd)
			}
		})
	}
	pdbCase := func(table string, allowed bool, setup func(f *fixture)) {
		for _, e := range entries {
			conformance.Run(t, c("Replace > "+table+" > "+e.name), func(t *testing.T) {
				f, ct := replaceFixture(t, e.spot)
				f.node("n", "m.4xlarge", zones[0], ct)
				setup(f)
				p := Compute(f.input())
				if !allowed {
					if p.Command != nil {
						t.Fatalf("command %s", p.Command)
					}
					return
				}
				cmd := mustCommand(t, p, SingleNodeConsolidation)
				if cmd.Decision() != "replace" || names(cmd.Candidates) != "n" {
					t.Fatalf("command %s, want n replaced", cmd)
				}
			})
		}
	}
	app := labelled(map[string]string{"app": "test"})
	blockingPDB := func(f *fixture, mods ...func(*policyv1.PodDisruptionBudget)) {
		f.pdb("pdb", 0, map[string]string{"app": "test"}, append([]func(*policyv1.PodDisruptionBudget){func(p *policyv1.PodDisruptionBudget) {
			zero := intstr.FromInt(0)
			p.Spec.MaxUnavailable = &zero
			p.Status.CurrentHealthy, p.Status.DesiredHealthy, p.Status.ExpectedPods = 1, 1, 1
		}}, mods...)...)
	}
	pdbCase("can replace nodes, considers PDB", false, func(f *fixture) {
		for i := range 3 {
			f.pod(fmt.Sprintf("p%d", i), "n", "1", "1Gi", app)
		}
		blockingPDB(f)
	})
	pdbCase("can replace nodes, considers PDB policy", true, func(f *fixture) {
		// Unready pods a PDB's AlwaysAllow policy lets go.
		for i := range 3 {
			f.pod(fmt.Sprintf("p%d", i), "n", "1", "1Gi", app, func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			})
		}
		always := policyv1.AlwaysAllow
		blockingPDB(f, func(p *policyv1.PodDisruptionBudget) { p.Spec.UnhealthyPodEvictionPolicy = &always })
	})
	pdbCase("can replace nodes, PDB namespace must match", true, func(f *fixture) {
		f.pod("p", "n", "1", "1Gi", app)
		blockingPDB(f, func(p *policyv1.PodDisruptionBudget) { p.Namespace = "other" })
	})
	// The other node holds one of the candidate's two 3-core pods, not
	// both: the candidate is replaced, the other stays.
	pdbCase("can replace nodes, considers karpenter.sh/do-not-disrupt set to true on nodes", true, func(f *fixture) {
		ct := f.claim("n").Labels[wellknown.CapacityTypeLabel]
		f.node("annotated", "m.2xlarge", zones[0], ct).Annotations[wellknown.DoNotDisruptAnnotation] = "true"
		f.pod("p0", "n", "3", "1Gi")
		f.pod("p1", "n", "3", "1Gi")
		f.pod("p2", "annotated", "3", "1Gi")
	})
	pdbCase("can replace nodes, considers karpenter.sh/do-not-disrupt set to true on pods", true, func(f *fixture) {
		ct := f.claim("n").Labels[wellknown.CapacityTypeLabel]
		f.node("n2", "m.2xlarge", zones[0], ct)
		f.pod("p0", "n", "3", "1Gi")
		f.pod("p1", "n", "3", "1Gi")
		f.pod("p2", "n2", "3", "1Gi", doNotDisrupt("true"))
	})
}
