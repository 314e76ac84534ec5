package bootstrap

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// installV1beta1Layout makes the CRD as Karpenter v1.0's chart leaves it
// before its storage version migration: v1beta1 and v1 served, v1 stored,
// converted by Karpenter's webhook, and storedVersions [v1beta1, v1].
func installV1beta1Layout(ctx context.Context, t *testing.T, c *kube.Clients, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	old := crd.DeepCopy()
	beta := *old.Spec.Versions[0].DeepCopy()
	beta.Name, beta.Storage = "v1beta1", false
	old.Spec.Versions = append([]apiextensionsv1.CustomResourceDefinitionVersion{beta}, old.Spec.Versions...)
	port := int32(8443)
	old.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "karpenter", Name: "karpenter", Port: &port}},
			ConversionReviewVersions: []string{"v1beta1", "v1"},
		},
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := api.Create(ctx, old, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Patch(ctx, old.Name, types.MergePatchType, []byte(`{"status":{"storedVersions":["v1beta1","v1"]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestInstallRefusesUnservedStoredVersions: a cluster whose CRDs still
// list v1beta1 in storedVersions (Karpenter v1.0) makes Install fail at
// once, naming the CRDs, the versions and the fix, before it changes
// anything (the conversion webhook included); after the documented fix,
// it installs.
func TestInstallRefusesUnservedStoredVersions(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	reset(t, c)
	ctx := testCtx(t)
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	api := c.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	var stale []string
	for _, crd := range all {
		if crd.Name == "nodeclaims.karpenter.sh" || crd.Name == "nodepools.karpenter.sh" {
			installV1beta1Layout(ctx, t, c, crd)
			stale = append(stale, crd.Name)
		}
	}
	// The generation counts changes of the spec (the API server's own
	// controllers keep writing the status for a while).
	before := map[string]int64{}
	for _, name := range stale {
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[name] = got.Generation
	}

	o := defaultOpts()
	o.Namespace = "karpless-stored"
	res, err := Install(ctx, c, o)
	if err == nil || !IsStoredVersions(err) {
		t.Fatalf("Install: %v", err)
	}
	for _, want := range []string{
		"CRD nodeclaims.karpenter.sh lists stored version v1beta1 in status.storedVersions [v1beta1 v1], which Karpless's CRD does not have (it has v1)",
		"CRD nodepools.karpenter.sh lists stored version v1beta1",
		"Nothing was changed.",
		"v1.0.6",
		`--subresource=status --type=merge -p '{"status":{"storedVersions":["v1"]}}'`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if len(res.Applied)+len(res.Created) > 0 {
		t.Errorf("result: %+v", res)
	}
	// Nothing changed: the CRDs (webhook and all), the namespace, the RBAC.
	for _, name := range stale {
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != before[name] || got.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || got.Labels[ManagedByLabel] != "" ||
			strings.Join(got.Status.StoredVersions, ",") != "v1beta1,v1" {
			t.Errorf("CRD %s changed: generation %d -> %d, conversion %s, labels %v, stored %v", name, before[name], got.Generation, got.Spec.Conversion.Strategy, got.Labels, got.Status.StoredVersions)
		}
		for _, mf := range got.ManagedFields {
			if mf.Manager == kube.FieldManager {
				t.Errorf("CRD %s has fields of %s: %+v", name, kube.FieldManager, mf)
			}
		}
	}
	if _, err := api.Get(ctx, "ec2nodeclasses.karpenter.k8s.aws", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("EC2NodeClass CRD: %v", err)
	}
	if _, err := c.Core.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace: %v", err)
	}
	if _, err := c.Core.RbacV1().ClusterRoles().Get(ctx, ClusterRoleName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole: %v", err)
	}

	// The fix, once every object is stored as v1 (there are none here).
	for _, name := range stale {
		if _, err := api.Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"storedVersions":["v1"]}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Install(ctx, c, o); err != nil {
		t.Fatalf("Install after the fix: %v", err)
	}
	for _, name := range stale {
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter || len(got.Spec.Versions) != 1 {
			t.Errorf("CRD %s after install: conversion %s, %d versions", name, got.Spec.Conversion.Strategy, len(got.Spec.Versions))
		}
	}
	checkInstalled(t, c, o)
	if _, err := Uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
}
