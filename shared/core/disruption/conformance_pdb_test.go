package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1 pkg/utils/pdb/suite_test.go, ported whole. CanEvictPods
// is the budget check of a disruption's validation (pdbLimits.blocking,
// which names the PDBs in the reason it gives); IsCurrentlyReschedulable is
// podutil's (provisioning) and the disruption simulation's own. As in
// Karpenter's envtest, no disruption controller fills the PDBs' status, so
// each allows no disruption.
func TestConformancePDB(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: "core/utils/pdb", File: "pkg/utils/pdb/suite_test.go", Spec: spec}
	}
	podLabels := map[string]string{"pdb-test": "value"}
	mkPDB := func(name string, sel map[string]string, mod func(*policyv1.PodDisruptionBudgetSpec)) *policyv1.PodDisruptionBudget {
		p := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
		if mod != nil {
			mod(&p.Spec)
		}
		return p
	}
	minAvailable100 := func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = new(intstr.FromString("100%")) }
	mkPod := func(name string, labels map[string]string, mods ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: labels},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		for _, m := range mods {
			m(p)
		}
		return p
	}
	unready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	}
	alwaysAllow := func(s *policyv1.PodDisruptionBudgetSpec) {
		minAvailable100(s)
		s.UnhealthyPodEvictionPolicy = new(policyv1.AlwaysAllow)
	}
	// canEvict is CanEvictPods: the PDBs named in the refusal, and whether
	// the pods may go.
	canEvict := func(pdbs []*policyv1.PodDisruptionBudget, pods ...*corev1.Pod) (string, bool) {
		why := newPDBLimits(pdbs).blocking(pods, t0)
		return why, why == ""
	}
	reschedulable := func(t *testing.T, pdbs []*policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
		t.Helper()
		a := podutil.IsCurrentlyReschedulable(p, pdbs, t0)
		if b := newPDBLimits(pdbs).currentlyReschedulable(p, t0); a != b {
			t.Fatalf("provisioning says currently reschedulable %v, the disruption simulation %v", a, b)
		}
		return a
	}
	names := func(t *testing.T, why string, pdbs []*policyv1.PodDisruptionBudget) {
		t.Helper()
		for _, p := range pdbs {
			if !strings.Contains(why, p.Namespace+"/"+p.Name) {
				t.Errorf("refusal %q does not name %s", why, p.Name)
			}
		}
	}

	conformance.Run(t, c("CanEvictPods > can evict unhealthy pods when UnhealthyPodEvictionPolicy is set to always allow"), func(t *testing.T) {
		if why, ok := canEvict([]*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, alwaysAllow)}, mkPod("p", podLabels, unready)); !ok {
			t.Fatalf("refused: %s", why)
		}
	})
	conformance.Run(t, c("CanEvictPods > can't evict unhealthy pods when UnhealthyPodEvictionPolicy is not set"), func(t *testing.T) {
		pdbs := []*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, minAvailable100)}
		why, ok := canEvict(pdbs, mkPod("p", podLabels, unready))
		if ok {
			t.Fatal("evictable")
		}
		names(t, why, pdbs)
	})
	conformance.Run(t, c("CanEvictPods > can evict pods when no PDBs match"), func(t *testing.T) {
		if why, ok := canEvict([]*policyv1.PodDisruptionBudget{mkPDB("pdb", map[string]string{"other": "value"}, nil)}, mkPod("p", podLabels)); !ok {
			t.Fatalf("refused: %s", why)
		}
	})
	entries := []struct {
		name string
		pdbs func() []*policyv1.PodDisruptionBudget
	}{
		{"100% min available", func() []*policyv1.PodDisruptionBudget {
			return []*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, minAvailable100)}
		}},
		{"0% max unavailable", func() []*policyv1.PodDisruptionBudget {
			return []*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = new(intstr.FromString("0%")) })}
		}},
		{"0 max unavailable", func() []*policyv1.PodDisruptionBudget {
			return []*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = new(intstr.FromInt(0)) })}
		}},
		{"multiple PDBs on the same pod", func() []*policyv1.PodDisruptionBudget {
			return []*policyv1.PodDisruptionBudget{mkPDB("pdb-1", podLabels, minAvailable100), mkPDB("pdb-2", podLabels, minAvailable100)}
		}},
	}
	for _, e := range entries {
		conformance.Run(t, c("CanEvictPods > can't evict pods when disruptions are not allowed for every pod in the list > "+e.name), func(t *testing.T) {
			pdbs := e.pdbs()
			why, ok := canEvict(pdbs, mkPod("p1", podLabels), mkPod("p2", podLabels))
			if ok {
				t.Fatal("evictable")
			}
			names(t, why, pdbs)
		})
		conformance.Run(t, c("CanEvictPods > can't evict pods when disruptions are not allowed for one pod in the list > "+e.name), func(t *testing.T) {
			pdbs := e.pdbs()
			why, ok := canEvict(pdbs, mkPod("p1", podLabels), mkPod("p2", nil))
			if ok {
				t.Fatal("evictable")
			}
			names(t, why, pdbs)
		})
	}

	conformance.Run(t, c("IsCurrentlyReschedulable > considers unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is set to always allow"), func(t *testing.T) {
		if !reschedulable(t, []*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, alwaysAllow)}, mkPod("p", podLabels, unready)) {
			t.Fatal("not currently reschedulable")
		}
	})
	conformance.Run(t, c("IsCurrentlyReschedulable > does not consider unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is not set"), func(t *testing.T) {
		if reschedulable(t, []*policyv1.PodDisruptionBudget{mkPDB("pdb", podLabels, minAvailable100)}, mkPod("p", podLabels, unready)) {
			t.Fatal("currently reschedulable")
		}
	})
	conformance.Run(t, c("IsCurrentlyReschedulable > considers pod as currently reschedulable when no PDBs match"), func(t *testing.T) {
		if !reschedulable(t, []*policyv1.PodDisruptionBudget{mkPDB("pdb", map[string]string{"other": "value"}, nil)}, mkPod("p", podLabels)) {
			t.Fatal("not currently reschedulable")
		}
	})
	for _, e := range entries {
		conformance.Run(t, c("IsCurrentlyReschedulable > pods which are not currently reschedulable due to PDBs > "+e.name), func(t *testing.T) {
			if reschedulable(t, e.pdbs(), mkPod("p", podLabels)) {
				t.Fatal("currently reschedulable")
			}
		})
	}
	conformance.Run(t, c("IsCurrentlyReschedulable > does not consider pod with do-not-disrupt annotation as currently reschedulable"), func(t *testing.T) {
		p := mkPod("p", podLabels, func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		})
		if reschedulable(t, nil, p) {
			t.Fatal("currently reschedulable")
		}
	})
}
