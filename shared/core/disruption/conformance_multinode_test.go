package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/disruption/consolidation_test.go's
// remaining Delete cases, Multi-NodeClaim and Node Lifetime Consideration,
// ported: a command Karpenter's queue carries out is the one proposed
// here and validated after the 15 s wait.
func TestConformanceConsolidationMultiNode(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: consolidationFile, Spec: "Consolidation > " + spec}
	}
	od, spot := wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot
	entries := []struct {
		name string
		ct   string
	}{{"if the candidate is on-demand node", od}, {"if the candidate is spot node", spot}}
	// multiFixture is the Multi-NodeClaim context's: spot-to-spot on,
	// enough cheaper spot types, spot allowed for spot candidates.
	multiFixture := func(t *testing.T, ct string) *fixture {
		f := newFixture(t)
		f.types = manyTypes()
		f.opts.SpotToSpotConsolidation = true
		if ct == spot {
			allowSpot(f.pool())
		}
		return f
	}
	// executeAfterWait proposes, waits and validates: the command carried out.
	executeAfterWait := func(t *testing.T, f *fixture) *Command {
		t.Helper()
		_, rec := f.propose(t)
		if rec.Due(f.now) {
			t.Fatalf("a %s proposal carried out before its wait", rec.Method)
		}
		cmd, why := f.validateAfterWait(rec)
		if cmd == nil {
			t.Fatalf("proposal %s rejected: %s", rec.ID, why)
		}
		return cmd
	}

	// Delete: two nodes of one type with room to spare.
	deleteNodes := func(t *testing.T) *fixture {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		return f
	}
	conformance.Run(t, c("Delete > does not delete nodes with pod churn, deletes nodes without pod churn"), func(t *testing.T) {
		f := deleteNodes(t)
		_, rec := f.propose(t)
		if rec.Method != Emptiness || len(rec.Candidates) != 2 {
			t.Fatalf("proposed %+v, want both empty nodes", rec)
		}
		// A pod lands on the first node during the wait.
		f.now = f.now.Add(rec.Method.ValidationDelay() + time.Second)
		f.pod("churn", "a", "100m", "64Mi")
		cmd, why := Validate(f.input(), rec)
		if cmd == nil || cmd.Decision() != "delete" || names(cmd.Candidates) != "b" || len(cmd.Replacements) != 0 {
			t.Fatalf("validated %v (%s), want b deleted", cmd, why)
		}
	})
	threePods := func(f *fixture) {
		f.pod("p0", "a", "1", "1Gi")
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "b", "1", "1Gi")
	}
	conformance.Run(t, c("Delete > can delete nodes if another nodePool has no node template"), func(t *testing.T) {
		f := deleteNodes(t)
		f.addPool("no-template").Spec.Template.Spec.NodeClassRef = nil
		threePods(f)
		cmd := executeAfterWait(t, f)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b deleted", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes, when non-Karpenter capacity can fit pods"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		it := f.typeNamed("m.4xlarge")
		f.snap.Nodes = append(f.snap.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "unmanaged", Labels: map[string]string{wellknown.HostnameLabel: "unmanaged", wellknown.ZoneLabel: zones[0]}},
			Spec:       corev1.NodeSpec{ProviderID: wellknown.ProviderID(zones[0], "i-0unmanaged000000")},
			Status: corev1.NodeStatus{Allocatable: it.Allocatable, Capacity: it.Capacity,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
		for i := range 3 {
			f.pod(fmt.Sprintf("p%d", i), "a", "1", "1Gi")
		}
		cmd := executeAfterWait(t, f)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "a" {
			t.Fatalf("command %s, want a deleted", cmd)
		}
	})
	conformance.Run(t, c("Delete > should consider initialized nodes before uninitialized nodes"), func(t *testing.T) {
		// 100 nodes with a core free each, one of them initialized; the
		// small node's pod fits on that one.
		f := newFixture(t)
		f.types = []*scheduling.InstanceType{mkType("default.type", 3, 3, 0.3), mkType("small.type", 1, 1, 0.1)}
		f.types[1].Capacity[corev1.ResourcePods] = resourceMust("10")
		f.types[1].Allocatable = f.types[1].Capacity.DeepCopy()
		const initialized = 37
		for i := range 100 {
			name := fmt.Sprintf("n%03d", i)
			f.node(name, "default.type", zones[0], od)
			f.pod("p"+name, name, "2", "2Gi")
			if i != initialized {
				f.notInitialized(name)
				f.nodeObj(name).Status.Conditions[0].Status = corev1.ConditionFalse
			}
		}
		f.node("small", "small.type", zones[0], od)
		f.pod("consolidatable", "small", "1", "1Gi")
		p := Compute(f.input())
		for _, n := range p.Unconsolidatable {
			if n.NodeClaim == "small" {
				t.Fatalf("small unconsolidatable: %s", n.Message)
			}
		}
		cmd := mustCommand(t, p, SingleNodeConsolidation)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "small" {
			t.Fatalf("command %s, want small deleted", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes while an invalid node pool exists"), func(t *testing.T) {
		f := deleteNodes(t)
		bad := f.addPool("bad-nodepool")
		bad.Spec.Template.Spec.Requirements = nil
		bad.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "TestNodeClass", Name: "non-existent"}
		threePods(f)
		cmd := executeAfterWait(t, f)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b deleted", cmd)
		}
	})

	// Multi-NodeClaim: three m.4xlarge nodes.
	three := func(t *testing.T, cts ...string) *fixture {
		f := multiFixture(t, cts[0])
		for i, n := range []string{"a", "b", "c"} {
			f.node(n, "m.4xlarge", zones[0], cts[i%len(cts)])
		}
		return f
	}
	for _, e := range entries {
		conformance.Run(t, c("Multi-NodeClaim > can merge 3 nodes into 1 > "+e.name), func(t *testing.T) {
			f := three(t, e.ct)
			for i, n := range []string{"a", "b", "c"} {
				f.pod(fmt.Sprintf("p%d", i), n, "1", "1Gi")
			}
			cmd := executeAfterWait(t, f)
			if cmd.Method != MultiNodeConsolidation || len(cmd.Candidates) != 3 || len(cmd.Replacements) != 1 {
				t.Fatalf("command %s, want 3 nodes into 1", cmd)
			}
		})
	}
	conformance.Run(t, c("Multi-NodeClaim > can merge 3 nodes into 1 if the candidates have both spot and on-demand"), func(t *testing.T) {
		f := three(t, od, od, spot)
		allowSpot(f.pool())
		for i, n := range []string{"a", "b", "c"} {
			f.pod(fmt.Sprintf("p%d", i), n, "1", "1Gi")
		}
		cmd := executeAfterWait(t, f)
		if cmd.Method != MultiNodeConsolidation || len(cmd.Candidates) != 3 || len(cmd.Replacements) != 1 {
			t.Fatalf("command %s, want 3 nodes into 1", cmd)
		}
	})
	for _, e := range entries {
		conformance.Run(t, c("Multi-NodeClaim > won't merge 2 nodes into 1 of the same type > "+e.name), func(t *testing.T) {
			// Both nodes run the cheapest type: the first goes, its pod
			// onto the second; no node of the same type replaces both.
			f := multiFixture(t, e.ct)
			f.node("a", "m.large", zones[0], e.ct)
			f.node("b", "m.large", zones[0], e.ct)
			f.pod("p0", "a", "100m", "64Mi")
			f.pod("p1", "b", "100m", "64Mi")
			f.pod("p2", "b", "100m", "64Mi")
			cmd := executeAfterWait(t, f)
			if cmd.Decision() != "delete" || names(cmd.Candidates) != "a" {
				t.Fatalf("command %s, want a deleted", cmd)
			}
		})
	}
	for _, e := range entries {
		conformance.Run(t, c("Multi-NodeClaim > should wait for the node TTL for non-empty nodes before consolidating (multi-node) > "+e.name), func(t *testing.T) {
			f := multiFixture(t, e.ct)
			f.node("a", "m.4xlarge", zones[0], e.ct)
			f.node("b", "m.4xlarge", zones[0], e.ct)
			f.pod("p0", "a", "1", "1Gi")
			f.pod("p1", "a", "1", "1Gi")
			f.pod("p2", "b", "1", "1Gi")
			_, rec := f.propose(t)
			if rec.Due(f.now.Add(14 * time.Second)) {
				t.Fatalf("proposal due before the 15 s wait")
			}
			cmd, why := f.validateAfterWait(rec)
			if cmd == nil || len(cmd.Candidates) != 2 || len(cmd.Replacements) != 1 {
				t.Fatalf("validated %v (%s), want both nodes into one", cmd, why)
			}
		})
	}
	for _, e := range entries {
		conformance.Run(t, c("Multi-NodeClaim > should consolidate multiple empty nodes via multi-nodeclaim consolidation > "+e.name), func(t *testing.T) {
			// Karpenter's pods were never bound nor found unschedulable:
			// not pending, so the three nodes are empty.
			f := three(t, e.ct)
			for i := range 3 {
				f.pod(fmt.Sprintf("p%d", i), "", "1", "1Gi").Status.Conditions = nil
			}
			cmd := executeAfterWait(t, f)
			if cmd.Decision() != "delete" || len(cmd.Candidates) != 3 {
				t.Fatalf("command %s, want the three nodes deleted", cmd)
			}
		})
	}
	for _, e := range entries {
		conformance.Run(t, c("Multi-NodeClaim > should continue to single nodeclaim consolidation when multi-nodeclaim consolidation fails validation after the node ttl > "+e.name), func(t *testing.T) {
			f := three(t, e.ct)
			for i, n := range []string{"a", "b", "c"} {
				f.pod(fmt.Sprintf("p%d", i), n, "1", "1Gi")
			}
			_, rec := f.propose(t)
			if rec.Method != MultiNodeConsolidation {
				t.Fatalf("proposed %+v, want a multi-node consolidation", rec)
			}
			// Pods land on the first two nodes during the wait.
			f.pod("extra0", "a", "1", "1Gi")
			f.pod("extra1", "b", "1", "1Gi")
			if cmd, _ := f.validateAfterWait(rec); cmd != nil {
				t.Fatalf("validated %s, want it rejected", cmd)
			}
			// The tick drops the proposal and skips multi-node once.
			for _, nc := range f.snap.NodeClaims {
				delete(nc.Annotations, CommandAnnotation)
			}
			f.opts.SkipMultiNode = true
			cmd := executeAfterWait(t, f)
			if cmd.Method != SingleNodeConsolidation || cmd.Decision() != "delete" || names(cmd.Candidates) != "c" {
				t.Fatalf("command %s, want c deleted by single-node consolidation", cmd)
			}
		})
	}

	conformance.Run(t, c("Node Lifetime Consideration > should consolidate the node with best savings ratio first"), func(t *testing.T) {
		// Both nearly expired, the older one more so; it has two pods,
		// the other one.
		f := newFixture(t)
		f.pool().Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("2h0m3s")
		a := f.node("a", "m.large", zones[0], od)
		b := f.node("b", "m.large", zones[0], od)
		b.CreationTimestamp = metav1.NewTime(a.CreationTimestamp.Add(2 * time.Second))
		for _, nc := range []*karpv1.NodeClaim{a, b} {
			nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("2h0m3s")
		}
		f.pod("p0", "a", "100m", "64Mi")
		f.pod("p1", "a", "100m", "64Mi")
		f.pod("p2", "b", "100m", "64Mi")
		cmd := executeAfterWait(t, f)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b deleted", cmd)
		}
	})
}
