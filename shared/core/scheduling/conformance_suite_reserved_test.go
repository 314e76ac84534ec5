package scheduling_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go,
// Describes "Reserved Instance Types" and "NodePool requirements instance
// filtering", ported whole. Each of Karpenter's scheduling loops is one
// Solve; the launch of a reserved offering takes one instance off its
// reservation (what EC2 then reports), as the fake cloud provider does.
func TestConformanceReservedInstanceTypes(t *testing.T) {
	c := func(spec string) conformance.Case { return suiteCase("Reserved Instance Types > " + spec) }
	reserved := func(it *scheduling.InstanceType, id string, n int) {
		it.Offerings = append(it.Offerings, scheduling.Offering{
			Zone: scheduling.FakeZone1, CapacityType: wellknown.CapacityTypeReserved, Available: true,
			ReservationID: id, ReservationCapacity: n, Price: scheduling.FakePrice(it.Capacity) / 100_000,
		})
	}
	small := func() *scheduling.InstanceType {
		return scheduling.FakeType("small-instance-type", "", scheduling.RL("cpu", "2", "memory", "2Gi"))
	}
	// types is the Describe's BeforeEach: medium and small have one
	// instance reserved each in zone 1.
	types := func() []*scheduling.InstanceType {
		its := []*scheduling.InstanceType{
			scheduling.FakeType("large-instance-type", "", scheduling.RL("cpu", "6", "memory", "6Gi")),
			scheduling.FakeType("medium-instance-type", "", scheduling.RL("cpu", "3", "memory", "3Gi")),
			small(),
		}
		for _, it := range its[1:] {
			reserved(it, "r-"+it.Name, 1)
		}
		return its
	}
	antiAffine := func(opts ...func(*corev1.Pod)) *corev1.Pod {
		base := []func(*corev1.Pod){scheduling.PodLabels("app", "test"), scheduling.PodAntiAffinity(wellknown.HostnameLabel, map[string]string{"app": "test"})}
		return scheduling.FakePod(append(base, opts...)...)
	}
	// one expects a single pod of the pass bound, on a node with the labels
	// given ("!" before a value: any other value; "" absent).
	one := func(t *testing.T, p pass, kv ...string) *corev1.Node {
		t.Helper()
		if len(p) != 1 {
			t.Fatalf("%d pods bound, want 1", len(p))
		}
		n := p.nodes()[0]
		expectLabels(t, n, kv...)
		return n
	}
	pending := func(w *world, pods []*corev1.Pod) []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				out = append(out, p)
			}
		}
		return out
	}
	rid, ct, it, np := wellknown.CapacityReservationIDLabel, wellknown.CapacityTypeLabel, wellknown.InstanceTypeLabel, wellknown.NodePoolLabel
	res := wellknown.CapacityTypeReserved

	conformance.Run(t, c("shouldn't fallback to on-demand or spot when compatible reserved offerings are available"), func(t *testing.T) {
		w := newWorld(t, types(), scheduling.FakePool("default"))
		var pods []*corev1.Pod
		for range 3 {
			pods = append(pods, scheduling.FakePod(cpu("1800m")))
		}
		one(t, w.provision(pods...), rid, "r-small-instance-type", ct, res, it, "small-instance-type")
		one(t, w.provision(pending(w, pods)...), rid, "r-medium-instance-type", ct, res, it, "medium-instance-type")
		one(t, w.provision(pending(w, pods)...), rid, "", ct, "!"+res, it, "small-instance-type")
	})
	conformance.Run(t, c("should correctly track reservations shared across nodepools"), func(t *testing.T) {
		w := newWorld(t, types(), scheduling.FakePool("np-1"), scheduling.FakePool("np-2"))
		var pods []*corev1.Pod
		for i := range 2 {
			pods = append(pods, antiAffine(scheduling.NodeRequirements(scheduling.Expr(it, in, "small-instance-type"), scheduling.Expr(np, in, fmt.Sprintf("np-%d", i+1)))))
		}
		one(t, w.provision(pods...), rid, "r-small-instance-type", ct, res, it, "small-instance-type")
		one(t, w.provision(pending(w, pods)...), rid, "", ct, "!"+res, it, "small-instance-type")
	})
	conformance.Run(t, c("should correctly track reservations for multiple nodepools with distinct reservations for the same instance pool"), func(t *testing.T) {
		w := newWorld(t, types(), scheduling.FakePool("np-1"), scheduling.FakePool("np-2"))
		distinct := small()
		reserved(distinct, "r-distinct", 1)
		w.class.Pools = map[string][]*scheduling.InstanceType{"np-2": {distinct}}
		var pods []*corev1.Pod
		for i := range 2 {
			pods = append(pods, antiAffine(scheduling.NodeRequirements(scheduling.Expr(it, in, distinct.Name), scheduling.Expr(np, in, fmt.Sprintf("np-%d", i+1)))))
		}
		got := w.provision(pods...)
		if len(got) != 2 {
			t.Fatalf("%d pods bound, want 2", len(got))
		}
		nodes := got.nodes()
		for _, n := range nodes {
			expectLabels(t, n, rid, "!", ct, res, it, distinct.Name)
		}
		if len(nodes) != 2 || nodes[0].Labels[rid] == nodes[1].Labels[rid] {
			t.Fatalf("nodes %v, want one in each reservation", nodes)
		}
	})
	conformance.Run(t, c("should correctly track multiple reservations for the same instance pool"), func(t *testing.T) {
		its := types()
		reserved(its[2], "r-small-instance-type-2", 2)
		w := newWorld(t, its, scheduling.FakePool("default"))
		var pods []*corev1.Pod
		for range 4 {
			pods = append(pods, antiAffine(scheduling.NodeRequirements(scheduling.Expr(it, in, "small-instance-type"))))
		}
		got := w.provision(pods...)
		if len(got) != 2 {
			t.Fatalf("%d pods bound, want 2", len(got))
		}
		for _, n := range got.nodes() {
			expectLabels(t, n, rid, "!", ct, res, it, "small-instance-type")
		}
		one(t, w.provision(pending(w, pods)...), rid, "!", ct, res, it, "small-instance-type")
		one(t, w.provision(pending(w, pods)...), rid, "", ct, "!"+res, it, "small-instance-type")
	})
	conformance.Run(t, c("shouldn't fallback to a lower weight NodePool if a reserved offering is available"), func(t *testing.T) {
		primary := scheduling.FakePool("np-primary", scheduling.WithWeight(100))
		w := newWorld(t, types(), primary, scheduling.FakePool("np-fallback", scheduling.WithWeight(50)))
		target := small()
		reserved(target, "r-fallback", 1)
		w.class.Pools = map[string][]*scheduling.InstanceType{"np-fallback": {target}}
		var pods []*corev1.Pod
		for range 2 {
			pods = append(pods, antiAffine(scheduling.NodeRequirements(scheduling.Expr(it, in, target.Name))))
		}
		one(t, w.provision(pods...), rid, "!", ct, res, it, target.Name, np, "np-primary")
		one(t, w.provision(pending(w, pods)...), rid, "", ct, "!"+res, it, target.Name, np, "np-primary")
	})
	conformance.Run(t, c("shouldn't relax preferences when a pod fails to schedule due to a reserved offering error"), func(t *testing.T) {
		// The It builds a distinct type for np-2 but never hands it to
		// the cloud provider: both NodePools share the reservation.
		w := newWorld(t, types(), scheduling.FakePool("np-1"), scheduling.FakePool("np-2"))
		var pods []*corev1.Pod
		for range 2 {
			pods = append(pods, antiAffine(scheduling.NodePreferences(scheduling.Expr(np, in, "np-1")),
				scheduling.NodeRequirements(scheduling.Expr(it, in, "small-instance-type"))))
		}
		one(t, w.provision(pods...), rid, "!", ct, res, it, "small-instance-type", np, "np-1")
		one(t, w.provision(pending(w, pods)...), rid, "", ct, "!"+res, it, "small-instance-type", np, "np-1")
	})
	conformance.Run(t, c("should handle multiple pods on reserved nodes"), func(t *testing.T) {
		w := newWorld(t, types(), scheduling.FakePool("np-1"))
		aff := map[string]string{"app": "test"}
		var pods []*corev1.Pod
		for range 2 {
			pods = append(pods, scheduling.FakePod(scheduling.PodLabels("app", "test"), scheduling.PodAffinity(wellknown.ZoneLabel, aff),
				scheduling.NodeRequirements(scheduling.Expr(it, in, "small-instance-type"), scheduling.Expr(np, in, "np-1"),
					scheduling.Expr(ct, in, res), scheduling.Expr(wellknown.ZoneLabel, in, scheduling.FakeZone1))))
		}
		got := w.provision(pods...)
		if len(got) != 2 || len(got.nodes()) != 1 {
			t.Fatalf("%d pods bound on %d nodes, want 2 on one", len(got), len(got.nodes()))
		}
		expectLabels(t, got.nodes()[0], rid, "r-small-instance-type", ct, res, it, "small-instance-type")
	})
}

// expectLabels checks a node's labels: key, value pairs; a value "!x" is
// any value but x ("!" any value), "" the label's absence.
func expectLabels(t *testing.T, n *corev1.Node, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		k, want := kv[i], kv[i+1]
		got, ok := n.Labels[k]
		switch {
		case want == "":
			if ok {
				t.Fatalf("node %s has %s=%s, want none", n.Name, k, got)
			}
		case strings.HasPrefix(want, "!"):
			if !ok || got == want[1:] {
				t.Fatalf("node %s has %s=%q (present %v), want another value than %q", n.Name, k, got, ok, want[1:])
			}
		default:
			if got != want {
				t.Fatalf("node %s has %s=%q, want %q", n.Name, k, got, want)
			}
		}
	}
}

func TestConformanceNodePoolRequirementsFiltering(t *testing.T) {
	c := func(spec string) conformance.Case {
		return suiteCase("NodePool requirements instance filtering > " + spec)
	}
	const filtered = "nodepool requirements filtered out all available instance types"
	// failed expects each pod pending with Karpenter's reason.
	failed := func(t *testing.T, w *world, pods ...*corev1.Pod) {
		t.Helper()
		if len(w.results.Unschedulable) != len(pods) {
			t.Fatalf("%d pod errors, want %d", len(w.results.Unschedulable), len(pods))
		}
		for _, e := range w.results.Unschedulable {
			if !strings.Contains(e.Reason, filtered) {
				t.Fatalf("pod %s: %q, want it to say %q", e.Pod.Name, e.Reason, filtered)
			}
			if e.Pod.Spec.NodeName != "" {
				t.Fatalf("pod %s bound", e.Pod.Name)
			}
		}
	}
	replace := func(reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
		np := scheduling.FakePool("default")
		np.Spec.Template.Spec.Requirements = reqs
		return np
	}
	conformance.Run(t, c("should return appropriate pod error when no available instance types exist"), func(t *testing.T) {
		w := newWorld(t, nil, scheduling.FakePool("default"))
		normal := scheduling.FakePod()
		expectNode(t, w.provision(normal), normal)
		w.snap.NodePools = []*karpv1.NodePool{replace(scheduling.NPReq(wellknown.InstanceTypeLabel, in, "non-existent-instance-type"))}
		p := scheduling.FakePod(scheduling.Requests("cpu", "32", "memory", "256Gi"))
		w.provision(p)
		failed(t, w, p)
	})
	conformance.Run(t, c("should handle multiple pods when requirements filter out all instance types"), func(t *testing.T) {
		w := newWorld(t, nil, replace(scheduling.NPReq(wellknown.ArchLabel, in, "non-existent-arch")))
		pods := []*corev1.Pod{scheduling.FakePod(), scheduling.FakePod(), scheduling.FakePod()}
		w.provision(pods...)
		failed(t, w, pods...)
	})
	conformance.Run(t, c("should handle conflicting requirements that eliminate all instance types"), func(t *testing.T) {
		w := newWorld(t, nil, replace(scheduling.NPReq(wellknown.ArchLabel, in, "amd64"), scheduling.NPReq(wellknown.ArchLabel, in, "arm64")))
		p := scheduling.FakePod()
		w.provision(p)
		failed(t, w, p)
	})
	conformance.Run(t, c("should handle zone requirements that filter out all instance types"), func(t *testing.T) {
		w := newWorld(t, nil, replace(scheduling.NPReq(wellknown.ZoneLabel, in, "non-existent-zone-1", "non-existent-zone-2")))
		p := scheduling.FakePod()
		w.provision(p)
		failed(t, w, p)
	})
}
