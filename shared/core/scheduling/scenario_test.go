package scheduling

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestMixedBatch is a day in a cluster: three NodePools (a heavy arm64 pool,
// a general one with a cpu limit, a tainted GPU pool), a DaemonSet,
// existing nodes with room, a StatefulSet with zonal volumes, a spread web
// tier, a cache with hostname anti-affinity, GPU jobs, and pods nothing can
// take.
func TestMixedBatch(t *testing.T) {
	arm := mkPool("arm", withWeight(10), withReq(wellknown.ArchLabel, opIn, "arm64"), withLabel("team", "web"))
	general := mkPool("general", withLimit("cpu", "64"))
	gpu := mkPool("gpu", withWeight(5), withTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule), withReq(wellknown.InstanceFamilyLabel, opIn, "p"))
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "kube-system"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "128Mi")}}}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}

	web := pods(9, "web", "500m", "1Gi", podLabels("app", "web"), nodeSelector("team", "web"), spread(wellknown.ZoneLabel, 1, corev1.DoNotSchedule, map[string]string{"app": "web"}))
	cache := pods(3, "cache", "1", "2Gi", podLabels("app", "cache"), podAntiAffinity(wellknown.HostnameLabel, map[string]string{"app": "cache"}))
	jobs := pods(2, "train", "2", "8Gi", tolerate("nvidia.com/gpu"), extended(string(wellknown.ResourceNVIDIAGPU), "1"))
	batch := pods(12, "batch", "1500m", "2Gi", nodeSelector(wellknown.ArchLabel, "amd64"))
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc}
	var db []*corev1.Pod
	var pvcs []*corev1.PersistentVolumeClaim
	var pvs []*corev1.PersistentVolume
	for i, z := range testZones {
		name := fmt.Sprintf("data-db-%d", i)
		pvs = append(pvs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com"}},
			NodeAffinity:           &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{expr(wellknown.ZoneLabel, opIn, z)}}}}},
		}})
		class := "gp3"
		pvcs = append(pvcs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{bindCompletedAnnotation: "yes"}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name, StorageClassName: &class}})
		p := mkPod(fmt.Sprintf("db-%d", i), "2", "4Gi", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
		})
		db = append(db, p)
	}
	impossible := mkPod("huge", "64", "1Gi")
	wrongTeam := mkPod("lost", "1", "1Gi", nodeSelector("team", "data"))

	var all []*corev1.Pod
	for _, g := range [][]*corev1.Pod{web, cache, jobs, batch, db, {impossible, wrongTeam}} {
		all = append(all, g...)
	}
	s := snapshot([]*karpv1.NodePool{general, arm, gpu}, all...)
	s.DaemonSets = []*appsv1.DaemonSet{ds}
	s.StorageClasses, s.PersistentVolumeClaims, s.PersistentVolumes = []*storagev1.StorageClass{sc}, pvcs, pvs
	roomy := mkNode("existing-1", "m.4xlarge", "test-1a")
	roomy.NodePool = "general"
	s.Nodes = []*Node{roomy}

	r := solve(t, s)
	if len(r.Unschedulable) != 2 {
		t.Fatalf("want exactly the two impossible pods unschedulable:\n%s", fingerprint(r))
	}
	if !strings.Contains(reasonOf(r, impossible), "64 cpu") {
		t.Fatalf("huge: %q", reasonOf(r, impossible))
	}
	if got := reasonOf(r, wrongTeam); !strings.Contains(got, "pod requires team In [data] but NodePool arm allows team In [web]") || !strings.Contains(got, "NodePool general does not set label team") {
		t.Fatalf("lost: %q", got)
	}
	for _, p := range web {
		if c := claimOf(r, p); c == nil || c.NodePool != "arm" {
			t.Fatalf("web pod %s not on the arm pool", p.Name)
		}
	}
	if z := countBy(s, r, web, zoneOf); z["test-1a"] != 3 || z["test-1b"] != 3 || z["test-1c"] != 3 {
		t.Fatalf("web spread %v", z)
	}
	for _, p := range jobs {
		if c := claimOf(r, p); c == nil || c.NodePool != "gpu" {
			t.Fatalf("gpu job %s not on the gpu pool: %s", p.Name, fingerprint(r))
		}
	}
	for i, p := range db {
		if z := zoneOf(s, r, p); z != testZones[i] {
			t.Fatalf("db-%d in %q, its volume is in %s", i, z, testZones[i])
		}
	}
	hosts := map[string]bool{}
	for _, p := range cache {
		hosts[placementOf(r, p)] = true
	}
	if len(hosts) != 3 {
		t.Fatalf("cache pods share nodes: %v", hosts)
	}
	if len(r.Existing["existing-1"]) == 0 {
		t.Fatalf("the roomy existing node took nothing")
	}
	for _, c := range r.NewNodeClaims {
		if c.NodePool == "gpu" {
			if q := c.Requests[corev1.ResourceCPU]; q.MilliValue()%1000 != 100 {
				t.Fatalf("gpu claim requests %s lack the DaemonSet", q.String())
			}
		}
	}
}

// TestSolveDoesNotModifyInput checks purity on random snapshots.
func TestSolveDoesNotModifyInput(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		s := randomSnapshot(rand.New(rand.NewSource(seed)))
		var before []*corev1.Pod
		for _, p := range s.Pods {
			before = append(before, p.DeepCopy())
		}
		pools := make([]*karpv1.NodePool, len(s.NodePools))
		for i, np := range s.NodePools {
			pools[i] = np.DeepCopy()
		}
		Solve(s, Provisioning())
		for i, p := range s.Pods {
			if !reflect.DeepEqual(p, before[i]) {
				t.Fatalf("seed %d: pod %s modified", seed, p.Name)
			}
		}
		for i, np := range s.NodePools {
			if !reflect.DeepEqual(np, pools[i]) {
				t.Fatalf("seed %d: NodePool %s modified", seed, np.Name)
			}
		}
	}
}
