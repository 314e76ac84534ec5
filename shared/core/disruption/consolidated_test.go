package disruption

import (
	"testing"

	"github.com/karpless/karpless/shared/core/wellknown"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConsolidatedSkipsTheSimulations(t *testing.T) {
	in := bigClusterOf(t, 40, 10, 0.85, 7, false)
	full := Compute(in)
	if full.Simulations == 0 {
		t.Fatal("the fixture should make consolidation simulate")
	}
	in.Options.Consolidated = true
	skipped := Compute(in)
	if skipped.Simulations != 0 {
		t.Fatalf("%d simulations while consolidated", skipped.Simulations)
	}
	if skipped.Command != nil && skipped.Command.Method.consolidation() {
		t.Fatalf("consolidated, yet %s", skipped.Command)
	}
	if skipped.NothingToConsolidate {
		t.Fatal("a skipped consolidation must not renew the consolidated state")
	}
	if full.Command == nil && !full.NothingToConsolidate {
		t.Fatal("a complete consolidation that found nothing must say so")
	}
}

func TestConsolidationState(t *testing.T) {
	in := bigClusterOf(t, 10, 5, 0.5, 3, false)
	base := ConsolidationState(in)
	if base != ConsolidationState(bigClusterOf(t, 10, 5, 0.5, 3, false)) {
		t.Fatal("the same cluster must give the same state")
	}
	for _, tc := range []struct {
		name   string
		change func(in *Input)
	}{
		{"a pod is bound elsewhere", func(in *Input) { in.Cluster.Pods[0].Spec.NodeName = "elsewhere" }},
		{"a pod appears", func(in *Input) {
			in.Cluster.Pods = append(in.Cluster.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "new"}})
		}},
		{"a node is deleting", func(in *Input) { in.Cluster.Nodes[0].DeletionTimestamp = &metav1.Time{} }},
		{"a nodeclaim turns consolidatable", func(in *Input) { in.Cluster.NodeClaims[0].Status.Conditions = nil }},
		{"a pod gains do-not-disrupt", func(in *Input) {
			in.Cluster.Pods[0].Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}},
		{"the nodepool changes", func(in *Input) { in.Cluster.NodePools[0].Generation++ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bigClusterOf(t, 10, 5, 0.5, 3, false)
			tc.change(in)
			if ConsolidationState(in) == base {
				t.Fatal("the state did not change")
			}
		})
	}
	// Pod status (readiness, IPs) does not matter to consolidation.
	in = bigClusterOf(t, 10, 5, 0.5, 3, false)
	in.Cluster.Pods[0].Status.PodIP = "10.0.0.9"
	if ConsolidationState(in) != base {
		t.Fatal("a pod's IP changed the state")
	}
}
