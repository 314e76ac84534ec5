package planning

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Bounded is the share of a backlog one pass provisions for: every pod when
// there are at most max, else the max oldest (by creation; namespace and
// name break ties, so that passes agree), in their given order, with how
// many are left for a later pass. Oldest first, so that a pod is never left
// behind by newer ones pass after pass. max <= 0 means no bound.
func Bounded(pods []*corev1.Pod, max int) (kept []*corev1.Pod, left int) {
	if max <= 0 || len(pods) <= max {
		return pods, 0
	}
	order := slices.Clone(pods)
	slices.SortStableFunc(order, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	chosen := make(map[*corev1.Pod]bool, max)
	for _, p := range order[:max] {
		chosen[p] = true
	}
	kept = make([]*corev1.Pod, 0, max)
	for _, p := range pods {
		if chosen[p] {
			kept = append(kept, p)
		}
	}
	return kept, len(pods) - max
}
