package drain

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/controllers/node/termination (suite_test.go's drain
// cases and terminator/suite_test.go's Pod Deletion API), ported through
// Next (what the termination tick evicts now, and whether the node is
// drained) and Expiring (what the terminationGracePeriod deletes). The
// eviction itself is the Eviction API's (PDBs, 429s); a do-not-disrupt pod
// is never evicted, only deleted by Expiring.

var at = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// pod is test.Pod on the node, owned by a ReplicaSet.
func pod(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: "node"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }

func daemon(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: new(true)}}
}

func terminatingAt(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t} }
}

func names(ps []*corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range ps {
		out[p.Name] = true
	}
	return out
}

func TestConformanceTermination(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/node/termination", File: "pkg/controllers/node/termination/suite_test.go", Spec: "Termination > Reconciliation > " + spec}
	}
	evicts := func(t *testing.T, pods []*corev1.Pod, now time.Time, want ...string) int {
		t.Helper()
		got, remaining := Next(pods, nil, now)
		g := names(got)
		if len(g) != len(want) {
			t.Fatalf("evicts %v, want %v", g, want)
		}
		for _, w := range want {
			if !g[w] {
				t.Fatalf("evicts %v, want %v", g, want)
			}
		}
		return remaining
	}
	gone := func(pods []*corev1.Pod, name string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range pods {
			if p.Name != name {
				out = append(out, p)
			}
		}
		return out
	}
	drained := func(t *testing.T, pods []*corev1.Pod, now time.Time) {
		t.Helper()
		if ev, remaining := Next(pods, nil, now); remaining != 0 || len(ev) != 0 {
			t.Fatalf("not drained: evicts %v, %d remaining", names(ev), remaining)
		}
	}
	tolerating := func(op corev1.TolerationOperator) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			tol := corev1.Toleration{Key: wellknown.DisruptedTaintKey, Operator: op, Effect: corev1.TaintEffectNoSchedule}
			if op == corev1.TolerationOpEqual {
				tol.Value = wellknown.DisruptedNoScheduleTaint.Value
			}
			p.Spec.Tolerations = []corev1.Toleration{tol}
		}
	}
	for _, op := range []struct {
		name string
		op   corev1.TolerationOperator
	}{{"equal", corev1.TolerationOpEqual}, {"exists", corev1.TolerationOpExists}} {
		conformance.Run(t, c("should not evict pods that tolerate karpenter disruption taint with "+op.name+" operator"), func(t *testing.T) {
			pods := []*corev1.Pod{pod("evict"), pod("skip", tolerating(op.op))}
			evicts(t, pods, at, "evict")
			drained(t, gone(pods, "evict"), at)
		})
	}
	conformance.Run(t, c("should evict pods that tolerate the node.kubernetes.io/unschedulable taint"), func(t *testing.T) {
		pods := []*corev1.Pod{pod("evict", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		})}
		evicts(t, pods, at, "evict")
	})
	conformance.Run(t, c("should delete nodes that have pods without an ownerRef"), func(t *testing.T) {
		pods := []*corev1.Pod{pod("orphan", func(p *corev1.Pod) { p.OwnerReferences = nil })}
		evicts(t, pods, at, "orphan")
		drained(t, nil, at)
	})
	conformance.Run(t, c("should delete nodes with terminal pods"), func(t *testing.T) {
		drained(t, []*corev1.Pod{
			pod("succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			pod("failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		}, at)
	})
	conformance.Run(t, c("should evict pods in order and wait until pods are fully deleted"), func(t *testing.T) {
		pods := []*corev1.Pod{pod("daemon-evict", daemon), pod("node-evict"), pod("critical-daemon", daemon, critical), pod("critical-node", critical)}
		evicts(t, pods, at, "node-evict")
		// Evicted, still terminating: the daemons wait until it is gone.
		pods[1].DeletionTimestamp = &metav1.Time{Time: at.Add(30 * time.Second)}
		evicts(t, pods, at)
		pods = gone(pods, "node-evict")
		evicts(t, pods, at, "daemon-evict")
		pods = gone(pods, "daemon-evict")
		evicts(t, pods, at, "critical-node")
		pods = gone(pods, "critical-node")
		evicts(t, pods, at, "critical-daemon")
		drained(t, gone(pods, "critical-daemon"), at)
	})
	conformance.Run(t, c("should evict non-critical pods first"), func(t *testing.T) {
		pods := []*corev1.Pod{pod("non-critical"), pod("critical-node", critical), pod("critical-cluster", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })}
		evicts(t, pods, at, "non-critical")
		evicts(t, gone(pods, "non-critical"), at, "critical-node", "critical-cluster")
	})
	conformance.Run(t, c("should not evict static pods"), func(t *testing.T) {
		pods := []*corev1.Pod{pod("evict"), pod("static", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node", Controller: new(true)}}
		})}
		evicts(t, pods, at, "evict")
		drained(t, gone(pods, "evict"), at)
	})
	conformance.Run(t, c("should bypass pods which are stuck terminating past their grace period"), func(t *testing.T) {
		pods := []*corev1.Pod{pod("stuck", terminatingAt(at))}
		if _, remaining := Next(pods, nil, at); remaining != 1 {
			t.Fatal("a pod still within its grace is not waited for")
		}
		drained(t, pods, at.Add(90*time.Second))
	})
	// The NodeClaim's terminationGracePeriod is 300s, its deadline recorded
	// at the drain's start.
	deadline := at.Add(300 * time.Second)
	doNotDisrupt := func(grace int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			p.Spec.TerminationGracePeriodSeconds = &grace
		}
	}
	conformance.Run(t, c("should preemptively delete pods to satisfy their terminationGracePeriodSeconds"), func(t *testing.T) {
		if got := Expiring([]*corev1.Pod{pod("p", doNotDisrupt(300))}, deadline, at.Add(10*time.Second)); len(got) != 1 {
			t.Fatal("not deleted")
		}
	})
	conformance.Run(t, c("should only delete pods when their terminationGracePeriodSeconds is less than the the node's remaining terminationGracePeriod"), func(t *testing.T) {
		p := pod("p", doNotDisrupt(60))
		if got := Expiring([]*corev1.Pod{p}, deadline, at.Add(90*time.Second)); len(got) != 0 {
			t.Fatal("deleted with more than its grace left")
		}
		if got := Expiring([]*corev1.Pod{p}, deadline, at.Add(265*time.Second)); len(got) != 1 {
			t.Fatal("not deleted with less than its grace left")
		}
	})
	conformance.Run(t, c("should update deletion timestamp for terminating pods when it is after node deletion timestamp"), func(t *testing.T) {
		p := pod("p", doNotDisrupt(6000), terminatingAt(at.Add(6000*time.Second)))
		got := Expiring([]*corev1.Pod{p}, deadline, at.Add(90*time.Second))
		if len(got) != 1 || got[0].Grace < 195 || got[0].Grace > 225 {
			t.Fatalf("deletions %v, want one with about 210s", got)
		}
	})

	d := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/node/termination", File: "pkg/controllers/node/termination/terminator/suite_test.go", Spec: "Eviction/Queue > Pod Deletion API > " + spec}
	}
	grace := func(s int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
	}
	conformance.Run(t, d("should not delete a pod with no nodeTerminationTime"), func(t *testing.T) {
		if got := Expiring([]*corev1.Pod{pod("p", grace(30))}, time.Time{}, at); len(got) != 0 {
			t.Fatal("deleted")
		}
	})
	conformance.Run(t, d("should not delete a pod with terminationGracePeriodSeconds still remaining before nodeTerminationTime"), func(t *testing.T) {
		if got := Expiring([]*corev1.Pod{pod("p", grace(60))}, at.Add(5*time.Minute), at); len(got) != 0 {
			t.Fatal("deleted")
		}
	})
	conformance.Run(t, d("should delete a pod with less than terminationGracePeriodSeconds remaining before nodeTerminationTime"), func(t *testing.T) {
		if got := Expiring([]*corev1.Pod{pod("p", grace(120))}, at.Add(time.Minute), at); len(got) != 1 {
			t.Fatal("not deleted")
		}
	})
	conformance.Run(t, d("should clamp gracePeriodSeconds to >= 1 when nodeTerminationTime is in the past"), func(t *testing.T) {
		got := Expiring([]*corev1.Pod{pod("p", grace(120))}, at.Add(-time.Hour), at)
		if len(got) != 1 || got[0].Grace < 1 {
			t.Fatalf("deletions %v, want one with a grace of at least 1s", got)
		}
	})
}
