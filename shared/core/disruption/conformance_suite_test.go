package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/disruption/suite_test.go, ported:
// Candidate Filtering through the candidate a method builds (graceful or
// eventual, Karpenter's disruption classes) and the DisruptionBlocked
// notes the plan reports; BuildDisruptionBudgetMapping through the
// budgets a plan computes; Pod Eviction Cost through podutil.
func TestConformanceSuite(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: suiteFile, Spec: spec}
	}
	od := wellknown.CapacityTypeOnDemand
	one := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		return f
	}
	tgp := func(f *fixture) {
		f.claim("n").Spec.TerminationGracePeriod = &metav1.Duration{Duration: 300 * time.Second}
	}
	// blocked checks the claim is no candidate for why, and, when note is
	// set, that the plan tells it as a DisruptionBlocked Event on the node
	// and the claim.
	blocked := func(t *testing.T, f *fixture, eventual bool, why string, note bool) {
		t.Helper()
		if got := f.candidateWhy("n", eventual); got != why {
			t.Fatalf("why %q, want %q", got, why)
		}
		if !note {
			return
		}
		want := sentence(why)
		for _, n := range Compute(f.input()).Blocked {
			if n.NodeClaim == "n" && n.Message == want && n.Node == "n" {
				return
			}
		}
		t.Fatalf("no DisruptionBlocked %q", want)
	}
	candidate := func(t *testing.T, f *fixture, eventual bool) {
		t.Helper()
		if why := f.candidateWhy("n", eventual); why != "" {
			t.Fatalf("not a candidate: %s", why)
		}
	}
	dnd := `pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/p)`
	pdbBlocks := `pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])`
	withPDB := func(f *fixture, mods ...func(*corev1.Pod)) {
		f.pod("p", "n", "1", "1Gi", append([]func(*corev1.Pod){labelled(map[string]string{"test": "value"})}, mods...)...)
		f.pdb("pdb", 0, map[string]string{"test": "value"})
	}
	cf := func(spec string) conformance.Case { return c("Candidate Filtering > " + spec) }

	conformance.Run(t, cf("should not consider candidates that have do-not-disrupt pods scheduled and no terminationGracePeriod"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		blocked(t, f, false, dnd, true)
	})
	conformance.Run(t, cf("should not consider candidates that have do-not-disrupt mirror pods scheduled"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"), ownedBy("Node"))
		blocked(t, f, false, dnd, true)
	})
	conformance.Run(t, cf("should consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for eventual disruption"), func(t *testing.T) {
		f := one(t)
		tgp(f)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		candidate(t, f, true)
	})
	conformance.Run(t, cf("should consider candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for eventual disruption"), func(t *testing.T) {
		f := one(t)
		tgp(f)
		withPDB(f)
		candidate(t, f, true)
	})
	conformance.Run(t, cf("should not consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for graceful disruption"), func(t *testing.T) {
		f := one(t)
		tgp(f)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		blocked(t, f, false, dnd, true)
	})
	conformance.Run(t, cf("should not consider candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for graceful disruption"), func(t *testing.T) {
		f := one(t)
		tgp(f)
		withPDB(f)
		blocked(t, f, false, pdbBlocks, true)
	})
	conformance.Run(t, cf("should not consider candidates that have do-not-disrupt pods scheduled without a terminationGracePeriod set for eventual disruption"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		blocked(t, f, true, dnd, false)
	})
	conformance.Run(t, cf("should not consider candidates that have PDB-blocked pods scheduled without a terminationGracePeriod set for eventual disruption"), func(t *testing.T) {
		f := one(t)
		withPDB(f)
		blocked(t, f, true, pdbBlocks, false)
	})
	conformance.Run(t, cf("should consider candidates that have do-not-disrupt terminating pods"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"), func(p *corev1.Pod) {
			at := metav1.NewTime(f.now)
			p.DeletionTimestamp = &at
		})
		candidate(t, f, false)
	})
	conformance.Run(t, cf("should consider candidates that have do-not-disrupt terminal pods"), func(t *testing.T) {
		for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
			f := one(t)
			f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"), func(p *corev1.Pod) { p.Status.Phase = phase })
			candidate(t, f, false)
		}
	})
	conformance.Run(t, cf("should not consider candidates that have do-not-disrupt on nodes"), func(t *testing.T) {
		f := one(t)
		f.nodeObj("n").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		blocked(t, f, false, `disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`, true)
	})
	conformance.Run(t, cf("should not consider candidates that have multiple PDBs on the same pod"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", labelled(map[string]string{"test": "value"}))
		f.pdb("pdb1", 0, map[string]string{"test": "value"})
		f.pdb("pdb2", 0, map[string]string{"test": "value"})
		why := f.candidateWhy("n", false)
		for _, want := range []string{"eviction does not support multiple PDBs", "default/pdb1", "default/pdb2"} {
			if !strings.Contains(why, want) {
				t.Fatalf("why %q lacks %q", why, want)
			}
		}
		blocked(t, f, false, why, true)
	})
	conformance.Run(t, cf("should not consider candidates that have fully blocking PDBs"), func(t *testing.T) {
		f := one(t)
		withPDB(f)
		blocked(t, f, false, pdbBlocks, true)
	})
	conformance.Run(t, cf("should not consider candidates that have fully blocking PDBs on daemonset pods"), func(t *testing.T) {
		f := one(t)
		withPDB(f, ownedBy("DaemonSet"))
		blocked(t, f, false, pdbBlocks, true)
	})
	conformance.Run(t, cf("should consider candidates that have fully blocking PDBs on mirror pods"), func(t *testing.T) {
		f := one(t)
		withPDB(f, ownedBy("Node"))
		candidate(t, f, false)
	})
	conformance.Run(t, cf("should not consider candidates that have do-not-disrupt pods without a terminationGracePeriod set for graceful disruption"), func(t *testing.T) {
		f := one(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		blocked(t, f, false, dnd, true)
	})
	conformance.Run(t, cf("should not consider candidates that have fully blocking PDBs without a terminationGracePeriod set for graceful disruption"), func(t *testing.T) {
		f := one(t)
		withPDB(f)
		blocked(t, f, false, pdbBlocks, true)
	})
	conformance.Run(t, cf("should consider candidates that have fully blocking PDBs on terminal pods"), func(t *testing.T) {
		for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
			f := one(t)
			withPDB(f, func(p *corev1.Pod) { p.Status.Phase = phase })
			candidate(t, f, false)
		}
	})
	conformance.Run(t, cf("should consider candidates that have fully blocking PDBs on terminating pods"), func(t *testing.T) {
		f := one(t)
		withPDB(f, func(p *corev1.Pod) {
			at := metav1.NewTime(f.now)
			p.DeletionTimestamp = &at
		})
		candidate(t, f, false)
	})
	conformance.Run(t, cf("should not consider candidates that has just a Node representation"), func(t *testing.T) {
		// Only NodeClaims are candidates: a lone Node is never one.
		f := one(t)
		f.snap.NodeClaims = nil
		p := Compute(f.input())
		if p.Command != nil || p.Eligible[Emptiness] != 0 || len(p.Blocked) != 0 {
			t.Fatalf("plan %+v", p)
		}
	})
	conformance.Run(t, cf("should not consider candidate that has just a NodeClaim representation"), func(t *testing.T) {
		f := one(t)
		f.snap.Nodes = nil
		blocked(t, f, false, "nodeclaim does not have an associated node", false)
	})
	conformance.Run(t, cf("should not consider candidates that are nominated"), func(t *testing.T) {
		f := one(t)
		f.claim("n").Annotations[NominatedUntilAnnotation] = f.now.Add(20 * time.Second).Format(time.RFC3339)
		blocked(t, f, false, NominatedForPod, true)
		// The nomination ends with its window.
		f.now = f.now.Add(21 * time.Second)
		candidate(t, f, false)
	})
	conformance.Run(t, cf("should not consider candidates that are deleting"), func(t *testing.T) {
		f := one(t)
		at := metav1.NewTime(f.now)
		f.claim("n").DeletionTimestamp = &at
		blocked(t, f, false, "node is deleting or marked for deletion", false)
	})
	conformance.Run(t, cf("should not consider candidates that are MarkedForDeletion"), func(t *testing.T) {
		// Karpless marks a node for deletion with the disrupted taint.
		f := one(t)
		f.nodeObj("n").Spec.Taints = []corev1.Taint{wellknown.DisruptedNoScheduleTaint}
		blocked(t, f, false, "node is deleting or marked for deletion", false)
	})
	conformance.Run(t, cf("should not consider candidates that aren't yet initialized"), func(t *testing.T) {
		f := one(t)
		f.notInitialized("n")
		blocked(t, f, false, "node isn't initialized", false)
	})
	conformance.Run(t, cf("should not consider candidates that are not owned by a NodePool (no karpenter.sh/nodepool label)"), func(t *testing.T) {
		f := one(t)
		delete(f.claim("n").Labels, wellknown.NodePoolLabel)
		blocked(t, f, false, "node doesn't have required label (label=karpenter.sh/nodepool)", true)
	})
	conformance.Run(t, cf("should not consider candidates that are have a non-existent NodePool"), func(t *testing.T) {
		f := one(t)
		f.snap.NodePools[0].Name = "other"
		blocked(t, f, false, "NodePool not found (NodePool=default)", true)
	})
	labelGone := func(spec, label string) {
		conformance.Run(t, cf(spec), func(t *testing.T) {
			f := one(t)
			delete(f.claim("n").Labels, label)
			candidate(t, f, false)
		})
	}
	labelGone("should consider candidates that do not have the karpenter.sh/capacity-type label", wellknown.CapacityTypeLabel)
	labelGone("should consider candidates that do not have the topology.kubernetes.io/zone label", wellknown.ZoneLabel)
	labelGone("should consider candidates that do not have the node.kubernetes.io/instance-type label", wellknown.InstanceTypeLabel)
	conformance.Run(t, cf("should consider candidates that have an instance type that cannot be resolved"), func(t *testing.T) {
		f := one(t)
		f.claim("n").Labels[wellknown.InstanceTypeLabel] = "unknown.type"
		candidate(t, f, false)
	})
	conformance.Run(t, cf("should not consider candidates that are actively being processed in the queue"), func(t *testing.T) {
		f := one(t)
		f.record(&Record{ID: "cmd", Method: Drift, Phase: Executing, Candidates: []string{"n"}})
		if why := f.candidateWhy("n", false); why != "" {
			t.Fatalf("candidate() without busy set: %s", why)
		}
		in := f.input()
		v := newCluster(in)
		if _, why := v.candidate(f.claim("n"), false, Busy(v.cmds, "")); why != AlreadyDisrupting {
			t.Fatalf("why %q, want %q", why, AlreadyDisrupting)
		}
	})

	// BuildDisruptionBudgetMapping: ten nodes.
	bm := func(spec string, budget string, setup func(f *fixture), want int) {
		conformance.Run(t, c("BuildDisruptionBudgetMapping > "+spec), func(t *testing.T) {
			f := newFixture(t)
			f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
			f.nodes("n", 10, "m.large")
			setup(f)
			counts := newCluster(f.input()).budgetCounts("")
			for _, reason := range []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized} {
				if got := remaining(f.input(), counts, reason, nil)["default"]; got != want {
					t.Fatalf("%s: %d allowed, want %d", reason, got, want)
				}
			}
		})
	}
	bm("should not consider nodes that are not managed as part of disruption count", "100%", func(f *fixture) {
		f.snap.Nodes = append(f.snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged"}})
	}, 10)
	bm("should not consider nodes that are not initialized as part of disruption count", "100%", func(f *fixture) {
		f.node("new", "m.large", zones[0], od)
		f.notInitialized("new")
	}, 10)
	bm("should not consider nodes that have the terminating status condition as part of disruption count", "100%", func(f *fixture) {
		f.node("leaving", "m.large", zones[0], od).SetCondition(karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "", "", metav1.NewTime(f.now))
	}, 10)
	bm("should not return a negative disruption value", "10%", func(f *fixture) {
		at := metav1.NewTime(f.now)
		for _, nc := range f.snap.NodeClaims {
			nc.DeletionTimestamp = &at
		}
		for _, n := range f.snap.Nodes {
			n.DeletionTimestamp = &at
		}
	}, 0)
	bm("should consider nodes with a deletion timestamp set and MarkedForDeletion to the disruption count", "100%", func(f *fixture) {
		at := metav1.NewTime(f.now)
		f.snap.NodeClaims[0].DeletionTimestamp = &at
		f.snap.Nodes[0].DeletionTimestamp = &at
		// Karpless marks a node for deletion by a command recorded on it.
		f.record(&Record{ID: "cmd", Method: Drift, Phase: Executing, Candidates: []string{f.snap.NodeClaims[1].Name}})
	}, 8)
	bm("should consider not ready nodes to the disruption count", "100%", func(f *fixture) {
		f.snap.Nodes[0].Status.Conditions[0].Status = corev1.ConditionFalse
		f.snap.Nodes[1].Status.Conditions[0].Status = corev1.ConditionUnknown
	}, 8)

	// Pod Eviction Cost
	std := podutil.EvictionCost(&corev1.Pod{})
	cost := func(spec string, pod *corev1.Pod, cmp func(float64) bool) {
		conformance.Run(t, c("Pod Eviction Cost > "+spec), func(t *testing.T) {
			if got := podutil.EvictionCost(pod); !cmp(got) {
				t.Fatalf("cost %v beside the standard %v", got, std)
			}
		})
	}
	deletionCost := func(v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": v}}}
	}
	priority := func(v int32) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Priority: &v}} }
	cost("should have a standard disruptionCost for a pod with no priority or disruptionCost specified", &corev1.Pod{}, func(c float64) bool { return c == 1 })
	cost("should have a higher disruptionCost for a pod with a positive deletion disruptionCost", deletionCost("100"), func(c float64) bool { return c > std })
	cost("should have a lower disruptionCost for a pod with a positive deletion disruptionCost", deletionCost("-100"), func(c float64) bool { return c < std })
	conformance.Run(t, c("Pod Eviction Cost > should have higher costs for higher deletion costs"), func(t *testing.T) {
		c1, c2, c3 := podutil.EvictionCost(deletionCost("101")), podutil.EvictionCost(deletionCost("100")), podutil.EvictionCost(deletionCost("99"))
		if !(c1 > c2 && c2 > c3) {
			t.Fatalf("costs %v %v %v", c1, c2, c3)
		}
	})
	cost("should have a higher disruptionCost for a pod with a higher priority", priority(1), func(c float64) bool { return c > std })
	cost("should have a lower disruptionCost for a pod with a lower priority", priority(-1), func(c float64) bool { return c < std })
}
