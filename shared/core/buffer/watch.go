package buffer

import (
	"k8s.io/apimachinery/pkg/api/meta"

	cbv1 "github.com/karpless/karpless/shared/apis/autoscaling/v1beta1"
)

// Changed reports whether a CapacityBuffer event (old nil for a buffer
// created, or first listed) asks for a provisioning pass. Karpenter's
// capacitybuffer controller reconciles every buffer created or changed
// and, once it resolved it, triggers the provisioner. Here the provisioner
// resolves buffers itself, so a buffer is work when its spec changed (a
// new generation: a status write, the provisioner's own included, is not
// one) and that generation is not resolved yet (Unresolved). A buffer
// being deleted is not: it holds no room the provisioner must make.
func Changed(old, cur *cbv1.CapacityBuffer) bool {
	if cur == nil || cur.DeletionTimestamp != nil {
		return false
	}
	if old != nil && old.Generation == cur.Generation {
		return false
	}
	return Unresolved(cur)
}

// Unresolved reports whether the buffer's spec as it is has not been
// resolved yet: its ReadyForProvisioning condition is missing or observed
// an older generation. Whoever resolves a buffer (the provisioner, or
// Karpenter's controller in shadow mode) writes the generation it
// resolved there.
func Unresolved(b *cbv1.CapacityBuffer) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, cbv1.ConditionReadyForProvisioning)
	return c == nil || c.ObservedGeneration < b.Generation
}
