package cluster_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/cluster"
)

func replica(name, cpu string, tolerate int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: new(true)}}},
		Spec: corev1.PodSpec{
			NodeName:     "node-1",
			NodeSelector: map[string]string{"zone": "a"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
			}}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: new(tolerate)}},
			Containers: []corev1.Container{{Name: "app", Image: "img", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			}}},
		},
	}
}

// TestTrimmerShares: pods alike share their parts, pods that differ do
// not, and every trimmed pod equals what TrimPod makes of it.
func TestTrimmerShares(t *testing.T) {
	tr := cluster.NewTrimmer()
	a, b := replica("a", "100m", 300), replica("b", "100m", 300)
	c, d := replica("c", "200m", 300), replica("d", "100m", 60)
	ta, tb, tc, td := tr.Pod(a), tr.Pod(b), tr.Pod(c), tr.Pod(d)
	for _, p := range []struct{ in, out *corev1.Pod }{{a, ta}, {b, tb}, {c, tc}, {d, td}} {
		if !equality.Semantic.DeepEqual(cluster.TrimPod(p.in), p.out) {
			t.Errorf("%s: trimmed differently from TrimPod", p.in.Name)
		}
	}
	if &ta.Spec.Containers[0] != &tb.Spec.Containers[0] || &ta.Spec.Tolerations[0] != &tb.Spec.Tolerations[0] ||
		&ta.OwnerReferences[0] != &tb.OwnerReferences[0] || ta.Spec.Affinity != tb.Spec.Affinity {
		t.Error("two replicas alike do not share their containers, tolerations, owner and affinity")
	}
	if &ta.Spec.Containers[0] == &tc.Spec.Containers[0] {
		t.Error("pods requesting different CPU share containers")
	}
	if &ta.Spec.Tolerations[0] == &td.Spec.Tolerations[0] {
		t.Error("pods tolerating for different times share tolerations")
	}
	if &ta.Spec.Containers[0] != &td.Spec.Containers[0] {
		t.Error("containers alike not shared when only the tolerations differ")
	}
}
