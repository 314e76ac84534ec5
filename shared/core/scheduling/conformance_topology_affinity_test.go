package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// zonalAntiAffinityCommits is how Karpless differs on required zonal
// anti-affinity (doc.go, "Differences from Karpenter").
const zonalAntiAffinityCommits = "A pod with required zonal anti-affinity gets a NodeClaim in one empty zone (the cheapest), where Karpenter's claim keeps every empty zone until its launch picks one: the same nodes, without waiting a batch per pod."

// The rest of Karpenter v1.14.1's topology_test.go: the Topology
// Describe's "Pod Affinity/Anti-Affinity" Context, and the "Taints" and
// "Topology with Volume Requirements" Describes.
func TestConformanceTopologyAffinity(t *testing.T) {
	in := corev1.NodeSelectorOpIn
	zone, host, arch := wellknown.ZoneLabel, wellknown.HostnameLabel, wellknown.ArchLabel
	lbl := withPodLabels(topoLabels)
	s2 := map[string]string{"security": "s2"}
	aff := withPodLabels(s2)
	differs := func(spec, why string, body func(t *testing.T)) {
		c := topoCase("Topology > Pod Affinity/Anti-Affinity > " + spec)
		c.Differs = why
		conformance.Run(t, c, body)
	}
	run := func(spec string, body func(t *testing.T)) { differs(spec, "", body) }
	hostSpread := spreadConstraint(host, 1, corev1.DoNotSchedule, topoLabels)
	sameNode := func(t *testing.T, w *topoWorld, a, b *corev1.Pod) {
		t.Helper()
		if na, nb := w.nodeOf(a), w.nodeOf(b); na != nb {
			t.Fatalf("pods on %s and %s, want the same node", na.Name, nb.Name)
		}
	}
	oneNode := func(t *testing.T, w *topoWorld, pods []*corev1.Pod) {
		t.Helper()
		for _, p := range pods {
			sameNode(t, w, pods[0], p)
		}
	}
	required := func(terms ...corev1.PodAffinityTerm) podOpt { return withPodAffinityTerms(terms, nil) }
	antiRequired := func(terms ...corev1.PodAffinityTerm) podOpt { return withPodAntiAffinityTerms(terms, nil) }

	run("should schedule a pod with empty pod affinity and anti-affinity", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		p := fakePod(withPodAffinityTerms([]corev1.PodAffinityTerm{}, nil), withPodAntiAffinityTerms([]corev1.PodAffinityTerm{}, nil))
		w.provision(p)
		w.nodeOf(p)
	})
	run("should respect pod affinity (hostname)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPod1 := fakePod(aff)
		affPod2 := fakePod(required(affinityTerm(host, s2)))
		w.provision(append(topoPods(10, lbl, withTSC(hostSpread)), affPod1, affPod2)...)
		sameNode(t, w, affPod1, affPod2)
	})
	archPods := func(second podOpt) (*corev1.Pod, *corev1.Pod) {
		c := spreadConstraint(host, 1, corev1.DoNotSchedule, s2)
		return fakePod(withTSC(c), aff, requests("cpu", "2"), nodeSelector(arch, "arm64")),
			fakePod(aff, withTSC(c), requests("cpu", "1"), second)
	}
	run("should respect pod affinity (arch)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPod1, affPod2 := archPods(required(affinityTerm(arch, s2)))
		w.provision(affPod1, affPod2)
		n1, n2 := w.nodeOf(affPod1), w.nodeOf(affPod2)
		if n1.Labels[arch] != n2.Labels[arch] || n1 == n2 {
			t.Fatalf("pods on %s (%s) and %s (%s), want the same arch on two nodes", n1.Name, n1.Labels[arch], n2.Name, n2.Labels[arch])
		}
	})
	selfAffinity := func(key string, n int, opts ...podOpt) []*corev1.Pod {
		return topoPods(n, append([]podOpt{aff, required(affinityTerm(key, s2))}, opts...)...)
	}
	run("should respect self pod affinity (hostname)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := selfAffinity(host, 3)
		w.provision(pods...)
		oneNode(t, w, pods)
	})
	run("should respect self pod affinity for first empty topology domain only (hostname)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := selfAffinity(host, 10)
		w.provision(pods...)
		nodes, scheduled := map[string]bool{}, 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				nodes[p.Spec.NodeName] = true
				scheduled++
			}
		}
		// The node holds five pods at most: one node, five pending.
		if len(nodes) != 1 || scheduled != 5 {
			t.Fatalf("%d pods scheduled on %d nodes, want 5 on 1", scheduled, len(nodes))
		}
		pods = selfAffinity(host, 10)
		w.provision(pods...)
		for _, p := range pods {
			w.expectNotBound(p)
		}
	})
	run("should respect self pod affinity for first empty topology domain only (hostname/constrained zones)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(selfAffinity(host, 1, nodeSelector(zone, fakeZone1))...)
		pods := selfAffinity(host, 10, nodeRequirements(expr(zone, in, fakeZone2, fakeZone3)))
		w.provision(pods...)
		for _, p := range pods {
			w.expectNotBound(p)
		}
	})
	run("should respect self pod affinity (zone)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := selfAffinity(zone, 3)
		w.provision(pods...)
		oneNode(t, w, pods)
	})
	run("should respect self pod affinity (zone w/ constraint)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := selfAffinity(zone, 3, nodeRequirements(expr(zone, in, fakeZone3)))
		w.provision(pods...)
		oneNode(t, w, pods)
		expectLabel(t, w.nodeOf(pods[0]).Labels, zone, fakeZone3)
	})
	run("should allow two nodes to be created when two pods with matching affinities have incompatible selectors", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		s1 := map[string]string{"security": "s1"}
		pod := func(z string) *corev1.Pod {
			return fakePod(withPodLabels(s1), required(affinityTerm(zone, s1)), nodeRequirements(expr(zone, in, z)))
		}
		pod1, pod2 := pod(fakeZone2), pod(fakeZone3)
		w.provision(pod1, pod2)
		n1, n2 := w.nodeOf(pod1), w.nodeOf(pod2)
		expectLabel(t, n1.Labels, zone, fakeZone2)
		expectLabel(t, n2.Labels, zone, fakeZone3)
		if n1 == n2 {
			t.Fatalf("both pods on %s, want two nodes", n1.Name)
		}
	})
	run("should allow violation of preferred pod affinity", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPod2 := fakePod(withPodAffinityTerms(nil, []corev1.WeightedPodAffinityTerm{weightedTerm(50, affinityTerm(host, s2))}))
		w.provision(append(topoPods(10, lbl, withTSC(hostSpread)), affPod2)...)
		w.nodeOf(affPod2)
	})
	run("should allow violation of preferred pod anti-affinity", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPods := topoPods(10, withPodAntiAffinityTerms(nil, []corev1.WeightedPodAffinityTerm{weightedTerm(50, affinityTerm(zone, topoLabels))}))
		w.provision(append(topoPods(3, lbl, withTSC(spreadConstraint(zone, 1, corev1.DoNotSchedule, topoLabels))), affPods...)...)
		for _, p := range affPods {
			w.nodeOf(p)
		}
	})
	run("should separate nodes using simple pod anti-affinity on hostname", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		for range 10 {
			affPod1 := fakePod(aff)
			affPod2 := fakePod(antiRequired(affinityTerm(host, s2)))
			w.provision(affPod2, affPod1)
			if n1, n2 := w.nodeOf(affPod1), w.nodeOf(affPod2); n1 == n2 {
				t.Fatalf("both pods on %s, want two nodes", n1.Name)
			}
		}
	})
	big := requests("cpu", "2")
	zonePods := func(opts ...podOpt) []*corev1.Pod {
		var out []*corev1.Pod
		for _, z := range []string{fakeZone1, fakeZone2, fakeZone3} {
			out = append(out, fakePod(append([]podOpt{big, nodeSelector(zone, z)}, opts...)...))
		}
		return out
	}
	run("should not violate pod anti-affinity on zone", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		zoned := zonePods(aff)
		affPod := fakePod(antiRequired(affinityTerm(zone, s2)))
		w.provision(append(zoned, affPod)...)
		for _, p := range zoned {
			w.nodeOf(p)
		}
		w.expectNotBound(affPod)
	})
	run("should not violate pod anti-affinity on zone (other schedules first)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pod := fakePod(aff, big)
		affPod := fakePod(antiRequired(affinityTerm(zone, s2)))
		w.provision(pod, affPod)
		w.nodeOf(pod)
		w.expectNotBound(affPod)
	})
	run("should not violate pod anti-affinity (arch)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPod1, affPod2 := archPods(antiRequired(affinityTerm(arch, s2)))
		w.provision(affPod1, affPod2)
		if n1, n2 := w.nodeOf(affPod1), w.nodeOf(affPod2); n1.Labels[arch] == n2.Labels[arch] {
			t.Fatalf("both pods on %s nodes, want different archs", n1.Labels[arch])
		}
	})
	preferredAnti := withPodAntiAffinityTerms(nil, []corev1.WeightedPodAffinityTerm{weightedTerm(10, affinityTerm(zone, s2))})
	requiredAnti := antiRequired(affinityTerm(zone, s2))
	inverse := func(anti podOpt, existing, schedules bool) func(t *testing.T) {
		return func(t *testing.T) {
			w := newTopoWorld(t, topoPool())
			zoned := zonePods(anti)
			affPod := fakePod(aff)
			if existing {
				w.provision(zoned...)
				w.provision(affPod)
			} else {
				w.provision(append(zoned, affPod)...)
			}
			for _, p := range zoned {
				w.nodeOf(p)
			}
			if schedules {
				w.nodeOf(affPod)
			} else {
				w.expectNotBound(affPod)
			}
		}
	}
	run("should violate preferred pod anti-affinity on zone (inverse)", inverse(preferredAnti, false, true))
	run("should not violate pod anti-affinity on zone (inverse)", inverse(requiredAnti, false, false))
	differs("should not violate pod anti-affinity on zone (Schrödinger)", zonalAntiAffinityCommits+
		" Here the pod it repels goes to another zone in the same pass; Karpenter leaves it pending until the launch has fixed the first pod's zone.", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		zoneAnywherePod := fakePod(requiredAnti, big)
		affPod := fakePod(aff)
		w.provision(zoneAnywherePod, affPod)
		n1 := w.nodeOf(zoneAnywherePod)
		w.expectNotBound(affPod)
		w.provision(affPod)
		if n2 := w.nodeOf(affPod); n1.Labels[zone] == n2.Labels[zone] {
			t.Fatalf("both pods in %s, want different zones", n1.Labels[zone])
		}
	})
	run("should not violate pod anti-affinity on zone (inverse w/existing nodes)", inverse(requiredAnti, true, false))
	run("should violate preferred pod anti-affinity on zone (inverse w/existing nodes)", inverse(preferredAnti, true, true))
	run("should allow violation of a pod affinity preference with a conflicting required constraint", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPod1 := fakePod(aff)
		affPods := topoPods(3, lbl, withTSC(hostSpread), withPodAffinityTerms(nil, []corev1.WeightedPodAffinityTerm{weightedTerm(50, affinityTerm(host, s2))}))
		pods := append(affPods, affPod1)
		w.provision(pods...)
		for _, p := range pods {
			w.nodeOf(p)
		}
		w.expectSkew("", hostSpread, 1, 1, 1)
	})
	zoneCount := corev1.TopologySpreadConstraint{TopologyKey: zone}
	differs("should support pod anti-affinity with a zone topology", zonalAntiAffinityCommits+
		" Here the three pods that repel each other take the three zones in the first pass; Karpenter records every empty zone as taken by the first pod's claim and places one pod per batch.", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		createPods := func() []*corev1.Pod { return topoPods(3, aff, antiRequired(affinityTerm(zone, s2))) }
		for _, want := range [][]int{{1}, {1, 1}, {1, 1, 1}, {1, 1, 1}} {
			w.provision(createPods()...)
			w.expectSkew("default", zoneCount, want...)
			w.deleteUnscheduled()
		}
	})
	run("should not schedule pods with affinity to a non-existent pod", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := topoPods(10, required(affinityTerm(zone, s2)))
		w.provision(pods...)
		for _, p := range pods {
			w.expectNotBound(p)
		}
	})
	run("should support pod affinity with zone topology (unconstrained target)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		target := fakePod(aff)
		affPods := topoPods(10, required(affinityTerm(zone, s2)))
		w.provision(append(affPods, target)...)
		for _, p := range affPods {
			w.expectNotBound(p)
		}
		w.expectSkew("default", zoneCount, 1)
		w.provision(affPods...)
		for _, p := range affPods {
			w.nodeOf(p)
		}
		w.expectSkew("default", zoneCount, 11)
	})
	run("should support pod affinity with zone topology (constrained target)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		affPod1 := fakePod(aff, nodeRequirements(expr(zone, in, fakeZone1)))
		affPods := append(topoPods(10, required(affinityTerm(zone, s2))), affPod1)
		w.provision(affPods...)
		w.expectSkew("default", zoneCount, 11)
	})
	run("should handle multiple dependent affinities", func(t *testing.T) {
		l := func(typ string) map[string]string { return map[string]string{"type": typ, "spread": "spread"} }
		for range 50 {
			w := newTopoWorld(t, topoPool())
			pods := []*corev1.Pod{
				fakePod(withPodLabels(l("db"))),
				fakePod(withPodLabels(l("web")), required(affinityTerm(host, l("db")))),
				fakePod(withPodLabels(l("cache")), required(affinityTerm(host, l("web")))),
				fakePod(withPodLabels(l("ui")), required(affinityTerm(host, l("cache")))),
			}
			w.provision(pods...)
			for _, p := range pods {
				w.nodeOf(p)
			}
		}
	})
	run("should fail to schedule pods with unsatisfiable dependencies", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		p := fakePod(withPodLabels(map[string]string{"type": "db", "spread": "spread"}),
			required(affinityTerm(host, map[string]string{"type": "web", "spread": "spread"})))
		w.provision(p)
		w.expectNotBound(p)
	})
	byNamespace := func(ns *corev1.Namespace, term corev1.PodAffinityTerm, together bool) func(t *testing.T) {
		return func(t *testing.T) {
			w := newTopoWorld(t, topoPool())
			w.namespaces = []*corev1.Namespace{ns}
			affPod1 := fakePod(aff, podNamespace(ns.Name))
			affPod2 := fakePod(required(term))
			w.provision(append(topoPods(10, lbl, withTSC(hostSpread)), affPod1, affPod2)...)
			w.nodeOf(affPod1)
			if together {
				sameNode(t, w, affPod1, affPod2)
			} else {
				w.expectNotBound(affPod2)
			}
		}
	}
	nsNamed := func(name string, l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	run("should filter pod affinity topologies by namespace, no matching pods",
		byNamespace(nsNamed("other-ns-no-match", nil), affinityTerm(host, s2), false))
	listed := affinityTerm(host, s2)
	listed.Namespaces = []string{"other-ns-list"}
	run("should filter pod affinity topologies by namespace, matching pods namespace list",
		byNamespace(nsNamed("other-ns-list", nil), listed, true))
	selected := affinityTerm(host, s2)
	selected.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{}}
	run("should filter pod affinity topologies by namespace, empty namespace selector",
		byNamespace(nsNamed("empty-ns-selector", map[string]string{"foo": "bar"}), selected, true))
}

func TestConformanceTopologyTaints(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, topoCase("Taints > "+spec), body) }
	noSchedule := corev1.TaintEffectNoSchedule
	run("should taint nodes with NodePool taints", func(t *testing.T) {
		taint := corev1.Taint{Key: "test", Value: "bar", Effect: noSchedule}
		w := newTopoWorld(t, topoPool(withTaint(taint.Key, taint.Value, taint.Effect)))
		p := fakePod(withTolerations(corev1.Toleration{Effect: noSchedule, Operator: corev1.TolerationOpExists}))
		w.provision(p)
		n := w.nodeOf(p)
		for _, tt := range n.Taints {
			if tt.MatchTaint(&taint) && tt.Value == taint.Value {
				return
			}
		}
		t.Fatalf("node taints %v, want %v among them", n.Taints, taint)
	})
	run("should schedule pods that tolerate NodePool constraints", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withTaint("test-key", "test-value", noSchedule)))
		pods := []*corev1.Pod{
			fakePod(withTolerations(corev1.Toleration{Key: "test-key", Operator: corev1.TolerationOpExists, Effect: noSchedule})),
			fakePod(withTolerations(corev1.Toleration{Key: "test-key", Value: "test-value", Operator: corev1.TolerationOpEqual, Effect: noSchedule})),
		}
		w.provision(pods...)
		for _, p := range pods {
			w.nodeOf(p)
		}
		other := []*corev1.Pod{
			fakePod(),
			fakePod(withTolerations(corev1.Toleration{Key: "invalid", Operator: corev1.TolerationOpExists})),
			fakePod(withTolerations(corev1.Toleration{Key: "test-key", Operator: corev1.TolerationOpEqual, Effect: noSchedule})),
		}
		w.provision(other...)
		for _, p := range other {
			w.expectNotBound(p)
		}
	})
	run("should provision nodes with taints and schedule pods if the taint is only a startup taint", func(t *testing.T) {
		pool := topoPool()
		pool.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "ignore-me", Value: "nothing-to-see-here", Effect: noSchedule}}
		w := newTopoWorld(t, pool)
		p := fakePod()
		w.provision(p)
		w.nodeOf(p)
	})
	// Karpenter's node keeps one taint its test harness leaves; what the
	// It checks is that the toleration generates none.
	run("should not generate taints for OpExists", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		p := fakePod(withTolerations(corev1.Toleration{Key: "test-key", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}))
		r := w.provision(p)
		w.nodeOf(p)
		if c := claimOf(r, p); len(c.Taints) != 0 {
			t.Fatalf("claim taints %v, want none", c.Taints)
		}
	})
}

func TestConformanceTopologyVolumes(t *testing.T) {
	conformance.Run(t, topoCase("Topology with Volume Requirements > should schedule pod with PVC and TSC minDomains=3 when pods are spread across 3 zones"), func(t *testing.T) {
		app := map[string]string{"app": "test"}
		w := newTopoWorld(t, mkPool("default", withReq(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn, wellknown.CapacityTypeOnDemand)))
		w.pvs = []*corev1.PersistentVolume{fakePV("test-pv", "", fakeZone1)}
		w.pvcs = []*corev1.PersistentVolumeClaim{fakePVC("test-pvc", nil, "test-pv")}
		three := int32(3)
		c := spreadConstraint(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app)
		c.MinDomains = &three
		initial := topoPods(3, withPodLabels(app), withTSC(c))
		w.provision(initial...)
		for _, p := range initial {
			w.nodeOf(p)
		}
		w.expectSkew("default", c, 1, 1, 1)
		p := fakePod(withPodLabels(app), withTSC(c), withClaims("test-pvc"))
		w.provision(p)
		expectLabel(t, w.nodeOf(p).Labels, wellknown.ZoneLabel, fakeZone1)
		w.expectSkew("default", c, 1, 1, 2)
	})
}
