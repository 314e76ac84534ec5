package bootstrap

import (
	"errors"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestShadowGuardOnTheAPIServer: a shadow stack installed on a real API
// server, and the functions' clients wrapped in shadow mode's guard but
// holding an administrator's credentials, so that RBAC stops nothing and
// the guard is the only layer tested. Deleting a whole collection of
// ConfigMaps or Leases, reads that act (exec, attach, port-forward, the
// node, service and pod proxies) and writes to another karpless- object
// or the pause switch are refused before they leave, and the objects are
// as they were; the functions' own Lease and ConfigMaps are written.
func TestShadowGuardOnTheAPIServer(t *testing.T) {
	e := kubetest.Need(t, env)
	admin := e.Clients
	reset(t, admin)
	ctx := testCtx(t)
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		k := crd.DeepCopy()
		k.Labels = map[string]string{ManagedByLabel: "Helm"}
		if _, err := admin.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, k, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			t.Fatal(err)
		}
	}
	waitStorage(t, admin)
	if _, err := Install(ctx, admin, Options{ClusterName: testCluster, Shadow: true}); err != nil {
		t.Fatal(err)
	}
	ns := DefaultNamespace
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "karpless-someone-else", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := admin.Core.CoreV1().ConfigMaps(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := admin.Core.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Core.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}) })

	cfg := rest.CopyConfig(e.Cluster.RESTConfig)
	cfg.Wrap(shadow.Kube(ns, app.ShadowOwn()))
	guarded, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	configMaps := func() map[string]string {
		l, err := admin.Core.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, cm := range l.Items {
			out[cm.Name] = cm.ResourceVersion
		}
		return out
	}
	before := configMaps()
	for _, name := range []string{PauseConfigMap, PricingConfigMap, "karpless-someone-else"} {
		if before[name] == "" {
			t.Fatalf("ConfigMap %s missing before the test: %v", name, before)
		}
	}

	rc := guarded.Core.CoreV1().RESTClient()
	refused := map[string]error{
		"delete every ConfigMap of the namespace": guarded.Core.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		"delete every Lease of the namespace":     guarded.Core.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		"exec in a pod":                           rc.Get().Namespace("default").Resource("pods").Name("web").SubResource("exec").Param("command", "sh").Do(ctx).Error(),
		"attach to a pod":                         rc.Get().Namespace("default").Resource("pods").Name("web").SubResource("attach").Do(ctx).Error(),
		"port-forward to a pod":                   rc.Get().Namespace("default").Resource("pods").Name("web").SubResource("portforward").Do(ctx).Error(),
		"a pod's proxy":                           rc.Get().Namespace("default").Resource("pods").Name("web").SubResource("proxy").Suffix("admin").Do(ctx).Error(),
		"a node's kubelet through the proxy":      rc.Get().Resource("nodes").Name("ip-10-0-1-1").SubResource("proxy").Suffix("configz").Do(ctx).Error(),
		"a service through the proxy":             rc.Get().Namespace("default").Resource("services").Name("kubernetes:443").SubResource("proxy").Do(ctx).Error(),
	}
	cm := other.DeepCopy()
	cm.Data = map[string]string{"k": "overwritten"}
	_, refused["update another karpless- ConfigMap"] = guarded.Core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	refused["delete another karpless- ConfigMap"] = guarded.Core.CoreV1().ConfigMaps(ns).Delete(ctx, other.Name, metav1.DeleteOptions{})
	_, refused["create a karpless- ConfigMap of its own choosing"] = guarded.Core.CoreV1().ConfigMaps(ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "karpless-new", Namespace: ns}}, metav1.CreateOptions{})
	sw, err := admin.Core.CoreV1().ConfigMaps(ns).Get(ctx, PauseConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw.Data = map[string]string{"paused": "true"}
	_, refused["resume or pause through the switch"] = guarded.Core.CoreV1().ConfigMaps(ns).Update(ctx, sw, metav1.UpdateOptions{})
	for what, err := range refused {
		if !errors.Is(err, shadow.ErrRefused) {
			t.Errorf("%s: %v, want refused by the shadow guard", what, err)
		}
	}
	if after := configMaps(); len(after) != len(before) {
		t.Errorf("ConfigMaps changed: before %v, after %v", before, after)
	} else {
		for name, rv := range before {
			if after[name] != rv {
				t.Errorf("ConfigMap %s changed (resourceVersion %s -> %s)", name, rv, after[name])
			}
		}
	}

	// The functions' own objects are written.
	if _, err := guarded.Core.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ProvisioningLease, Namespace: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Errorf("the provisioning lease: %v", err)
	}
	for _, name := range append(StateConfigMaps(), ShadowStores()...) {
		cm, err := guarded.Core.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cm.Data = map[string]string{"written": "yes"}
		if _, err := guarded.Core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Errorf("updating its own %s: %v", name, err)
		}
	}
	_ = admin.Core.CoreV1().ConfigMaps(ns).Delete(ctx, other.Name, metav1.DeleteOptions{})
}
