package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// pdbLimits answers whether pods may be evicted now, from the PDBs' status
// (disruptionsAllowed, kept current by the disruption controller).
type pdbLimits []pdbItem

type pdbItem struct {
	key      string
	ns       string
	selector labels.Selector
	allowed  int32
	// fullyBlocking PDBs never allow an eviction (maxUnavailable 0 or 0%,
	// minAvailable 100%).
	fullyBlocking bool
	// unhealthyEvictable: unhealthyPodEvictionPolicy AlwaysAllow lets pods
	// that are not Ready go regardless of the budget.
	unhealthyEvictable bool
}

func newPDBLimits(pdbs []*policyv1.PodDisruptionBudget) pdbLimits {
	var out pdbLimits
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			// An unparsable selector matches nothing for the API server
			// either; it cannot block an eviction.
			continue
		}
		mu, ma := p.Spec.MaxUnavailable, p.Spec.MinAvailable
		out = append(out, pdbItem{
			key:      p.Namespace + "/" + p.Name,
			ns:       p.Namespace,
			selector: sel,
			allowed:  p.Status.DisruptionsAllowed,
			fullyBlocking: (mu != nil && mu.Type == intstr.Int && mu.IntVal == 0) ||
				(mu != nil && mu.Type == intstr.String && mu.StrVal == "0%") ||
				(ma != nil && ma.Type == intstr.String && ma.StrVal == "100%"),
			unhealthyEvictable: p.Spec.UnhealthyPodEvictionPolicy != nil && *p.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		})
	}
	return out
}

func (l pdbLimits) matching(p *corev1.Pod) []*pdbItem {
	var out []*pdbItem
	for i := range l {
		if l[i].ns == p.Namespace && l[i].selector.Matches(labels.Set(p.Labels)) {
			out = append(out, &l[i])
		}
	}
	return out
}

// evictable is Karpenter's test of whether the eviction API would be
// called for the pod at all: active, not tolerating the disrupted taint,
// not static, not protected by an active do-not-disrupt annotation.
func evictable(p *corev1.Pod, now time.Time) bool {
	if podutil.IsTerminal(p) || podutil.IsTerminating(p) || podutil.IsOwnedByNode(p) || toleratesDisrupted(p) {
		return false
	}
	blocked, _ := podutil.DoNotDisrupt(p, now)
	return !blocked
}

// blocking returns why the pods' PDBs refuse an eviction now ("" when every
// pod can be evicted): a PDB that allows no disruption, or a pod several
// PDBs select (the eviction API refuses those). The words are Karpenter's.
func (l pdbLimits) blocking(pods []*corev1.Pod, now time.Time) string {
	for _, p := range pods {
		if !evictable(p, now) {
			continue
		}
		m := l.matching(p)
		if len(m) > 1 {
			keys := make([]string, len(m))
			for i, x := range m {
				keys[i] = x.key
			}
			sort.Strings(keys)
			return fmt.Sprintf("eviction does not support multiple PDBs (PodDisruptionBudget(s)=[%s])", strings.Join(keys, " "))
		}
		if len(m) == 1 && m[0].allowed == 0 && !(m[0].unhealthyEvictable && !podReady(p)) {
			return fmt.Sprintf("pdb prevents pod evictions (PodDisruptionBudget=[%s])", m[0].key)
		}
	}
	return ""
}

// fullyBlocked reports a pod that a PDB will never let go: capacity for it
// would be wasted until it leaves on its own.
func (l pdbLimits) fullyBlocked(p *corev1.Pod, now time.Time) bool {
	if !evictable(p, now) {
		return false
	}
	m := l.matching(p)
	if len(m) > 1 {
		return true
	}
	return len(m) == 1 && m[0].fullyBlocking && !(m[0].unhealthyEvictable && !podReady(p))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func toleratesDisrupted(p *corev1.Pod) bool {
	t := wellknown.DisruptedNoScheduleTaint
	for _, tol := range p.Spec.Tolerations {
		if tol.ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}

// currentlyReschedulable is Karpenter's set of pods to find room for when
// their node goes: reschedulable, not held by do-not-disrupt, and not held
// for ever by a PDB.
func (l pdbLimits) currentlyReschedulable(p *corev1.Pod, now time.Time) bool {
	if !reschedulable(p) {
		return false
	}
	if blocked, _ := podutil.DoNotDisrupt(p, now); blocked && !podutil.IsTerminal(p) && !podutil.IsTerminating(p) {
		return false
	}
	return !l.fullyBlocked(p, now)
}

// reschedulable is Karpenter's IsReschedulable: active (or a terminating
// StatefulSet pod, whose replacement needs the same room), not a DaemonSet
// pod, not a static pod.
func reschedulable(p *corev1.Pod) bool {
	if podutil.IsOwnedByDaemonSet(p) || podutil.IsOwnedByNode(p) || podutil.IsTerminal(p) {
		return false
	}
	if !podutil.IsTerminating(p) {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "StatefulSet" {
			return true
		}
	}
	return false
}
