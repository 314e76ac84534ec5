package testworld

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/kube"
)

// RemoveNodeClasses deletes every EC2NodeClass at once, their finalizers
// (karpenter.k8s.aws/termination, which the provisioner adds) dropped
// first, and waits until they are gone: a class left terminating would be
// finished by the next test's provisioner, its instance profile and
// launch templates deleted under that test. Tests only: a deployment
// must let the finalizer run.
func RemoveNodeClasses(ctx context.Context, c *kube.Clients) error {
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	for range 50 {
		l, err := c.EC2NodeClasses.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing ec2nodeclasses: %w", err)
		}
		if len(l.Items) == 0 {
			return nil
		}
		for _, nc := range l.Items {
			_, _ = c.EC2NodeClasses.Patch(ctx, nc.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
			_ = c.EC2NodeClasses.Delete(ctx, nc.Name, metav1.DeleteOptions{})
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("ec2nodeclasses still present after 2.5s")
}
