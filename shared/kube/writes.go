package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// The writes every function makes to NodeClaims and Nodes, each written
// once with one rule for an object that is gone or changed meanwhile:
//   - a write to this very object (its UID) never lands on a namesake;
//   - a delete whose object is gone already has done its job (nil);
//   - an update re-reads and retries on conflict; an object gone is
//     reported as NotFound (IsGone), for the caller to decide.

// IsGone reports an error saying the object written is not there (any more).
func IsGone(err error) bool { return apierrors.IsNotFound(err) }

// DeleteNodeClaim deletes this very claim (UID precondition). NotFound and
// the precondition's 409 (the name now belongs to another claim; a DELETE
// answers 409 for nothing else) both mean the claim is gone: nil.
func (c *Clients) DeleteNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) error {
	err := c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &nc.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
	}
	return nil
}

// UpdateNodeClaimStatus applies mutate to the latest copy of this very
// claim and writes its status, retrying on conflicts; on success, mutate
// is applied to nc too. A claim gone, or replaced by a namesake, is
// NotFound (IsGone).
func (c *Clients) UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim, mutate func(*karpv1.NodeClaim)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != nc.UID {
			return apierrors.NewNotFound(karpv1.Resource("nodeclaims"), nc.Name)
		}
		mutate(cur)
		_, err = c.NodeClaims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("updating status of nodeclaim %s: %w", nc.Name, err)
	}
	mutate(nc)
	return nil
}

// UpdateNodeClaimStatusFromCopy is UpdateNodeClaimStatus for a caller
// whose copy's status is the server's as read (a snapshot's, changed only
// by mirrored writes): the first try writes mutate on that copy, whose
// resourceVersion makes the API server refuse it (409) if the claim, or a
// namesake, changed since, and only then is the latest read. A claim
// unchanged since it was read costs one request instead of two.
func (c *Clients) UpdateNodeClaimStatusFromCopy(ctx context.Context, nc *karpv1.NodeClaim, mutate func(*karpv1.NodeClaim)) error {
	if nc.ResourceVersion == "" {
		return c.UpdateNodeClaimStatus(ctx, nc, mutate)
	}
	cur := nc.DeepCopy()
	mutate(cur)
	_, err := c.NodeClaims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return c.UpdateNodeClaimStatus(ctx, nc, mutate)
	}
	if err != nil {
		return fmt.Errorf("updating status of nodeclaim %s: %w", nc.Name, err)
	}
	mutate(nc)
	return nil
}

// AnnotateNodeClaim sets each annotation of this very claim (nil removes
// it) in one merge patch carrying the UID, so a namesake refuses it, and
// mirrors them on nc. A claim gone, or replaced by a namesake, is
// NotFound (IsGone).
func (c *Clients) AnnotateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim, annotations map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": nc.UID, "annotations": annotations}})
	if err != nil {
		return fmt.Errorf("encoding annotations of nodeclaim %s: %w", nc.Name, err)
	}
	if _, err := c.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if uidRefused(err) {
			err = apierrors.NewNotFound(karpv1.Resource("nodeclaims"), nc.Name)
		}
		return fmt.Errorf("annotating nodeclaim %s: %w", nc.Name, err)
	}
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		if v == nil {
			delete(nc.Annotations, k)
		} else {
			nc.Annotations[k] = *v
		}
	}
	return nil
}

// LabelNodeClaim sets each label of this very claim (nil removes it) in one
// merge patch carrying the UID, as AnnotateNodeClaim does, and mirrors
// them on nc. A claim gone, or replaced by a namesake, is NotFound (IsGone).
func (c *Clients) LabelNodeClaim(ctx context.Context, nc *karpv1.NodeClaim, labels map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": nc.UID, "labels": labels}})
	if err != nil {
		return fmt.Errorf("encoding labels of nodeclaim %s: %w", nc.Name, err)
	}
	if _, err := c.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if uidRefused(err) {
			err = apierrors.NewNotFound(karpv1.Resource("nodeclaims"), nc.Name)
		}
		return fmt.Errorf("labelling nodeclaim %s: %w", nc.Name, err)
	}
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range labels {
		if v == nil {
			delete(nc.Labels, k)
		} else {
			nc.Labels[k] = *v
		}
	}
	return nil
}

// LabelNode sets each label of a node (nil removes it) in one merge patch;
// a node gone needs nothing.
func (c *Clients) LabelNode(ctx context.Context, name string, labels map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("encoding labels of node %s: %w", name, err)
	}
	if _, err := c.Core.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("labelling node %s: %w", name, err)
	}
	return nil
}

// uidRefused reports the API server's answer to a patch whose metadata.uid
// is not the object's: 422, "metadata.uid: field is immutable".
func uidRefused(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	return slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Field == "metadata.uid" })
}

// TaintDisrupted adds karpenter.sh/disrupted:NoSchedule to the node named
// (stamped now) unless it has it, and returns the node as written or
// found, and whether this call added the taint. A node gone is NotFound
// (IsGone).
func (c *Clients) TaintDisrupted(ctx context.Context, name string, now time.Time) (node *corev1.Node, added bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if wellknown.IsDisrupted(n) {
			node, added = n, false
			return nil
		}
		t := wellknown.DisruptedNoScheduleTaint
		t.TimeAdded = &metav1.Time{Time: now}
		n.Spec.Taints = append(n.Spec.Taints, t)
		if n, err = c.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		node, added = n, true
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("tainting node %s: %w", name, err)
	}
	return node, added, nil
}

// UntaintDisrupted removes karpenter.sh/disrupted:NoSchedule from this very
// node unless it is being deleted meanwhile (termination wants the taint
// then); a node gone needs nothing.
func (c *Clients) UntaintDisrupted(ctx context.Context, node *corev1.Node) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Core.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.UID != node.UID || n.DeletionTimestamp != nil || !wellknown.IsDisrupted(n) {
			return nil
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) })
		_, err = c.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("untainting node %s: %w", node.Name, err)
	}
	return nil
}
