package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// FieldManager is the server-side apply field manager of everything Karpless applies.
const FieldManager = "karpless"

// ApplyCRDs server-side applies the CRDs and waits until each is
// Established. Applying an unchanged CRD is a no-op, so it is safe to repeat.
func ApplyCRDs(ctx context.Context, client apiextensionsclient.Interface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		obj := crd.DeepCopy()
		obj.APIVersion, obj.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		obj.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		body, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding CRD %s: %w", crd.Name, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, client, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}
