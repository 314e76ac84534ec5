package scheduling

import (
	"fmt"
	"math/rand"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// randomSnapshot builds a small random cluster: NodePools with random
// requirements, taints, weights and limits; existing nodes with pods and
// taints; pods with random sizes, selectors, tolerations, spreads,
// affinities, host ports and preferences.
func randomSnapshot(r *rand.Rand) *Snapshot {
	pick := func(vals ...string) string { return vals[r.Intn(len(vals))] }
	some := func(vals ...string) []string {
		var out []string
		for _, v := range vals {
			if r.Intn(2) == 0 {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			out = append(out, vals[r.Intn(len(vals))])
		}
		return out
	}
	var pools []*karpv1.NodePool
	for i := 0; i < 1+r.Intn(3); i++ {
		var opts []poolOpt
		if r.Intn(3) == 0 {
			opts = append(opts, withReq(wellknown.ArchLabel, opIn, some("amd64", "arm64")...))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, withReq(wellknown.ZoneLabel, opIn, some(testZones...)...))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, withReq(wellknown.CapacityTypeLabel, opIn, some("spot", "on-demand")...))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, withTaint("dedicated", pick("a", "b"), corev1.TaintEffectNoSchedule))
		}
		if r.Intn(5) == 0 {
			opts = append(opts, withTaint("soft", "", corev1.TaintEffectPreferNoSchedule))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, withWeight(int32(r.Intn(20))))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, withLimit("cpu", fmt.Sprint(4+r.Intn(30))))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, withLabel("team", pick("x", "y")))
		}
		pools = append(pools, mkPool(fmt.Sprintf("pool-%d", i), opts...))
	}
	var pods []*corev1.Pod
	for i := 0; i < 5+r.Intn(60); i++ {
		var opts []podOpt
		app := pick("a", "b", "c")
		opts = append(opts, podLabels("app", app))
		if r.Intn(5) == 0 {
			opts = append(opts, nodeSelector(wellknown.ArchLabel, pick("amd64", "arm64")))
		}
		if r.Intn(6) == 0 {
			opts = append(opts, nodeSelector(wellknown.ZoneLabel, pick(testZones...)))
		}
		if r.Intn(8) == 0 {
			opts = append(opts, nodeSelector("team", pick("x", "y")))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, tolerate("dedicated"))
		}
		switch r.Intn(8) {
		case 0:
			opts = append(opts, spread(wellknown.ZoneLabel, int32(1+r.Intn(2)), corev1.DoNotSchedule, map[string]string{"app": app}))
		case 1:
			opts = append(opts, spread(wellknown.HostnameLabel, 1, corev1.UnsatisfiableConstraintAction(pick(string(corev1.DoNotSchedule), string(corev1.ScheduleAnyway))), map[string]string{"app": app}))
		case 2:
			opts = append(opts, podAntiAffinity(wellknown.HostnameLabel, map[string]string{"app": app}))
		case 3:
			opts = append(opts, podAffinity(pick(wellknown.ZoneLabel, wellknown.HostnameLabel), map[string]string{"app": app}))
		case 4:
			opts = append(opts, preferredAntiAffinity(int32(1+r.Intn(10)), wellknown.ZoneLabel, map[string]string{"app": app}))
		case 5:
			opts = append(opts, preferredAffinity(int32(1+r.Intn(10)), expr(wellknown.InstanceFamilyLabel, opIn, pick("c", "m", "g"))))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, hostPortOpt(int32(8080+r.Intn(2))))
		}
		if r.Intn(15) == 0 {
			opts = append(opts, extended(string(wellknown.ResourceNVIDIAGPU), "1"))
		}
		pods = append(pods, mkPod(fmt.Sprintf("p%02d", i), pick("100m", "250m", "500m", "1", "2", "3500m"), pick("128Mi", "512Mi", "1Gi", "3Gi", "7Gi"), opts...))
	}
	s := snapshot(pools, pods...)
	for i := 0; i < r.Intn(5); i++ {
		var bound []*corev1.Pod
		for j := 0; j < r.Intn(4); j++ {
			bp := mkPod(fmt.Sprintf("bound-%d-%d", i, j), pick("100m", "500m", "1"), pick("256Mi", "1Gi"), podLabels("app", pick("a", "b", "c")))
			if r.Intn(4) == 0 {
				bp.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick("a", "b", "c")}},
				}}}}
			}
			bound = append(bound, bp)
		}
		n := mkNode(fmt.Sprintf("node-%d", i), pick("c.large", "m.xlarge", "g.large", "c.2xlarge"), pick(testZones...), bound...)
		if r.Intn(4) == 0 {
			n.Taints = []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
		}
		n.InFlight = r.Intn(5) == 0
		n.MarkedForDeletion = r.Intn(6) == 0
		s.Nodes = append(s.Nodes, n)
	}
	if r.Intn(3) == 0 {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "200m", "memory", "256Mi")}}}
		s.DaemonSets = []*appsv1.DaemonSet{ds}
	}
	return s
}

func TestRandomSnapshots(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 50
	}
	for seed := int64(1); seed <= int64(n); seed++ {
		podSeq = 0
		s := randomSnapshot(rand.New(rand.NewSource(seed)))
		r := Solve(s, Provisioning())
		checkInvariants(t, s, r)
		podSeq = 0
		again := Solve(randomSnapshot(rand.New(rand.NewSource(seed))), Provisioning())
		if a, b := fingerprint(r), fingerprint(again); a != b {
			t.Fatalf("seed %d: same input, different output:\n%s\n---\n%s", seed, a, b)
		}
	}
}

// TestPlacedPodsNeverMoveExistingCapacity checks that no node receives pods
// past its allocatable even when the batch is much larger than the room.
func TestExistingNodesNeverOverfilled(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var ps []*corev1.Pod
	for i := 0; i < 200; i++ {
		ps = append(ps, mkPod("p", []string{"100m", "300m", "700m"}[r.Intn(3)], []string{"100Mi", "700Mi", "2Gi"}[r.Intn(3)]))
	}
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, ps...)
	for i := 0; i < 10; i++ {
		s.Nodes = append(s.Nodes, mkNode(fmt.Sprintf("n%d", i), "m.xlarge", testZones[i%3], mkPod("b", "1", "1Gi")))
	}
	res := Solve(s, Options{})
	checkInvariants(t, s, res)
	if len(res.Unschedulable) == 0 {
		t.Fatal("expected more pods than room")
	}
}
