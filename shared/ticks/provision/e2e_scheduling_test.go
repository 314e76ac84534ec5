package provision_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/testworld"
)

// e2eNodePool is the AWS provider's e2e default NodePool as its scheduling
// suite makes it (test/suites/scheduling, v1.14.1): Linux, amd64,
// on-demand, any instance category and generation.
func e2eNodePool(extra ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand}},
		{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpExists},
		{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpExists},
	}
	return deploy.DefaultNodePool("default", append(reqs, extra...)...)
}

// selecting makes a pod select every label of sel, as the e2e suite's pods
// do: by nodeSelector and by a required node affinity term of In
// requirements (ops, when set, gives other requirements instead).
func selecting(sel map[string]string, ops []corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = sel
		reqs := ops
		for k, v := range sel {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
		}
		if len(reqs) > 0 {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: reqs}}},
			}}
		}
	}
}

// TestE2ESchedulingLabels ports the AWS provider's e2e scheduling suite's
// label cases (test/suites/scheduling/scheduling.go, run by its
// scheduling-strict and scheduling-besteffort suites): a pod that selects
// well-known labels gets one node that has them, so kube-scheduler runs
// it there; a NodePool's template annotations reach its node.
func TestE2ESchedulingLabels(t *testing.T) {
	type tc struct {
		name  string
		pool  func(w *testworld.World) *karpv1.NodePool
		sel   func(w *testworld.World) map[string]string
		ops   []corev1.NodeSelectorRequirement
		check func(t *testing.T, node *corev1.Node)
	}
	region := func(w *testworld.World) string { return w.Emu.Region() }
	restricted := func(domain string) tc {
		return tc{
			name: "restricted-domain-" + domain,
			pool: func(*testworld.World) *karpv1.NodePool {
				return e2eNodePool(
					karpv1.NodeSelectorRequirementWithMinValues{Key: domain + "/team", Operator: corev1.NodeSelectorOpExists},
					karpv1.NodeSelectorRequirementWithMinValues{Key: domain + "/custom-label", Operator: corev1.NodeSelectorOpExists},
					karpv1.NodeSelectorRequirementWithMinValues{Key: "subdomain." + domain + "/custom-label", Operator: corev1.NodeSelectorOpExists},
				)
			},
			sel: func(*testworld.World) map[string]string {
				return map[string]string{domain + "/team": "team-1", domain + "/custom-label": "custom-value", "subdomain." + domain + "/custom-label": "custom-value"}
			},
		}
	}
	cases := []tc{
		{
			// "should apply annotations to the node"
			name: "nodepool-annotations",
			pool: func(*testworld.World) *karpv1.NodePool {
				np := e2eNodePool()
				np.Spec.Template.Annotations = map[string]string{"foo": "bar", wellknown.DoNotDisruptAnnotation: "true"}
				return np
			},
			check: func(t *testing.T, n *corev1.Node) {
				if n.Annotations["foo"] != "bar" || n.Annotations[wellknown.DoNotDisruptAnnotation] != "true" {
					t.Errorf("node annotations %v, want foo=bar and %s=true", n.Annotations, wellknown.DoNotDisruptAnnotation)
				}
			},
		},
		{
			// "should support well-known labels for instance type selection"
			name: "instance-type-labels",
			sel: func(*testworld.World) map[string]string {
				return map[string]string{
					wellknown.NodePoolLabel:                                    "default",
					corev1.LabelInstanceTypeStable:                             "c5.large",
					"karpenter.k8s.aws/instance-hypervisor":                    "nitro",
					"karpenter.k8s.aws/instance-category":                      "c",
					"karpenter.k8s.aws/instance-generation":                    "5",
					"karpenter.k8s.aws/instance-family":                        "c5",
					"karpenter.k8s.aws/instance-size":                          "large",
					"karpenter.k8s.aws/instance-cpu":                           "2",
					"karpenter.k8s.aws/instance-cpu-manufacturer":              "intel",
					"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3400",
					"karpenter.k8s.aws/instance-memory":                        "4096",
					"karpenter.k8s.aws/instance-ebs-bandwidth":                 "4750",
					"karpenter.k8s.aws/instance-network-bandwidth":             "750",
				}
			},
		},
		{
			// "should support well-known labels for zone id selection"
			name: "zone-id",
			ops:  nil,
			sel: func(w *testworld.World) map[string]string {
				return map[string]string{"topology.k8s.aws/zone-id": w.Emu.Subnets()[0].ZoneID}
			},
		},
		{
			// "should support well-known labels for local NVME storage"
			name: "local-nvme",
			ops:  []corev1.NodeSelectorRequirement{{Key: "karpenter.k8s.aws/instance-local-nvme", Operator: corev1.NodeSelectorOpGt, Values: []string{"0"}}},
		},
		{
			// "should support well-known labels for encryption in transit"
			name: "encryption-in-transit",
			ops:  []corev1.NodeSelectorRequirement{{Key: "karpenter.k8s.aws/instance-encryption-in-transit-supported", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}},
		},
		{
			// "should support well-known deprecated labels". The e2e also
			// selects topology.ebs.csi.aws.com/zone, which a real node gets
			// from the EBS CSI driver's node plugin (kubelet adds the
			// driver's topology keys); the local world runs no CSI driver.
			name: "deprecated-labels",
			sel: func(w *testworld.World) map[string]string {
				return map[string]string{
					corev1.LabelFailureDomainBetaRegion: region(w),
					corev1.LabelFailureDomainBetaZone:   region(w) + "a",
					"beta.kubernetes.io/arch":           "amd64",
					"beta.kubernetes.io/os":             "linux",
					corev1.LabelInstanceType:            "c5.large",
				}
			},
		},
		{
			// "should support well-known labels for topology and architecture"
			name: "topology-and-arch",
			sel: func(w *testworld.World) map[string]string {
				return map[string]string{
					wellknown.NodePoolLabel:     "default",
					corev1.LabelTopologyRegion:  region(w),
					corev1.LabelTopologyZone:    region(w) + "a",
					corev1.LabelOSStable:        "linux",
					corev1.LabelArchStable:      "amd64",
					wellknown.CapacityTypeLabel: wellknown.CapacityTypeOnDemand,
				}
			},
		},
		{
			// "should support well-known labels for a gpu (nvidia)"
			name: "gpu-nvidia",
			sel: func(*testworld.World) map[string]string {
				return map[string]string{
					"karpenter.k8s.aws/instance-gpu-name":         "t4",
					"karpenter.k8s.aws/instance-gpu-memory":       "16384",
					"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
					"karpenter.k8s.aws/instance-gpu-count":        "1",
				}
			},
		},
		{
			// "should support well-known labels for an accelerator (inferentia2)"
			name: "inferentia2",
			sel: func(*testworld.World) map[string]string {
				return map[string]string{
					"karpenter.k8s.aws/instance-accelerator-name":         "inferentia",
					"karpenter.k8s.aws/instance-accelerator-manufacturer": "aws",
					"karpenter.k8s.aws/instance-accelerator-count":        "1",
				}
			},
		},
		// "should support restricted label domain exceptions" (the e2e
		// spells the first domain so).
		restricted("node-restriction.kuberentes.io"),
		restricted("node.kubernetes.io"),
		restricted("kops.k8s.io"),
	}
	// make test runs a sample (every 3th case and the last); make
	// test-cases, which CI runs, every case.
	sample := deploy.SampleCases(len(cases), 3)
	for i, c := range cases {
		if !sample[i] {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			w := testworld.New(t, env, "provisioner")
			pool := e2eNodePool()
			if c.pool != nil {
				pool = c.pool(w)
			}
			w.Apply(pool)
			var sel map[string]string
			if c.sel != nil {
				sel = c.sel(w)
			}
			w.Pods("app", 1, "100m", selecting(sel, c.ops))
			w.WaitUnschedulable(1)
			w.Converge(3*time.Minute, nil)
			// One node, as the e2e counts them (a claim whose launch failed
			// may still be going).
			if nodes, err := w.E.Clients.Core.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil || len(nodes.Items) != 1 {
				t.Errorf("nodes %v (%v), want 1", nodeNames(nodes), err)
			}
			pods := w.ListPods()
			node, err := w.E.Clients.Core.CoreV1().Nodes().Get(context.Background(), pods[0].Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// kube-scheduler ran the pod there, so the node has every label;
			// said again for the reader of a failure.
			for k, v := range sel {
				if node.Labels[k] != v {
					t.Errorf("node %s label %s=%q, want %q", node.Name, k, node.Labels[k], v)
				}
			}
			if c.check != nil {
				c.check(t, node)
			}
			t.Logf("node %s: %s", node.Name, strings.Join([]string{node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone]}, " "))
			w.AssertNoLeaks()
		})
	}
}

func nodeNames(l *corev1.NodeList) []string {
	var out []string
	if l != nil {
		for _, n := range l.Items {
			out = append(out, n.Name)
		}
	}
	return out
}
