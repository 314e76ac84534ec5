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

// Karpenter v1.14.1 pkg/controllers/disruption/consolidation_test.go,
// ported: each case's cluster as the fixture's snapshot (Karpenter's most
// expensive instance is m.4xlarge, its least expensive m.large), its
// expected outcome through Compute and Validate. Karpenter publishes an
// Event per method and lets its recorder drop the repeats; the core notes
// each once (Plan.Unconsolidatable), which is what a user sees either way.
func TestConformanceConsolidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/disruption", File: consolidationFile, Spec: "Consolidation > " + spec}
	}
	od := wellknown.CapacityTypeOnDemand

	// Events
	conformance.Run(t, c("Events > should not fire an event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmptyOrUnderutilized"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		if p := Compute(f.input()); len(p.Unconsolidatable) != 0 {
			t.Fatalf("notes %v", p.Unconsolidatable)
		}
	})
	conformance.Run(t, c("Events > should fire an event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmpty"), func(t *testing.T) {
		f := newFixture(t)
		f.pool().Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		p := Compute(f.input())
		want := `NodePool "default" has consolidation policy WhenEmpty, but node is not empty`
		if noteFor(p.Unconsolidatable, "n", want) != want || len(p.Unconsolidatable) != 1 || p.Unconsolidatable[0].Node != "n" {
			t.Fatalf("notes %v, want one %q on the node and claim", p.Unconsolidatable, want)
		}
	})
	conformance.Run(t, c("Events > should fire an event for ConsolidationDisabled when the NodePool has consolidateAfter set to 'Never'"), func(t *testing.T) {
		f := newFixture(t)
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		p := Compute(f.input())
		want := `NodePool "default" has consolidation disabled`
		if noteFor(p.Unconsolidatable, "n", want) != want || len(p.Unconsolidatable) != 1 {
			t.Fatalf("notes %v, want %q", p.Unconsolidatable, want)
		}
	})
	labelGone := func(spec, label, want string) {
		conformance.Run(t, c("Events > "+spec), func(t *testing.T) {
			f := newFixture(t)
			nc := f.node("n", "m.4xlarge", zones[0], od)
			delete(nc.Labels, label) // the node shares the map
			f.pod("p", "n", "1", "1Gi")
			p := Compute(f.input())
			if noteFor(p.Unconsolidatable, "n", want) != want {
				t.Fatalf("notes %v, want %q", p.Unconsolidatable, want)
			}
		})
	}
	labelGone("should fire an event when a candidate does not have a resolvable instance type", wellknown.InstanceTypeLabel, `Instance Type "" not found`)
	labelGone("should fire an event when a candidate does not have the capacity type label", wellknown.CapacityTypeLabel, `Node does not have label "karpenter.sh/capacity-type"`)
	labelGone("should fire an event when a candidate does not have the zone label", wellknown.ZoneLabel, `Node does not have label "topology.kubernetes.io/zone"`)

	// Budgets: ten m.4xlarge nodes.
	budgets := func(t *testing.T, nodes string, pods bool) (*fixture, []string) {
		f := newFixture(t)
		f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: nodes}}
		names := f.nodes("n", 10, "m.4xlarge")
		if pods {
			for i, n := range names {
				f.pod(fmt.Sprintf("p%d", i), n, "100m", "64Mi")
			}
		}
		return f, names
	}
	emptyBudget := func(spec, nodes string, want int) {
		conformance.Run(t, c("Budgets > "+spec), func(t *testing.T) {
			f, _ := budgets(t, nodes, false)
			p := Compute(f.input())
			if got := p.Budgets[karpv1.DisruptionReasonEmpty]["default"].Left; got != want {
				t.Fatalf("allowed disruptions %d, want %d", got, want)
			}
			n := 0
			if p.Command != nil {
				n = len(p.Command.Candidates)
			}
			if n != want {
				t.Fatalf("command takes %d nodes (%v), want %d", n, p.Command, want)
			}
		})
	}
	emptyBudget("should only allow 3 empty nodes to be disrupted", "30%", 3)
	emptyBudget("should allow all empty nodes to be disrupted", "100%", 10)
	emptyBudget("should allow no empty nodes to be disrupted", "0%", 0)
	conformance.Run(t, c("Budgets > should only allow 3 nodes to be deleted in multi node consolidation delete"), func(t *testing.T) {
		f, _ := budgets(t, "30%", true)
		cmd := mustCommand(t, Compute(f.input()), MultiNodeConsolidation)
		if cmd.Decision() != "delete" || len(cmd.Candidates) != 3 {
			t.Fatalf("command %s, want 3 nodes deleted", cmd)
		}
	})
	conformance.Run(t, c("Budgets > should only allow 3 nodes to be deleted in single node consolidation delete"), func(t *testing.T) {
		// Karpenter runs single-node consolidation alone, three times;
		// here each pass's command is carried out (its candidate deleted)
		// and counts against the budget of the next.
		f, _ := budgets(t, "30%", true)
		f.opts.SkipMultiNode = true // single-node consolidation alone
		deleted := 0
		for range 5 {
			p := Compute(f.input())
			if p.Command == nil {
				break
			}
			if p.Command.Method != SingleNodeConsolidation || p.Command.Decision() != "delete" {
				t.Fatalf("command %s", p.Command)
			}
			for _, cn := range p.Command.Candidates {
				at := metav1.NewTime(f.now)
				cn.NodeClaim.DeletionTimestamp = &at
				deleted++
			}
		}
		if deleted != 3 {
			t.Fatalf("%d nodes deleted, want 3", deleted)
		}
	})
	// Ten NodePools of three empty nodes each.
	poolBudget := func(spec, nodes string, allowed, want int) {
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
				pool := fmt.Sprintf("np-%d", i)
				if got := p.Budgets[karpv1.DisruptionReasonEmpty][pool].Left; got != allowed {
					t.Fatalf("%s allows %d disruptions, want %d", pool, got, allowed)
				}
				if per[pool] != want {
					t.Fatalf("deleted per nodepool %v, want %d each", per, want)
				}
			}
		})
	}
	poolBudget("should allow 2 nodes from each nodePool to be deleted", "50%", 2, 2)
	poolBudget("should allow all nodes from each nodePool to be deleted", "100%", 3, 3)
	poolBudget("should allow no nodes from each nodePool to be deleted", "0%", 0, 0)

	// "Not marked consolidated": the plan must not let the caller skip
	// consolidation until the cluster changes (NothingToConsolidate);
	// emptiness is never skipped that way here.
	notMarked := func(spec string, many, pods bool) {
		conformance.Run(t, c("Budgets > "+spec), func(t *testing.T) {
			var f *fixture
			if many {
				f = newFixture(t)
				f.pool().Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0%"}}
				for i := range 10 {
					pool := fmt.Sprintf("np-%d", i)
					f.addPool(pool)
					for j := range 3 {
						name := fmt.Sprintf("%s-%d", pool, j)
						f.nodeIn(pool, name, "m.4xlarge", zones[0], od)
						if pods {
							f.pod(name+"-p", name, "1", "64Mi")
						}
					}
				}
			} else {
				f, _ = budgets(t, "0%", false)
				if pods {
					for i, n := range f.snap.Nodes {
						f.pod(fmt.Sprintf("p%d", i), n.Name, "1", "64Mi")
					}
				}
			}
			p := Compute(f.input())
			if p.Command != nil {
				t.Fatalf("command %s under a 0%% budget", p.Command)
			}
			if pods && p.NothingToConsolidate {
				t.Fatalf("marked consolidated though budgets blocked the candidates")
			}
			// Once the budget opens, the next pass acts at once, whatever
			// the caller remembered of this one.
			for _, np := range f.snap.NodePools {
				np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
			}
			f.opts.Consolidated = p.NothingToConsolidate
			if p := Compute(f.input()); p.Command == nil {
				t.Fatalf("no command once the budgets allow one")
			}
		})
	}
	notMarked("should not mark empty node consolidated if the candidates can't be disrupted due to budgets with one nodepool", false, false)
	notMarked("should not mark empty node consolidated if all candidates can't be disrupted due to budgets with many nodepools", true, false)
	notMarked("should not mark multi node consolidated if the candidates can't be disrupted due to budgets with one nodepool", false, true)
	notMarked("should not mark multi node consolidated if all candidates can't be disrupted due to budgets with many nodepools", true, true)
	notMarked("should not mark single node consolidated if the candidates can't be disrupted due to budgets with one nodepool", false, true)
	notMarked("should not mark single node consolidated if all candidates can't be disrupted due to budgets with many nodepools", true, true)

	// Replace
	conformance.Run(t, c("Replace > won't replace node if any spot replacement is more expensive"), func(t *testing.T) {
		f := newFixture(t)
		allowSpot(f.pool())
		f.types = []*scheduling.InstanceType{
			mkOfferings("current.od", 32, 64, offer(zones[0], od, 0.5, false)),
			mkOfferings("potential.spot", 32, 64,
				offer(zones[0], wellknown.CapacityTypeSpot, 1.0, true),
				offer(zones[1], wellknown.CapacityTypeSpot, 0.2, true),
				offer("test-1c", wellknown.CapacityTypeSpot, 0.4, true)),
		}
		f.node("n", "current.od", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s: a spot launch could pick the $1.00 offering", p.Command)
		}
	})
	conformance.Run(t, c("Replace > won't replace on-demand node if on-demand replacement is more expensive"), func(t *testing.T) {
		f := newFixture(t)
		f.types = []*scheduling.InstanceType{
			mkOfferings("current.od", 32, 64, offer(zones[0], od, 0.5, false)),
			mkOfferings("od.replacement", 32, 64,
				offer(zones[0], od, 0.6, true), offer(zones[1], od, 0.6, true),
				offer(zones[1], wellknown.CapacityTypeSpot, 0.2, true), offer("test-1c", wellknown.CapacityTypeSpot, 0.3, true)),
		}
		f.node("n", "current.od", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s: the on-demand replacement costs more", p.Command)
		}
	})
	conformance.Run(t, c("Replace > cannot replace spot with spot if the spotToSpotConsolidation is disabled"), func(t *testing.T) {
		f := newFixture(t)
		allowSpot(f.pool())
		f.types = manyTypes()
		f.node("n", "m.4xlarge", zones[0], wellknown.CapacityTypeSpot)
		f.pod("p", "n", "1", "1Gi")
		p := Compute(f.input())
		want := "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
		if p.Command != nil || noteFor(p.Unconsolidatable, "n", want) == "" {
			t.Fatalf("command %v notes %v", p.Command, p.Unconsolidatable)
		}
	})
	conformance.Run(t, c("Replace > cannot replace spot with spot if less than minimum InstanceTypes flexibility"), func(t *testing.T) {
		f := newFixture(t)
		allowSpot(f.pool())
		f.opts.SpotToSpotConsolidation = true
		f.node("n", "m.4xlarge", zones[0], wellknown.CapacityTypeSpot)
		f.pod("p", "n", "1", "1Gi")
		p := Compute(f.input())
		want := "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 3"
		if p.Command != nil || noteFor(p.Unconsolidatable, "n", want) == "" {
			t.Fatalf("command %v notes %v", p.Command, p.Unconsolidatable)
		}
	})

	// Delete
	conformance.Run(t, c("Delete > can delete nodes"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "a", "1", "1Gi")
		f.pod("p3", "b", "1", "1Gi")
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b deleted", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes, considers karpenter.sh/do-not-disrupt set to true on nodes"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "b", "1", "1Gi")
		f.nodeObj("b").Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if names(cmd.Candidates) != "a" {
			t.Fatalf("command %s, want a", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes, considers karpenter.sh/do-not-disrupt set to true on pods"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "b", "1", "1Gi", doNotDisrupt("true"))
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if names(cmd.Candidates) != "a" {
			t.Fatalf("command %s, want a", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes, considers PDB"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi", labelled(map[string]string{"app": "other"}))
		f.pod("p2", "b", "1", "1Gi", labelled(map[string]string{"app": "test"}))
		f.pdb("pdb", 0, map[string]string{"app": "test"})
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if names(cmd.Candidates) != "a" {
			t.Fatalf("command %s, want a", cmd)
		}
	})
	conformance.Run(t, c("Delete > does not consolidate nodes with karpenter.sh/do-not-disrupt set to true on pods when the NodePool's TerminationGracePeriod is not nil"), func(t *testing.T) {
		f := newFixture(t)
		f.pool().Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		a := f.node("a", "m.4xlarge", zones[0], od)
		a.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi", doNotDisrupt("true"))
		f.pod("p2", "b", "1", "1Gi", doNotDisrupt("true"))
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("Delete > does not consolidate nodes with pods with blocking PDBs when the NodePool's TerminationGracePeriod is not nil"), func(t *testing.T) {
		f := newFixture(t)
		a := f.node("a", "m.4xlarge", zones[0], od)
		a.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		f.pod("p1", "a", "1", "1Gi", labelled(map[string]string{"app": "test"}))
		f.pdb("pdb", 0, map[string]string{"app": "test"})
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("Delete > does not consolidate nodes with pods that have a duration-based do-not-disrupt annotation that is still active"), func(t *testing.T) {
		f := newFixture(t)
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi", doNotDisrupt("5h"))
		f.pod("p2", "b", "1", "1Gi", doNotDisrupt("5h"))
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
	conformance.Run(t, c("Delete > can consolidate nodes after duration-based do-not-disrupt annotation expires"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi", doNotDisrupt("1m"))
		f.pod("p2", "a", "1", "1Gi")
		f.pod("p3", "b", "1", "1Gi", doNotDisrupt("1m"))
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if cmd.Decision() != "delete" || len(cmd.Candidates) != 1 {
			t.Fatalf("command %s", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes, considers invalid do-not-disrupt annotation format as not blocking"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "a", "1", "1Gi")
		f.pod("p3", "b", "1", "1Gi", doNotDisrupt("invalid-duration"))
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes, evicts pods without an ownerRef"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.4xlarge")
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "a", "1", "1Gi")
		f.pod("bare", "b", "1", "1Gi", func(p *corev1.Pod) { p.OwnerReferences = nil })
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b", cmd)
		}
	})
	conformance.Run(t, c("Delete > won't delete node if it would require pods to schedule on an uninitialized node"), func(t *testing.T) {
		f := newFixture(t)
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.notInitialized("b")
		f.snap.Nodes[1].Status.Conditions[0].Status = corev1.ConditionFalse
		if p := Compute(f.input()); p.Command != nil && p.Command.Decision() == "delete" {
			t.Fatalf("command %s moves pods onto an uninitialized node", p.Command)
		}
	})
	conformance.Run(t, c("Delete > should not consolidate pods onto a destination node that is under its consolidateAfter window"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.large")
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
		f.node("a", "m.large", zones[0], od)
		f.node("b", "m.large", zones[0], od)
		f.pod("p0", "a", "100m", "64Mi")
		f.pod("p1", "a", "100m", "64Mi")
		f.pod("p2", "b", "100m", "64Mi")
		f.initializedAt("a", f.now)
		f.initializedAt("b", f.now)
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s moves pods onto a node inside its consolidateAfter window", p.Command)
		}
		f.now = f.now.Add(2 * time.Minute)
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "b" {
			t.Fatalf("command %s, want b deleted", cmd)
		}
	})
	conformance.Run(t, c("Delete > should consolidate pods onto a destination node with consolidateAfter set to Never"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.large")
		dest := f.addPool("destination")
		dest.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		f.node("a", "m.large", zones[0], od)
		f.nodeIn("destination", "d", "m.large", zones[0], od)
		f.pod("p", "a", "100m", "64Mi")
		f.initializedAt("a", f.now)
		f.initializedAt("d", f.now)
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if cmd.Decision() != "delete" || names(cmd.Candidates) != "a" {
			t.Fatalf("command %s, want a deleted", cmd)
		}
	})
	conformance.Run(t, c("Delete > should replace a node with a cheaper one even when consolidateAfter has not expired"), func(t *testing.T) {
		f := newFixture(t)
		f.pool().Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		f.initializedAt("n", f.now.Add(-2*time.Minute))
		cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
		if cmd.Decision() != "replace" {
			t.Fatalf("command %s, want a replacement", cmd)
		}
	})
	conformance.Run(t, c("Delete > can delete nodes with a permanently pending pod"), func(t *testing.T) {
		f := newFixture(t)
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p1", "a", "1", "1Gi")
		f.pod("p2", "b", "1", "1Gi")
		f.pod("pending", "", "1", "1Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"non-existent": "node-label"} })
		cmd := mustCommand(t, Compute(f.input()), MultiNodeConsolidation)
		if cmd.Decision() == "" || len(cmd.Candidates) == 0 {
			t.Fatalf("command %s", cmd)
		}
	})
	conformance.Run(t, c("Delete > won't delete nodes if it would make a non-pending pod go pending"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.large")
		f.node("a", "m.large", zones[0], od)
		f.node("b", "m.large", zones[0], od)
		f.pod("p1", "a", "1500m", "1Gi")
		f.pod("p2", "b", "1500m", "1Gi")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})

	// TTL: the proposal, validated after the 15 s wait.
	conformance.Run(t, c("TTL > should wait for the node TTL for non-empty nodes before consolidating"), func(t *testing.T) {
		f := newFixture(t)
		onlyType(f, "m.large")
		f.node("a", "m.large", zones[0], od)
		f.node("b", "m.large", zones[0], od)
		f.pod("p0", "a", "100m", "64Mi")
		f.pod("p1", "a", "100m", "64Mi")
		f.pod("p2", "b", "100m", "64Mi")
		cmd, rec := f.propose(t)
		if rec.Due(f.now) || rec.Due(f.now.Add(14*time.Second)) {
			t.Fatalf("proposal %s due before the 15 s wait", cmd)
		}
		got, why := f.validateAfterWait(rec)
		if got == nil || names(got.Candidates) != "b" {
			t.Fatalf("validated %v (%s), want b deleted", got, why)
		}
	})
	conformance.Run(t, c("TTL > should not consolidate if the action picks different instance types after the node TTL wait"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		f.pod("p", "n", "1", "1Gi")
		cmd, rec := f.propose(t)
		if cmd.Decision() != "replace" {
			t.Fatalf("proposed %s, want a replacement", cmd)
		}
		f.pod("p2", "n", "1500m", "1Gi") // the smallest type no longer holds them
		if got, why := f.validateAfterWait(rec); got != nil || why != NewResults {
			t.Fatalf("validated %v (%s), want it cancelled", got, why)
		}
	})
	conformance.Run(t, c("TTL > should not consolidate if the action becomes invalid during the node TTL wait"), func(t *testing.T) {
		f := newFixture(t)
		f.node("n", "m.4xlarge", zones[0], od)
		_, rec := f.propose(t)
		f.pod("p", "n", "1", "1Gi", doNotDisrupt("true"))
		if got, why := f.validateAfterWait(rec); got != nil {
			t.Fatalf("validated %v (%s), want it cancelled", got, why)
		}
	})
	duringWait := func(spec string, pods int, mutate func(f *fixture, node string)) {
		conformance.Run(t, c("TTL > "+spec), func(t *testing.T) {
			f := newFixture(t)
			target := "n"
			if pods == 1 {
				f.node("n", "m.4xlarge", zones[0], od)
				f.pod("p", "n", "1", "1Gi")
			} else {
				onlyType(f, "m.large")
				f.node("a", "m.large", zones[0], od)
				f.node("b", "m.large", zones[0], od)
				f.pod("p0", "a", "100m", "64Mi")
				f.pod("p1", "b", "100m", "64Mi")
				target = ""
			}
			cmd, rec := f.propose(t)
			if target == "" {
				target = cmd.Candidates[0].Name()
			}
			mutate(f, target)
			if got, why := f.validateAfterWait(rec); got != nil {
				t.Fatalf("validated %v (%s), want it cancelled", got, why)
			}
		})
	}
	duringWait("should not replace node if a pod schedules with karpenter.sh/do-not-disrupt set to true during the TTL wait", 1, func(f *fixture, n string) {
		f.pod("dnd", n, "100m", "64Mi", doNotDisrupt("true"))
	})
	duringWait("should not replace node if a pod schedules with a blocking PDB during the TTL wait", 1, func(f *fixture, n string) {
		f.pod("blocked", n, "100m", "64Mi", labelled(map[string]string{"app": "test"}))
		f.pdb("pdb", 0, map[string]string{"app": "test"})
	})
	duringWait("should not delete node if pods schedule with karpenter.sh/do-not-disrupt set to true during the TTL wait", 2, func(f *fixture, n string) {
		f.pod("dnd", n, "100m", "64Mi", doNotDisrupt("true"))
	})
	duringWait("should not delete node if pods schedule with a blocking PDB during the TTL wait", 2, func(f *fixture, n string) {
		f.pod("blocked", n, "100m", "64Mi", labelled(map[string]string{"app": "test"}))
		f.pdb("pdb", 0, map[string]string{"app": "test"})
	})

	// Static NodePool
	conformance.Run(t, c("Static NodePool > should not consolidate static NodePool nodes"), func(t *testing.T) {
		f := newFixture(t)
		f.pool().Spec.Replicas = new(int64(2))
		f.node("a", "m.4xlarge", zones[0], od)
		f.node("b", "m.4xlarge", zones[0], od)
		f.pod("p", "a", "1", "1Gi")
		if p := Compute(f.input()); p.Command != nil {
			t.Fatalf("command %s", p.Command)
		}
	})
}
