package kube

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// finalizerWrite is one finalizer added to or removed from an object: the
// object as last read, how to read it again and how to update it.
type finalizerWrite[T any, P object[T]] struct {
	obj    P
	kind   string
	get    func(ctx context.Context, name string) (P, error)
	update func(ctx context.Context, obj P) (P, error)
}

// setFinalizer is the one way Karpless adds or removes a finalizer: on a
// fresh read of this very object (by UID), written with an update that
// carries the resourceVersion read, so a concurrent change to the list is
// a conflict, retried, never overwritten (Karpenter patches with an
// optimistic lock for the same reason). It writes only when the list would
// change, and adds nothing to an object being deleted (the API server
// refuses new finalizers then). An object gone, or replaced by a namesake,
// needs nothing: false, nil. It reports whether it wrote.
func setFinalizer[T any, P object[T]](ctx context.Context, w finalizerWrite[T, P], finalizer string, present bool) (bool, error) {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := w.get(ctx, w.obj.GetName())
		if err != nil {
			return err
		}
		fs := cur.GetFinalizers()
		if cur.GetUID() != w.obj.GetUID() || slices.Contains(fs, finalizer) == present {
			return nil
		}
		if present && cur.GetDeletionTimestamp() != nil {
			return nil
		}
		next := P(cur.DeepCopy())
		if present {
			next.SetFinalizers(append(slices.Clone(fs), finalizer))
		} else {
			next.SetFinalizers(slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == finalizer }))
		}
		if _, err := w.update(ctx, next); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		verb := "removing the finalizer of"
		if present {
			verb = "adding the finalizer to"
		}
		return false, fmt.Errorf("%s %s %s: %w", verb, w.kind, w.obj.GetName(), err)
	}
	return wrote, nil
}

// RemoveNodeClaimFinalizer drops Karpenter's termination finalizer from
// this very claim; a claim gone needs nothing.
func (c *Clients) RemoveNodeClaimFinalizer(ctx context.Context, nc *karpv1.NodeClaim) error {
	_, err := setFinalizer(ctx, c.nodeClaimFinalizer(nc), wellknown.TerminationFinalizer, false)
	return err
}

func (c *Clients) nodeClaimFinalizer(nc *karpv1.NodeClaim) finalizerWrite[karpv1.NodeClaim, *karpv1.NodeClaim] {
	return finalizerWrite[karpv1.NodeClaim, *karpv1.NodeClaim]{
		obj: nc, kind: "nodeclaim",
		get: func(ctx context.Context, name string) (*karpv1.NodeClaim, error) {
			return c.NodeClaims.Get(ctx, name, metav1.GetOptions{})
		},
		update: func(ctx context.Context, o *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
			return c.NodeClaims.Update(ctx, o, metav1.UpdateOptions{})
		},
	}
}

// SetEC2NodeClassFinalizer adds (present) or removes Karpenter's
// karpenter.k8s.aws/termination finalizer on this very EC2NodeClass, and
// reports whether it wrote. The finalizer is the one a Karpenter
// installation adds, so a class Karpenter left behind is honoured as is.
// A class gone needs nothing; a class being deleted gets no new finalizer.
func (c *Clients) SetEC2NodeClassFinalizer(ctx context.Context, nc *awsv1.EC2NodeClass, present bool) (bool, error) {
	return setFinalizer(ctx, finalizerWrite[awsv1.EC2NodeClass, *awsv1.EC2NodeClass]{
		obj: nc, kind: "ec2nodeclass",
		get: func(ctx context.Context, name string) (*awsv1.EC2NodeClass, error) {
			return c.EC2NodeClasses.Get(ctx, name, metav1.GetOptions{})
		},
		update: func(ctx context.Context, o *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
			return c.EC2NodeClasses.Update(ctx, o, metav1.UpdateOptions{})
		},
	}, wellknown.AWSTerminationFinalizer, present)
}
