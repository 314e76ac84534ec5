package v1

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func basePool() *NodePool {
	return &NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{
		ObjectMeta: ObjectMeta{Labels: map[string]string{"team": "a"}},
		Spec: NodeClaimTemplateSpec{
			NodeClassRef: &NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Taints:       []corev1.Taint{{Key: "a", Effect: "NoSchedule"}, {Key: "b", Effect: "NoSchedule"}},
			Requirements: []NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}},
			ExpireAfter:  MustParseNillableDuration("720h"),
		},
	}}}
}

func TestNodePoolHash(t *testing.T) {
	h := basePool().Hash()
	if h != basePool().Hash() {
		t.Fatal("hash is not deterministic")
	}
	same := []func(*NodePool){
		func(p *NodePool) {
			p.Spec.Template.Spec.Taints[0], p.Spec.Template.Spec.Taints[1] = p.Spec.Template.Spec.Taints[1], p.Spec.Template.Spec.Taints[0]
		},
		func(p *NodePool) { p.Spec.Template.Spec.Requirements[0].Values = []string{"arm64"} },
		func(p *NodePool) { p.Spec.Weight = new(int32(10)) },
		func(p *NodePool) { p.Spec.Disruption.Budgets = []Budget{{Nodes: "0"}} },
	}
	for i, m := range same {
		p := basePool()
		m(p)
		if p.Hash() != h {
			t.Errorf("change %d altered the hash but is not a static-drift field", i)
		}
	}
	differ := []func(*NodePool){
		func(p *NodePool) { p.Spec.Template.Labels["team"] = "b" },
		func(p *NodePool) { p.Spec.Template.Annotations = map[string]string{"x": "y"} },
		func(p *NodePool) { p.Spec.Template.Spec.Taints = p.Spec.Template.Spec.Taints[:1] },
		func(p *NodePool) {
			p.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "s", Effect: "NoSchedule"}}
		},
		func(p *NodePool) { p.Spec.Template.Spec.NodeClassRef.Name = "other" },
		func(p *NodePool) { p.Spec.Template.Spec.ExpireAfter = MustParseNillableDuration("24h") },
		func(p *NodePool) { p.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour} },
	}
	for i, m := range differ {
		p := basePool()
		m(p)
		if p.Hash() == h {
			t.Errorf("change %d did not alter the hash", i)
		}
	}
}
