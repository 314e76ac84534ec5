package scheduling

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// checkInvariants verifies what must hold for any snapshot: every pod is
// accounted for once, unplaceable pods have a reason, no node or NodeClaim
// is over capacity or violates a placed pod's hard constraints.
func checkInvariants(t *testing.T, s *Snapshot, r *Results) {
	t.Helper()
	seen := map[*corev1.Pod]string{}
	mark := func(p *corev1.Pod, where string) {
		if prev, ok := seen[p]; ok {
			t.Fatalf("pod %s placed twice: %s and %s", p.Name, prev, where)
		}
		seen[p] = where
	}
	for n, ps := range r.Existing {
		for _, p := range ps {
			mark(p, n)
		}
	}
	for i, c := range r.NewNodeClaims {
		for _, p := range c.Pods {
			mark(p, fmt.Sprintf("claim#%d", i))
		}
		// The NodeClaim CRD's rule: an In requirement lists at least its
		// minValues values, and minValues is 1 to 50.
		for _, q := range c.Requirements {
			if q.MinValues == nil {
				continue
			}
			if *q.MinValues < 1 || (q.Operator == corev1.NodeSelectorOpIn && len(q.Values) < *q.MinValues) {
				t.Fatalf("claim#%d requirement %s %s %v has minValues %d, which the NodeClaim CRD refuses", i, q.Key, q.Operator, q.Values, *q.MinValues)
			}
		}
	}
	for _, e := range r.Unschedulable {
		mark(e.Pod, "unschedulable")
		if strings.TrimSpace(e.Reason) == "" {
			t.Fatalf("pod %s is unschedulable without a reason", e.Pod.Name)
		}
	}
	for _, p := range s.Pods {
		if _, ok := seen[p]; !ok {
			t.Fatalf("pod %s is missing from the results", p.Name)
		}
	}

	// Existing nodes: capacity, taints, requirements.
	for _, n := range s.Nodes {
		placed := r.Existing[n.Name]
		if len(placed) == 0 {
			continue
		}
		if n.MarkedForDeletion {
			t.Fatalf("pods placed on node %s, which is being deleted", n.Name)
		}
		used := corev1.ResourceList{}
		for _, p := range append(append([]*corev1.Pod{}, n.Pods...), placed...) {
			if !ignoredForTopology(p) { // finished and terminating pods hold nothing
				addList(used, PodRequests(p))
			}
		}
		for name, q := range used {
			a := n.Allocatable[name]
			if q.Cmp(a) > 0 {
				t.Fatalf("node %s over capacity on %s: %s > %s", n.Name, name, q.String(), a.String())
			}
		}
		for _, p := range placed {
			if n.NodeClaim != "" && n.Labels[wellknown.InitializedLabel] != "true" {
				continue // startup and ephemeral taints are ignored until initialized
			}
			if bad := untolerated(hardTaints(n.Taints), p.Spec.Tolerations); bad != nil {
				t.Fatalf("pod %s on node %s does not tolerate %s", p.Name, n.Name, taintString(bad))
			}
			if !nodeLabelsSatisfy(p, n.Labels) {
				t.Fatalf("pod %s on node %s does not match its node selector/affinity", p.Name, n.Name)
			}
		}
		checkHostConstraints(t, n.Name, append(append([]*corev1.Pod{}, n.Pods...), placed...), placed)
	}

	// NodePool limits: existing capacity plus the largest type of every new
	// claim stays within each limit.
	for _, np := range s.NodePools {
		for name, limit := range np.Spec.Limits {
			if name == wellknown.ResourceNodes {
				continue
			}
			used := limit.DeepCopy()
			used.Sub(limit)
			for _, n := range s.Nodes {
				if n.NodePool == np.Name {
					q := n.Allocatable[name]
					if c, ok := n.Capacity[name]; ok {
						q = c
					}
					used.Add(q)
				}
			}
			claims := 0
			for _, c := range r.NewNodeClaims {
				if c.NodePool != np.Name {
					continue
				}
				claims++
				var biggest = limit.DeepCopy()
				biggest.Sub(limit)
				for _, it := range c.InstanceTypes {
					if q := it.Capacity[name]; q.Cmp(biggest) > 0 {
						biggest = q
					}
				}
				used.Add(biggest)
			}
			if claims > 0 && used.Cmp(limit) > 0 {
				t.Fatalf("NodePool %s %s limit %s exceeded: %s", np.Name, name, limit.String(), used.String())
			}
		}
	}

	// New NodeClaims: every listed type holds the requests and meets the
	// requirements; pods tolerate taints and match requirements.
	for i, c := range r.NewNodeClaims {
		if len(c.InstanceTypes) == 0 {
			t.Fatalf("claim#%d has no instance types", i)
		}
		if len(c.Pods) == 0 {
			t.Fatalf("claim#%d has no pods", i)
		}
		reqs := RequirementsFromNodePool(c.Requirements)
		for _, it := range c.InstanceTypes {
			for name, q := range c.Requests {
				a := it.Allocatable[name]
				if q.Cmp(a) > 0 {
					t.Fatalf("claim#%d type %s too small on %s: %s > %s", i, it.Name, name, q.String(), a.String())
				}
			}
			for k, rq := range reqs {
				switch k {
				case wellknown.ZoneLabel, wellknown.CapacityTypeLabel:
					ok := false
					for _, o := range it.Offerings {
						if o.Available && reqs.Get(wellknown.ZoneLabel).Has(o.Zone) && reqs.Get(wellknown.CapacityTypeLabel).Has(o.CapacityType) {
							ok = true
						}
					}
					if !ok {
						t.Fatalf("claim#%d type %s has no offering in %s / %s", i, it.Name, reqs.Get(wellknown.ZoneLabel), reqs.Get(wellknown.CapacityTypeLabel))
					}
				default:
					if _, choice := it.LabelChoices[k]; choice {
						if !it.LabelMatches(rq) {
							t.Fatalf("claim#%d type %s violates %s", i, it.Name, rq)
						}
					} else if v, ok := it.Labels[k]; ok || isCatalogKey(k) {
						if !rq.Matches(v, ok) {
							t.Fatalf("claim#%d type %s violates %s", i, it.Name, rq)
						}
					}
				}
			}
		}
		if _, o := c.CheapestOffering(); o.Zone == "" {
			t.Fatalf("claim#%d has no launchable offering", i)
		}
		for _, p := range c.Pods {
			if bad := untolerated(hardTaints(c.Taints), p.Spec.Tolerations); bad != nil {
				t.Fatalf("pod %s on claim#%d does not tolerate %s", p.Name, i, taintString(bad))
			}
			if !claimSatisfies(p, reqs) {
				t.Fatalf("pod %s on claim#%d: requirements %s do not meet the pod's node selector/affinity", p.Name, i, reqs)
			}
		}
		checkHostConstraints(t, fmt.Sprintf("claim#%d", i), c.Pods, c.Pods)
	}
}

// hardTaints drops PreferNoSchedule taints, which a pod may ignore once its
// preferences are relaxed.
func hardTaints(ts []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			out = append(out, t)
		}
	}
	return out
}

func isCatalogKey(k string) bool {
	switch k {
	case wellknown.InstanceTypeLabel, wellknown.ArchLabel, wellknown.OSLabel, wellknown.InstanceFamilyLabel, wellknown.InstanceSizeLabel, wellknown.InstanceCPULabel, wellknown.InstanceMemoryLabel:
		return true
	}
	return false
}

func addList(dst, src corev1.ResourceList) {
	for k, v := range src {
		q := dst[k]
		q.Add(v)
		dst[k] = q
	}
}

// alternatives are the pod's hard node constraints: nodeSelector plus each
// required term.
func alternatives(p *corev1.Pod) []Requirements {
	base := RequirementsFromLabels(p.Spec.NodeSelector)
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []Requirements{base}
	}
	var out []Requirements
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		r := base.Copy()
		r.AddAll(RequirementsFromNodeSelector(term.MatchExpressions))
		out = append(out, r)
	}
	return out
}

func nodeLabelsSatisfy(p *corev1.Pod, l map[string]string) bool {
	for _, alt := range alternatives(p) {
		if alt.MatchesLabels(l) == nil {
			return true
		}
	}
	return false
}

func claimSatisfies(p *corev1.Pod, reqs Requirements) bool {
	for _, alt := range alternatives(p) {
		if reqs.Compatible(alt, IsWellKnown) == nil {
			return true
		}
	}
	return false
}

// checkHostConstraints verifies per-node hard rules: required hostname
// anti-affinity (both ways) and host ports. Spreads constrain only their
// owner at the time it is placed, so a final state cannot be checked.
func checkHostConstraints(t *testing.T, where string, pods, placed []*corev1.Pod) {
	t.Helper()
	isNew := map[*corev1.Pod]bool{}
	for _, p := range placed {
		isNew[p] = true
	}
	var ports []hostPort
	for _, p := range pods {
		hp := hostPorts(p)
		if c := portConflict(ports, hp); c != nil && isNew[p] {
			t.Fatalf("%s: host port %s used twice", where, c)
		}
		ports = append(ports, hp...)
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if term.TopologyKey != wellknown.HostnameLabel {
					continue
				}
				sel, _ := metav1.LabelSelectorAsSelector(term.LabelSelector)
				for _, q := range pods {
					if q != p && (isNew[p] || isNew[q]) && q.Namespace == p.Namespace && sel.Matches(labels.Set(q.Labels)) {
						t.Fatalf("%s: pod %s has anti-affinity to %s on the same node", where, p.Name, q.Name)
					}
				}
			}
		}
	}
}

// fingerprint renders results canonically, to compare two solves.
func fingerprint(r *Results) string {
	var b strings.Builder
	var nodes []string
	for n := range r.Existing {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		fmt.Fprintf(&b, "node %s:", n)
		for _, p := range r.Existing[n] {
			fmt.Fprintf(&b, " %s", p.Name)
		}
		b.WriteString("\n")
	}
	for i, c := range r.NewNodeClaims {
		fmt.Fprintf(&b, "claim %d %s %v:", i, c.NodePool, c.Requirements)
		for _, p := range c.Pods {
			fmt.Fprintf(&b, " %s", p.Name)
		}
		for _, it := range c.InstanceTypes {
			fmt.Fprintf(&b, " %s", it.Name)
		}
		b.WriteString("\n")
	}
	for _, e := range r.Unschedulable {
		fmt.Fprintf(&b, "unschedulable %s: %s\n", e.Pod.Name, e.Reason)
	}
	return b.String()
}
