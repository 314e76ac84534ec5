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

var nodeOverlayGVR = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1alpha1", Resource: "nodeoverlays"}

func nodeOverlay() obj {
	return obj{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": obj{}, "spec": obj{
		"requirements": list(req("node.kubernetes.io/instance-type", "In", "m5.large")),
		"price":        "0.5",
	}}
}

func noReq(r obj) obj { return set(nodeOverlay(), list(r), "spec", "requirements") }

// TestNodeOverlayCoversEveryField applies the full manifests, writes a
// status with every field, and checks that every field path came back.
func TestNodeOverlayCoversEveryField(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	client := dyn(t, e).Resource(nodeOverlayGVR)
	root := crdSchema(t, "nodeoverlays.karpenter.sh")
	want, got := map[string]bool{}, map[string]bool{}
	spec, status := root.Properties["spec"], root.Properties["status"]
	schemaPaths(&spec, ".spec", want)
	schemaPaths(&status, ".status", want)
	for i, u := range readManifests(t, "testdata/nodeoverlay-full.yaml") {
		name := kubetest.Name(t) + "-" + string(rune('a'+i))
		u.SetName(name)
		created, err := client.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("applying document %d: %v", i, err)
		}
		t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		set(created.Object, obj{"conditions": list(obj{
			"type": "ValidationSucceeded", "status": "False", "reason": "Conflict", "message": "conflict with another overlay",
			"lastTransitionTime": "2026-11-26T10:00:00Z", "observedGeneration": int64(1),
		})}, "status")
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

// TestNodeOverlayValidationRules breaks each of the NodeOverlay CRD's 8
// CEL rules, and the patterns and bounds Karpenter's users meet most,
// once, expecting Karpenter's message.
func TestNodeOverlayValidationRules(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	client := dyn(t, e).Resource(nodeOverlayGVR)
	cases := []struct {
		name   string
		create obj
		want   string
	}{
		// CEL rules (8)
		{"price and priceAdjustment", set(nodeOverlay(), "+10%", "spec", "priceAdjustment"), "cannot set both 'price' and 'priceAdjustment'"},
		{"capacity cpu", set(nodeOverlay(), obj{"cpu": "1"}, "spec", "capacity"), "invalid resource restricted"},
		{"NotIn without values", noReq(req("karpenter.k8s.aws/instance-family", "NotIn")), "requirements with operator 'NotIn' must have a value defined"},
		{"In without values", noReq(req("karpenter.k8s.aws/instance-family", "In")), "requirements with operator 'In' must have a value defined"},
		{"Gte with two values", noReq(req("karpenter.k8s.aws/instance-cpu", "Gte", "1", "2")), "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"},
		{"requirement karpenter.sh domain", noReq(req("karpenter.sh/custom", "Exists")), `label domain "karpenter.sh" is restricted`},
		{"requirement hostname", noReq(req("kubernetes.io/hostname", "In", "a")), `label "kubernetes.io/hostname" is restricted`},
		{"requirement karpenter.k8s.aws domain", noReq(req("karpenter.k8s.aws/capacity-reservation-id", "In", "cr-1")), `label domain "karpenter.k8s.aws" is restricted`},
		// Patterns and bounds
		{"price negative", set(nodeOverlay(), "-1", "spec", "price"), "spec.price"},
		{"priceAdjustment without sign", del(set(nodeOverlay(), "10%", "spec", "priceAdjustment"), "spec", "price"), "spec.priceAdjustment"},
		{"priceAdjustment below -100%", del(set(nodeOverlay(), "-150%", "spec", "priceAdjustment"), "spec", "price"), "spec.priceAdjustment"},
		{"weight 0", set(nodeOverlay(), int64(0), "spec", "weight"), "spec.weight"},
		{"weight above 10000", set(nodeOverlay(), int64(10001), "spec", "weight"), "spec.weight"},
		{"unknown operator", noReq(req("karpenter.k8s.aws/instance-cpu", "Above", "1")), "Unsupported value"},
		{"no requirements", del(nodeOverlay(), "spec", "requirements"), "spec.requirements"},
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

// TestNodeOverlayDocExamplesApply applies the adjustments Karpenter's docs
// show: the rules must not reject them.
func TestNodeOverlayDocExamplesApply(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	client := dyn(t, e).Resource(nodeOverlayGVR)
	for i, o := range []obj{
		del(set(nodeOverlay(), "+10%", "spec", "priceAdjustment"), "spec", "price"),
		del(set(nodeOverlay(), "-0.5", "spec", "priceAdjustment"), "spec", "price"),
		del(set(nodeOverlay(), "-15.5%", "spec", "priceAdjustment"), "spec", "price"),
		del(set(nodeOverlay(), "-100%", "spec", "priceAdjustment"), "spec", "price"),
		del(set(nodeOverlay(), "+1.2", "spec", "priceAdjustment"), "spec", "price"),
		set(nodeOverlay(), "5", "spec", "price"),
		set(set(nodeOverlay(), int64(10000), "spec", "weight"), obj{"smarter-devices/fuse": "1", "hugepages-1Gi": "2Gi"}, "spec", "capacity"),
		noReq(req("karpenter.sh/nodepool", "In", "default")),
		noReq(req("karpenter.k8s.aws/instance-memory", "Lte", "8192")),
		set(nodeOverlay(), list(), "spec", "requirements"),
	} {
		u := &unstructured.Unstructured{Object: o}
		name := kubetest.Name(t) + "-" + string(rune('a'+i))
		u.SetName(name)
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Errorf("example %d %v: %v", i, o["spec"], err)
			continue
		}
		_ = client.Delete(ctx, name, metav1.DeleteOptions{})
	}
}
