package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/disruption"
	"github.com/karpless/karpless/shared/lifecycle"
	"github.com/karpless/karpless/shared/wellknown"
)

const mergePatch = types.MergePatchType

func isNotFound(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if apierrors.IsNotFound(e) {
			return true
		}
	}
	return apierrors.IsNotFound(err)
}

// patchAnnotations sets (or, for nil values, removes) annotations on a
// NodeClaim, and mirrors the change on the given copy. The patch carries
// the claim's UID, so it never lands on a namesake.
func (d *Disrupter) patchAnnotations(ctx context.Context, nc *karpv1.NodeClaim, vals map[string]*string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": nc.UID, "annotations": vals}})
	_, err := d.Kube.NodeClaims.Patch(ctx, nc.Name, mergePatch, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone (or replaced): nothing left to mark
		}
		return fmt.Errorf("annotating nodeclaim %s: %w", nc.Name, err)
	}
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	for k, v := range vals {
		if v == nil {
			delete(nc.Annotations, k)
		} else {
			nc.Annotations[k] = *v
		}
	}
	return nil
}

func hasDisruptedTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) })
}

// taint adds karpenter.sh/disrupted:NoSchedule to the node if missing.
func (d *Disrupter) taint(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := d.Kube.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasDisruptedTaint(n) {
			return nil
		}
		t := wellknown.DisruptedNoScheduleTaint
		t.TimeAdded = new(metav1.NewTime(d.Clock.Now()))
		n.Spec.Taints = append(n.Spec.Taints, t)
		_, err = d.Kube.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tainting node %s: %w", name, err)
	}
	return nil
}

// untaint removes karpenter.sh/disrupted:NoSchedule unless the node is
// being deleted meanwhile (termination wants it then).
func (d *Disrupter) untaint(ctx context.Context, node *corev1.Node) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := d.Kube.Core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.UID != node.UID || n.DeletionTimestamp != nil || !hasDisruptedTaint(n) {
			return nil
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) })
		_, err = d.Kube.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("untainting node %s: %w", node.Name, err)
	}
	return nil
}

func (d *Disrupter) setDisruptionReason(ctx context.Context, nc *karpv1.NodeClaim, reason karpv1.DisruptionReason) error {
	now := metav1.NewTime(d.Clock.Now())
	return d.updateStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		lifecycle.SetCondition(c, karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, string(reason), string(reason), now)
	})
}

func (d *Disrupter) clearDisruptionReason(ctx context.Context, nc *karpv1.NodeClaim) error {
	if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil {
		return nil
	}
	return d.updateStatus(ctx, nc, func(c *karpv1.NodeClaim) {
		meta.RemoveStatusCondition(&c.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
	})
}

// updateStatus writes mutate to the claim's status and, once written, to
// the caller's copy too; a claim already gone needs nothing.
func (d *Disrupter) updateStatus(ctx context.Context, nc *karpv1.NodeClaim, mutate func(*karpv1.NodeClaim)) error {
	err := lifecycle.UpdateStatus(ctx, d.Kube, nc, mutate)
	if isNotFound(err) {
		return nil
	}
	if err == nil {
		mutate(nc)
	}
	return err
}

// deleteClaim deletes a NodeClaim (this very one: UID precondition).
func (d *Disrupter) deleteClaim(ctx context.Context, nc *karpv1.NodeClaim) error {
	err := d.Kube.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &nc.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
	}
	return nil
}

func nodeNamed(in *disruption.Input, name string) *corev1.Node {
	for _, n := range in.Cluster.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
