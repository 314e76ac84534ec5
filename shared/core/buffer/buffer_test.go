package buffer

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/scheduling"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func podSpec(requests ...string) *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: rl(requests...)}}}}
}

var always = corev1.ContainerRestartPolicyAlways

// TestReplicas ports Karpenter v1.14.1's capacitybuffer replica tests
// (suite_test.go "Replica calculation", helpers_test.go).
func TestReplicas(t *testing.T) {
	cases := []struct {
		name     string
		spec     cbv1.CapacityBufferSpec
		pod      *corev1.PodSpec
		scalable *int32
		want     int32
	}{
		{"fixed replicas only", cbv1.CapacityBufferSpec{Replicas: new(int32(7))}, podSpec(), nil, 7},
		{"replicas capped by binding limit", cbv1.CapacityBufferSpec{Replicas: new(int32(10)), Limits: cbv1.Limits(rl("cpu", "3"))}, podSpec("cpu", "1"), nil, 3},
		{"non-binding limit does not reduce", cbv1.CapacityBufferSpec{Replicas: new(int32(3)), Limits: cbv1.Limits(rl("cpu", "10"))}, podSpec("cpu", "1"), nil, 3},
		{"limits only", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "5"))}, podSpec("cpu", "1"), nil, 5},
		{"percentage only", cbv1.CapacityBufferSpec{Percentage: new(int32(20))}, podSpec(), new(int32(10)), 2},
		{"replicas > percentage", cbv1.CapacityBufferSpec{Replicas: new(int32(5)), Percentage: new(int32(20))}, podSpec(), new(int32(10)), 5},
		{"percentage > replicas", cbv1.CapacityBufferSpec{Replicas: new(int32(5)), Percentage: new(int32(80))}, podSpec(), new(int32(10)), 8},
		{"max of both capped by limit", cbv1.CapacityBufferSpec{Replicas: new(int32(5)), Percentage: new(int32(80)), Limits: cbv1.Limits(rl("cpu", "4"))}, podSpec("cpu", "1"), new(int32(10)), 4},
		{"percentage rounds up to 1", cbv1.CapacityBufferSpec{Percentage: new(int32(10))}, podSpec(), new(int32(1)), 1},
		{"percentage of a podTemplateRef is ignored", cbv1.CapacityBufferSpec{Percentage: new(int32(50)), Replicas: new(int32(1))}, podSpec(), nil, 1},
		{"percentage of 0 replicas", cbv1.CapacityBufferSpec{Percentage: new(int32(50))}, podSpec(), new(int32(0)), 0},
		{"percentage 0", cbv1.CapacityBufferSpec{Percentage: new(int32(0))}, podSpec(), new(int32(10)), 0},
		{"percentage ceil", cbv1.CapacityBufferSpec{Percentage: new(int32(50))}, podSpec(), new(int32(3)), 2},
		{"percentage above 100", cbv1.CapacityBufferSpec{Percentage: new(int32(250))}, podSpec(), new(int32(4)), 10},
		{"nothing set", cbv1.CapacityBufferSpec{}, podSpec("cpu", "1"), nil, 0},
		// calculateLimitReplicas (helpers_test.go)
		{"memory limit", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("memory", "2Gi"))}, podSpec("memory", "512Mi"), nil, 4},
		{"least across resources", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "8", "memory", "4Gi"))}, podSpec("cpu", "1", "memory", "1Gi"), nil, 4},
		{"floor divide", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "10"))}, podSpec("cpu", "3"), nil, 3},
		{"millicores", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "1"))}, podSpec("cpu", "250m"), nil, 4},
		{"limit below one pod", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "500m"))}, podSpec("cpu", "1"), nil, 0},
		{"limit on an unrequested resource bounds nothing", cbv1.CapacityBufferSpec{Replicas: new(int32(3)), Limits: cbv1.Limits(rl("memory", "1Gi"))}, podSpec("cpu", "1"), nil, 3},
		{"no requests: limits bound nothing", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "4"))}, podSpec(), nil, 0},
		{"containers summed", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "3"))}, &corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}}, {Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
		}}, nil, 3},
		{"init container larger than containers", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "8"))}, &corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "4")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
		}, nil, 2},
		{"sidecar adds to containers", cbv1.CapacityBufferSpec{Limits: cbv1.Limits(rl("cpu", "6"))}, &corev1.PodSpec{
			InitContainers: []corev1.Container{{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
		}, nil, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Replicas(c.spec, c.pod, c.scalable); got != c.want {
				t.Errorf("Replicas = %d, want %d", got, c.want)
			}
		})
	}
}

func buffer(name string, spec cbv1.CapacityBufferSpec) *cbv1.CapacityBuffer {
	return &cbv1.CapacityBuffer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name), Generation: 3,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))},
		Spec: spec,
	}
}

func tmpl(requests ...string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: *podSpec(requests...)}
}

// TestResolve covers the controller's side: ReadyForProvisioning with
// Karpenter's reasons, status.replicas and the observed reference.
func TestResolve(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))
	cases := []struct {
		name       string
		cb         *cluster.CapacityBuffer
		ready      bool
		reason     string
		replicas   int32
		templateOf string
	}{
		{"pod template", &cluster.CapacityBuffer{Buffer: buffer("a", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "t"}, Replicas: new(int32(2))}),
			Template: tmpl("cpu", "1"), TemplateGeneration: 4}, true, cbv1.ReasonResolved, 2, "t"},
		{"deployment at 50%", &cluster.CapacityBuffer{Buffer: buffer("b", cbv1.CapacityBufferSpec{ScalableRef: &cbv1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: new(int32(50))}),
			Template: tmpl("cpu", "1"), ScalableReplicas: 4}, true, cbv1.ReasonResolved, 2, ""},
		{"template missing", &cluster.CapacityBuffer{Buffer: buffer("c", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "t"}, Replicas: new(int32(2))}),
			NotFound: true, Error: `podtemplates "t" not found`}, false, cbv1.ReasonPodTemplateNotFound, 0, ""},
		{"deployment missing", &cluster.CapacityBuffer{Buffer: buffer("d", cbv1.CapacityBufferSpec{ScalableRef: &cbv1.ScalableRef{Kind: "Deployment", Name: "web"}}),
			NotFound: true, Error: `deployments.apps "web" not found`}, false, cbv1.ReasonScalableRefNotFound, 0, ""},
		{"unsupported kind", &cluster.CapacityBuffer{Buffer: buffer("e", cbv1.CapacityBufferSpec{ScalableRef: &cbv1.ScalableRef{APIGroup: "batch", Kind: "Job", Name: "j"}}),
			Error: `unsupported kind "Job"`}, false, cbv1.ReasonResolutionFailed, 0, ""},
		{"no reference", &cluster.CapacityBuffer{Buffer: buffer("f", cbv1.CapacityBufferSpec{Replicas: new(int32(1))})}, false, cbv1.ReasonResolutionFailed, 0, ""},
		{"zero chunks", &cluster.CapacityBuffer{Buffer: buffer("g", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "t"}, Replicas: new(int32(0))}),
			Template: tmpl("cpu", "1")}, true, cbv1.ReasonResolved, 0, "t"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := Resolve(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{c.cb}}, now)[0]
			if b.Ready != c.ready || b.Replicas != c.replicas || len(b.Pods) != int(c.replicas) {
				t.Errorf("ready=%v replicas=%d pods=%d, want %v %d", b.Ready, b.Replicas, len(b.Pods), c.ready, c.replicas)
			}
			st := b.Status(nil, now)
			cond := meta.FindStatusCondition(st.Conditions, cbv1.ConditionReadyForProvisioning)
			if cond == nil || cond.Reason != c.reason || (cond.Status == metav1.ConditionTrue) != c.ready || cond.ObservedGeneration != 3 {
				t.Errorf("ReadyForProvisioning = %+v, want reason %s", cond, c.reason)
			}
			if c.ready && (st.Replicas == nil || *st.Replicas != c.replicas) {
				t.Errorf("status.replicas = %v, want %d", st.Replicas, c.replicas)
			}
			if got := ""; st.PodTemplateRef != nil {
				got = st.PodTemplateRef.Name
				if got != c.templateOf || st.PodTemplateGeneration == nil {
					t.Errorf("status.podTemplateRef = %q (generation %v), want %q", got, st.PodTemplateGeneration, c.templateOf)
				}
			} else if c.templateOf != "" {
				t.Errorf("no status.podTemplateRef, want %q", c.templateOf)
			}
			prov := meta.FindStatusCondition(st.Conditions, cbv1.ConditionProvisioning)
			switch {
			case !c.ready && (prov == nil || prov.Reason != cbv1.ReasonNotReadyForProvisioning):
				t.Errorf("Provisioning = %+v, want NotReadyForProvisioning", prov)
			case c.ready && c.replicas == 0 && (prov == nil || prov.Reason != cbv1.ReasonBufferEmpty):
				t.Errorf("Provisioning = %+v, want BufferEmpty", prov)
			case c.ready && c.replicas > 0 && prov != nil:
				t.Errorf("Provisioning = %+v without a simulation, want none", prov)
			}
		})
	}
}

// TestVirtualPods: names and UIDs derive from the buffer, so two ticks
// (or the provisioner and the disruption function) make the same pods;
// claims and node names are dropped; the pods read as provisionable.
func TestVirtualPods(t *testing.T) {
	tp := tmpl("cpu", "1")
	tp.Spec.NodeName = "n1"
	tp.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	tp.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data"}, {Name: "scratch"}, {Name: "cfg"}}
	cb := &cluster.CapacityBuffer{Buffer: buffer("web", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "t"}, Replicas: new(int32(2))}), Template: tp}
	snap := &cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{cb}}
	a, b := VirtualPods(snap), VirtualPods(snap)
	if len(a) != 2 {
		t.Fatalf("%d pods, want 2", len(a))
	}
	for i, p := range a {
		if p.Name != b[i].Name || p.UID != b[i].UID {
			t.Errorf("pod %d differs between two resolutions: %s/%s vs %s/%s", i, p.Name, p.UID, b[i].Name, b[i].UID)
		}
		if want := []string{"capacity-buffer-web-1", "capacity-buffer-web-2"}[i]; p.Name != want || p.Namespace != "team-a" || string(p.UID) != "uid-web-"+want[len(want)-1:] {
			t.Errorf("pod %d is %s/%s uid %s", i, p.Namespace, p.Name, p.UID)
		}
		if !IsVirtual(p) || KeyOf(p) != "team-a/web" || p.Labels["app"] != "web" {
			t.Errorf("pod %d marks: %v labels %v", i, p.Annotations, p.Labels)
		}
		if p.Spec.NodeName != "" || len(p.Spec.Volumes) != 1 || len(p.Spec.Containers[0].VolumeMounts) != 1 {
			t.Errorf("pod %d not sanitized: node %q volumes %v mounts %v", i, p.Spec.NodeName, p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts)
		}
		if p.Spec.Priority == nil || *p.Spec.Priority != cbv1.VirtualPodPriority || !p.CreationTimestamp.Equal(&cb.Buffer.CreationTimestamp) {
			t.Errorf("pod %d priority %v created %v", i, p.Spec.Priority, p.CreationTimestamp)
		}
	}
	if len(tp.Spec.Volumes) != 3 || tp.Spec.NodeName != "n1" {
		t.Error("the snapshot's template was modified")
	}
	if KeyOf(&corev1.Pod{}) != "" || len(WithoutVirtual(append(a, &corev1.Pod{}))) != 1 {
		t.Error("a real pod is taken for a virtual one")
	}
}

// TestProvisioningCondition ports Karpenter's computeProvisioningCondition
// from a simulation's placement of the pods.
func TestProvisioningCondition(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))
	cb := &cluster.CapacityBuffer{Buffer: buffer("web", cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: "t"}, Replicas: new(int32(2))}), Template: tmpl("cpu", "1")}
	b := Resolve(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{cb}}, now)[0]
	pods := b.Pods
	cases := []struct {
		name   string
		res    scheduling.Results
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"both on existing", scheduling.Results{Existing: map[string][]*corev1.Pod{"n1": pods}}, metav1.ConditionTrue, cbv1.ReasonFitsExistingCapacity, "All 2 virtual pods fit on existing capacity"},
		{"one needs a claim", scheduling.Results{Existing: map[string][]*corev1.Pod{"n1": pods[:1]}, NewNodeClaims: []*scheduling.NewNodeClaim{{Pods: pods[1:]}}},
			metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity, "1/2 virtual pods required new capacity, 0 failed"},
		{"one fits nowhere", scheduling.Results{Existing: map[string][]*corev1.Pod{"n1": pods[:1]}, Unschedulable: []scheduling.PodError{{Pod: pods[1], Reason: "nodepool limits"}}},
			metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity, "0/2 virtual pods required new capacity, 1 failed: nodepool limits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := b.Status(Place(&c.res)["team-a/web"], now)
			cond := meta.FindStatusCondition(st.Conditions, cbv1.ConditionProvisioning)
			if cond == nil || cond.Status != c.status || cond.Reason != c.reason || cond.Message != c.msg || cond.ObservedGeneration != 3 {
				t.Errorf("Provisioning = %+v, want %s %s %q", cond, c.status, c.reason, c.msg)
			}
			if st.ProvisioningStrategy != nil || *st.Replicas != 2 {
				t.Errorf("status %+v", st)
			}
		})
	}
	hosts := Hosts(&scheduling.Results{Existing: map[string][]*corev1.Pod{"n1": pods, "n2": {{}}}})
	if hosts["n1"] != 2 || hosts["n2"] != 0 {
		t.Errorf("Hosts = %v", hosts)
	}
}
