package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/topology_test.go,
// ported whole: each It's NodePools, nodes and pods through Solve on the
// fake cloud provider's types, each ExpectProvisioned a solve of a
// topoWorld, and Karpenter's expected skews and placements.
const topologySuiteFile = "pkg/controllers/provisioning/scheduling/topology_test.go"

func topoCase(spec string) conformance.Case {
	return conformance.Case{Suite: "core/provisioning/scheduling", File: topologySuiteFile, Spec: spec}
}

var topoLabels = map[string]string{"test": "test"}

// poolReqs replaces the first NodePool's requirements.
func (w *topoWorld) poolReqs(reqs ...karpv1.NodeSelectorRequirementWithMinValues) {
	w.pools[0].Spec.Template.Spec.Requirements = reqs
}

func TestConformanceTopology(t *testing.T) {
	in := corev1.NodeSelectorOpIn
	zone, ct, host := wellknown.ZoneLabel, wellknown.CapacityTypeLabel, wellknown.HostnameLabel
	lbl := withPodLabels(topoLabels)
	run := func(spec string, body func(t *testing.T)) { conformance.Run(t, topoCase("Topology > "+spec), body) }

	run("should ignore unknown topology keys", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		p0 := fakePod(lbl, withTSC(spreadConstraint("unknown", 1, corev1.DoNotSchedule, topoLabels)))
		p1 := fakePod()
		w.provision(p0, p1)
		w.expectNotBound(p0)
		w.nodeOf(p1)
	})
	// Karpenter skips this It on Kubernetes 1.24 and later, whose
	// admission refuses the selector; ported for what it says: the
	// selector selects nothing, so the pods are not spread.
	run("should not spread an invalid label selector", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		c := corev1.TopologySpreadConstraint{TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule, MaxSkew: 1,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "{{ zqfmgb }}"}}}
		w.provision(topoPods(2, lbl, withTSC(c))...)
		w.expectSkew("default", spreadConstraint(zone, 1, corev1.DoNotSchedule, topoLabels), 2)
	})
	run("should not spread when a nil label selector is defined", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		c := spreadConstraint(zone, 1, corev1.DoNotSchedule, nil)
		w.provision(topoPods(2, lbl, withTSC(c))...)
		w.expectSkew("default", c, 2)
	})

	zonal := func(spec string, body func(t *testing.T)) { run("Zonal > "+spec, body) }
	zc := spreadConstraint(zone, 1, corev1.DoNotSchedule, topoLabels)
	zonal("should balance pods across zones (match labels)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(4, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 1, 1, 2)
	})
	zonal("should balance pods across zones (match expressions)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		c := corev1.TopologySpreadConstraint{TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule, MaxSkew: 1, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "test", Operator: metav1.LabelSelectorOpIn, Values: []string{"test"}}}}}
		w.provision(topoPods(4, lbl, withTSC(c))...)
		w.expectSkew("default", c, 1, 1, 2)
	})
	zonal("should respect NodePool zonal constraints", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1, fakeZone2, fakeZone3))))
		w.provision(topoPods(4, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 1, 1, 2)
	})
	zonal("should respect NodePool zonal constraints (subset) with requirements", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1, fakeZone2))))
		w.provision(topoPods(4, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 2, 2)
	})
	zonal("should respect NodePool zonal constraints (subset) with labels", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withLabel(zone, fakeZone1)))
		w.provision(topoPods(4, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 4)
	})
	zonal("should respect NodePool zonal constraints (subset) with requirements and labels", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1, fakeZone2)), withLabel(zone, fakeZone1)))
		w.provision(topoPods(4, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 4)
	})
	zonal("should respect NodePool zonal constraints (subset) with labels across NodePools", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1, fakeZone2)), withLabel(zone, fakeZone1)),
			mkPool("nodepool-2", withLabel(zone, fakeZone2)))
		w.provision(topoPods(4, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 2, 2)
	})
	big := requests("cpu", "1.1")
	zonal("should respect NodePool zonal constraints (existing pod)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		p := fakePod(lbl, big, nodeSelector(zone, fakeZone3))
		w.provision(p)
		w.nodeOf(p)
		w.poolReqs(npReq(zone, in, fakeZone1, fakeZone2))
		w.provision(topoPods(6, lbl, big, withTSC(zc))...)
		w.expectSkew("default", zc, 1, 2, 2)
	})
	zonal("should schedule to the non-minimum domain if its all that's available", func(t *testing.T) {
		c := spreadConstraint(zone, 5, corev1.DoNotSchedule, topoLabels)
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1))))
		w.provision(fakePod(lbl, big, withTSC(c)))
		w.expectSkew("default", c, 1)
		w.poolReqs(npReq(zone, in, fakeZone2))
		w.provision(fakePod(lbl, big, withTSC(c)))
		w.expectSkew("default", c, 1, 1)
		w.poolReqs(npReq(zone, in, fakeZone3))
		w.provision(topoPods(10, lbl, big, withTSC(c))...)
		w.expectSkew("default", c, 1, 1, 6)
	})
	zonal("should only schedule to minimum domains if already violating max skew", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := topoPods(9, lbl, big, withTSC(zc))
		w.provision(pods...)
		w.expectSkew("default", zc, 3, 3, 3)
		for _, p := range pods {
			if w.nodeOf(p).Labels[zone] != fakeZone1 {
				w.deletePod(p)
			}
		}
		w.expectSkew("default", zc, 3)
		w.provision(topoPods(3, lbl, big, withTSC(zc))...)
		w.expectSkew("default", zc, 3, 1, 2)
	})
	zonal("should not violate max-skew when unsat = do not schedule", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1))))
		w.provision(fakePod(lbl, big, withTSC(zc)))
		w.expectSkew("default", zc, 1)
		w.poolReqs(npReq(zone, in, fakeZone2, fakeZone3))
		w.provision(topoPods(10, lbl, big, withTSC(zc))...)
		w.expectSkew("default", zc, 1, 2, 2)
	})
	zonal("should not violate max-skew when unsat = do not schedule (discover domains)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1))))
		w.provision(fakePod(lbl, big))
		w.poolReqs(npReq(zone, in, fakeZone2, fakeZone3))
		w.provision(topoPods(10, lbl, withTSC(zc), big)...)
		w.expectSkew("default", zc, 1, 2, 2)
	})
	// The pending pod without a PodScheduled=False condition and the
	// terminating one are not pods Karpenter provisions for, nor bound:
	// they are left out.
	countOnly := func(key, v1, v2 string, want ...int) func(t *testing.T) {
		return func(t *testing.T) {
			c := spreadConstraint(key, 1, corev1.DoNotSchedule, topoLabels)
			w := newTopoWorld(t, topoPool())
			w.namespaces = []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "wrong-namespace"}}}
			failed, succeeded := fakePod(lbl), fakePod(lbl)
			failed.Status.Phase, succeeded.Status.Phase = corev1.PodFailed, corev1.PodSucceeded
			w.addNode("first", map[string]string{key: v1}, nil, nil,
				fakePod(), fakePod(lbl, podNamespace("wrong-namespace")), failed, succeeded, fakePod(lbl), fakePod(lbl))
			w.addNode("second", map[string]string{key: v2}, nil, nil, fakePod(lbl))
			w.addNode("third", map[string]string{}, nil, nil, fakePod(lbl))
			w.provision(topoPods(2, lbl, withTSC(c))...)
			w.expectSkew("default", c, want...)
		}
	}
	zonal("should only count running/scheduled pods with matching labels scheduled to nodes with a corresponding domain",
		countOnly(zone, fakeZone1, fakeZone2, 2, 2, 1))
	zonal("should match all pods when labelSelector is not specified", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(fakePod())
		w.expectSkew("default", spreadConstraint(zone, 1, corev1.DoNotSchedule, nil), 1)
	})
	interdependent := func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := topoPods(5, withTSC(spreadConstraint(host, 1, corev1.DoNotSchedule, topoLabels)))
		w.provision(pods...)
		for _, p := range pods {
			if w.nodeOf(p) != w.nodeOf(pods[0]) {
				t.Fatalf("pods on %s and %s, want one node", p.Spec.NodeName, pods[0].Spec.NodeName)
			}
		}
	}
	zonal("should handle interdependent selectors", interdependent)
	minDomains := func(n int32, zones []string, pods int, want ...int) func(t *testing.T) {
		return func(t *testing.T) {
			c := spreadConstraint(zone, 1, corev1.DoNotSchedule, topoLabels)
			c.MinDomains = &n
			w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, zones...))))
			w.provision(topoPods(pods, lbl, withTSC(c))...)
			w.expectSkew("default", c, want...)
		}
	}
	zonal("should respect minDomains constraints", minDomains(3, []string{fakeZone1, fakeZone2}, 3, 1, 1))
	zonal("satisfied minDomains constraints (equal) should allow expected pod scheduling", minDomains(3, []string{fakeZone1, fakeZone2, fakeZone3}, 11, 4, 4, 3))
	zonal("satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling", minDomains(2, []string{fakeZone1, fakeZone2, fakeZone3}, 11, 4, 4, 3))

	hostname := func(spec string, body func(t *testing.T)) { run("Hostname > "+spec, body) }
	hostname("should balance pods across nodes", func(t *testing.T) {
		c := spreadConstraint(host, 1, corev1.DoNotSchedule, topoLabels)
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(4, lbl, withTSC(c))...)
		w.expectSkew("default", c, 1, 1, 1, 1)
	})
	hostname("should balance pods on the same hostname up to maxskew", func(t *testing.T) {
		c := spreadConstraint(host, 4, corev1.DoNotSchedule, topoLabels)
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(4, lbl, withTSC(c))...)
		w.expectSkew("default", c, 4)
	})
	deployments := func(arch1, arch2 string, nodes int) func(t *testing.T) {
		return func(t *testing.T) {
			spreadPod := func(app, arch string) *corev1.Pod {
				opts := []podOpt{withPodLabels(map[string]string{"app": app}), withTSC(spreadConstraint(host, 1, corev1.DoNotSchedule, map[string]string{"app": app}))}
				if arch != "" {
					opts = append(opts, nodeRequirements(expr(wellknown.ArchLabel, in, arch)))
				}
				return fakePod(opts...)
			}
			w := newTopoWorld(t, topoPool())
			pods := []*corev1.Pod{spreadPod("app1", arch1), spreadPod("app1", arch1), spreadPod("app2", arch2), spreadPod("app2", arch2)}
			w.provision(pods...)
			for _, p := range pods {
				w.nodeOf(p)
			}
			if len(w.nodes) != nodes {
				t.Fatalf("%d nodes, want %d", len(w.nodes), nodes)
			}
		}
	}
	hostname("balance multiple deployments with hostname topology spread", deployments("", "", 2))
	hostname("balance multiple deployments with hostname topology spread & varying arch", deployments("amd64", "arm64", 4))

	capacityType := func(spec string, body func(t *testing.T)) { run("CapacityType > "+spec, body) }
	cc := spreadConstraint(ct, 1, corev1.DoNotSchedule, topoLabels)
	spot, od := wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand
	capacityType("should balance pods across capacity types", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(4, lbl, withTSC(cc))...)
		w.expectSkew("default", cc, 2, 2)
	})
	capacityType("should respect NodePool capacity type constraints", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(ct, in, spot, od))))
		w.provision(topoPods(4, lbl, withTSC(cc))...)
		w.expectSkew("default", cc, 2, 2)
	})
	capacityType("should not violate max-skew when unsat = do not schedule (capacity type)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool(withReqs(npReq(ct, in, spot))))
		w.provision(fakePod(lbl, big, withTSC(cc)))
		w.expectSkew("default", cc, 1)
		w.poolReqs(npReq(ct, in, od))
		w.provision(topoPods(5, lbl, big, withTSC(cc))...)
		w.expectSkew("default", cc, 1, 2)
	})
	capacityType("should violate max-skew when unsat = schedule anyway (capacity type)", func(t *testing.T) {
		c := spreadConstraint(ct, 1, corev1.ScheduleAnyway, topoLabels)
		w := newTopoWorld(t, topoPool(withReqs(npReq(ct, in, spot))))
		w.provision(fakePod(lbl, big, withTSC(c)))
		w.expectSkew("default", c, 1)
		w.poolReqs(npReq(ct, in, od))
		w.provision(topoPods(5, lbl, big, withTSC(c))...)
		w.expectSkew("default", c, 1, 5)
	})
	capacityType("should only count running/scheduled pods with matching labels scheduled to nodes with a corresponding domain",
		countOnly(ct, spot, od, 2, 3))
	capacityType("should match all pods when labelSelector is not specified", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(fakePod())
		w.expectSkew("default", spreadConstraint(ct, 1, corev1.DoNotSchedule, nil), 1)
	})
	capacityType("should handle interdependent selectors", interdependent)
	capacityType("should balance pods across capacity-types (node required affinity constrained)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		p := fakePod(lbl, nodeRequirements(expr(zone, in, fakeZone1), expr(ct, in, od)))
		w.provision(p)
		w.nodeOf(p)
		w.provision(topoPods(5, lbl, nodeRequirements(expr(zone, in, fakeZone2), expr(ct, in, spot)), withTSC(cc))...)
		w.expectSkew("default", cc, 1, 5)
	})
	noConstraints := func(key, first, second string) func(t *testing.T) {
		return func(t *testing.T) {
			c := spreadConstraint(key, 1, corev1.DoNotSchedule, topoLabels)
			w := newTopoWorld(t, topoPool())
			p := fakePod(lbl, nodeSelector(wellknown.InstanceTypeLabel, "single-pod-instance-type"), nodeRequirements(expr(key, in, first)))
			w.provision(p)
			w.nodeOf(p)
			w.poolReqs(npReq(key, in, second))
			w.provision(topoPods(5, lbl, requests("cpu", "2"), withTSC(c))...)
			w.expectSkew("default", c, 1, 2)
		}
	}
	capacityType("should balance pods across capacity-types (no constraints)", noConstraints(ct, od, spot))
	capacityType("should balance pods across arch (no constraints)", noConstraints(wellknown.ArchLabel, "amd64", "arm64"))

	combined := func(spec string, body func(t *testing.T)) { run("Combined Hostname and Zonal Topology > "+spec, body) }
	rounds := func(first, second corev1.TopologySpreadConstraint, hostMost int, steps []int, want [][]int) func(t *testing.T) {
		return func(t *testing.T) {
			w := newTopoWorld(t, topoPool())
			for i, n := range steps {
				w.provision(topoPods(n, lbl, withTSC(first, second))...)
				w.expectSkew("default", first, want[i]...)
				w.expectSkewAtMost("default", second, hostMost)
			}
		}
	}
	combined("should spread pods while respecting both constraints (hostname and zonal)",
		rounds(zc, spreadConstraint(host, 3, corev1.DoNotSchedule, topoLabels), 3, []int{2, 3, 5, 11}, [][]int{{1, 1}, {2, 2, 1}, {4, 3, 3}, {7, 7, 7}}))
	combined("should balance pods across NodePool requirements", func(t *testing.T) {
		const key = "capacity.spread.4-1"
		w := newTopoWorld(t,
			mkPool("spot", withReqs(npReq(ct, in, spot), npReq(key, in, "2", "3", "4", "5"))),
			mkPool("on-demand", withReqs(npReq(ct, in, od), npReq(key, in, "1"))))
		c := spreadConstraint(key, 1, corev1.DoNotSchedule, topoLabels)
		pods := topoPods(20, lbl, withTSC(c))
		w.provision(pods...)
		for _, p := range pods {
			w.nodeOf(p)
		}
		w.expectSkew("default", c, 4, 4, 4, 4, 4)
		w.expectSkew("default", cc, 4, 16)
	})
	combined("should spread pods while respecting both constraints", func(t *testing.T) {
		hc := spreadConstraint(host, 1, corev1.ScheduleAnyway, topoLabels)
		w := newTopoWorld(t, topoPool(withReqs(npReq(zone, in, fakeZone1, fakeZone2))),
			mkPool("nodepool-b", withReqs(npReq(zone, in, fakeZone3)), withLimit("cpu", "0")))
		w.provision(topoPods(10, lbl, withTSC(zc, hc))...)
		w.expectSkew("default", zc, 1, 1)
		w.expectSkew("default", hc, 1, 1)
	})
	combined("should spread pods while respecting both constraints",
		rounds(cc, spreadConstraint(host, 3, corev1.DoNotSchedule, topoLabels), 3, []int{2, 3, 5, 11}, [][]int{{1, 1}, {3, 2}, {5, 5}, {11, 10}}))

	matchLabelKeys := func(spec string, body func(t *testing.T)) { run("MatchLabelKeys > "+spec, body) }
	mlk := spreadConstraint(host, 1, corev1.DoNotSchedule, topoLabels)
	mlk.MatchLabelKeys = []string{"test-label"}
	matchLabelKeys("should support matchLabelKeys", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := topoPods(2, lbl, withPodLabels(map[string]string{"test-label": "value-a"}), withTSC(mlk))
		pods = append(pods, topoPods(2, lbl, withPodLabels(map[string]string{"test-label": "value-b"}), withTSC(mlk))...)
		w.provision(pods...)
		w.expectSkew("default", mlk, 2, 2)
	})
	matchLabelKeys("should ignore unknown labels specified in matchLabelKeys", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(4, lbl, withTSC(mlk))...)
		w.expectSkew("default", mlk, 1, 1, 1, 1)
	})

	const spreadLabel = "fake-label"
	policy := func(p corev1.NodeInclusionPolicy) *corev1.NodeInclusionPolicy { return &p }
	taintsPolicy := func(spec string, body func(t *testing.T)) { run("NodeTaintsPolicy > "+spec, body) }
	taintedNodes := func(p corev1.NodeInclusionPolicy, want ...int) func(t *testing.T) {
		return func(t *testing.T) {
			w := newTopoWorld(t, topoPool())
			w.pools[0].Spec.Template.Labels = map[string]string{spreadLabel: "baz"}
			taint := []corev1.Taint{{Key: "taintname", Value: "taintvalue", Effect: corev1.TaintEffectNoSchedule}}
			w.addNode("node-foo", map[string]string{spreadLabel: "foo"}, taint, rl("cpu", "100m"))
			w.addNode("node-bar", map[string]string{spreadLabel: "bar"}, taint, rl("cpu", "100m"))
			c := spreadConstraint(spreadLabel, 1, corev1.DoNotSchedule, topoLabels)
			c.NodeTaintsPolicy = policy(p)
			w.provision(topoPods(5, lbl, requests("cpu", "1"), withTSC(c))...)
			w.expectSkew("default", c, want...)
		}
	}
	taintsPolicy("should balance pods across a label (NodeTaintsPolicy=ignore)", taintedNodes(corev1.NodeInclusionPolicyIgnore, 1))
	taintsPolicy("should balance pods across a label (NodeTaintsPolicy=honor)", taintedNodes(corev1.NodeInclusionPolicyHonor, 5))
	const taintKey = "taint-key"
	taintedPool := func(name, value string, domains ...string) *karpv1.NodePool {
		return mkPool(name, withReqs(npReq(ct, corev1.NodeSelectorOpExists), npReq(spreadLabel, in, domains...)),
			withTaint(taintKey, value, corev1.TaintEffectNoSchedule))
	}
	discovered := func(p corev1.NodeInclusionPolicy, want ...int) func(t *testing.T) {
		return func(t *testing.T) {
			pool := topoPool(withReq(spreadLabel, in, "foo"))
			w := newTopoWorld(t, pool, taintedPool("tainted", "taint-value", "bar"))
			c := spreadConstraint(spreadLabel, 1, corev1.DoNotSchedule, topoLabels)
			c.NodeTaintsPolicy = policy(p)
			w.provision(topoPods(2, lbl, withTSC(c))...)
			w.expectSkew("default", c, want...)
		}
	}
	taintsPolicy("should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=ignore)", discovered(corev1.NodeInclusionPolicyIgnore, 1))
	taintsPolicy("should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=honor)", discovered(corev1.NodeInclusionPolicyHonor, 2))
	taintsPolicy("should balance pods across a label when mutually exclusive NodePools (by taints) share domains (NodeTaintsPolicy=honor)", func(t *testing.T) {
		pools := []*karpv1.NodePool{taintedPool("nodepool-0", "nodepool-0", "foo", "bar"), taintedPool("nodepool-1", "nodepool-1", "foo", "baz")}
		w := newTopoWorld(t, pools...)
		c := spreadConstraint(spreadLabel, 1, corev1.DoNotSchedule, topoLabels)
		c.NodeTaintsPolicy = policy(corev1.NodeInclusionPolicyHonor)
		var pods []*corev1.Pod
		for i, np := range pools {
			pods = append(pods, topoPods((i+1)*2, lbl, withTSC(c),
				withTolerations(corev1.Toleration{Key: taintKey, Effect: corev1.TaintEffectNoSchedule, Value: np.Spec.Template.Spec.Taints[0].Value}))...)
		}
		w.provision(pods...)
		w.expectSkew("default", c, 3, 2, 1)
	})

	affinityPolicy := func(p corev1.NodeInclusionPolicy, want ...int) func(t *testing.T) {
		return func(t *testing.T) {
			w := newTopoWorld(t, topoPool())
			w.pools[0].Spec.Template.Labels = map[string]string{spreadLabel: "baz", "selector": "value"}
			w.addNode("node-foo", map[string]string{spreadLabel: "foo", "selector": "mismatch"}, nil, rl("cpu", "100m"))
			w.addNode("node-bar", map[string]string{spreadLabel: "bar", "selector": "mismatch"}, nil, rl("cpu", "100m"))
			c := spreadConstraint(spreadLabel, 1, corev1.DoNotSchedule, topoLabels)
			c.NodeAffinityPolicy = policy(p)
			w.provision(topoPods(5, lbl, requests("cpu", "1"), nodeSelector("selector", "value"), withTSC(c))...)
			w.expectSkew("default", c, want...)
		}
	}
	run("NodeAffinityPolicy > should balance pods across a label (NodeAffinityPolicy=ignore)", affinityPolicy(corev1.NodeInclusionPolicyIgnore, 1))
	run("NodeAffinityPolicy > should balance pods across a label (NodeAffinityPolicy=honor)", affinityPolicy(corev1.NodeInclusionPolicyHonor, 5))

	run("Combined Zonal and Capacity Type Topology > should spread pods while respecting both constraints", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		for _, step := range []struct{ pods, ct, zone int }{{2, 1, 1}, {3, 3, 2}, {3, 5, 4}, {11, 11, 7}} {
			w.provision(topoPods(step.pods, lbl, withTSC(cc, zc))...)
			w.expectSkewAtMost("default", cc, step.ct)
			w.expectSkewAtMost("default", zc, step.zone)
		}
	})
	run("Combined Hostname, Zonal, and Capacity Type Topology > should spread pods while respecting all constraints", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.types = fakeTypesAssorted()
		cs := []corev1.TopologySpreadConstraint{cc, spreadConstraint(zone, 2, corev1.DoNotSchedule, topoLabels), spreadConstraint(host, 3, corev1.DoNotSchedule, topoLabels)}
		for i := 1; i < 15; i++ {
			pods := topoPods(i, lbl, withTSC(cs...))
			w.provision(pods...)
			for j, c := range cs {
				w.expectMaxSkew("default", c, j+1)
			}
			for _, p := range pods {
				w.nodeOf(p)
			}
		}
	})

	affinity := func(spec string, body func(t *testing.T)) {
		run("Combined Zonal Topology and Node Affinity > "+spec, body)
	}
	affinity("should limit spread options by nodeSelector", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		pods := append(topoPods(5, lbl, withTSC(zc), nodeSelector(zone, fakeZone1)), topoPods(10, lbl, withTSC(zc), nodeSelector(zone, fakeZone2))...)
		w.provision(pods...)
		w.expectSkew("default", zc, 5, 10)
	})
	affinity("should limit spread options by node requirements", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(10, lbl, withTSC(zc), nodeRequirements(expr(zone, in, fakeZone1, fakeZone2)))...)
		w.expectSkew("default", zc, 5, 5)
	})
	affinity("should limit spread options by required node affinity", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(6, lbl, withTSC(zc), nodeRequirements(expr(zone, in, fakeZone1, fakeZone2)))...)
		w.expectSkew("default", zc, 3, 3)
		w.poolReqs(npReq(zone, in, fakeZone1, fakeZone2, fakeZone3))
		w.provision(fakePod(lbl, withTSC(zc), nodeRequirements(expr(zone, in, fakeZone2, fakeZone3))))
		w.expectSkew("default", zc, 3, 3, 1)
		w.provision(topoPods(5, lbl, withTSC(zc))...)
		w.expectSkew("default", zc, 4, 4, 4)
	})
	affinity("should not limit spread options by preferred node affinity", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(6, lbl, withTSC(zc), nodePreferences(expr(zone, in, fakeZone1, fakeZone2)))...)
		w.expectSkew("default", zc, 2, 2, 2)
	})

	ctAffinity := func(spec string, body func(t *testing.T)) {
		run("Combined Capacity Type Topology and Node Affinity > "+spec, body)
	}
	ctAffinity("should limit spread options by nodeSelector", func(t *testing.T) {
		c := spreadConstraint(ct, 1, corev1.ScheduleAnyway, topoLabels)
		w := newTopoWorld(t, topoPool())
		pods := append(topoPods(5, lbl, withTSC(c), nodeSelector(ct, spot)), topoPods(5, lbl, withTSC(c), nodeSelector(ct, od))...)
		w.provision(pods...)
		w.expectSkew("default", c, 5, 5)
	})
	ctAffinity("should limit spread options by node affinity (capacity type)", func(t *testing.T) {
		w := newTopoWorld(t, topoPool())
		w.provision(topoPods(3, lbl, withTSC(cc), nodeRequirements(expr(ct, in, spot)))...)
		w.expectSkew("default", cc, 3)
		w.provision(fakePod(lbl, withTSC(cc), nodeRequirements(expr(ct, in, od, spot))))
		w.expectSkew("default", cc, 3, 1)
		w.provision(topoPods(5, lbl, withTSC(cc))...)
		w.expectSkew("default", cc, 5, 4)
	})
}

// fakeTypesAssorted is fake.InstanceTypesAssorted: a type for every CPU
// count, memory size, zone, capacity type, operating system and
// architecture, each with that one offering.
func fakeTypesAssorted() []*InstanceType {
	var out []*InstanceType
	for _, cpu := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, mem := range []int{1, 2, 4, 8, 16, 32, 64, 128} {
			for _, z := range []string{fakeZone1, fakeZone2, fakeZone3} {
				for _, ct := range []string{wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand} {
					for _, os := range []string{"linux", "windows"} {
						for _, arch := range []string{"amd64", "arm64"} {
							res := rl("cpu", fmt.Sprint(cpu), "memory", fmt.Sprint(mem)+"Gi")
							it := fakeType(fmt.Sprint(cpu)+"-cpu-"+fmt.Sprint(mem)+"-mem-"+arch+"-"+os+"-"+z+"-"+ct,
								fakeTypeOpts{arch: arch, resources: res, offerings: []Offering{fakeOffer(ct, z, fakePrice(res))}})
							it.Labels[wellknown.OSLabel] = os
							out = append(out, it)
						}
					}
				}
			}
		}
	}
	return out
}
