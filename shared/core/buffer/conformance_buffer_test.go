package buffer

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// Karpenter v1.14.1's capacitybuffer controller suite
// (pkg/controllers/capacitybuffer/suite_test.go, helpers_test.go) and the
// provisioner's buffer helpers (pkg/controllers/provisioning/buffers_test.go),
// through Resolve, Replicas, Status, Place and Hosts. What Karpenter's
// controller reads from the API server (the referent, its generation and
// replicas) is the snapshot's cluster.CapacityBuffer here: shared/kube's
// ReadCapacityBuffers fills it.

var confNow = metav1.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))

func cbCase(file, spec string) conformance.Case {
	return conformance.Case{Suite: "core/capacitybuffer", File: "pkg/controllers/capacitybuffer/" + file, Spec: spec}
}

func resolveOne(cb *cluster.CapacityBuffer) *Buffer {
	return Resolve(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{cb}}, confNow)[0]
}

func readyCond(t *testing.T, b *Buffer) *metav1.Condition {
	t.Helper()
	st := b.Status(nil, confNow)
	c := meta.FindStatusCondition(st.Conditions, cbv1.ConditionReadyForProvisioning)
	if c == nil {
		t.Fatalf("no ReadyForProvisioning condition in %+v", st)
	}
	return c
}

func inDefault(name string, spec cbv1.CapacityBufferSpec) *cbv1.CapacityBuffer {
	b := buffer(name, spec)
	b.Namespace = "default"
	return b
}

func deploymentRef(name string) *cbv1.ScalableRef {
	return &cbv1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: name}
}

func TestConformanceCapacityBufferController(t *testing.T) {
	const ctrl = "CapacityBuffer Controller > "
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, cbCase("suite_test.go", ctrl+spec), body)
	}
	run("PodTemplateRef resolution > should resolve a PodTemplate and set ReadyForProvisioning=True", func(t *testing.T) {
		strategy := "buffer.x-k8s.io/active-capacity"
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer", cbv1.CapacityBufferSpec{
			ProvisioningStrategy: &strategy, PodTemplateRef: &cbv1.LocalObjectRef{Name: "test-template"}, Replicas: new(int32(5)),
		}), Template: tmpl("cpu", "1", "memory", "1Gi"), TemplateGeneration: 1})
		c := readyCond(t, b)
		st := b.Status(nil, confNow)
		if c.Status != metav1.ConditionTrue || c.Reason != cbv1.ReasonResolved {
			t.Errorf("ReadyForProvisioning %+v, want True/Resolved", c)
		}
		if st.PodTemplateRef == nil || st.PodTemplateRef.Name != "test-template" || st.Replicas == nil || *st.Replicas != 5 ||
			st.ProvisioningStrategy == nil || *st.ProvisioningStrategy != strategy {
			t.Errorf("status %+v", st)
		}
	})
	run("PodTemplateRef resolution > should set ReadyForProvisioning=False when PodTemplate is not found", func(t *testing.T) {
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer-missing", cbv1.CapacityBufferSpec{
			PodTemplateRef: &cbv1.LocalObjectRef{Name: "nonexistent"}, Replicas: new(int32(3)),
		}), NotFound: true, Error: `podtemplates "nonexistent" not found`})
		if c := readyCond(t, b); c.Status != metav1.ConditionFalse || c.Reason != cbv1.ReasonPodTemplateNotFound {
			t.Errorf("ReadyForProvisioning %+v, want False/PodTemplateNotFound", c)
		}
	})
	run("ScalableRef resolution > should resolve a Deployment and calculate percentage-based replicas", func(t *testing.T) {
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer-scalable", cbv1.CapacityBufferSpec{
			ScalableRef: deploymentRef("my-app"), Percentage: new(int32(20)),
		}), Template: tmpl("cpu", "500m", "memory", "256Mi"), ScalableReplicas: 10})
		st := b.Status(nil, confNow)
		if c := readyCond(t, b); c.Status != metav1.ConditionTrue {
			t.Errorf("ReadyForProvisioning %+v, want True", c)
		}
		if st.Replicas == nil || *st.Replicas != 2 || st.PodTemplateRef != nil {
			t.Errorf("replicas %v podTemplateRef %v, want 2 (20%% of 10) and none", st.Replicas, st.PodTemplateRef)
		}
	})
	run("ScalableRef resolution > should set ReadyForProvisioning=False when scalable ref is not found", func(t *testing.T) {
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer-missing-ref", cbv1.CapacityBufferSpec{
			ScalableRef: deploymentRef("nonexistent"), Replicas: new(int32(3)),
		}), NotFound: true, Error: `deployments.apps "nonexistent" not found`})
		if c := readyCond(t, b); c.Status != metav1.ConditionFalse || c.Reason != cbv1.ReasonScalableRefNotFound {
			t.Errorf("ReadyForProvisioning %+v, want False/ScalableRefNotFound", c)
		}
	})
	run("ScalableRef resolution > should resolve a StatefulSet", func(t *testing.T) {
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer-sts", cbv1.CapacityBufferSpec{
			ScalableRef: &cbv1.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "my-sts"}, Percentage: new(int32(20)),
		}), Template: tmpl("cpu", "500m"), ScalableReplicas: 5})
		if c := readyCond(t, b); c.Status != metav1.ConditionTrue || b.Replicas != 1 {
			t.Errorf("ReadyForProvisioning %+v, replicas %d; want True and 1 (20%% of 5)", c, b.Replicas)
		}
	})
	// Karpenter's reconcile fails (and is retried) with the buffer's
	// ReadyForProvisioning False/ResolutionFailed; Karpless writes the same
	// condition and reads the buffer again every tick. The reader's side
	// (which kinds and groups it refuses) is shared/kube's conformance.
	for _, c := range []struct{ spec, err string }{
		{"should return error for unsupported kind", `unsupported kind "Job"`},
		{"should return error for unsupported API group", `unsupported scalableRef API group "batch"`},
	} {
		run("ScalableRef resolution > "+c.spec, func(t *testing.T) {
			b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer-bad", cbv1.CapacityBufferSpec{
				ScalableRef: &cbv1.ScalableRef{APIGroup: "batch", Kind: "Job", Name: "my-job"}, Percentage: new(int32(20)),
			}), Error: c.err})
			cond := readyCond(t, b)
			if cond.Status != metav1.ConditionFalse || cond.Reason != cbv1.ReasonResolutionFailed || cond.Message != c.err || b.Ready || len(b.Pods) != 0 {
				t.Errorf("ReadyForProvisioning %+v, ready %v, %d pods; want False/ResolutionFailed saying %q and no virtual pod", cond, b.Ready, len(b.Pods), c.err)
			}
		})
	}
	run("ScalableRef resolution > should default to 1 replica when workload has nil Spec.Replicas", func(t *testing.T) {
		// The reader records a workload without spec.replicas as 1
		// (shared/kube's conformance asserts it against the API server).
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("test-buffer-nil-replicas", cbv1.CapacityBufferSpec{
			ScalableRef: deploymentRef("nil-replicas-app"), Percentage: new(int32(100)),
		}), Template: tmpl("cpu", "500m"), ScalableReplicas: 1})
		if c := readyCond(t, b); c.Status != metav1.ConditionTrue || b.Replicas != 1 {
			t.Errorf("ReadyForProvisioning %+v, replicas %d; want True and 1", c, b.Replicas)
		}
	})

	// Replica calculation: the workload (its replicas, a pod asking for one
	// CPU where the entry limits CPU) and the buffer.
	type entry struct {
		name     string
		spec     cbv1.CapacityBufferSpec
		cpuPod   bool
		scalable int32 // 0: a podTemplateRef
		want     int32
	}
	pt := func(n string) *cbv1.LocalObjectRef { return &cbv1.LocalObjectRef{Name: n} }
	for _, e := range []entry{
		{"fixed replicas only", cbv1.CapacityBufferSpec{PodTemplateRef: pt("pt-fixed"), Replicas: new(int32(7))}, false, 0, 7},
		{"replicas capped by binding limit", cbv1.CapacityBufferSpec{PodTemplateRef: pt("pt-cap"), Replicas: new(int32(10)), Limits: cbv1.Limits(rl("cpu", "3"))}, true, 0, 3},
		{"non-binding limit does not reduce (podTemplateRef)", cbv1.CapacityBufferSpec{PodTemplateRef: pt("pt-loose"), Replicas: new(int32(3)), Limits: cbv1.Limits(rl("cpu", "10"))}, true, 0, 3},
		{"limits only", cbv1.CapacityBufferSpec{PodTemplateRef: pt("pt-limit"), Limits: cbv1.Limits(rl("cpu", "5"))}, true, 0, 5},
		{"percentage only", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d-pct-only"), Percentage: new(int32(20))}, false, 10, 2},
		{"replicas > percentage", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d-repl"), Replicas: new(int32(5)), Percentage: new(int32(20))}, false, 10, 5},
		{"percentage > replicas", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d-pct"), Replicas: new(int32(5)), Percentage: new(int32(80))}, false, 10, 8},
		{"max of replicas and percentage capped by limit", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d-cap"), Replicas: new(int32(5)), Percentage: new(int32(80)), Limits: cbv1.Limits(rl("cpu", "4"))}, true, 10, 4},
		{"percentage rounds up to a minimum of 1", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d-min"), Percentage: new(int32(10))}, false, 1, 1},
	} {
		run("Replica calculation > should resolve buffer replicas from replicas, percentage, and limits > "+e.name, func(t *testing.T) {
			tp := tmpl()
			if e.cpuPod {
				tp = tmpl("cpu", "1")
			}
			cb := &cluster.CapacityBuffer{Buffer: inDefault("cb", e.spec), Template: tp, ScalableReplicas: e.scalable, TemplateGeneration: 1}
			st := resolveOne(cb).Status(nil, confNow)
			if st.Replicas == nil || *st.Replicas != e.want {
				t.Errorf("status.replicas %v, want %d", st.Replicas, e.want)
			}
		})
	}

	run("PodTemplate watch > should re-resolve the template when its generation changes", func(t *testing.T) {
		// Every tick resolves every buffer against the template as it is
		// then: the template's new generation is the status's.
		cb := &cluster.CapacityBuffer{Buffer: inDefault("test-watch-buffer", cbv1.CapacityBufferSpec{
			PodTemplateRef: pt("watched-template"), Replicas: new(int32(2)),
		}), Template: tmpl(), TemplateGeneration: 1}
		first := resolveOne(cb).Status(nil, confNow)
		cb.Buffer.Status = first
		cb.Template = tmpl()
		cb.Template.Spec.Containers[0].Image = "pause:v2"
		cb.TemplateGeneration = 2
		b := resolveOne(cb)
		second := b.Status(nil, confNow)
		if first.PodTemplateGeneration == nil || second.PodTemplateGeneration == nil || *second.PodTemplateGeneration < *first.PodTemplateGeneration || *second.PodTemplateGeneration != 2 {
			t.Errorf("podTemplateGeneration %v then %v, want it to follow the template to 2", first.PodTemplateGeneration, second.PodTemplateGeneration)
		}
		if b.Pods[0].Spec.Containers[0].Image != "pause:v2" {
			t.Errorf("virtual pod image %q, want the template's new pause:v2", b.Pods[0].Spec.Containers[0].Image)
		}
	})

	// "Provisioner trigger > should trigger the provisioner after a
	// successful reconcile" is the watcher's: shared/ticks/watch.
	run("Provisioner trigger > should NOT trigger the provisioner when resolution fails", func(t *testing.T) {
		// Nothing reaches the provisioner from a buffer that did not
		// resolve: no virtual pod.
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("no-trig-buffer", cbv1.CapacityBufferSpec{
			PodTemplateRef: pt("does-not-exist"), Replicas: new(int32(1)),
		}), NotFound: true, Error: "not found"})
		if len(Pods([]*Buffer{b})) != 0 {
			t.Errorf("virtual pods %d, want none", len(b.Pods))
		}
	})

	// Karpenter keeps a cache of each buffer's virtual pods; Karpless makes
	// them from the snapshot every tick (VirtualPods): the cache's content
	// is what VirtualPods returns.
	ready := func(name string, n int32) *cluster.CapacityBuffer {
		return &cluster.CapacityBuffer{Buffer: inDefault(name, cbv1.CapacityBufferSpec{PodTemplateRef: pt(name + "-template"), Replicas: new(n)}),
			Template: tmpl(), TemplateGeneration: 1}
	}
	run("Virtual pod cache > should populate the cache after a successful reconcile", func(t *testing.T) {
		if got := VirtualPods(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{ready("cache-buffer", 3)}}); len(got) != 3 {
			t.Errorf("virtual pods %d, want 3", len(got))
		}
	})
	run("Virtual pod cache > should remove the cache entry when resolution fails with NotFound", func(t *testing.T) {
		cb := ready("gone-buffer", 2)
		if got := VirtualPods(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{cb}}); len(got) != 2 {
			t.Fatalf("virtual pods %d, want 2", len(got))
		}
		cb.Template, cb.NotFound, cb.Error = nil, true, `podtemplates "gone-buffer-template" not found`
		if got := VirtualPods(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{cb}}); len(got) != 0 {
			t.Errorf("virtual pods %d after the template went, want none", len(got))
		}
	})
	run("Virtual pod cache > should evict the cache entry when the buffer is deleted", func(t *testing.T) {
		if got := VirtualPods(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{ready("del-buffer", 3)}}); len(got) != 3 {
			t.Fatalf("virtual pods %d, want 3", len(got))
		}
		if got := VirtualPods(&cluster.Snapshot{}); len(got) != 0 {
			t.Errorf("virtual pods %d after the buffer went, want none", len(got))
		}
	})
	run("Virtual pod cache > should not touch the cache when a buffer has neither ref set", func(t *testing.T) {
		cb := &cluster.CapacityBuffer{Buffer: inDefault("no-ref-buffer", cbv1.CapacityBufferSpec{Replicas: new(int32(1))})}
		if got := VirtualPods(&cluster.Snapshot{CapacityBuffers: []*cluster.CapacityBuffer{cb}}); len(got) != 0 {
			t.Errorf("virtual pods %d, want none", len(got))
		}
	})
}

func TestConformanceCapacityBufferHelpers(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, cbCase("helpers_test.go", "Helpers > "+spec), body)
	}
	containers := func(reqs ...corev1.ResourceList) []corev1.Container {
		var out []corev1.Container
		for _, r := range reqs {
			out = append(out, corev1.Container{Resources: corev1.ResourceRequirements{Requests: r}})
		}
		return out
	}
	sidecar := func(r corev1.ResourceList) corev1.Container {
		return corev1.Container{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: r}}
	}
	for _, c := range []struct {
		spec    string
		limits  corev1.ResourceList
		pod     *corev1.PodSpec
		want    int32
		matched bool
	}{
		{"should calculate replicas based on CPU limits", rl("cpu", "4"), podSpec("cpu", "1"), 4, true},
		{"should calculate replicas based on memory limits", rl("memory", "2Gi"), podSpec("memory", "512Mi"), 4, true},
		{"should take the minimum across multiple resources", rl("cpu", "8", "memory", "4Gi"), podSpec("cpu", "1", "memory", "1Gi"), 4, true},
		{"should sum requests across multiple containers", rl("cpu", "3"), &corev1.PodSpec{Containers: containers(rl("cpu", "500m"), rl("cpu", "500m"))}, 3, true},
		{"should use init container max if larger than sum of containers", rl("cpu", "8"), &corev1.PodSpec{InitContainers: containers(rl("cpu", "4")), Containers: containers(rl("cpu", "1"))}, 2, true},
		{"should use container sum if larger than init containers", rl("cpu", "6"), &corev1.PodSpec{InitContainers: containers(rl("cpu", "500m")), Containers: containers(rl("cpu", "2"))}, 3, true},
		{"should return false when pod has no resource requests", rl("cpu", "4"), &corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}, 0, false},
		{"should return false when no limit resources match pod requests", rl("memory", "4Gi"), podSpec("cpu", "1"), 0, false},
		{"should floor divide (no rounding up)", rl("cpu", "10"), podSpec("cpu", "3"), 3, true},
		{"should handle millicore-level precision", rl("cpu", "1"), podSpec("cpu", "250m"), 4, true},
		{"should return 0 when limit is smaller than a single pod request", rl("cpu", "1"), podSpec("cpu", "2"), 0, true},
	} {
		run("calculateLimitReplicas > "+c.spec, func(t *testing.T) {
			got, matched := limitReplicas(c.limits, c.pod)
			if matched != c.matched || (c.matched && got != c.want) {
				t.Errorf("limitReplicas = %d, %v; want %d, %v", got, matched, c.want, c.matched)
			}
		})
	}
	for _, c := range []struct {
		spec string
		pod  *corev1.PodSpec
		want corev1.ResourceList
	}{
		{"should sum requests from all containers", &corev1.PodSpec{Containers: containers(rl("cpu", "1", "memory", "512Mi"), rl("cpu", "500m", "memory", "256Mi"))}, rl("cpu", "1500m", "memory", "768Mi")},
		{"should take max of init containers vs regular containers", &corev1.PodSpec{InitContainers: containers(rl("cpu", "4"), rl("cpu", "2")), Containers: containers(rl("cpu", "1"))}, rl("cpu", "4")},
		{"should return empty list for pod with no requests", &corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}, rl()},
		{"should handle mixed resources across containers", &corev1.PodSpec{Containers: containers(rl("cpu", "1"), rl("memory", "1Gi"))}, rl("cpu", "1", "memory", "1Gi")},
		{"should sum sidecar init containers with regular containers", &corev1.PodSpec{InitContainers: []corev1.Container{sidecar(rl("cpu", "500m"))}, Containers: containers(rl("cpu", "1"))}, rl("cpu", "1500m")},
		{"should sum multiple sidecar init containers with regular containers", &corev1.PodSpec{InitContainers: []corev1.Container{sidecar(rl("cpu", "500m")), sidecar(rl("cpu", "200m"))}, Containers: containers(rl("cpu", "1"))}, rl("cpu", "1700m")},
		{"should use max of regular init container + preceding sidecars vs running total", &corev1.PodSpec{InitContainers: []corev1.Container{sidecar(rl("cpu", "500m")), containers(rl("cpu", "4"))[0]}, Containers: containers(rl("cpu", "1"))}, rl("cpu", "4500m")},
		{"should handle sidecar after regular init container", &corev1.PodSpec{InitContainers: []corev1.Container{containers(rl("cpu", "4"))[0], sidecar(rl("cpu", "500m"))}, Containers: containers(rl("cpu", "1"))}, rl("cpu", "4")},
		{"should not treat init containers without restartPolicy as sidecars", &corev1.PodSpec{InitContainers: containers(rl("cpu", "2")), Containers: containers(rl("cpu", "1"))}, rl("cpu", "2")},
	} {
		run("totalPodRequests > "+c.spec, func(t *testing.T) {
			got := podRequests(c.pod)
			if len(got) != len(c.want) {
				t.Fatalf("requests %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if q, ok := got[k]; !ok || q.Cmp(v) != 0 {
					t.Errorf("%s = %v, want %v", k, got[k], v.String())
				}
			}
		})
	}
	for _, c := range []struct {
		spec                  string
		scalable, pct, expect int32
	}{
		{"should calculate percentage and ceil", 10, 20, 2},
		{"should ceil fractional results", 3, 10, 1},
		{"should return at least 1 when percentage > 0 and replicas > 0", 1, 1, 1},
		{"should return 0 when scalable has 0 replicas", 0, 50, 0},
		{"should return 0 when percentage is 0", 10, 0, 0},
		{"should handle 100 percent", 5, 100, 5},
		{"should handle large percentages (>100)", 5, 200, 10},
		{"should handle large replica counts", 1000, 10, 100},
	} {
		run("calculatePercentageReplicas > "+c.spec, func(t *testing.T) {
			if got := percentageReplicas(c.scalable, c.pct); got != c.expect {
				t.Errorf("percentageReplicas(%d, %d) = %d, want %d", c.scalable, c.pct, got, c.expect)
			}
		})
	}

	// SetCondition: Karpless sets the buffer's conditions in Resolve and
	// Status (ReadyForProvisioning, Provisioning).
	run("SetCondition > should add a new condition", func(t *testing.T) {
		b := resolveOne(ready2("a", 1))
		st := b.Status(nil, confNow)
		if len(st.Conditions) != 1 || st.Conditions[0].Type != cbv1.ConditionReadyForProvisioning || st.Conditions[0].Status != metav1.ConditionTrue ||
			st.Conditions[0].Reason != cbv1.ReasonResolved || st.Conditions[0].Message != "Pod template resolved successfully" {
			t.Errorf("conditions %+v", st.Conditions)
		}
	})
	run("SetCondition > should update an existing condition", func(t *testing.T) {
		cb := ready2("a", 1)
		cb.Buffer.Status.Conditions = []metav1.Condition{{Type: cbv1.ConditionReadyForProvisioning, Status: metav1.ConditionFalse, Reason: "FirstReason", Message: "first"}}
		st := resolveOne(cb).Status(nil, confNow)
		if len(st.Conditions) != 1 || st.Conditions[0].Status != metav1.ConditionTrue || st.Conditions[0].Reason != cbv1.ReasonResolved {
			t.Errorf("conditions %+v, want the one condition updated", st.Conditions)
		}
	})
	run("SetCondition > should support multiple condition types", func(t *testing.T) {
		st := resolveOne(ready2("a", 1)).Status(&Placement{NewClaims: 1}, confNow)
		if len(st.Conditions) != 2 {
			t.Errorf("conditions %+v, want ReadyForProvisioning and Provisioning", st.Conditions)
		}
	})
	run("SetCondition > should set observed generation", func(t *testing.T) {
		cb := ready2("a", 1)
		cb.Buffer.Generation = 7
		st := resolveOne(cb).Status(nil, confNow)
		if st.Conditions[0].ObservedGeneration != 7 {
			t.Errorf("observedGeneration %d, want 7", st.Conditions[0].ObservedGeneration)
		}
	})
}

// ready2 is Karpenter's test.ReadyBuffer: a buffer of n chunks in default
// whose template resolved.
func ready2(name string, n int32) *cluster.CapacityBuffer {
	return readyIn(name, "default", n)
}

func readyIn(name, ns string, n int32) *cluster.CapacityBuffer {
	b := buffer(name, cbv1.CapacityBufferSpec{PodTemplateRef: &cbv1.LocalObjectRef{Name: name}, Replicas: new(n)})
	b.Namespace = ns
	b.UID = types.UID("uid-" + ns + "-" + name)
	return &cluster.CapacityBuffer{Buffer: b, Template: &corev1.PodTemplateSpec{}, TemplateGeneration: 1}
}

func TestConformanceProvisioningBuffers(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "core/provisioning", File: "pkg/controllers/provisioning/buffers_test.go", Spec: spec}, body)
	}
	annotated := func(ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt", Namespace: "default", Annotations: ann}}
	}
	realPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("real-" + name)}}
	}
	run("bufferKeyOf > should return empty string for nil pod", func(t *testing.T) {
		if got := KeyOf(nil); got != "" {
			t.Errorf("KeyOf(nil) = %q", got)
		}
	})
	run("bufferKeyOf > should return empty string for non-virtual pod", func(t *testing.T) {
		if got := KeyOf(realPod("real")); got != "" {
			t.Errorf("KeyOf = %q", got)
		}
	})
	run("bufferKeyOf > should return empty string when namespace annotation is missing", func(t *testing.T) {
		p := annotated(map[string]string{cbv1.FakePodAnnotationKey: cbv1.FakePodAnnotationValue, cbv1.BufferNameAnnotation: "my-buffer"})
		if got := KeyOf(p); got != "" {
			t.Errorf("KeyOf = %q, want empty", got)
		}
	})
	run("bufferKeyOf > should return empty string when name annotation is missing", func(t *testing.T) {
		p := annotated(map[string]string{cbv1.FakePodAnnotationKey: cbv1.FakePodAnnotationValue, cbv1.BufferNamespaceAnnotation: "default"})
		if got := KeyOf(p); got != "" {
			t.Errorf("KeyOf = %q, want empty", got)
		}
	})
	run("bufferKeyOf > should return namespace/name for complete virtual pod", func(t *testing.T) {
		p := annotated(map[string]string{cbv1.FakePodAnnotationKey: cbv1.FakePodAnnotationValue, cbv1.BufferNameAnnotation: "my-buffer", cbv1.BufferNamespaceAnnotation: "default"})
		if got := KeyOf(p); got != "default/my-buffer" {
			t.Errorf("KeyOf = %q, want default/my-buffer", got)
		}
	})
	run("IsVirtualPod > should return false for nil pod", func(t *testing.T) {
		if IsVirtual(nil) {
			t.Error("IsVirtual(nil)")
		}
	})
	run("IsVirtualPod > should return false for pod without annotations", func(t *testing.T) {
		if IsVirtual(realPod("real")) {
			t.Error("IsVirtual of a real pod")
		}
	})
	run("IsVirtualPod > should return true for virtual pod", func(t *testing.T) {
		if !IsVirtual(annotated(map[string]string{cbv1.FakePodAnnotationKey: "true"})) {
			t.Error("not virtual")
		}
	})
	run("IsVirtualPod > should return false for pod with other annotations only", func(t *testing.T) {
		if IsVirtual(annotated(map[string]string{"other": "value"})) {
			t.Error("virtual")
		}
	})

	podsOf := func(cb *cluster.CapacityBuffer) []*corev1.Pod { return resolveOne(cb).Pods }
	run("classifyBufferPods > should bucket virtual pods by buffer namespace/name across existing and new nodes", func(t *testing.T) {
		a, b := podsOf(ready2("a", 3)), podsOf(ready2("b", 2))
		got := Place(&scheduling.Results{
			Existing:      map[string][]*corev1.Pod{"node": {a[0], a[1]}},
			NewNodeClaims: []*scheduling.NewNodeClaim{{Pods: []*corev1.Pod{a[2], b[0], b[1]}}},
		})
		if pa, pb := got["default/a"], got["default/b"]; pa == nil || pb == nil || pa.Existing != 2 || pa.NewClaims != 1 || pb.Existing != 0 || pb.NewClaims != 2 {
			t.Errorf("placements %v", got)
		}
		if r := resolveOne(ready2("a", 3)).Replicas; r != 3 {
			t.Errorf("desired replicas %d, want 3", r)
		}
	})
	run("classifyBufferPods > should ignore real pods", func(t *testing.T) {
		if got := Place(&scheduling.Results{Existing: map[string][]*corev1.Pod{"node": {realPod("real")}}}); len(got) != 0 {
			t.Errorf("placements %v, want none", got)
		}
	})
	run("classifyBufferPods > should distinguish buffers with the same name in different namespaces", func(t *testing.T) {
		a, b := podsOf(readyIn("buffer", "ns-a", 2)), podsOf(readyIn("buffer", "ns-b", 3))
		got := Place(&scheduling.Results{
			Existing:      map[string][]*corev1.Pod{"node": {a[0], b[0], b[1]}},
			NewNodeClaims: []*scheduling.NewNodeClaim{{Pods: []*corev1.Pod{a[1], b[2]}}},
		})
		if pa, pb := got["ns-a/buffer"], got["ns-b/buffer"]; pa == nil || pb == nil || pa.Existing != 1 || pa.NewClaims != 1 || pb.Existing != 2 || pb.NewClaims != 1 {
			t.Errorf("placements %v", got)
		}
	})

	provisioning := func(b *Buffer, p *Placement) *metav1.Condition {
		st := b.Status(p, confNow)
		return meta.FindStatusCondition(st.Conditions, cbv1.ConditionProvisioning)
	}
	want := func(t *testing.T, c *metav1.Condition, status metav1.ConditionStatus, reason string) {
		t.Helper()
		if c == nil || c.Status != status || c.Reason != reason {
			t.Errorf("Provisioning %+v, want %s/%s", c, status, reason)
		}
	}
	run("computeProvisioningCondition > should return True/FitsExistingCapacity when all pods fit", func(t *testing.T) {
		want(t, provisioning(resolveOne(ready2("web", 3)), &Placement{Existing: 3}), metav1.ConditionTrue, cbv1.ReasonFitsExistingCapacity)
	})
	run("computeProvisioningCondition > should return False/RequiresNewCapacity when new nodes are needed", func(t *testing.T) {
		want(t, provisioning(resolveOne(ready2("web", 3)), &Placement{Existing: 1, NewClaims: 2}), metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity)
	})
	run("computeProvisioningCondition > should return False/NotReadyForProvisioning when buffer is not ready", func(t *testing.T) {
		cb := ready2("web", 3)
		cb.Template, cb.NotFound = nil, true
		want(t, provisioning(resolveOne(cb), nil), metav1.ConditionFalse, cbv1.ReasonNotReadyForProvisioning)
	})
	run("computeProvisioningCondition > should return False/BufferEmpty when replicas is zero", func(t *testing.T) {
		want(t, provisioning(resolveOne(ready2("web", 0)), nil), metav1.ConditionFalse, cbv1.ReasonBufferEmpty)
	})
	run("computeProvisioningCondition > should return nil when ready but no results observed", func(t *testing.T) {
		if c := provisioning(resolveOne(ready2("web", 3)), nil); c != nil {
			t.Errorf("Provisioning %+v, want none", c)
		}
	})
	run("computeProvisioningCondition with scalableRef buffer > should return True/FitsExistingCapacity for scalableRef buffer when all pods fit", func(t *testing.T) {
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("scalable", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d"), Replicas: new(int32(2))}), Template: tmpl(), ScalableReplicas: 2})
		want(t, provisioning(b, &Placement{Existing: 2}), metav1.ConditionTrue, cbv1.ReasonFitsExistingCapacity)
	})
	run("computeProvisioningCondition with scalableRef buffer > should return False/RequiresNewCapacity for scalableRef buffer when new nodes needed", func(t *testing.T) {
		b := resolveOne(&cluster.CapacityBuffer{Buffer: inDefault("scalable", cbv1.CapacityBufferSpec{ScalableRef: deploymentRef("d"), Replicas: new(int32(3))}), Template: tmpl(), ScalableReplicas: 3})
		want(t, provisioning(b, &Placement{Existing: 1, NewClaims: 2}), metav1.ConditionFalse, cbv1.ReasonRequiresNewCapacity)
	})

	// bufferPodCountsFromResults: Karpless keys the existing capacity by
	// the simulation's node name, Karpenter by provider ID.
	run("bufferPodCountsFromResults > should count virtual pods per providerID on existing nodes", func(t *testing.T) {
		a, b := podsOf(ready2("a", 3)), podsOf(ready2("b", 2))
		got := Hosts(&scheduling.Results{
			Existing:      map[string][]*corev1.Pod{"node-a": {a[0], a[1], realPod("real-pod")}, "node-b": {b[0], b[1]}},
			NewNodeClaims: []*scheduling.NewNodeClaim{{Pods: []*corev1.Pod{a[2]}}},
		})
		if got["node-a"] != 2 || got["node-b"] != 2 || len(got) != 2 {
			t.Errorf("hosts %v, want node-a:2 node-b:2", got)
		}
	})
	run("bufferPodCountsFromResults > should return empty map for empty results", func(t *testing.T) {
		if got := Hosts(&scheduling.Results{}); len(got) != 0 {
			t.Errorf("hosts %v", got)
		}
	})
	run("bufferPodCountsFromResults > should return empty map when only real pods are present", func(t *testing.T) {
		if got := Hosts(&scheduling.Results{Existing: map[string][]*corev1.Pod{"node-a": {realPod("real")}}}); len(got) != 0 {
			t.Errorf("hosts %v", got)
		}
	})

	// filterVirtualPodErrors and filterVirtualPodMapping: what the pass
	// reports about real pods (Events, nominations, errors) is
	// WithoutVirtual of what the simulation placed or failed.
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	byKey := func(in map[string][]*corev1.Pod) map[string][]*corev1.Pod {
		out := map[string][]*corev1.Pod{}
		for k, pods := range in {
			if real := WithoutVirtual(pods); len(real) > 0 {
				out[k] = real
			}
		}
		return out
	}
	run("filterVirtualPodErrors > should remove virtual pods from error map", func(t *testing.T) {
		v := podsOf(ready2("web", 2))
		if got := names(WithoutVirtual([]*corev1.Pod{v[0], v[1], realPod("real")})); !slices.Equal(got, []string{"real"}) {
			t.Errorf("kept %v, want the real pod", got)
		}
	})
	run("filterVirtualPodErrors > should return empty map when all pods are virtual", func(t *testing.T) {
		if got := WithoutVirtual(podsOf(ready2("web", 2))); len(got) != 0 {
			t.Errorf("kept %v", names(got))
		}
	})
	run("filterVirtualPodErrors > should return all pods when none are virtual", func(t *testing.T) {
		if got := WithoutVirtual([]*corev1.Pod{realPod("a"), realPod("b")}); len(got) != 2 {
			t.Errorf("kept %v", names(got))
		}
	})
	run("filterVirtualPodErrors > should handle empty input", func(t *testing.T) {
		if got := WithoutVirtual(nil); len(got) != 0 {
			t.Errorf("kept %v", names(got))
		}
	})
	run("filterVirtualPodMapping > should remove virtual pods from pod slices", func(t *testing.T) {
		v := podsOf(ready2("web", 2))
		got := byKey(map[string][]*corev1.Pod{"nodepool-a": {v[0], realPod("real"), v[1]}})
		if len(got) != 1 || !slices.Equal(names(got["nodepool-a"]), []string{"real"}) {
			t.Errorf("got %v", got)
		}
	})
	run("filterVirtualPodMapping > should drop keys entirely when only virtual pods remain", func(t *testing.T) {
		v := podsOf(ready2("web", 2))
		got := byKey(map[string][]*corev1.Pod{"nodepool-a": {v[0], v[1]}, "nodepool-b": {realPod("real")}})
		if _, ok := got["nodepool-a"]; len(got) != 1 || ok || got["nodepool-b"] == nil {
			t.Errorf("got %v", fmt.Sprint(got))
		}
	})
	run("filterVirtualPodMapping > should return empty map when all pods are virtual", func(t *testing.T) {
		if got := byKey(map[string][]*corev1.Pod{"nodepool-a": podsOf(ready2("web", 2))}); len(got) != 0 {
			t.Errorf("got %v", got)
		}
	})
	run("filterVirtualPodMapping > should handle empty input", func(t *testing.T) {
		if got := byKey(map[string][]*corev1.Pod{}); len(got) != 0 {
			t.Errorf("got %v", got)
		}
	})
}
