package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
)

// recordRegistration records nc's registration outcome on its NodePool
// (poolstatus.RecordRegistration, given the NodePool's EC2NodeClass as
// now): first the buffer, in the NodePool's annotation, then the
// NodeRegistrationHealthy condition the buffer gives. Each write carries
// the resourceVersion of the NodePool it was computed from, so a tick
// running beside this one, or the disruption tick stamping the status,
// makes it read again and recompute instead of losing the other's write. A tick killed between the two writes leaves
// the outcome in the buffer; the next one finds the claim where it was
// (not yet deleted, not yet Registered), records nothing new (outcomes are
// keyed by NodeClaim UID) and writes the condition.
//
// A NodePool gone, or made again under the same name, is left as it is,
// as Karpenter leaves it.
func (l *Lifecycle) recordRegistration(ctx context.Context, nc *karpv1.NodeClaim, registered bool) error {
	name := nc.Labels[wellknown.NodePoolLabel]
	if name == "" {
		return nil
	}
	var before, after *metav1.Condition
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := l.Kube.NodePools.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !poolstatus.OwnedBy(nc, np) {
			return nil
		}
		class, err := l.nodeClass(ctx, np)
		if err != nil {
			return err
		}
		buf, status, _ := poolstatus.RecordRegistration(np, class, nc, registered, l.Clock.Now())
		if v := buf.Encode(); np.Annotations[poolstatus.RegistrationOutcomesAnnotation] != v {
			// The resourceVersion is the precondition: a NodePool changed
			// since it was read, or a namesake, refuses the patch (409).
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
				"resourceVersion": np.ResourceVersion,
				"annotations":     map[string]string{poolstatus.RegistrationOutcomesAnnotation: v},
			}})
			if err != nil {
				return err
			}
			if np, err = l.Kube.NodePools.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err
			}
		}
		if equality.Semantic.DeepEqual(np.Status, status) {
			return nil
		}
		before = meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
		after = meta.FindStatusCondition(status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
		np.Status = status
		_, err = l.Kube.NodePools.UpdateStatus(ctx, np, metav1.UpdateOptions{})
		return err
	})
	if kube.IsGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the registration outcome on nodepool %s: %w", name, err)
	}
	if after != nil && (before == nil || before.Status != after.Status) {
		l.Log.Info("nodepool registration health changed", "nodepool", name, "nodeclaim", nc.Name,
			"status", after.Status, "reason", after.Reason, "message", after.Message)
	}
	return nil
}

// nodeClass is np's EC2NodeClass, nil when there is none (or np names
// another provider's class).
func (l *Lifecycle) nodeClass(ctx context.Context, np *karpv1.NodePool) (*awsv1.EC2NodeClass, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || !poolstatus.Managed(np) {
		return nil, nil
	}
	class, err := l.Kube.EC2NodeClasses.Get(ctx, ref.Name, metav1.GetOptions{})
	if kube.IsGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ec2nodeclass %s: %w", ref.Name, err)
	}
	return class, nil
}
