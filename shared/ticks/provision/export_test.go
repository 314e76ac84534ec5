package provision

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/kube"
)

// FinalizeNodeClasses runs the pass's EC2NodeClass finalizer alone, on
// the classes and claims of this moment, so a test can kill it at each of
// its own calls without the rest of a pass.
func (p *Provisioner) FinalizeNodeClasses(ctx context.Context) error {
	p.prepare()
	l, err := p.Kube.EC2NodeClasses.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	claims, err := kube.AllNodeClaims(ctx, p.Kube)
	if err != nil {
		return err
	}
	for i := range l.Items {
		if err := p.finalizeNodeClasses(ctx, &invocation{}, []*awsv1.EC2NodeClass{&l.Items[i]}, claims); err != nil {
			return err
		}
	}
	return nil
}
