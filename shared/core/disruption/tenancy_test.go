package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestDedicatedNodesConsolidate: a NodePool of dedicated tenancy
// consolidates as any other (the types can be launched dedicated, as
// Karpenter's instance types require tenancy In [default, dedicated]),
// and the replacement keeps the pool's tenancy; the prefilter does not
// take the candidate for hopeless.
func TestDedicatedNodesConsolidate(t *testing.T) {
	const tenancy = wellknown.InstanceTenancyLabel
	f := newFixture(t)
	for _, it := range f.types {
		it.Labels[tenancy] = "default"
		it.LabelChoices = map[string][]string{tenancy: {"default", "dedicated"}}
	}
	np := f.pool()
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: tenancy, Operator: corev1.NodeSelectorOpIn, Values: []string{"dedicated"}})
	nc := f.node("big", "m.4xlarge", "test-1a", "on-demand")
	nc.Labels[tenancy] = "dedicated"
	f.pod("p1", "big", "1", "2Gi")

	c := newCluster(f.input())
	cands, _ := c.candidates(SingleNodeConsolidation, nil)
	if len(cands) != 1 {
		t.Fatalf("%d candidates", len(cands))
	}
	if why := c.newWorld("").room().hopeless(cands[0]); why != "" {
		t.Fatalf("pruned as hopeless: %s", why)
	}
	cmd := mustCommand(t, Compute(f.input()), SingleNodeConsolidation)
	if cmd.Decision() != "replace" || cmd.PriceAfter != 0.10 {
		t.Fatalf("want a replacement by m.large, got %s at $%.2f/h", cmd, cmd.PriceAfter)
	}
	if got := reqGet(cmd.Replacements[0], tenancy); got.Len() != 1 || !got.Has("dedicated") {
		t.Errorf("replacement requires tenancy %s, want dedicated", got)
	}
}
