package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/disruption/emptiness_test.go and
// drift_test.go, ported through Compute and Validate.
func TestConformanceEmptiness(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: emptinessFile, Spec: "Emptiness > " + spec}
	}
	od := wellknown.CapacityTypeOnDemand
	one := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		return f
	}
	deletes := func(t *testing.T, f *fixture, want string) {
		t.Helper()
		cmd := mustCommand(t, Compute(f.input()), Emptiness)
		if got := names(cmd.Candidates); got != want {
			t.Fatalf("empties %s, want %s", got, want)
		}
	}
	keeps := func(t *testing.T, f *fixture) {
		t.Helper()
		if p := Compute(f.input()); p.Command != nil && p.Command.Method == Emptiness {
			t.Fatalf("command %s", p.Command)
		}
	}

	conformance.Run(t, c("Metrics > should correctly report eligible nodes"), func(t *testing.T) {
		f := one(t)
		f.claim("n").SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		if n := f.eligible(Emptiness); n != 0 {
			t.Fatalf("%d eligible before the node is consolidatable", n)
		}
		f.claim("n").SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "", "", metav1.NewTime(f.now))
		if n := f.eligible(Emptiness); n != 1 {
			t.Fatalf("%d eligible, want 1", n)
		}
	})
	budget := func(spec, nodes string, want int) {
		conformance.Run(t, c("Budgets > "+spec), func(t *testing.T) {
			f := newFixture(t)
			f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: nodes}}
			f.nodes("n", 10, "m.4xlarge")
			p := Compute(f.input())
			got := 0
			if p.Command != nil {
				got = len(p.Command.Candidates)
			}
			if got != want {
				t.Fatalf("%d empties, want %d", got, want)
			}
		})
	}
	budget("should allow all empty nodes to be disrupted", "100%", 10)
	budget("should allow no empty nodes to be disrupted", "0%", 0)
	budget("should only allow 3 empty nodes to be disrupted", "30%", 3)
	pools := func(spec, nodes string, want int) {
		conformance.Run(t, c("Budgets > "+spec), func(t *testing.T) {
			f := newFixture(t)
			for i := range 10 {
				pool := fmt.Sprintf("np-%d", i)
				f.addPool(pool).Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: nodes}}
				for j := range 3 {
					f.nodeIn(pool, fmt.Sprintf("%s-%d", pool, j), "m.4xlarge", zones[0], od)
				}
			}
			p := Compute(f.input())
			per := map[string]int{}
			if p.Command != nil {
				for _, cn := range p.Command.Candidates {
					per[cn.NodePool.Name]++
				}
			}
			for i := range 10 {
				if got := per[fmt.Sprintf("np-%d", i)]; got != want {
					t.Fatalf("per nodepool %v, want %d each", per, want)
				}
			}
		})
	}
	pools("should allow 2 nodes from each nodePool to be deleted", "50%", 2)
	pools("should allow all nodes from each nodePool to be deleted", "100%", 3)

	conformance.Run(t, c("Emptiness > can delete empty nodes"), func(t *testing.T) {
		deletes(t, one(t), "n")
	})
	conformance.Run(t, c("Emptiness > can delete empty and drifted nodes"), func(t *testing.T) {
		f := one(t)
		drifted(f, "n")
		deletes(t, f, "n")
	})
	conformance.Run(t, c("Emptiness > should ignore nodes without the consolidatable status condition"), func(t *testing.T) {
		f := one(t)
		nc := f.claim("n")
		var kept []metav1.Condition
		for _, cond := range nc.Status.Conditions {
			if cond.Type != karpv1.ConditionTypeConsolidatable {
				kept = append(kept, cond)
			}
		}
		nc.Status.Conditions = kept
		keeps(t, f)
	})
	conformance.Run(t, c("Emptiness > should ignore nodes with the karpenter.sh/do-not-disrupt annotation"), func(t *testing.T) {
		f := one(t)
		f.nodeObj("n").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		keeps(t, f)
	})
	conformance.Run(t, c("Emptiness > should delete nodes with the karpenter.sh/do-not-disrupt annotation set to false"), func(t *testing.T) {
		f := one(t)
		f.nodeObj("n").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "false"}
		deletes(t, f, "n")
	})
	conformance.Run(t, c("Emptiness > should ignore nodes that have pods"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi")
		keeps(t, f)
	})
	conformance.Run(t, c("Emptiness > should ignore nodes with the consolidatable status condition set to false"), func(t *testing.T) {
		f := one(t)
		f.claim("n").SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		keeps(t, f)
	})
	conformance.Run(t, c("can delete multiple empty nodes"), func(t *testing.T) {
		f := one(t)
		f.node("n2", "m.4xlarge", zones[0], od)
		deletes(t, f, "n,n2")
	})
	conformance.Run(t, c("considers pending pods when consolidating"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		f.pod("unsched", "", "14", "1Gi") // needs this node's room
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("will consider a node with a DaemonSet pod as empty"), func(t *testing.T) {
		f := one(t)
		f.pod("ds", "n", "100m", "64Mi", ownedBy("DaemonSet"))
		deletes(t, f, "n")
	})
	conformance.Run(t, c("will consider a node with terminating Deployment pods as empty"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", func(p *corev1.Pod) {
			at := metav1.NewTime(f.now)
			p.DeletionTimestamp = &at
		})
		deletes(t, f, "n")
	})
	conformance.Run(t, c("will not consider a node with a terminating StatefulSet pod as empty"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", ownedBy("StatefulSet"), func(p *corev1.Pod) {
			at := metav1.NewTime(f.now)
			p.DeletionTimestamp = &at
		})
		keeps(t, f)
	})
	conformance.Run(t, c("should wait for the node TTL for empty nodes before consolidating"), func(t *testing.T) {
		f := one(t)
		_, rec := f.propose(t)
		if rec.Due(f.now.Add(14 * time.Second)) {
			t.Fatalf("due before the 15 s wait")
		}
		if cmd, why := f.validateAfterWait(rec); cmd == nil || names(cmd.Candidates) != "n" {
			t.Fatalf("validated %v (%s)", cmd, why)
		}
	})
	conformance.Run(t, c("Static NodePool > should not consolidate static NodePool nodes"), func(t *testing.T) {
		f := one(t)
		f.pool().Spec.Replicas = new(int64(1))
		if p := Compute(f.input()); p.Eligible[Emptiness] != 0 || p.Eligible[MultiNodeConsolidation] != 0 || p.Command != nil {
			t.Fatalf("plan %+v", p)
		}
	})
	conformance.Run(t, c("Buffer pod protection > should not disrupt a node that hosts virtual buffer pods"), func(t *testing.T) {
		f := one(t)
		f.buffer("headroom", 3, "1")
		keeps(t, f)
	})
	conformance.Run(t, c("Buffer pod protection > should disrupt a node once buffer pods are cleared"), func(t *testing.T) {
		f := one(t)
		f.buffer("headroom", 2, "1")
		keeps(t, f)
		f.snap.CapacityBuffers = nil
		deletes(t, f, "n")
	})
	conformance.Run(t, c("Buffer pod protection > should not consider a node with real pods AND buffer pods as empty"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi")
		f.buffer("headroom", 2, "1")
		keeps(t, f)
	})
}

func TestConformanceDrift(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: driftFile, Spec: "Drift > " + spec}
	}
	od := wellknown.CapacityTypeOnDemand
	// one is the Drift context's BeforeEach: a drifted node, not
	// consolidatable.
	one := func(t *testing.T) *fixture {
		f := newFixture(t)
		nc := f.node("n", "m.4xlarge", zones[0], od)
		drifted(f, "n")
		nc.SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		return f
	}
	drifts := func(t *testing.T, f *fixture, want string, replacements int) {
		t.Helper()
		cmd := mustCommand(t, Compute(f.input()), Drift)
		if names(cmd.Candidates) != want || len(cmd.Replacements) != replacements {
			t.Fatalf("command %s, want %s with %d replacement(s)", cmd, want, replacements)
		}
	}
	none := func(t *testing.T, f *fixture) {
		t.Helper()
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	}

	conformance.Run(t, c("Metrics > should correctly report eligible drifted nodes"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		if n := f.eligible(Drift); n != 0 {
			t.Fatalf("%d eligible before drift", n)
		}
		drifted(f, "n")
		if n := f.eligible(Drift); n != 1 {
			t.Fatalf("%d eligible, want 1", n)
		}
	})
	conformance.Run(t, c("Budgets > should only consider 3 nodes allowed to be disrupted because of budgets"), func(t *testing.T) {
		f := newFixture(t)
		f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "30%"}}
		for i, n := range f.nodes("n", 10, "m.4xlarge") {
			drifted(f, n)
			f.claim(n).SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
			f.pod(fmt.Sprintf("p%d", i), n, "15", "1Gi")
		}
		taken := 0
		for range 5 {
			p := Compute(f.input())
			if left := p.Budgets[karpv1.DisruptionReasonDrifted]["default"].Left; left != 3-taken {
				t.Fatalf("%d left after %d drifted, want %d", left, taken, 3-taken)
			}
			if p.Command == nil {
				break
			}
			if p.Command.Method != Drift && p.Command.Method != Emptiness {
				t.Fatalf("command %s", p.Command)
			}
			for _, cn := range p.Command.Candidates {
				at := metav1.NewTime(f.now)
				cn.NodeClaim.DeletionTimestamp = &at
				taken++
			}
		}
		if taken != 3 {
			t.Fatalf("%d disrupted, want 3", taken)
		}
	})
	conformance.Run(t, c("Drift > should continue to the next drifted node if the first cannot reschedule all pods"), func(t *testing.T) {
		f := one(t)
		f.pod("huge", "n", "150", "1Gi")
		f.node("n2", "m.4xlarge", zones[0], od)
		drifted(f, "n2")
		f.pod("p", "n2", "1", "1Gi")
		drifts(t, f, "n2", 1)
	})
	conformance.Run(t, c("Drift > should ignore nodes without the drifted status condition"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od).SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		f.pod("p", "n", "1", "1Gi")
		none(t, f)
	})
	conformance.Run(t, c("Drift > should ignore nodes with the drifted status condition set to false"), func(t *testing.T) {
		f := one(t)
		f.claim("n").SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		f.pod("p", "n", "1", "1Gi")
		none(t, f)
	})
	conformance.Run(t, c("Drift > should ignore nodes with the karpenter.sh/do-not-disrupt annotation set to true"), func(t *testing.T) {
		f := one(t)
		f.nodeObj("n").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		none(t, f)
	})
	conformance.Run(t, c("Drift > should delete drifted nodes with the karpenter.sh/do-not-disrupt annotation set to false"), func(t *testing.T) {
		f := one(t)
		f.nodeObj("n").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "false"}
		drifts(t, f, "n", 0)
	})
	conformance.Run(t, c("Drift > should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation set to true"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		none(t, f)
	})
	conformance.Run(t, c("Drift > should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation set to true when the NodePool's TerminationGracePeriod is not nil"), func(t *testing.T) {
		f := one(t)
		f.claim("n").Spec.TerminationGracePeriod = &metav1.Duration{Duration: 300 * time.Second}
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		// The node may drift (eventual disruption), but its pod cannot be
		// evicted: nothing is launched for it.
		if p := Compute(f.input()); p.Command != nil && len(p.Command.Replacements) != 0 {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("Drift > should not create replacements for drifted nodes that have pods with the blocking PDBs when the NodePool's TerminationGracePeriod is not nil"), func(t *testing.T) {
		f := one(t)
		f.claim("n").Spec.TerminationGracePeriod = &metav1.Duration{Duration: 300 * time.Second}
		f.pod("p", "n", "1", "1Gi", labelled(map[string]string{"test": "value"}))
		f.pdb("pdb", 0, map[string]string{"test": "value"}, func(p *policyv1.PodDisruptionBudget) {
			zero := intstr.FromInt(0)
			p.Spec.MaxUnavailable = &zero // fully blocking, as Karpenter's
		})
		if p := Compute(f.input()); p.Command != nil && len(p.Command.Replacements) != 0 {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("Drift > should not drift nodes with pods that have a duration-based do-not-disrupt annotation that is still active"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("5h"))
		none(t, f)
	})
	conformance.Run(t, c("Drift > should drift nodes with pods that have an invalid do-not-disrupt annotation format"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("invalid"))
		drifts(t, f, "n", 1)
	})
	conformance.Run(t, c("Drift > should not drift nodes until the longest duration-based do-not-disrupt grace period expires across multiple pods"), func(t *testing.T) {
		f := one(t)
		f.pod("p1", "n", "1", "1Gi", doNotDisrupt("2h"))
		f.pod("p2", "n", "1", "1Gi", doNotDisrupt("4h")) // the pods started 3 h ago
		none(t, f)
		f.now = f.now.Add(90 * time.Minute)
		drifts(t, f, "n", 1)
	})
	conformance.Run(t, c("Drift > should replace drifted nodes"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi")
		drifts(t, f, "n", 1)
	})
	conformance.Run(t, c("Drift > should delete drifted nodes"), func(t *testing.T) {
		f := one(t)
		f.node("other", "m.4xlarge", zones[0], od).SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		f.pod("p", "n", "1", "1Gi")
		drifts(t, f, "n", 0)
	})
	conformance.Run(t, c("Drift > should delete drifted nodes when they are empty and consolidation is disabled"), func(t *testing.T) {
		f := one(t)
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		drifts(t, f, "n", 0)
	})
	conformance.Run(t, c("Drift > should drift empty nodes before non-empty nodes"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi")
		f.node("empty", "m.4xlarge", zones[0], od)
		f.claim("empty").SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		drifted(f, "empty")
		drifts(t, f, "empty", 0)
	})
	conformance.Run(t, c("Drift > should delete drifted nodes when they are empty and consolidatable"), func(t *testing.T) {
		f := one(t)
		f.claim("n").SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, "", "", metav1.NewTime(f.now))
		// Emptiness comes first and takes it.
		cmd := mustCommand(t, Compute(f.input()), Emptiness)
		if names(cmd.Candidates) != "n" {
			t.Fatalf("command %s", cmd)
		}
	})
	conformance.Run(t, c("Drift > can replace drifted nodes with multiple nodes"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.large")
		f.node("n", "m.large", zones[0], od)
		drifted(f, "n")
		f.claim("n").SetCondition(karpv1.ConditionTypeConsolidatable, metav1.ConditionFalse, "", "", metav1.NewTime(f.now))
		for i := range 3 {
			f.pod(fmt.Sprintf("p%d", i), "n", "600m", "2Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spread": "yes"}}, TopologyKey: wellknown.HostnameLabel,
				}}}}
				p.Labels = map[string]string{"spread": "yes"}
			})
		}
		drifts(t, f, "n", 3)
	})
	conformance.Run(t, c("Drift > should drift one non-empty node at a time, starting with the earliest drift"), func(t *testing.T) {
		f := newFixture(t)
		for i, n := range []string{"a", "b"} {
			f.node(n, "m.4xlarge", zones[0], od)
			f.pod("p-"+n, n, "15", "1Gi") // each only fits a node of its own
			f.claim(n).SetCondition(karpv1.ConditionTypeDrifted, metav1.ConditionTrue, AMIDrift, AMIDrift, metav1.NewTime(f.now.Add(-time.Duration(i)*time.Hour)))
		}
		drifts(t, f, "b", 1)
	})
	conformance.Run(t, c("Static NodePool > should not consider static nodepool for drift"), func(t *testing.T) {
		// Static NodePools drift through StaticDrift, not Drift: the
		// command replaces the node in kind (staticdrift_test.go).
		f := one(t)
		f.pool().Spec.Replicas = new(int64(1))
		f.pod("p", "n", "1", "1Gi")
		p := Compute(f.input())
		if p.Command != nil && len(p.Command.Replacements) != 1 {
			t.Fatalf("command %s, want the node replaced in kind (StaticDrift)", p.Command)
		}
	})
}
