package poolstatus

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/nodepool/counter/suite_test.go, ported
// whole through Status (status.resources and status.nodes as the
// disruption pass writes them). A deleted NodeClaim and Node are gone from
// the lists.
func TestConformanceNodePoolCounter(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/nodepool/counter", File: "pkg/controllers/nodepool/counter/suite_test.go", Spec: "Counter > " + spec}
	}
	seq := 0
	// pair is test.NodeClaimAndNode: a claim of pool with capacity and its
	// node, whose capacity is the claim's.
	pair := func(pool string, capacity corev1.ResourceList, provider bool) (*karpv1.NodeClaim, *corev1.Node) {
		seq++
		name := fmt.Sprintf("nc-%d", seq)
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool}}}
		nc.Status.Capacity = capacity
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool}}}
		if provider {
			nc.Status.ProviderID = wellknown.ProviderID("test-zone-1a", fmt.Sprintf("i-%017d", seq))
			node.Spec.ProviderID = nc.Status.ProviderID
		}
		node.Status.Capacity = capacity.DeepCopy()
		return nc, node
	}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	// expected is BaseResources with l merged in and nodes set.
	expected := func(l corev1.ResourceList, nodes string) corev1.ResourceList {
		out := rl("cpu", "0", "memory", "0", "pods", "0", "ephemeral-storage", "0", "nodes", nodes)
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	equal := func(t *testing.T, got, want corev1.ResourceList) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("resources %v, want %v", got, want)
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g.Cmp(w) != 0 {
				t.Fatalf("resources %v, want %v", got, want)
			}
		}
	}
	one := rl("cpu", "100m", "pods", "256", "memory", "1Gi")
	two := rl("cpu", "500m", "pods", "1000", "memory", "5Gi")
	np := func() *karpv1.NodePool { return testPool() }
	status := func(p *karpv1.NodePool, claims []*karpv1.NodeClaim, nodes []*corev1.Node) karpv1.NodePoolStatus {
		return Status(p, readyClassFor(p), claims, nodes, at)
	}

	conformance.Run(t, c("should ignore NodePools which aren't managed by this instance of Karpenter"), func(t *testing.T) {
		p := np()
		p.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
		nc, n := pair(p.Name, one, true)
		nc.Spec.NodeClassRef = p.Spec.Template.Spec.NodeClassRef
		if s := status(p, []*karpv1.NodeClaim{nc}, []*corev1.Node{n}); s.Resources != nil {
			t.Fatalf("resources %v, want none", s.Resources)
		}
	})
	conformance.Run(t, c("should set well-known resource to zero when no nodes exist in the cluster"), func(t *testing.T) {
		equal(t, status(np(), nil, nil).Resources, expected(nil, "0"))
	})
	conformance.Run(t, c("should set the counter from the nodeClaim and then to the node when it initializes"), func(t *testing.T) {
		p := np()
		nc, n := pair(p.Name, one, true)
		equal(t, status(p, []*karpv1.NodeClaim{nc}, []*corev1.Node{n}).Resources, expected(nc.Status.Capacity, "1"))
		n.Status.Capacity = rl("cpu", "1", "pods", "512", "memory", "2Gi")
		equal(t, status(p, []*karpv1.NodeClaim{nc}, []*corev1.Node{n}).Resources, expected(n.Status.Capacity, "1"))
	})
	conformance.Run(t, c("should increase the counter when new nodes are created"), func(t *testing.T) {
		p := np()
		nc, n := pair(p.Name, one, true)
		equal(t, status(p, []*karpv1.NodeClaim{nc}, []*corev1.Node{n}).Resources, expected(n.Status.Capacity, "1"))
	})
	conformance.Run(t, c("should decrease the counter when an existing node is deleted"), func(t *testing.T) {
		p := np()
		nc, n := pair(p.Name, one, true)
		nc2, n2 := pair(p.Name, two, true)
		equal(t, status(p, []*karpv1.NodeClaim{nc, nc2}, []*corev1.Node{n, n2}).Resources,
			expected(rl("cpu", "600m", "pods", "1256", "memory", "6Gi"), "2"))
		equal(t, status(p, []*karpv1.NodeClaim{nc2}, []*corev1.Node{n2}).Resources, expected(n2.Status.Capacity, "1"))
	})
	conformance.Run(t, c("should zero out the counter when all nodes are deleted"), func(t *testing.T) {
		p := np()
		nc, n := pair(p.Name, one, true)
		equal(t, status(p, []*karpv1.NodeClaim{nc}, []*corev1.Node{n}).Resources, expected(n.Status.Capacity, "1"))
		equal(t, status(p, nil, nil).Resources, expected(nil, "0"))
	})
	nodes := func(t *testing.T, s karpv1.NodePoolStatus, want int64) {
		t.Helper()
		if s.Nodes == nil || *s.Nodes != want {
			t.Fatalf("status.nodes %v, want %d", s.Nodes, want)
		}
	}
	conformance.Run(t, c("Status.Nodes Field > should set Status.Nodes to zero when no nodes exist"), func(t *testing.T) {
		nodes(t, status(np(), nil, nil), 0)
	})
	conformance.Run(t, c("Status.Nodes Field > should set Status.Nodes to 2 when two nodes exist"), func(t *testing.T) {
		p := np()
		nc, n := pair(p.Name, one, true)
		nc2, n2 := pair(p.Name, two, true)
		nodes(t, status(p, []*karpv1.NodeClaim{nc, nc2}, []*corev1.Node{n, n2}), 2)
	})
	conformance.Run(t, c("Status.Nodes Field > should update Status.Nodes when nodes are added and removed"), func(t *testing.T) {
		p := np()
		nc, n := pair(p.Name, one, true)
		nc2, n2 := pair(p.Name, two, true)
		nodes(t, status(p, nil, nil), 0)
		nodes(t, status(p, []*karpv1.NodeClaim{nc}, []*corev1.Node{n}), 1)
		nodes(t, status(p, []*karpv1.NodeClaim{nc, nc2}, []*corev1.Node{n, n2}), 2)
		nodes(t, status(p, []*karpv1.NodeClaim{nc2}, []*corev1.Node{n2}), 1)
		nodes(t, status(p, nil, nil), 0)
	})
	static := func(name string, replicas int64) *karpv1.NodePool {
		p := np()
		p.Name = name
		p.Spec.Replicas = &replicas
		return p
	}
	conformance.Run(t, c("Status.Nodes Field > should handle multiple nodepools including static with different node counts"), func(t *testing.T) {
		p, p2 := np(), static("static", 2)
		nc, n := pair(p.Name, one, true)
		nc3, n3 := pair(p2.Name, rl("cpu", "300m"), false)
		nc4, n4 := pair(p2.Name, rl("cpu", "300m"), false)
		claims, all := []*karpv1.NodeClaim{nc, nc3, nc4}, []*corev1.Node{n, n3, n4}
		nodes(t, status(p, claims, all), 1)
		nodes(t, status(p2, claims, all), 2)
	})
	conformance.Run(t, c("Status.Nodes Field > should handle static nodepools with replicas correctly"), func(t *testing.T) {
		p := static("static", 3)
		nc1, n1 := pair(p.Name, rl("cpu", "300m"), true)
		nc2, n2 := pair(p.Name, rl("cpu", "300m"), false)
		s := status(p, []*karpv1.NodeClaim{nc1, nc2}, []*corev1.Node{n1, n2})
		nodes(t, s, 2)
		if *p.Spec.Replicas != 3 {
			t.Fatal("replicas changed")
		}
	})
}

// readyClassFor is a Ready EC2NodeClass named as the pool's reference.
func readyClassFor(np *karpv1.NodePool) *awsv1.EC2NodeClass {
	c := class(metav1.ConditionTrue, "Ready")
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		c.Name = ref.Name
	}
	return c
}
