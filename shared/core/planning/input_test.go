package planning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPromised ports Karpenter's state node rule for a node that is not
// initialized (its issue #1459): each resource the node reports as zero,
// or not at all, counts at its NodeClaim's value; what it reports as more
// than zero counts as reported.
func TestPromised(t *testing.T) {
	q := resource.MustParse
	gpu := corev1.ResourceName("nvidia.com/gpu")
	for _, tc := range []struct {
		name        string
		node, claim corev1.ResourceList
		want        corev1.ResourceList
	}{
		{"a GPU before its device plugin runs", corev1.ResourceList{corev1.ResourceCPU: q("1930m"), gpu: q("0")}, corev1.ResourceList{corev1.ResourceCPU: q("1900m"), gpu: q("1")},
			corev1.ResourceList{corev1.ResourceCPU: q("1930m"), gpu: q("1")}},
		{"a resource the node does not list yet", corev1.ResourceList{corev1.ResourceCPU: q("2")}, corev1.ResourceList{gpu: q("4")},
			corev1.ResourceList{corev1.ResourceCPU: q("2"), gpu: q("4")}},
		{"the node's own non-zero figure wins", corev1.ResourceList{gpu: q("2")}, corev1.ResourceList{gpu: q("4")},
			corev1.ResourceList{gpu: q("2")}},
		{"a node that reports nothing yet", nil, corev1.ResourceList{corev1.ResourceMemory: q("7Gi")},
			corev1.ResourceList{corev1.ResourceMemory: q("7Gi")}},
		{"a claim that promises nothing", corev1.ResourceList{corev1.ResourceCPU: q("2")}, nil,
			corev1.ResourceList{corev1.ResourceCPU: q("2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := promised(tc.node, tc.claim)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for name, want := range tc.want {
				if g := got[name]; g.Cmp(want) != 0 {
					t.Errorf("%s = %s, want %s", name, g.String(), want.String())
				}
			}
		})
	}
	node := corev1.ResourceList{gpu: q("0")}
	promised(node, corev1.ResourceList{gpu: q("1")})
	if g := node[gpu]; !g.IsZero() {
		t.Error("promised changed the node's own list")
	}
}
