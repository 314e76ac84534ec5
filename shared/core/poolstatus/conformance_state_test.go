package poolstatus

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/state/suite_test.go, "NodePool
// Resources": Karpenter's cluster.NodePoolResourcesFor, which its counter
// writes as status.resources, is Resources here; each of Karpenter's
// UpdateNodeClaim, UpdateNode, DeleteNodeClaim and DeleteNode is the next
// list of NodeClaims and Nodes.
func TestConformanceStateNodePoolResources(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/state", File: "pkg/controllers/state/suite_test.go", Spec: "NodePool Resources > " + spec}
	}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	seq := 0
	// pair is test.NodeClaimAndNode: a registered claim of pool and its
	// node, whose capacity is the claim's.
	pair := func(pool string, capacity corev1.ResourceList) (*karpv1.NodeClaim, *corev1.Node) {
		seq++
		name := fmt.Sprintf("nc-%d", seq)
		labels := map[string]string{wellknown.NodePoolLabel: pool, wellknown.RegisteredLabel: "true", wellknown.InstanceTypeLabel: "m5.large"}
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		nc.Status.ProviderID = wellknown.ProviderID("test-zone-1a", fmt.Sprintf("i-%017d", seq))
		nc.Status.Capacity = capacity
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool, wellknown.RegisteredLabel: "true"}},
			Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}, Status: corev1.NodeStatus{Capacity: capacity.DeepCopy()}}
		return nc, node
	}
	expect := func(t *testing.T, pool string, claims []*karpv1.NodeClaim, nodes []*corev1.Node, cpu, mem, eph string) {
		t.Helper()
		got, _ := Resources(pool, claims, nodes)
		for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourceEphemeralStorage: eph} {
			if g := got[name]; g.Cmp(resource.MustParse(want)) != 0 {
				t.Fatalf("%s of %s = %s, want %s", name, pool, g.String(), want)
			}
		}
	}
	size := func(n string) corev1.ResourceList {
		return rl("cpu", n, "memory", n+"Gi", "ephemeral-storage", n+"Gi")
	}
	drop := func(s []*karpv1.NodeClaim, nc *karpv1.NodeClaim) []*karpv1.NodeClaim {
		var out []*karpv1.NodeClaim
		for _, x := range s {
			if x != nc {
				out = append(out, x)
			}
		}
		return out
	}
	dropNode := func(s []*corev1.Node, n *corev1.Node) []*corev1.Node {
		var out []*corev1.Node
		for _, x := range s {
			if x != n {
				out = append(out, x)
			}
		}
		return out
	}

	conformance.Run(t, c("should calculate nodepool resources for multiple nodepools"), func(t *testing.T) {
		var claims []*karpv1.NodeClaim
		var nodes []*corev1.Node
		pools := []string{"pool-1", "pool-2", "pool-3"}
		last := map[string]*karpv1.NodeClaim{}
		lastNode := map[string]*corev1.Node{}
		for i, pool := range pools {
			for range 3 {
				nc, n := pair(pool, size(fmt.Sprint(2*(i+1))))
				nc.Status.Allocatable = size(fmt.Sprint(2*(i+1) - 1))
				claims, nodes = append(claims, nc), append(nodes, n)
				last[pool], lastNode[pool] = nc, n
			}
		}
		expectAll := func(a, b, c string) {
			t.Helper()
			expect(t, "pool-1", claims, nodes, a, a+"Gi", a+"Gi")
			expect(t, "pool-2", claims, nodes, b, b+"Gi", b+"Gi")
			expect(t, "pool-3", claims, nodes, c, c+"Gi", c+"Gi")
		}
		expectAll("6", "12", "18")
		// The Nodes go: their NodeClaims still count.
		for _, pool := range pools {
			nodes = dropNode(nodes, lastNode[pool])
		}
		expectAll("6", "12", "18")
		// Then the NodeClaims.
		for _, pool := range pools {
			claims = drop(claims, last[pool])
		}
		expectAll("4", "8", "12")
		claims, nodes = nil, nil
		expectAll("0", "0", "0")
	})
	conformance.Run(t, c("should update nodepool resources when a node switches from one nodepool to another"), func(t *testing.T) {
		nc, n := pair("old", size("2"))
		claims, nodes := []*karpv1.NodeClaim{nc}, []*corev1.Node{n}
		expect(t, "old", claims, nodes, "2", "2Gi", "2Gi")
		// The NodeClaim is relabelled: its Node's label still decides.
		nc.Labels[wellknown.NodePoolLabel] = "new"
		expect(t, "old", claims, nodes, "2", "2Gi", "2Gi")
		expect(t, "new", claims, nodes, "0", "0", "0")
		n.Labels[wellknown.NodePoolLabel] = "new"
		expect(t, "old", claims, nodes, "0", "0", "0")
		expect(t, "new", claims, nodes, "2", "2Gi", "2Gi")
	})
	conformance.Run(t, c("should update nodepool resources when the node changes providerID"), func(t *testing.T) {
		nc, n := pair("default", size("2"))
		claims, nodes := []*karpv1.NodeClaim{nc}, []*corev1.Node{n}
		expect(t, "default", claims, nodes, "2", "2Gi", "2Gi")
		// The NodeClaim's provider ID changes: it and the Node are two.
		nc.Status.ProviderID = wellknown.ProviderID("test-zone-1a", "i-99999999999999999")
		expect(t, "default", claims, nodes, "4", "4Gi", "4Gi")
		n.Spec.ProviderID = nc.Status.ProviderID
		expect(t, "default", claims, nodes, "2", "2Gi", "2Gi")
	})
	nodeSmaller := func() (*karpv1.NodeClaim, *corev1.Node) {
		nc, n := pair("default", size("2"))
		n.Status.Capacity = size("1")
		return nc, n
	}
	conformance.Run(t, c("should handle nodepool resources when node inside of the state node is removed"), func(t *testing.T) {
		nc, n := nodeSmaller()
		expect(t, "default", []*karpv1.NodeClaim{nc}, []*corev1.Node{n}, "1", "1Gi", "1Gi")
		// The Node goes: the NodeClaim's capacity counts.
		expect(t, "default", []*karpv1.NodeClaim{nc}, nil, "2", "2Gi", "2Gi")
	})
	// Karpenter has two cases of this title; the second removes the
	// NodeClaim rather than the Node.
	conformance.Run(t, c("should handle nodepool resources when node inside of the state node is removed"), func(t *testing.T) {
		nc, n := nodeSmaller()
		expect(t, "default", []*karpv1.NodeClaim{nc}, []*corev1.Node{n}, "1", "1Gi", "1Gi")
		// The NodeClaim goes: the Node's capacity still counts.
		expect(t, "default", nil, []*corev1.Node{n}, "1", "1Gi", "1Gi")
	})
	conformance.Run(t, c("should update nodepool resources when node is terminating (deletionTimestamp set)"), func(t *testing.T) {
		nc, n := pair("default", size("2"))
		claims, nodes := []*karpv1.NodeClaim{nc}, []*corev1.Node{n}
		expect(t, "default", claims, nodes, "2", "2Gi", "2Gi")
		nc.DeletionTimestamp = &metav1.Time{}
		expect(t, "default", claims, nodes, "0", "0", "0")
	})
	conformance.Run(t, conformance.Case{Suite: "core/state", File: "pkg/controllers/state/suite_test.go",
		Spec:    "NodePool Resources > should update nodepool resources when node is marked/unmarked for deletion",
		Differs: "Karpless has no in-memory mark for deletion: a NodePool's status.resources keeps counting a node a disruption command replaces until its NodeClaim is deleted (once its replacements are initialized), where Karpenter stops as soon as it has launched them"}, func(*testing.T) {})
	conformance.Run(t, c("should not double subtract resources when marking for deletion and then deleting"), func(t *testing.T) {
		// Karpless has no in-memory mark (see the case above): the
		// deletions that follow it, each counted once.
		nc, n := pair("default", size("2"))
		claims, nodes := []*karpv1.NodeClaim{nc}, []*corev1.Node{n}
		expect(t, "default", claims, nodes, "2", "2Gi", "2Gi")
		nc.DeletionTimestamp = &metav1.Time{}
		expect(t, "default", claims, nodes, "0", "0", "0")
		n.DeletionTimestamp = &metav1.Time{}
		expect(t, "default", claims, nodes, "0", "0", "0")
		expect(t, "default", nil, nodes, "0", "0", "0")
		expect(t, "default", nil, nil, "0", "0", "0")
	})
}
