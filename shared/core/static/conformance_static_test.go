package static

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's static provisioning and deprovisioning suites
// (pkg/controllers/static/{provisioning,deprovisioning}/suite_test.go),
// through Plan: a reconcile of Karpenter's static controllers is one plan
// here (the provisioning tick creates Plan's Create claims, the disruption
// tick deletes its Delete claims). Karpenter's cluster-state counts are
// Count: running NodeClaims Active, those marked for deletion Disrupting
// (a disruption command's candidates) or Deleting.

func provCase(spec string) conformance.Case {
	return conformance.Case{Suite: "core/static/provisioning", File: "pkg/controllers/static/provisioning/suite_test.go",
		Spec: "Static Provisioning Controller > " + spec}
}

func deprovCase(spec string) conformance.Case {
	return conformance.Case{Suite: "core/static/deprovisioning", File: "pkg/controllers/static/deprovisioning/suite_test.go",
		Spec: "Static Deprovisioning Controller > " + spec}
}

// readyPool is Karpenter's test.StaticNodePool as its suite applies it:
// validated, its class ready, so its root condition is True.
func readyPool(replicas int64, mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	return staticPool("static", replicas, append([]func(*karpv1.NodePool){func(np *karpv1.NodePool) {
		for _, t := range []string{karpv1.ConditionTypeValidationSucceeded, karpv1.ConditionTypeNodeClassReady, karpv1.ConditionTypeReady} {
			meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t})
		}
	}}, mutate...)...)
}

func unmanaged(np *karpv1.NodePool) {
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "test.group", Kind: "UnmanagedNodeClass", Name: "test"}
}

func onlyPool(t *testing.T, plan []Pool) Pool {
	t.Helper()
	if len(plan) != 1 {
		t.Fatalf("%d pools planned, want one", len(plan))
	}
	return plan[0]
}

// apply carries a plan out on the world as the ticks would: each claim to
// create becomes a claim not launched yet, each to delete is deleting.
func (w *world) apply(p Pool) {
	for range p.Create {
		w.claim(p.NodePool.Name, "unlaunched")
	}
	for _, nc := range p.Delete {
		nc.DeletionTimestamp = &metav1.Time{Time: now}
	}
}

func TestConformanceStaticProvisioning(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, provCase("Reconcile > "+spec), body) }
	// creates is the number of NodeClaims one reconcile creates.
	creates := func(t *testing.T, w *world) int {
		t.Helper()
		plan := Plan(w.input())
		if len(plan) == 0 {
			return 0
		}
		p := onlyPool(t, plan)
		if p.Create > 0 && p.Claim == nil {
			t.Fatalf("create %d without a claim", p.Create)
		}
		return p.Create
	}

	cf := provCase("Reconcile > should handle CreateNodeClaims errors gracefully")
	cf.Differs = "a NodeClaim the provisioning tick fails to create is logged and counted, the tick's other work goes on and the next tick creates it; " +
		"Karpenter's reconcile returns the error and is retried with backoff: the same NodeClaims, created a tick later at most"
	conformance.Run(t, cf, func(t *testing.T) {})
	run("should return early if nodepool is not managed by cloud provider", func(t *testing.T) {
		if n := creates(t, newWorld(readyPool(1, unmanaged))); n != 0 {
			t.Errorf("creates %d, want none", n)
		}
	})
	run("should return early if nodepool is being deleted", func(t *testing.T) {
		np := readyPool(1, func(np *karpv1.NodePool) { np.DeletionTimestamp = &metav1.Time{Time: now} })
		if n := creates(t, newWorld(np)); n != 0 {
			t.Errorf("creates %d, want none", n)
		}
	})
	run("should return early if nodepool replicas is nil", func(t *testing.T) {
		np := readyPool(1, func(np *karpv1.NodePool) { np.Spec.Replicas = nil })
		if plan := Plan(newWorld(np).input()); len(plan) != 0 {
			t.Errorf("plan %+v, want none (a dynamic pool)", plan)
		}
	})
	run("should return early if current node count exceeds desired replicas", func(t *testing.T) {
		w := newWorld(readyPool(1))
		w.claims("static", "node", 2)
		if n := creates(t, w); n != 0 {
			t.Errorf("creates %d, want none", n)
		}
	})
	run("should create nodeclaims when current node count is less than desired replicas", func(t *testing.T) {
		np := readyPool(2)
		p := onlyPool(t, Plan(newWorld(np).input()))
		if p.Create != 2 || p.Claim == nil {
			t.Fatalf("creates %d (%v), want 2", p.Create, p.Claim)
		}
		nc := planning.NodeClaimFor(np, &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, p.Claim)
		if *nc.Spec.NodeClassRef != *np.Spec.Template.Spec.NodeClassRef || nc.Labels[wellknown.NodePoolLabel] != np.Name {
			t.Errorf("nodeClassRef %v labels %v, want the pool's", nc.Spec.NodeClassRef, nc.Labels)
		}
	})
	run("should create additional nodeclaims to reach desired replicas", func(t *testing.T) {
		w := newWorld(readyPool(3))
		w.claim("static", "node")
		if n := creates(t, w); n != 2 {
			t.Errorf("creates %d, want 2", n)
		}
	})
	run("should not create additional nodeclaims", func(t *testing.T) {
		// A claim with no node, one whose node has not registered, one
		// with its node: all three count, however often it reruns.
		w := newWorld(readyPool(3))
		w.claim("static", "launched")
		w.claim("static", "node")
		w.snap.Nodes[len(w.snap.Nodes)-1].Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}
		w.claim("static", "node")
		for range 10 {
			w.apply(onlyPool(t, Plan(w.input())))
		}
		if len(w.snap.NodeClaims) != 3 {
			t.Errorf("%d claims, want 3", len(w.snap.NodeClaims))
		}
	})
	run("should not create additional nodeclaims when node limits are reached", func(t *testing.T) {
		w := newWorld(readyPool(3, nodeLimit("1")))
		w.claim("static", "node")
		if n := creates(t, w); n != 0 {
			t.Errorf("creates %d, want none at the node limit", n)
		}
	})
	run("should reserve nodepool nodecount during provisioning and release after", func(t *testing.T) {
		np := readyPool(3, nodeLimit("10"))
		w := newWorld(np)
		w.apply(onlyPool(t, Plan(w.input())))
		if len(w.snap.NodeClaims) != 3 {
			t.Fatalf("%d claims, want 3", len(w.snap.NodeClaims))
		}
		np.Spec.Replicas = new(int64(15))
		w.apply(onlyPool(t, Plan(w.input())))
		if len(w.snap.NodeClaims) != 10 {
			t.Errorf("%d claims at replicas 15 and limit 10, want 10", len(w.snap.NodeClaims))
		}
		if n := creates(t, w); n != 0 {
			t.Errorf("creates %d more, want none", n)
		}
	})
	run("should handle zero replicas", func(t *testing.T) {
		if n := creates(t, newWorld(readyPool(0))); n != 0 {
			t.Errorf("creates %d, want none", n)
		}
	})
	run("should respect nodepool template specifications", func(t *testing.T) {
		in := []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: wellknown.InstanceCategoryLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "r"}, MinValues: new(2)},
			{Key: wellknown.InstanceFamilyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"c4", "r4"}, MinValues: new(2)},
			{Key: wellknown.InstanceCPULabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"32"}},
			{Key: wellknown.InstanceHypervisorLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"nitro"}},
			{Key: wellknown.InstanceGenerationLabel, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
			{Key: wellknown.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
			{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand", "reserved", "spot"}},
		}
		want := slices.Clone(in)
		want[4] = karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceGenerationLabel, Operator: karpv1.NodeSelectorOpGte, Values: []string{"3"}}
		np := readyPool(4, func(np *karpv1.NodePool) {
			np.Spec.Template.Labels = map[string]string{"custom-label": "custom-value"}
			np.Spec.Template.Annotations = map[string]string{"custom-annotation": "custom-value"}
			np.Spec.Template.Spec.Requirements = in
		})
		w := newWorld(np)
		// A class with types the requirements allow.
		cls := map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true}}
		for _, name := range []string{"c4.8xlarge", "r4.8xlarge"} {
			it := mkType(name, "amd64", 32, 1.6)
			it.Labels[wellknown.InstanceHypervisorLabel] = "nitro"
			it.Labels[wellknown.InstanceGenerationLabel] = "4"
			cls["default"].InstanceTypes = append(cls["default"].InstanceTypes, it)
		}
		input := w.input()
		input.Classes = cls
		p := onlyPool(t, Plan(input))
		if p.Create != 4 || p.Claim == nil {
			t.Fatalf("creates %d (%s), want 4", p.Create, p.Why)
		}
		nc := planning.NodeClaimFor(np, &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, p.Claim)
		if nc.Labels["custom-label"] != "custom-value" || nc.Annotations["custom-annotation"] != "custom-value" {
			t.Errorf("labels %v annotations %v, want the template's", nc.Labels, nc.Annotations)
		}
		for _, r := range want {
			if !slices.ContainsFunc(nc.Spec.Requirements, func(q karpv1.NodeSelectorRequirementWithMinValues) bool {
				return q.Key == r.Key && q.Operator == r.Operator && slices.Equal(sorted(q.Values), sorted(r.Values)) &&
					(q.MinValues == nil) == (r.MinValues == nil) && (q.MinValues == nil || *q.MinValues == *r.MinValues)
			}) {
				t.Errorf("requirement %v missing from %v", r, nc.Spec.Requirements)
			}
		}
	})
	run("should handle large replica counts", func(t *testing.T) {
		if n := creates(t, newWorld(readyPool(1000))); n != 1000 {
			t.Errorf("creates %d, want 1000", n)
		}
	})
	// Karpenter's concurrent reconciles each reserve from the pool's node
	// count; Karpless plans once per tick under the provisioning lease, so
	// the 50 reconciles are 50 passes one after the other: never past
	// limits.nodes, as the title says. (Karpenter's cluster state ends at
	// the limit, 10, for 5 replicas: its deprovisioning then deletes the
	// 5 extra; Karpless never creates them.)
	for _, spec := range []string{
		"handles concurrent reconciliation without exceeding NodePool limits",
		"should wait for cluster to be synced and not over provision",
	} {
		run(spec, func(t *testing.T) {
			w := newWorld(readyPool(5, nodeLimit("10")))
			for range 50 {
				w.apply(onlyPool(t, Plan(w.input())))
				if len(w.snap.NodeClaims) > 10 {
					t.Fatalf("%d claims, more than limits.nodes 10", len(w.snap.NodeClaims))
				}
			}
			if len(w.snap.NodeClaims) != 5 {
				t.Errorf("%d claims, want the 5 replicas", len(w.snap.NodeClaims))
			}
		})
	}

	// The predicate of Karpenter's NodePool watch, the watcher's here
	// (Changed): a change it reports starts the provisioner within a
	// batch's wait.
	for _, e := range []struct {
		entry              string
		oldRep, newRep     int64
		oldReady, newReady bool
		want               bool
	}{
		{"replica changed", 5, 3, false, false, true},
		{"replica same, false → true", 5, 5, false, true, true},
		{"replica same, true → false", 5, 5, true, false, false},
		{"replica same, both true", 5, 5, true, true, false},
		{"replica same, both false", 5, 5, false, false, false},
	} {
		conformance.Run(t, provCase("Helper Functions > should detect replica or status changes > "+e.entry), func(t *testing.T) {
			old, cur := watchedPool(e.oldRep, e.oldReady), watchedPool(e.newRep, e.newReady)
			if got := ReplicaOrStatusChanged(old, cur); got != e.want {
				t.Errorf("ReplicaOrStatusChanged %v, want %v", got, e.want)
			}
			if got := Changed(old, cur); got != e.want {
				t.Errorf("Changed (the watcher's) %v, want %v", got, e.want)
			}
		})
	}
}

// watchedPool is the NodePool of Karpenter's predicate tests as stored:
// its conditions set as Karpenter's StatusConditions leaves them (the
// root Ready follows ValidationSucceeded and NodeClassReady).
func watchedPool(replicas int64, ready bool) *karpv1.NodePool {
	np := staticPool("static", replicas)
	set := func(typ string, status metav1.ConditionStatus) {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: typ})
	}
	if ready {
		set(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue)
		set(karpv1.ConditionTypeNodeClassReady, metav1.ConditionTrue)
		set(karpv1.ConditionTypeReady, metav1.ConditionTrue)
	} else {
		set(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse)
		set(karpv1.ConditionTypeReady, metav1.ConditionFalse)
	}
	return np
}

func sorted(v []string) []string {
	out := slices.Clone(v)
	slices.Sort(out)
	return out
}

func TestConformanceStaticDeprovisioning(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, deprovCase("Reconcile > "+spec), body) }
	deletes := func(t *testing.T, w *world) []*karpv1.NodeClaim {
		t.Helper()
		plan := Plan(w.input())
		if len(plan) == 0 {
			return nil
		}
		return onlyPool(t, plan).Delete
	}
	run("should return early if nodepool is not managed by cloud provider", func(t *testing.T) {
		w := newWorld(readyPool(1, unmanaged))
		w.claims("static", "node", 2)
		if d := deletes(t, w); len(d) != 0 {
			t.Errorf("deletes %v, want none", names(d))
		}
	})
	run("should return early if nodepool replicas is nil", func(t *testing.T) {
		w := newWorld(readyPool(1, func(np *karpv1.NodePool) { np.Spec.Replicas = nil }))
		w.claims("static", "node", 2)
		if d := deletes(t, w); len(d) != 0 {
			t.Errorf("deletes %v, want none", names(d))
		}
	})
	run("should return early if nodepool is being deleted", func(t *testing.T) {
		w := newWorld(readyPool(1, func(np *karpv1.NodePool) { np.DeletionTimestamp = &metav1.Time{Time: now} }))
		w.claims("static", "node", 2)
		if d := deletes(t, w); len(d) != 0 {
			t.Errorf("deletes %v, want none", names(d))
		}
	})
	run("should return early if current node count is less than or equal to desired replicas", func(t *testing.T) {
		w := newWorld(readyPool(3))
		w.claims("static", "node", 2)
		if d := deletes(t, w); len(d) != 0 {
			t.Errorf("deletes %v, want none", names(d))
		}
	})
	run("should only consider running nodeclaims and not deleting nodeclaims", func(t *testing.T) {
		w := newWorld(readyPool(1))
		for i, nc := range w.claims("static", "node", 4) {
			if i < 3 {
				w.disrupting[nc.Name] = true // marked for deletion
			}
		}
		p := onlyPool(t, Plan(w.input()))
		if len(p.Delete) != 0 || p.Count.Active != 1 || p.Count.Disrupting != 3 {
			t.Errorf("deletes %v, count %+v; want none, 1 running and 3 going", names(p.Delete), p.Count)
		}
	})
	run("should terminate excess nodeclaims when current count exceeds desired replicas", func(t *testing.T) {
		w := newWorld(readyPool(2))
		w.claims("static", "node", 4)
		p := onlyPool(t, Plan(w.input()))
		w.apply(p)
		if after := Counts(w.input())["static"]; len(p.Delete) != 2 || after.Active != 2 || after.Deleting != 2 {
			t.Errorf("deletes %v, then %+v; want 2 deleted, 2 running", names(p.Delete), after)
		}
	})
	run("should handle zero replicas by terminating all nodeclaims", func(t *testing.T) {
		w := newWorld(readyPool(0))
		w.claims("static", "node", 3)
		w.apply(onlyPool(t, Plan(w.input())))
		if after := Counts(w.input())["static"]; after.Active != 0 || after.Deleting != 3 {
			t.Errorf("then %+v, want all 3 deleting", after)
		}
	})
	run("should handle no active nodeclaims gracefully", func(t *testing.T) {
		if d := deletes(t, newWorld(readyPool(0))); len(d) != 0 {
			t.Errorf("deletes %v, want none", names(d))
		}
	})
	df := deprovCase("Reconcile > Failing Scenarios > should return error when nodeclaim deletion fails")
	df.Differs = "a NodeClaim the disruption tick fails to delete is logged and counted and the tick's other work goes on; the next tick, " +
		"which finds it still running, deletes it: Karpenter's reconcile returns the error and is retried with backoff"
	conformance.Run(t, df, func(t *testing.T) {})

	sel := "Deprovision Candidate Selection > "
	run(sel+"should prioritize nodeclaims that have unresolved providerID", func(t *testing.T) {
		w := newWorld(readyPool(2))
		w.claims("static", "node", 2)
		unresolved := w.claims("static", "unlaunched", 2)
		got := names(deletes(t, w))
		slices.Sort(got)
		if want := sorted(names(unresolved)); !slices.Equal(got, want) {
			t.Errorf("deletes %v, want the unlaunched %v", got, want)
		}
	})
	// Karpenter's DaemonSet pods have an owner reference without
	// controller: true; they are DaemonSet pods all the same.
	dsNoController := func(p *corev1.Pod) {
		p.Namespace = "kube-system"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "test-daemonset", UID: "test-uid"}}
	}
	run(sel+"should prioritize empty nodes (with only daemonset pods) for termination", func(t *testing.T) {
		w := newWorld(readyPool(2))
		all := w.claims("static", "node", 4)
		for i, nc := range all {
			if i == 0 || i == 2 {
				w.pod(nc, dsNoController)
			} else {
				w.pod(nc, nil)
			}
		}
		got := names(deletes(t, w))
		slices.Sort(got)
		if want := sorted([]string{all[0].Name, all[2].Name}); !slices.Equal(got, want) {
			t.Errorf("deletes %v, want the DaemonSet-only nodes %v", got, want)
		}
	})
	run(sel+"should terminate non-empty nodes when empty nodes are insufficient", func(t *testing.T) {
		w := newWorld(readyPool(1))
		all := w.claims("static", "node", 4)
		w.pod(all[0], nil)
		w.pod(all[2], nil)
		if d := deletes(t, w); len(d) != 3 {
			t.Errorf("deletes %v, want 3", names(d))
		}
	})
	// disruption cost ordering: two nodes each of one kube-system pod
	// (low), a kube-system and an app pod (high), a do-not-disrupt pod
	// (dnd), a DaemonSet pod (ds).
	build := func(replicas int64) (*world, []*karpv1.NodeClaim) {
		w := newWorld(readyPool(replicas))
		var all []*karpv1.NodeClaim
		for i := range 2 {
			for _, kind := range []string{"low", "high", "dnd", "ds"} {
				nc := w.claim("static", "node")
				named := func(n string) func(*corev1.Pod) {
					return func(p *corev1.Pod) { p.Name, p.Namespace = fmt.Sprintf("%s-%d", n, i), "kube-system" }
				}
				switch kind {
				case "low":
					w.pod(nc, named("system-pod-low"))
				case "high":
					w.pod(nc, named("system-pod-high"))
					w.pod(nc, func(p *corev1.Pod) { p.Name = fmt.Sprintf("app-pod-high-%d", i) })
				case "dnd":
					w.pod(nc, doNotDisrupt)
				case "ds":
					w.pod(nc, dsNoController)
				}
				all = append(all, nc)
			}
		}
		return w, all
	}
	for _, e := range []struct {
		entry    string
		replicas int64
		keep     []int
	}{
		{"to 6 (drops DS-only first)", 6, []int{0, 1, 2, 4, 5, 6}},
		{"to 4 (drops low next)", 4, []int{1, 2, 5, 6}},
		{"to 2 (drops high next)", 2, []int{2, 6}},
		{"to 0 (drops do-not-disrupt last)", 0, nil},
	} {
		run(sel+"disruption cost ordering > scales down in disruption cost order > "+e.entry, func(t *testing.T) {
			w, all := build(e.replicas)
			p := onlyPool(t, Plan(w.input()))
			w.apply(p)
			var kept []int
			for i, nc := range all {
				if nc.DeletionTimestamp == nil {
					kept = append(kept, i)
				}
			}
			if !slices.Equal(kept, e.keep) {
				t.Errorf("kept %v, want %v", kept, e.keep)
			}
			if c := Counts(w.input())["static"]; int64(c.Active) != e.replicas || int64(c.Deleting) != 8-e.replicas {
				t.Errorf("count %+v, want %d running, %d deleting", c, e.replicas, 8-e.replicas)
			}
		})
	}
	helper := func(spec string, body func(t *testing.T)) {
		run("Helper Functions > hasNodePoolReplicaOrStatusChanged > "+spec, body)
	}
	helper("should detect replica changes", func(t *testing.T) {
		old, cur := staticPool("static", 5), staticPool("static", 10)
		if !ReplicaCountChanged(old, cur) {
			t.Error("ReplicaCountChanged false, want true")
		}
		if !Changed(old, cur) {
			t.Error("Changed (the watcher's) false, want true")
		}
	})
	helper("should return false for identical replicas", func(t *testing.T) {
		old := staticPool("static", 5)
		if ReplicaCountChanged(old, old) {
			t.Error("ReplicaCountChanged true, want false")
		}
		if Changed(old, old) {
			t.Error("Changed (the watcher's) true, want false")
		}
	})
}
