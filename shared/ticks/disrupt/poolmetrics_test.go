package disrupt

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// TestPoolGauges: Karpenter's karpenter_nodepools_usage and
// karpenter_nodepools_limit values and resource_type labels, from
// status.resources and spec.limits (core pkg/controllers/metrics/nodepool):
// cores for cpu (fractions kept), whole units rounded up for the rest,
// names lower-cased with dashes as underscores.
func TestPoolGauges(t *testing.T) {
	q := resource.MustParse
	for name, tc := range map[string]struct {
		limits karpv1.Limits
		usage  corev1.ResourceList
		want   []string
	}{
		"nothing owned, no limits": {
			usage: corev1.ResourceList{"cpu": q("0"), "memory": q("0"), "pods": q("0"), "ephemeral-storage": q("0"), "nodes": q("0")},
			want: []string{
				"karpenter_nodepools_usage cpu 0", "karpenter_nodepools_usage ephemeral_storage 0", "karpenter_nodepools_usage memory 0",
				"karpenter_nodepools_usage nodes 0", "karpenter_nodepools_usage pods 0",
			},
		},
		"two nodes and a GPU": {
			usage: corev1.ResourceList{"cpu": q("3500m"), "memory": q("16Gi"), "ephemeral-storage": q("40G"), "nodes": q("2"), "nvidia.com/gpu": q("1"), "hugepages-2Mi": q("0")},
			want: []string{
				"karpenter_nodepools_usage cpu 3.5", "karpenter_nodepools_usage ephemeral_storage 4e+10", "karpenter_nodepools_usage hugepages_2mi 0",
				"karpenter_nodepools_usage memory 1.7179869184e+10", "karpenter_nodepools_usage nodes 2", "karpenter_nodepools_usage nvidia.com/gpu 1",
			},
		},
		"limits": {
			limits: karpv1.Limits{"cpu": q("1000"), "memory": q("1000Gi"), "nodes": q("10"), "nvidia.com/gpu": q("4")},
			usage:  corev1.ResourceList{"cpu": q("2")},
			want: []string{
				"karpenter_nodepools_usage cpu 2",
				"karpenter_nodepools_limit cpu 1000", "karpenter_nodepools_limit memory 1.073741824e+12", "karpenter_nodepools_limit nodes 10", "karpenter_nodepools_limit nvidia.com/gpu 4",
			},
		},
		"a fraction of a byte rounds up": {
			usage: corev1.ResourceList{"memory": q("1500m")},
			want:  []string{"karpenter_nodepools_usage memory 2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Limits: tc.limits}}
			var got []string
			for _, g := range poolGauges(np, tc.usage) {
				got = append(got, fmt.Sprintf("%s %s %v", g.name, g.resourceType, g.value))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("gauges\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
