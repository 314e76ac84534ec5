package crds_test

import (
	"context"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/karpless/karpless/shared/local/kubetest"
)

var capacityBufferGVR = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Resource: "capacitybuffers"}

func capacityBuffer() obj {
	return obj{"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer", "metadata": obj{}, "spec": obj{
		"podTemplateRef": obj{"name": "t"},
		"replicas":       int64(2),
	}}
}

// TestCapacityBufferCoversEveryField applies the full manifests, writes a
// status with every field, and checks that every field path came back and
// that the strategy is defaulted.
func TestCapacityBufferCoversEveryField(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	client := dyn(t, e).Resource(capacityBufferGVR).Namespace("default")
	root := crdSchema(t, "capacitybuffers.autoscaling.x-k8s.io")
	want, got := map[string]bool{}, map[string]bool{}
	spec, status := root.Properties["spec"], root.Properties["status"]
	schemaPaths(&spec, ".spec", want)
	schemaPaths(&status, ".status", want)
	for i, u := range readManifests(t, "testdata/capacitybuffer-full.yaml") {
		name := kubetest.Name(t) + "-" + string(rune('a'+i))
		u.SetName(name)
		created, err := client.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("applying document %d: %v", i, err)
		}
		t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		if s, _, _ := unstructured.NestedString(created.Object, "spec", "provisioningStrategy"); s != "buffer.x-k8s.io/active-capacity" {
			t.Errorf("%s: provisioningStrategy %q, want the default", name, s)
		}
		set(created.Object, obj{
			"conditions": list(obj{
				"type": "ReadyForProvisioning", "status": "True", "reason": "Resolved", "message": "Pod template resolved successfully",
				"lastTransitionTime": "2026-11-26T10:00:00Z", "observedGeneration": int64(1),
			}),
			"podTemplateRef": obj{"name": "worker-template"}, "podTemplateGeneration": int64(3),
			"replicas": int64(5), "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
		}, "status")
		back, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("writing status of %s: %v", name, err)
		}
		presentPaths(&spec, back.Object["spec"], ".spec", got)
		presentPaths(&status, back.Object["status"], ".status", got)
	}
	var missing []string
	for p := range want {
		if !got[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d of %d field paths not exercised: %v", len(missing), len(want), missing)
	}
}

// TestCapacityBufferValidationRules breaks each of the CapacityBuffer CRD's
// 2 CEL rules, and its bounds, once, expecting Karpenter's message.
func TestCapacityBufferValidationRules(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	client := dyn(t, e).Resource(capacityBufferGVR).Namespace("default")
	cases := []struct {
		name   string
		create obj
		want   string
	}{
		{"podTemplateRef without replicas or limits", del(capacityBuffer(), "spec", "replicas"), "If podTemplateRef is set, replicas or limits must also be set"},
		{"both refs", set(capacityBuffer(), obj{"kind": "Deployment", "name": "d"}, "spec", "scalableRef"), "You must define either PodTemplateRef or ScalableRef, but not both"},
		{"negative replicas", set(capacityBuffer(), int64(-1), "spec", "replicas"), "spec.replicas"},
		{"negative percentage", set(del(capacityBuffer(), "spec", "podTemplateRef"), int64(-5), "spec", "percentage"), "spec.percentage"},
		{"empty template name", set(capacityBuffer(), obj{"name": ""}, "spec", "podTemplateRef"), "spec.podTemplateRef.name"},
		{"scalableRef without kind", set(del(capacityBuffer(), "spec", "podTemplateRef"), obj{"name": "d"}, "spec", "scalableRef"), "spec.scalableRef.kind"},
		{"no spec", del(capacityBuffer(), "spec"), "spec"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: c.create}
			name := kubetest.Name(t)
			u.SetName(name)
			if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err == nil {
				_ = client.Delete(ctx, name, metav1.DeleteOptions{})
			} else {
				checkRejected(t, err, c.want)
				return
			}
			t.Fatalf("accepted; want rejection %q", c.want)
		})
	}
}
