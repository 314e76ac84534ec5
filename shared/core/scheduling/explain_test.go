package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func TestExplain(t *testing.T) {
	gpu := mkPool("gpu", withTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule))
	arm := mkPool("arm", withReq(wellknown.ArchLabel, opIn, "arm64"), withLimit("cpu", "100"))
	n1 := mkNode("n1", "c.large", "test-1a", mkPod("bound", "1500m", "1Gi"))
	pod := mkPod("web", "1", "6Gi", preferredAffinity(5, expr(wellknown.InstanceFamilyLabel, opIn, "nope")))
	s := snapshot([]*karpv1.NodePool{gpu, arm})
	s.Nodes = []*Node{n1}
	e := Explain(s, pod, Provisioning())
	if !e.Placed || e.NodeClaim == nil || e.NodeClaim.NodePool != "arm" {
		t.Fatalf("outcome: %s", e.Outcome)
	}
	if len(e.Relaxed) != 1 || !strings.Contains(e.Relaxed[0], "preferred node affinity") {
		t.Fatalf("relaxed: %v", e.Relaxed)
	}
	if e.Nodes[0].Fits || !strings.Contains(e.Nodes[0].Reason, "not enough cpu") {
		t.Fatalf("node verdict: %+v", e.Nodes[0])
	}
	var gv, av NodePoolVerdict
	for _, v := range e.NodePools {
		switch v.NodePool {
		case "gpu":
			gv = v
		case "arm":
			av = v
		}
	}
	if gv.Fits || !strings.Contains(gv.Reason, "taint nvidia.com/gpu=true:NoSchedule") {
		t.Fatalf("gpu pool: %+v", gv)
	}
	cats := map[string]int{}
	for _, tv := range av.InstanceTypes {
		cats[tv.Category]++
	}
	// arm64 types: g.large (8Gi) fits the 6Gi pod? g.large has 8Gi, fits; g.xlarge fits.
	if cats["fits"] != 2 || cats["nodepool"] != 7 {
		t.Fatalf("arm pool categories %v", cats)
	}
	text := e.String()
	for _, want := range []string{"Pod default/web goes to a new NodeClaim of NodePool arm", "n1: not enough cpu", "7 instance types: NodePool arm requires kubernetes.io/arch In [arm64]", "after relaxing preferred node affinity"} {
		if !strings.Contains(text, want) {
			t.Fatalf("explanation lacks %q:\n%s", want, text)
		}
	}
	// An unplaceable pod.
	big := mkPod("big", "1", "600Gi")
	e = Explain(snapshot([]*karpv1.NodePool{mkPool("default")}), big, Provisioning())
	if e.Placed || !strings.Contains(e.Outcome, "cannot be placed: no instance type of NodePool default has 600Gi memory") {
		t.Fatalf("outcome %q", e.Outcome)
	}
	if tv := e.NodePools[0].InstanceTypes[0]; tv.Category != "resources" || !strings.Contains(tv.Reason, "pod needs 600Gi memory") {
		t.Fatalf("type verdict %+v", tv)
	}
}
