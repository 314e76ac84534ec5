package scheduling

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestResources(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		wantType   string // cheapest type of the claim
		wantReason string // substring, when unschedulable
	}{
		{"small pod gets the cheapest type", mkPod("p", "500m", "1Gi"), "g.large", ""},
		{"memory picks a memory type", mkPod("p", "1", "12Gi"), "g.xlarge", ""},
		{"gpu picks the gpu type", mkPod("p", "1", "1Gi", extended(string(wellknown.ResourceNVIDIAGPU), "1")), "p.2xlarge", ""},
		{"too much memory", mkPod("p", "1", "600Gi"), "", "no instance type of NodePool default has 600Gi memory in zones [test-1a test-1b test-1c]"},
		{"too many gpus", mkPod("p", "1", "1Gi", extended(string(wellknown.ResourceNVIDIAGPU), "4")), "", "4 nvidia.com/gpu"},
		{"unknown extended resource", mkPod("p", "1", "1Gi", extended("example.com/fpga", "1")), "", "1 example.com/fpga"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, tc.pod))
			if tc.wantReason != "" {
				if got := reasonOf(r, tc.pod); !strings.Contains(got, tc.wantReason) {
					t.Fatalf("reason = %q, want it to contain %q", got, tc.wantReason)
				}
				return
			}
			c := claimOf(r, tc.pod)
			if c == nil {
				t.Fatalf("not placed: %v", r.Unschedulable)
			}
			if it, _ := c.CheapestOffering(); it.Name != tc.wantType {
				t.Fatalf("cheapest = %s, want %s (types %d)", it.Name, tc.wantType, len(c.InstanceTypes))
			}
		})
	}
}

func TestPackingAndOrdering(t *testing.T) {
	var pods []*corev1.Pod
	for i := 0; i < 10; i++ {
		pods = append(pods, mkPod("p", "1500m", "2Gi"))
	}
	r := solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, pods...))
	if len(r.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	total := 0.0
	for _, c := range r.NewNodeClaims {
		_, o := c.CheapestOffering()
		total += o.Price
		for i := 1; i < len(c.InstanceTypes); i++ {
			if minPrice(c, c.InstanceTypes[i]) < minPrice(c, c.InstanceTypes[i-1]) {
				t.Fatalf("instance types not ordered by price: %s before %s", c.InstanceTypes[i-1].Name, c.InstanceTypes[i].Name)
			}
		}
	}
	// 15 cpu and 20Gi: the lower bound is ~2 c.2xlarge or 1 m.4xlarge class.
	if total > 0.4*0.768*1.01 {
		t.Fatalf("packing too expensive: $%.3f/h over %d claims", total, len(r.NewNodeClaims))
	}
}

func minPrice(c *NewNodeClaim, it *InstanceType) float64 {
	best := 1e18
	for _, o := range it.Offerings {
		if c.allows(&o) && o.Price < best {
			best = o.Price
		}
	}
	return best
}

func TestRequirements(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pools      []*karpv1.NodePool
		pod        *corev1.Pod
		check      func(*testing.T, *NewNodeClaim)
		wantReason string
	}{
		{"nodeSelector arch", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", nodeSelector(wellknown.ArchLabel, "arm64")),
			func(t *testing.T, c *NewNodeClaim) {
				for _, it := range c.InstanceTypes {
					if it.Labels[wellknown.ArchLabel] != "arm64" {
						t.Fatalf("type %s is not arm64", it.Name)
					}
				}
			}, ""},
		{"required affinity zone narrows", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", requiredAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, opIn, "test-1b")})),
			func(t *testing.T, c *NewNodeClaim) {
				if z := reqOf(c, wellknown.ZoneLabel); z.Operator() != opIn || len(z.Values()) != 1 || z.Values()[0] != "test-1b" {
					t.Fatalf("zone = %s", z)
				}
			}, ""},
		{"second required term used when the first fails", []*karpv1.NodePool{mkPool("default")},
			mkPod("p", "1", "1Gi", requiredAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.ArchLabel, opIn, "s390x")}, []corev1.NodeSelectorRequirement{expr(wellknown.ArchLabel, opIn, "arm64")})),
			func(t *testing.T, c *NewNodeClaim) {
				if a := reqOf(c, wellknown.ArchLabel); !a.Has("arm64") || a.Has("amd64") {
					t.Fatalf("arch = %s", a)
				}
			}, ""},
		{"preferred affinity honoured", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", preferredAffinity(10, expr(wellknown.InstanceFamilyLabel, opIn, "m"))),
			func(t *testing.T, c *NewNodeClaim) {
				for _, it := range c.InstanceTypes {
					if it.Labels[wellknown.InstanceFamilyLabel] != "m" {
						t.Fatalf("type %s not in preferred family", it.Name)
					}
				}
			}, ""},
		{"preferred affinity relaxed", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", preferredAffinity(10, expr(wellknown.InstanceFamilyLabel, opIn, "nope"))),
			func(t *testing.T, c *NewNodeClaim) {}, ""},
		{"Gt on cpu label", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", requiredAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.InstanceCPULabel, opGt, "4")})),
			func(t *testing.T, c *NewNodeClaim) {
				for _, it := range c.InstanceTypes {
					if it.Labels[wellknown.InstanceCPULabel] == "2" || it.Labels[wellknown.InstanceCPULabel] == "4" {
						t.Fatalf("type %s has too few cpus", it.Name)
					}
				}
			}, ""},
		{"Lt and DoesNotExist", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", requiredAffinity([]corev1.NodeSelectorRequirement{expr(wellknown.InstanceCPULabel, opLt, "8"), expr(wellknown.InstanceGPUCountLabel, opDNE)})),
			func(t *testing.T, c *NewNodeClaim) {
				for _, it := range c.InstanceTypes {
					if it.Labels[wellknown.InstanceCPULabel] == "8" || it.Labels[wellknown.InstanceCPULabel] == "16" {
						t.Fatalf("type %s has too many cpus", it.Name)
					}
				}
			}, ""},
		{"custom label from NodePool labels", []*karpv1.NodePool{mkPool("default", withLabel("team", "a"))}, mkPod("p", "1", "1Gi", nodeSelector("team", "a")),
			func(t *testing.T, c *NewNodeClaim) {
				if c.Labels["team"] != "a" {
					t.Fatalf("labels %v", c.Labels)
				}
			}, ""},
		{"custom label from NodePool requirement In", []*karpv1.NodePool{mkPool("default", withReq("team", opIn, "a", "b"))}, mkPod("p", "1", "1Gi", nodeSelector("team", "b")),
			func(t *testing.T, c *NewNodeClaim) {
				if c.Labels["team"] != "b" {
					t.Fatalf("labels %v", c.Labels)
				}
			}, ""},
		{"custom label the NodePool does not set", []*karpv1.NodePool{mkPool("default")}, mkPod("p", "1", "1Gi", nodeSelector("team", "a")), nil,
			"NodePool default does not set label team"},
		{"nodepool selector", []*karpv1.NodePool{mkPool("a"), mkPool("b")}, mkPod("p", "1", "1Gi", nodeSelector(wellknown.NodePoolLabel, "b")),
			func(t *testing.T, c *NewNodeClaim) {
				if c.NodePool != "b" {
					t.Fatalf("nodepool %s", c.NodePool)
				}
			}, ""},
		{"NodePool requirement excludes", []*karpv1.NodePool{mkPool("default", withReq(wellknown.ArchLabel, opIn, "amd64"))}, mkPod("p", "1", "1Gi", nodeSelector(wellknown.ArchLabel, "arm64")), nil,
			"pod requires kubernetes.io/arch In [arm64] but NodePool default allows kubernetes.io/arch In [amd64]"},
		{"NodePool capacity type on-demand", []*karpv1.NodePool{mkPool("default", withReq(wellknown.CapacityTypeLabel, opIn, "on-demand"))}, mkPod("p", "1", "1Gi"),
			func(t *testing.T, c *NewNodeClaim) {
				if _, o := c.CheapestOffering(); o.CapacityType != "on-demand" {
					t.Fatalf("offering %+v", o)
				}
			}, ""},
		{"minValues keeps enough families", []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.InstanceFamilyLabel, 3, opExists))}, mkPod("p", "1", "1Gi"),
			func(t *testing.T, c *NewNodeClaim) {
				fam := map[string]bool{}
				for _, it := range c.InstanceTypes {
					fam[it.Labels[wellknown.InstanceFamilyLabel]] = true
				}
				if len(fam) < 3 {
					t.Fatalf("families %v", fam)
				}
			}, ""},
		{"minValues unsatisfiable", []*karpv1.NodePool{mkPool("default", withMinValues(wellknown.InstanceFamilyLabel, 3, opExists))}, mkPod("p", "1", "40Gi"), nil,
			"minValues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := solve(t, snapshot(tc.pools, tc.pod))
			if tc.wantReason != "" {
				if got := reasonOf(r, tc.pod); !strings.Contains(got, tc.wantReason) {
					t.Fatalf("reason = %q, want it to contain %q", got, tc.wantReason)
				}
				return
			}
			c := claimOf(r, tc.pod)
			if c == nil {
				t.Fatalf("not placed: %v", r.Unschedulable)
			}
			tc.check(t, c)
		})
	}
}

func TestTaintsAndTolerations(t *testing.T) {
	gpu := mkPool("gpu", withTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule), withWeight(10))
	general := mkPool("general")
	for _, tc := range []struct {
		name       string
		pools      []*karpv1.NodePool
		pod        *corev1.Pod
		wantPool   string
		wantReason string
	}{
		{"untolerating pod skips the tainted pool", []*karpv1.NodePool{gpu, general}, mkPod("p", "1", "1Gi"), "general", ""},
		{"tolerating pod takes the heavier pool", []*karpv1.NodePool{gpu, general}, mkPod("p", "1", "1Gi", tolerate("nvidia.com/gpu")), "gpu", ""},
		{"no pool tolerated", []*karpv1.NodePool{gpu}, mkPod("p", "1", "1Gi"), "", "no NodePool tolerates taint nvidia.com/gpu=true:NoSchedule"},
		{"startup taints are not scheduling constraints", []*karpv1.NodePool{mkPool("s", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
		})}, mkPod("p", "1", "1Gi"), "s", ""},
		{"PreferNoSchedule tolerated after relaxation", []*karpv1.NodePool{mkPool("soft", withTaint("spot", "", corev1.TaintEffectPreferNoSchedule))}, mkPod("p", "1", "1Gi"), "soft", ""},
		{"do-not-disrupt is no constraint", []*karpv1.NodePool{general}, mkPod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}), "general", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := solve(t, snapshot(tc.pools, tc.pod))
			if tc.wantReason != "" {
				if got := reasonOf(r, tc.pod); got != tc.wantReason {
					t.Fatalf("reason = %q, want %q", got, tc.wantReason)
				}
				return
			}
			c := claimOf(r, tc.pod)
			if c == nil || c.NodePool != tc.wantPool {
				t.Fatalf("claim %+v, unschedulable %v", c, r.Unschedulable)
			}
		})
	}
}

func TestWeights(t *testing.T) {
	heavy := mkPool("heavy", withWeight(50), withReq(wellknown.InstanceFamilyLabel, opIn, "m"))
	light := mkPool("light", withWeight(1))
	r := solve(t, snapshot([]*karpv1.NodePool{light, heavy}, mkPod("p", "1", "1Gi")))
	if c := r.NewNodeClaims[0]; c.NodePool != "heavy" {
		t.Fatalf("pool %s, want the heavier one even though it is pricier", c.NodePool)
	}
	// Equal weights: the cheaper one.
	a := mkPool("a", withReq(wellknown.InstanceFamilyLabel, opIn, "m"))
	b := mkPool("b", withReq(wellknown.InstanceFamilyLabel, opIn, "c"))
	r = solve(t, snapshot([]*karpv1.NodePool{a, b}, mkPod("p", "1", "1Gi")))
	if c := r.NewNodeClaims[0]; c.NodePool != "b" {
		t.Fatalf("pool %s, want the cheaper of equal weight", c.NodePool)
	}
}

func TestLimits(t *testing.T) {
	existing := mkNode("n1", "c.2xlarge", "test-1a", mkPod("bound", "7", "1Gi"))
	existing.NodePool = "team-a"
	existing.NodeClaim = "team-a-x"
	existing.Labels[wellknown.NodePoolLabel] = "team-a"
	for _, tc := range []struct {
		name       string
		pool       *karpv1.NodePool
		nodes      []*Node
		pods       []*corev1.Pod
		wantClaims int
		wantReason string
	}{
		{"within limit", mkPool("team-a", withLimit("cpu", "100")), nil, []*corev1.Pod{mkPod("p", "1", "1Gi")}, 1, ""},
		{"cpu limit reached by existing nodes", mkPool("team-a", withLimit("cpu", "8")), []*Node{existing},
			[]*corev1.Pod{mkPod("big", "8", "1Gi")}, 0, "NodePool team-a cpu limit 8 reached"},
		{"nodes limit", mkPool("team-a", withLimit("nodes", "1")), []*Node{existing}, []*corev1.Pod{mkPod("big", "8", "1Gi")}, 0, "NodePool team-a nodes limit 1 reached"},
		{"limit caps types", mkPool("team-a", withLimit("cpu", "4")), nil, []*corev1.Pod{mkPod("a", "3", "1Gi"), mkPod("b", "3", "1Gi")}, 1, "cpu limit 4 reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshot([]*karpv1.NodePool{tc.pool}, tc.pods...)
			s.Nodes = tc.nodes
			r := solve(t, s)
			if len(r.NewNodeClaims) != tc.wantClaims {
				t.Fatalf("claims = %d, want %d (%v)", len(r.NewNodeClaims), tc.wantClaims, r.Unschedulable)
			}
			if tc.wantReason != "" {
				if len(r.Unschedulable) == 0 || !strings.Contains(r.Unschedulable[0].Reason, tc.wantReason) {
					t.Fatalf("unschedulable %v, want %q", r.Unschedulable, tc.wantReason)
				}
			}
			for _, c := range r.NewNodeClaims {
				for _, it := range c.InstanceTypes {
					if q := it.Capacity[corev1.ResourceCPU]; tc.pool.Spec.Limits != nil && q.Cmp(tc.pool.Spec.Limits[corev1.ResourceCPU]) > 0 {
						if _, ok := tc.pool.Spec.Limits[corev1.ResourceCPU]; ok {
							t.Fatalf("type %s exceeds the cpu limit", it.Name)
						}
					}
				}
			}
		})
	}
}

func TestExistingNodes(t *testing.T) {
	bound := mkPod("bound", "3", "1Gi")
	n1 := mkNode("n1", "c.xlarge", "test-1a", bound) // 1 cpu free
	n2 := mkNode("n2", "m.xlarge", "test-1b")        // 4 cpu free
	tainted := mkNode("n3", "m.xlarge", "test-1c")
	tainted.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	deleting := mkNode("n0", "m.4xlarge", "test-1a")
	deleting.MarkedForDeletion = true
	inflight := mkNode("nc-1", "m.4xlarge", "test-1c")
	inflight.InFlight = true

	small := mkPod("small", "500m", "1Gi")
	mid := mkPod("mid", "2", "1Gi")
	big := mkPod("big", "3500m", "1Gi")
	huge := mkPod("huge", "10", "1Gi")
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, small, mid, big, huge)
	s.Nodes = []*Node{inflight, n2, tainted, n1, deleting}
	r := solve(t, s)
	// Order: largest first. huge only fits the in-flight claim; big fills n2;
	// mid does not fit n1 (1 cpu) nor n2, goes to the in-flight claim; small to n1.
	want := map[*corev1.Pod]string{huge: "nc-1", big: "n2", mid: "nc-1", small: "n1"}
	for p, w := range want {
		if got := placementOf(r, p); got != w {
			t.Fatalf("%s on %q, want %q (%s)", p.Name, got, w, fingerprint(r))
		}
	}
	if len(r.NewNodeClaims) != 0 {
		t.Fatalf("no new claims expected")
	}
	// MaxNewNodeClaims 0: existing only.
	s2 := snapshot([]*karpv1.NodePool{mkPool("default")}, mkPod("x", "30", "1Gi"))
	r2 := Solve(s2, Options{})
	if len(r2.NewNodeClaims) != 0 || len(r2.Unschedulable) != 1 || !strings.Contains(r2.Unschedulable[0].Reason, "may not add nodes") {
		t.Fatalf("existing-only: %s", fingerprint(r2))
	}
}

func TestUninitializedNodeIgnoresStartupTaints(t *testing.T) {
	pool := mkPool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	})
	n := mkNode("n1", "m.xlarge", "test-1a")
	n.NodePool, n.NodeClaim = "default", "default-abc"
	n.Taints = []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}, wellknown.UnregisteredNoExecuteTaint}
	p := mkPod("p", "1", "1Gi")
	s := snapshot([]*karpv1.NodePool{pool}, p)
	s.Nodes = []*Node{n}
	if got := placementOf(solve(t, s), p); got != "n1" {
		t.Fatalf("placed on %q", got)
	}
}

func TestDaemonSetOverhead(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "logs", Namespace: "kube-system"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}}}
	arm := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "arm-only", Namespace: "kube-system"}}
	arm.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ArchLabel: "arm64"}
	arm.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: rl("cpu", "3")}}}

	p := mkPod("p", "1500m", "1Gi")
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, p)
	s.DaemonSets = []*appsv1.DaemonSet{ds, arm}
	r := solve(t, s)
	c := claimOf(r, p)
	// 1.5 + 1 cpu does not fit 2-cpu types; arm types also carry 3 cpu of arm-only.
	for _, it := range c.InstanceTypes {
		if cpu := it.Allocatable[corev1.ResourceCPU]; cpu.Value() < 4 {
			t.Fatalf("type %s cannot hold the pod and the daemonset", it.Name)
		}
		if it.Labels[wellknown.ArchLabel] == "arm64" {
			t.Fatalf("arm type %s cannot hold the pod and both daemonsets (4+1.5 > 4)", it.Name)
		}
	}
	if q := c.Requests[corev1.ResourceCPU]; q.MilliValue() != 2500 {
		t.Fatalf("requests cpu = %s, want pod + daemon", q.String())
	}
	// A tainted pool the daemon does not tolerate carries no overhead.
	tp := mkPool("tainted", withTaint("x", "y", corev1.TaintEffectNoSchedule))
	p2 := mkPod("p2", "1500m", "1Gi", tolerate("x"))
	s2 := snapshot([]*karpv1.NodePool{tp}, p2)
	s2.DaemonSets = []*appsv1.DaemonSet{ds}
	if c := claimOf(solve(t, s2), p2); c.InstanceTypes[0].Name != "g.large" {
		t.Fatalf("cheapest %s, want g.large without overhead", c.InstanceTypes[0].Name)
	}
}

func TestNodePoolsThatCannotLaunch(t *testing.T) {
	static := mkPool("static")
	n := int64(3)
	static.Spec.Replicas = &n
	notReady := mkPool("nr", func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "broken" })
	s := snapshot([]*karpv1.NodePool{static, notReady}, mkPod("p", "1", "1Gi"))
	s.NodeClasses["broken"] = &NodeClass{Name: "broken"}
	r := solve(t, s)
	want := "no NodePool can launch nodes: NodePool nr uses EC2NodeClass broken, which is not ready; NodePool static is static (spec.replicas) and does not provision for pending pods"
	if len(r.Unschedulable) != 1 || r.Unschedulable[0].Reason != want {
		t.Fatalf("reason %v", r.Unschedulable)
	}
}

func TestDeterminism(t *testing.T) {
	build := func() *Snapshot {
		podSeq = 0
		var pods []*corev1.Pod
		for i := 0; i < 50; i++ {
			pods = append(pods, mkPod("p", []string{"100m", "500m", "1", "1500m"}[i%4], []string{"128Mi", "1Gi", "3Gi"}[i%3], podLabels("app", []string{"a", "b"}[i%2]),
				spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, map[string]string{"app": "a"})))
		}
		return snapshot([]*karpv1.NodePool{mkPool("default")}, pods...)
	}
	a, b := fingerprint(Solve(build(), Provisioning())), fingerprint(Solve(build(), Provisioning()))
	if a != b {
		t.Fatalf("two solves differ:\n%s\n---\n%s", a, b)
	}
}

func TestCachedLaunchMatchesRule(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		s := randomSnapshot(rand.New(rand.NewSource(seed)))
		for _, c := range Solve(s, Provisioning()).NewNodeClaims {
			it, o := c.CheapestOffering()
			fresh := &NewNodeClaim{InstanceTypes: c.InstanceTypes, Requirements: c.Requirements}
			it2, o2 := fresh.CheapestOffering()
			if it != it2 || o != o2 {
				t.Fatalf("seed %d: cached %s %+v, rule %s %+v", seed, it.Name, o, it2.Name, o2)
			}
		}
	}
}

// TestInFlightClaimsKeptForParticularPods: two in-flight claims launched as
// spot, one in zone a and one in zone b. A pod that asks only for spot comes
// first (older); it must take the zone-b claim, leaving the zone-a claim to
// the pod that selects zone a. First fit by name would give the spot pod
// the zone-a claim and ask for a new node for the zonal pod, every pass.
func TestInFlightClaimsKeptForParticularPods(t *testing.T) {
	spotA := mkNode("nc-a", "m.xlarge", "test-1a")
	spotB := mkNode("nc-b", "m.xlarge", "test-1b")
	for _, n := range []*Node{spotA, spotB} {
		n.InFlight = true
		n.Labels[wellknown.CapacityTypeLabel] = wellknown.CapacityTypeSpot
	}
	spot := mkPod("spot", "3", "1Gi", nodeSelector(wellknown.CapacityTypeLabel, wellknown.CapacityTypeSpot))
	zonal := mkPod("zonal", "3", "1Gi", nodeSelector(wellknown.ZoneLabel, "test-1a"))
	zonal.CreationTimestamp.Time = spot.CreationTimestamp.Add(time.Second)
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, zonal, spot)
	s.Nodes = []*Node{spotA, spotB}
	r := solve(t, s)
	for p, w := range map[*corev1.Pod]string{spot: "nc-b", zonal: "nc-a"} {
		if got := placementOf(r, p); got != w {
			t.Errorf("%s on %q, want %q (%s)", p.Name, got, w, fingerprint(r))
		}
	}
	if len(r.NewNodeClaims) != 0 {
		t.Errorf("%d new claims for two pods that fit the two in-flight claims: %s", len(r.NewNodeClaims), fingerprint(r))
	}
}
