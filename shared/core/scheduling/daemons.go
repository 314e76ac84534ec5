package scheduling

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// daemon is a DaemonSet as the pod it would run on every eligible node.
type daemon struct {
	namespace, name string
	pod             *corev1.Pod
	req             []int64
	ports           []hostPort
}

// buildDaemons turns DaemonSets into pods. A pod of the DaemonSet is
// preferred (it carries the tolerations its controller adds, and the
// requests a LimitRange gave it): Snapshot.DaemonSetPods's, else one it
// runs; the template's required node affinity replaces whatever that pod
// pinned.
func (s *solver) buildDaemons() {
	running := map[string]*corev1.Pod{}
	for _, n := range s.snap.Nodes {
		if n == nil {
			continue
		}
		for _, p := range n.Pods {
			if ref := ownerOfKind(p, "DaemonSet"); ref != "" {
				running[p.Namespace+"/"+ref] = p
			}
		}
	}
	for _, ds := range s.snap.DaemonSets {
		if ds == nil {
			continue
		}
		pod := running[ds.Namespace+"/"+ds.Name]
		for _, p := range s.snap.DaemonSetPods {
			if p != nil && p.Namespace == ds.Namespace && metav1.IsControlledBy(p, ds) {
				pod = p
			}
		}
		if pod == nil {
			pod = &corev1.Pod{Spec: *ds.Spec.Template.Spec.DeepCopy()}
			pod.Namespace, pod.Name = ds.Namespace, ds.Name
			for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range cs {
					mergeLimitsIntoRequests(&cs[i])
				}
			}
		} else {
			pod = pod.DeepCopy()
		}
		if hasDRARequirements(pod) {
			continue
		}
		if a := ds.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			if pod.Spec.Affinity == nil {
				pod.Spec.Affinity = &corev1.Affinity{}
			}
			if pod.Spec.Affinity.NodeAffinity == nil {
				pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
			}
			pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.DeepCopy()
		}
		d := &daemon{namespace: ds.Namespace, name: ds.Name, pod: pod, ports: hostPorts(pod)}
		s.d.addList(PodRequests(pod))
		s.daemons = append(s.daemons, d)
	}
}

func (s *solver) daemonVectors() {
	for _, d := range s.daemons {
		d.req = s.d.vec(PodRequests(d.pod))
	}
}

func mergeLimitsIntoRequests(c *corev1.Container) {
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			c.Resources.Requests[name] = q
		}
	}
}

func ownerOfKind(p *corev1.Pod, kind string) string {
	for _, r := range p.OwnerReferences {
		if r.Kind == kind {
			return r.Name
		}
	}
	return ""
}

// daemonAlternatives are the required node-affinity alternatives of a
// DaemonSet that the NodePool's requirements admit, with Karpenter's
// registered and initialized labels present; nil when its tolerations do
// not cover the NodePool's taints (a PreferNoSchedule taint never keeps a
// DaemonSet away) or no alternative is admitted. A type of the NodePool
// runs the DaemonSet when it satisfies one of them (typeSatisfies). This
// is the part of the check that does not depend on the type, done once
// per NodePool and DaemonSet rather than for each of hundreds of types.
func (s *solver) daemonAlternatives(t *template, d *daemon) []Requirements {
	tol := append(slices.Clone(d.pod.Spec.Tolerations), corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})
	if untolerated(t.taints, tol) != nil {
		return nil
	}
	reqs := t.reqs.Copy()
	reqs.Add(NewRequirement(wellknown.RegisteredLabel, corev1.NodeSelectorOpIn, "true"), NewRequirement(wellknown.InitializedLabel, corev1.NodeSelectorOpIn, "true"))
	var out []Requirements
	for _, strict := range daemonTermAlternatives(d.pod) {
		if reqs.Compatible(strict, IsWellKnown) == nil {
			out = append(out, strict)
		}
	}
	return out
}

// daemonTermAlternatives are the DaemonSet pod's strict requirements with
// each required node-affinity term in turn.
func daemonTermAlternatives(p *corev1.Pod) []Requirements {
	out := []Requirements{PodRequirements(p, true)}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return out
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := 1; i < len(terms); i++ {
		r := RequirementsFromLabels(p.Spec.NodeSelector)
		for _, e := range terms[i].MatchExpressions {
			r.Add(NewRequirement(e.Key, e.Operator, e.Values...))
		}
		out = append(out, r)
	}
	return out
}

// typeSatisfies checks the keys an instance type decides: its labels, and
// zone and capacity type through its offerings.
func (s *solver) typeSatisfies(t *template, tt *tType, reqs Requirements) bool {
	for k, r := range reqs {
		switch {
		case k == wellknown.ZoneLabel:
			ok := false
			for ct := 0; ct < numCT && !ok; ct++ {
				maskEach(tt.zones[ct], func(z int) { ok = ok || r.Has(s.zones[z]) })
			}
			if !ok {
				return false
			}
		case k == wellknown.CapacityTypeLabel:
			ok := false
			for ct := 0; ct < numCT; ct++ {
				if tt.zones[ct] != 0 && r.Has(ctNames[ct]) {
					ok = true
				}
			}
			if !ok {
				return false
			}
		case s.isTypeKey(k):
			if !tt.it.LabelMatches(r) {
				return false
			}
		}
	}
	return true
}

// buildDaemonGroups groups a template's types by the DaemonSets that would
// run on them and folds each group's overhead into the types' allocatable.
func (s *solver) buildDaemonGroups(t *template) {
	alts := make([][]Requirements, len(s.daemons))
	for i, d := range s.daemons {
		alts[i] = s.daemonAlternatives(t, d)
	}
	index := map[string]int{}
	var key strings.Builder
	var members []*daemon
	for _, tt := range t.types {
		key.Reset()
		members = members[:0]
		for i, d := range s.daemons {
			for _, strict := range alts[i] {
				if s.typeSatisfies(t, tt, strict) {
					key.WriteString(strconv.Itoa(i))
					key.WriteByte(',')
					members = append(members, d)
					break
				}
			}
		}
		g, ok := index[key.String()]
		if !ok {
			dg := daemonGroup{overhead: make([]int64, s.d.n())}
			for _, d := range members {
				addInto(dg.overhead, d.req)
				dg.ports = append(dg.ports, d.ports...)
			}
			dg.overhead[dimPods] = int64(len(members))
			g = len(t.groups)
			index[key.String()] = g
			t.groups = append(t.groups, dg)
		}
		tt.group = g
		raw := tt.alloc
		tt.alloc = slices.Clone(raw)
		subInto(tt.alloc, t.groups[g].overhead)
	}
}

// existingDaemonOverhead is what the DaemonSets that would run on an
// existing node still need there: those not already running on it.
func (s *solver) existingDaemonOverhead(n *Node, taints []corev1.Taint) []int64 {
	out := make([]int64, s.d.n())
	present := map[string]bool{}
	for _, p := range n.Pods {
		if ref := ownerOfKind(p, "DaemonSet"); ref != "" {
			present[p.Namespace+"/"+ref] = true
		}
	}
	for _, d := range s.daemons {
		if present[d.namespace+"/"+d.name] {
			continue
		}
		if untolerated(taints, d.pod.Spec.Tolerations) != nil {
			continue
		}
		if PodRequirements(d.pod, true).MatchesLabels(n.Labels) != nil {
			continue
		}
		addInto(out, d.req)
	}
	return out
}
