package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// zoneOf is where a placed pod's node is (or will be): a node's zone label
// or a claim's single zone; "" when not determined.
func zoneOf(s *Snapshot, r *Results, p *corev1.Pod) string {
	if c := claimOf(r, p); c != nil {
		z := reqOf(c, wellknown.ZoneLabel)
		if z.Operator() == opIn && len(z.Values()) == 1 {
			return z.Values()[0]
		}
		return ""
	}
	where := placementOf(r, p)
	for _, n := range s.Nodes {
		if n.Name == where {
			return n.Labels[wellknown.ZoneLabel]
		}
	}
	return ""
}

func countBy(s *Snapshot, r *Results, pods []*corev1.Pod, key func(*Snapshot, *Results, *corev1.Pod) string) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		out[key(s, r, p)]++
	}
	return out
}

func pods(n int, name, cpu, mem string, opts ...podOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, mkPod(name, cpu, mem, opts...))
	}
	return out
}

func TestZoneSpread(t *testing.T) {
	app := map[string]string{"app": "web"}
	for _, tc := range []struct {
		name     string
		pods     []*corev1.Pod
		nodes    []*Node
		pools    []*karpv1.NodePool
		want     map[string]int
		failures int
	}{
		{"even over three zones", pods(6, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app)),
			nil, []*karpv1.NodePool{mkPool("default")}, map[string]int{"test-1a": 2, "test-1b": 2, "test-1c": 2}, 0},
		{"existing pods count", pods(3, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app)),
			[]*Node{mkNode("n1", "c.large", "test-1a", mkPod("old", "100m", "100Mi", podLabels("app", "web")), mkPod("old", "100m", "100Mi", podLabels("app", "web")))},
			[]*karpv1.NodePool{mkPool("default")}, map[string]int{"test-1b": 2, "test-1c": 1}, 0},
		{"maxSkew 2", pods(4, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 2, corev1.DoNotSchedule, app)),
			nil, []*karpv1.NodePool{mkPool("default", withReq(wellknown.ZoneLabel, opIn, "test-1a", "test-1b"))}, map[string]int{"test-1a": 2, "test-1b": 2}, 0},
		{"minDomains beyond what the pool offers", pods(4, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app), func(p *corev1.Pod) {
			three := int32(3)
			p.Spec.TopologySpreadConstraints[0].MinDomains = &three
		}), nil, []*karpv1.NodePool{mkPool("default", withReq(wellknown.ZoneLabel, opIn, "test-1a", "test-1b"))}, map[string]int{"test-1a": 1, "test-1b": 1, "": 2}, 2},
		{"ScheduleAnyway relaxes", pods(3, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 1, corev1.ScheduleAnyway, app)),
			nil, []*karpv1.NodePool{mkPool("default", withReq(wellknown.ZoneLabel, opIn, "test-1a"))}, map[string]int{"test-1a": 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshot(tc.pools, tc.pods...)
			s.Nodes = tc.nodes
			r := solve(t, s)
			if len(r.Unschedulable) != tc.failures {
				t.Fatalf("failures %d, want %d: %v", len(r.Unschedulable), tc.failures, r.Unschedulable)
			}
			got := countBy(s, r, tc.pods, zoneOf)
			for z, n := range tc.want {
				if got[z] != n {
					t.Fatalf("per zone %v, want %v", got, tc.want)
				}
			}
			for _, u := range r.Unschedulable {
				if !strings.Contains(u.Reason, "topology spread on topology.kubernetes.io/zone") {
					t.Fatalf("reason %q", u.Reason)
				}
			}
		})
	}
}

func TestSpreadNodeInclusionPolicies(t *testing.T) {
	app := map[string]string{"app": "web"}
	ignore := corev1.NodeInclusionPolicyIgnore
	honor := corev1.NodeInclusionPolicyHonor
	// An arm64 node in 1a with two matching pods. Pods select amd64: with the
	// default affinity policy (Honor) that node does not count.
	mk := func(opts ...podOpt) []*corev1.Pod {
		return pods(3, "web", "1", "1Gi", append([]podOpt{podLabels("app", "web"), nodeSelector(wellknown.ArchLabel, "amd64"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app)}, opts...)...)
	}
	node := func() *Node {
		return mkNode("arm", "g.large", "test-1a", mkPod("old", "100m", "100Mi", podLabels("app", "web")), mkPod("old", "100m", "100Mi", podLabels("app", "web")))
	}
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, mk()...)
	s.Nodes = []*Node{node()}
	r := solve(t, s)
	if got := countBy(s, r, s.Pods, zoneOf); got["test-1a"] != 1 {
		t.Fatalf("Honor: %v", got)
	}
	s = snapshot([]*karpv1.NodePool{mkPool("default")}, mk(func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = &ignore })...)
	s.Nodes = []*Node{node()}
	r = solve(t, s)
	if got := countBy(s, r, s.Pods, zoneOf); got["test-1a"] != 0 {
		t.Fatalf("Ignore: %v", got)
	}
	// nodeTaintsPolicy Honor: a pool the pods do not tolerate adds no domain.
	tainted := mkPool("tainted", withReq(wellknown.ZoneLabel, opIn, "test-1c"), withTaint("x", "y", corev1.TaintEffectNoSchedule))
	open := mkPool("open", withReq(wellknown.ZoneLabel, opIn, "test-1a", "test-1b"))
	ps := pods(4, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app), func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = &honor
	})
	r = solve(t, snapshot([]*karpv1.NodePool{tainted, open}, ps...))
	if len(r.Unschedulable) != 0 {
		t.Fatalf("taint policy Honor should ignore test-1c: %v", r.Unschedulable)
	}
	ps = pods(4, "web", "1", "1Gi", podLabels("app", "web"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, app))
	r = solve(t, snapshot([]*karpv1.NodePool{tainted, open}, ps...))
	if len(r.Unschedulable) != 2 {
		t.Fatalf("taint policy Ignore counts the empty test-1c: %d unschedulable", len(r.Unschedulable))
	}
}

func TestMatchLabelKeys(t *testing.T) {
	sel := map[string]string{"app": "web"}
	var ps []*corev1.Pod
	for _, rev := range []string{"v1", "v2"} {
		ps = append(ps, pods(3, "web-"+rev, "1", "1Gi", podLabels("app", "web", "rev", rev), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, sel), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints[0].MatchLabelKeys = []string{"rev"}
		})...)
	}
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, ps...)
	r := solve(t, s)
	for _, group := range [][]*corev1.Pod{ps[:3], ps[3:]} {
		got := countBy(s, r, group, zoneOf)
		if got["test-1a"] != 1 || got["test-1b"] != 1 || got["test-1c"] != 1 {
			t.Fatalf("each revision spreads on its own: %v", got)
		}
	}
}

func TestHostnameSpreadAndCapacityTypeSpread(t *testing.T) {
	app := map[string]string{"app": "web"}
	ps := pods(4, "web", "100m", "100Mi", podLabels("app", "web"), spread(wellknown.HostnameLabel, 1, corev1.DoNotSchedule, app))
	r := solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, ps...))
	if len(r.NewNodeClaims) != 4 {
		t.Fatalf("hostname spread maxSkew 1: %d claims", len(r.NewNodeClaims))
	}
	ps = pods(4, "web", "100m", "100Mi", podLabels("app", "web"), spread(wellknown.CapacityTypeLabel, 1, corev1.DoNotSchedule, app))
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, ps...)
	r = solve(t, s)
	ct := countBy(s, r, ps, func(_ *Snapshot, r *Results, p *corev1.Pod) string {
		c := claimOf(r, p)
		v := reqOf(c, wellknown.CapacityTypeLabel)
		if len(v.Values()) != 1 {
			return "?"
		}
		return v.Values()[0]
	})
	if ct["spot"] != 2 || ct["on-demand"] != 2 {
		t.Fatalf("capacity-type spread: %v", ct)
	}
}

func TestPodAffinity(t *testing.T) {
	db := map[string]string{"app": "db"}
	existing := mkNode("n1", "m.xlarge", "test-1b", mkPod("db", "3", "1Gi", podLabels("app", "db")))
	ps := pods(3, "api", "1", "1Gi", podAffinity(wellknown.ZoneLabel, db))
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, ps...)
	s.Nodes = []*Node{existing}
	r := solve(t, s)
	for _, p := range ps {
		if z := zoneOf(s, r, p); z != "test-1b" {
			t.Fatalf("pod %s in %q, want test-1b with the db", p.Name, z)
		}
	}
	// Without a db anywhere and not self-selecting: unschedulable.
	lone := mkPod("api", "1", "1Gi", podAffinity(wellknown.ZoneLabel, db))
	r = solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, lone))
	if !strings.Contains(reasonOf(r, lone), "pod affinity on topology.kubernetes.io/zone") {
		t.Fatalf("reason %q", reasonOf(r, lone))
	}
	// Self-affinity on hostname: all on one node.
	cache := map[string]string{"app": "cache"}
	ps = pods(5, "cache", "500m", "512Mi", podLabels("app", "cache"), podAffinity(wellknown.HostnameLabel, cache))
	r = solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, ps...))
	if len(r.NewNodeClaims) != 1 || len(r.NewNodeClaims[0].Pods) != 5 {
		t.Fatalf("hostname self-affinity: %s", fingerprint(r))
	}
	// Self-affinity on zone: one zone.
	ps = pods(8, "z", "1", "1Gi", podLabels("app", "z"), podAffinity(wellknown.ZoneLabel, map[string]string{"app": "z"}))
	s = snapshot([]*karpv1.NodePool{mkPool("default")}, ps...)
	r = solve(t, s)
	if got := countBy(s, r, ps, zoneOf); len(got) != 1 || got[""] != 0 {
		t.Fatalf("zone self-affinity: %v", got)
	}
}

func TestPodAntiAffinity(t *testing.T) {
	app := map[string]string{"app": "web"}
	ps := pods(4, "web", "100m", "100Mi", podLabels("app", "web"), podAntiAffinity(wellknown.HostnameLabel, app))
	r := solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, ps...))
	if len(r.NewNodeClaims) != 4 {
		t.Fatalf("hostname anti-affinity: %d claims", len(r.NewNodeClaims))
	}
	// Zone anti-affinity: one per zone, the fourth cannot go anywhere.
	ps = pods(4, "web", "100m", "100Mi", podLabels("app", "web"), podAntiAffinity(wellknown.ZoneLabel, app))
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, ps...)
	r = solve(t, s)
	if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "pod anti-affinity on topology.kubernetes.io/zone") {
		t.Fatalf("zone anti-affinity: %s", fingerprint(r))
	}
	// An existing pod's anti-affinity repels the pods it selects (inverse).
	guard := mkPod("guard", "100m", "100Mi", podAntiAffinity(wellknown.HostnameLabel, app))
	n1 := mkNode("n1", "m.xlarge", "test-1a", guard)
	p := mkPod("web", "100m", "100Mi", podLabels("app", "web"))
	s = snapshot([]*karpv1.NodePool{mkPool("default")}, p)
	s.Nodes = []*Node{n1}
	r = solve(t, s)
	if placementOf(r, p) == "n1" {
		t.Fatalf("pod placed next to a pod whose anti-affinity selects it")
	}
	// Preferred anti-affinity is relaxed when it cannot hold.
	ps = pods(4, "web", "100m", "100Mi", podLabels("app", "web"), preferredAntiAffinity(10, wellknown.ZoneLabel, app))
	r = solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, ps...))
	if len(r.Unschedulable) != 0 {
		t.Fatalf("preferred anti-affinity not relaxed: %v", r.Unschedulable)
	}
	// Ignore policy drops preferences up front.
	r = Solve(snapshot([]*karpv1.NodePool{mkPool("default")}, ps...), Options{MaxNewNodeClaims: -1, Preferences: PreferencesIgnore})
	if len(r.NewNodeClaims) != 1 {
		t.Fatalf("Ignore: %d claims", len(r.NewNodeClaims))
	}
}

func TestHostPorts(t *testing.T) {
	ps := pods(3, "web", "100m", "100Mi", hostPortOpt(8080))
	r := solve(t, snapshot([]*karpv1.NodePool{mkPool("default")}, ps...))
	if len(r.NewNodeClaims) != 3 {
		t.Fatalf("host port: %d claims", len(r.NewNodeClaims))
	}
	n1 := mkNode("n1", "m.xlarge", "test-1a", mkPod("old", "100m", "100Mi", hostPortOpt(8080)))
	p := mkPod("web", "100m", "100Mi", hostPortOpt(8080))
	q := mkPod("other", "100m", "100Mi", hostPortOpt(9090))
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, p, q)
	s.Nodes = []*Node{n1}
	r = solve(t, s)
	if placementOf(r, p) == "n1" || placementOf(r, q) != "n1" {
		t.Fatalf("ports: %s", fingerprint(r))
	}
}

func TestVolumeTopology(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: wellknown.ZoneLabel, Values: []string{"test-1c"}}}}}}
	imm := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "imm"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &immediate}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}},
		NodeAffinity:           &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, opIn, "test-1b")}}}}},
	}}
	claim := func(name, volume, class string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
		if class != "" {
			c.Spec.StorageClassName = &class
		}
		if volume != "" {
			c.Annotations = map[string]string{bindCompletedAnnotation: "yes"}
		}
		return c
	}
	withPVC := func(name string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	bound := mkPod("bound", "1", "1Gi", withPVC("data-bound"))
	unbound := mkPod("unbound", "1", "1Gi", withPVC("data-new"))
	missing := mkPod("missing", "1", "1Gi", withPVC("nope"))
	immPod := mkPod("imm", "1", "1Gi", withPVC("data-imm"))
	s := snapshot([]*karpv1.NodePool{mkPool("default")}, bound, unbound, missing, immPod)
	s.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{claim("data-bound", "pv-1", "gp3"), claim("data-new", "", "gp3"), claim("data-imm", "", "imm")}
	s.PersistentVolumes = []*corev1.PersistentVolume{pv}
	s.StorageClasses = []*storagev1.StorageClass{sc, imm}
	r := solve(t, s)
	if z := zoneOf(s, r, bound); z != "test-1b" {
		t.Fatalf("bound volume zone %q", z)
	}
	if z := zoneOf(s, r, unbound); z != "test-1c" {
		t.Fatalf("allowedTopologies zone %q", z)
	}
	if got := reasonOf(r, missing); got != "PersistentVolumeClaim default/nope does not exist" {
		t.Fatalf("missing: %q", got)
	}
	if got := reasonOf(r, immPod); !strings.Contains(got, "Immediate binding") {
		t.Fatalf("immediate: %q", got)
	}
	// The volume's zone excludes an existing node elsewhere.
	n := mkNode("n1", "m.xlarge", "test-1a")
	s2 := snapshot([]*karpv1.NodePool{mkPool("default")}, mkPod("b2", "1", "1Gi", withPVC("data-bound")))
	s2.PersistentVolumeClaims, s2.PersistentVolumes, s2.StorageClasses = s.PersistentVolumeClaims, s.PersistentVolumes, s.StorageClasses
	s2.Nodes = []*Node{n}
	if r := solve(t, s2); placementOf(r, s2.Pods[0]) == "n1" {
		t.Fatalf("placed on a node in the wrong zone")
	}
	// CSI attach limit on an existing node.
	n = mkNode("n1", "m.xlarge", "test-1c", mkPod("has-vol", "100m", "100Mi", withPVC("data-new")))
	one := int32(1)
	s3 := snapshot([]*karpv1.NodePool{mkPool("default")}, mkPod("second", "1", "1Gi", withPVC("data-other")))
	s3.PersistentVolumeClaims = append(append([]*corev1.PersistentVolumeClaim{}, s.PersistentVolumeClaims...), claim("data-other", "", "gp3"))
	s3.StorageClasses = s.StorageClasses
	s3.Nodes = []*Node{n}
	s3.CSINodes = []*storagev1.CSINode{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", Allocatable: &storagev1.VolumeNodeResources{Count: &one}}}}}}
	if r := solve(t, s3); placementOf(r, s3.Pods[0]) == "n1" {
		t.Fatalf("attach limit ignored")
	}
}
