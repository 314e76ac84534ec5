package bootstrap

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestShadowInstallLeavesKarpentersCRDs: with Mode shadow the bootstrap
// refuses a cluster without Karpenter's CRDs, changing nothing, and on one
// with them installs the functions' RBAC and ConfigMaps but leaves the
// CRDs exactly as Karpenter's install left them.
func TestShadowInstallLeavesKarpentersCRDs(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)
	opts := OptionsFrom(config.Config{ClusterName: testCluster, Namespace: DefaultNamespace, Mode: config.ModeShadow})
	if !opts.Shadow {
		t.Fatal("MODE shadow did not reach the options")
	}
	_, err := Install(ctx, c, opts)
	if err == nil || !strings.Contains(err.Error(), "shadow mode runs beside Karpenter") {
		t.Fatalf("shadow Install without Karpenter's CRDs: %v", err)
	}
	if _, err := c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused Install created the ClusterRole: %v", err)
	}

	// Karpenter's CRDs, as its chart (Helm) installs them.
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range all {
		k := crd.DeepCopy()
		k.Labels = map[string]string{ManagedByLabel: "Helm"}
		if _, err := api.Create(ctx, k, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]string{}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, crd := range all {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil || !slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				return false, nil
			}
			before[crd.Name] = got.ResourceVersion
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStorage(t, c)
	res, err := Install(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != before[crd.Name] || got.Labels[ManagedByLabel] != "Helm" {
			t.Errorf("%s changed: resourceVersion %s -> %s, labels %v", crd.Name, before[crd.Name], got.ResourceVersion, got.Labels)
		}
		if !slices.Contains(res.Kept, "CustomResourceDefinition/"+crd.Name+" (shadow mode: Karpenter's)") {
			t.Errorf("Kept = %v, missing %s", res.Kept, crd.Name)
		}
	}
	if _, err := c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{}); err != nil {
		t.Errorf("the ClusterRole: %v", err)
	}
	for _, bad := range []Options{{Shadow: true, DefaultNodePool: true, ClusterName: testCluster, NodeRoleName: "r"}, {Shadow: true, RemoveUserObjects: true}} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "shadow mode") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	// The decision stores are there for the functions to update.
	for _, name := range ShadowStores() {
		cm, err := c.Core.CoreV1().ConfigMaps(DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || cm.Labels[ShadowStoreLabel] != "true" {
			t.Errorf("shadow store %s: %v %v", name, err, cm.GetLabels())
		}
	}
}
