package static

import (
	"testing"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// TestChanged covers what Karpenter's static controllers filter out of
// their NodePool watches before the replica and status predicates: other
// providers' pools and dynamic ones.
func TestChanged(t *testing.T) {
	dynamic := func(np *karpv1.NodePool) { np.Spec.Replicas = nil }
	for _, c := range []struct {
		name     string
		old, cur *karpv1.NodePool
		want     bool
	}{
		{"a static pool created", nil, staticPool("s", 2), true},
		{"a static pool created with no replicas yet", nil, staticPool("s", 0), true},
		{"a dynamic pool created", nil, staticPool("d", 0, dynamic), false},
		{"another provider's static pool created", nil, staticPool("s", 2, unmanaged), false},
		{"another provider's static pool scaled", staticPool("s", 2, unmanaged), staticPool("s", 3, unmanaged), false},
		{"a dynamic pool made static", staticPool("s", 0, dynamic), staticPool("s", 3), true},
		{"a static pool made dynamic", staticPool("s", 3), staticPool("s", 0, dynamic), false},
		{"a static pool scaled to zero", staticPool("s", 3), staticPool("s", 0), true},
		{"a static pool becoming Ready", watchedPool(3, false), watchedPool(3, true), true},
		{"a static pool relabelled", staticPool("s", 3), staticPool("s", 3, func(np *karpv1.NodePool) { np.Labels = map[string]string{"team": "a"} }), false},
		{"a deletion", staticPool("s", 3), nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Changed(c.old, c.cur); got != c.want {
				t.Errorf("Changed %v, want %v", got, c.want)
			}
		})
	}
}
