package static

import (
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/poolstatus"
)

// Changed reports whether a NodePool event (old nil for a creation) is
// work for static NodePools, as Karpenter v1.14's static controllers
// filter their NodePool watches: a static NodePool Karpless manages
// (judged, like controller-runtime's predicates, on the pool as it is now),
// created, or updated so that the provisioning controller
// (ReplicaOrStatusChanged) or the deprovisioning one (ReplicaCountChanged)
// reconciles it. A deletion is not: a pool being deleted neither creates
// nor deletes. The watcher starts the provisioner on it, which creates
// what a pool lacks; deleting what it has too many of is the disruption
// tick's.
func Changed(old, cur *karpv1.NodePool) bool {
	if cur == nil || !IsStatic(cur) || !poolstatus.Managed(cur) {
		return false
	}
	return old == nil || ReplicaOrStatusChanged(old, cur) || ReplicaCountChanged(old, cur)
}

// ReplicaOrStatusChanged is Karpenter's static provisioning predicate
// (HasNodePoolReplicaOrStatusChanged): the replicas changed (unset counts
// as 0), or the pool became Ready. Only becoming Ready: a pool that stops
// being Ready has nothing new to create.
func ReplicaOrStatusChanged(old, cur *karpv1.NodePool) bool {
	return ReplicaCountChanged(old, cur) || (!ready(old) && ready(cur))
}

// ReplicaCountChanged is Karpenter's static deprovisioning predicate
// (HasNodePoolReplicaCountChanged): the replicas changed, unset counting
// as 0.
func ReplicaCountChanged(old, cur *karpv1.NodePool) bool {
	return replicas(old) != replicas(cur)
}

func replicas(np *karpv1.NodePool) int64 {
	if np.Spec.Replicas == nil {
		return 0
	}
	return *np.Spec.Replicas
}

// ready reads the stored Ready condition (none: not Ready), as Karpenter
// does: it never recomputes the root condition from an informer's object.
func ready(np *karpv1.NodePool) bool {
	return meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady)
}
