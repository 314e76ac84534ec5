package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// verdict is why one NodePool cannot take a pod on a new NodeClaim.
type verdict struct {
	pool     string
	category string // taint, requirements, limits, resources, topology, volumes, minValues, ports
	text     string
	taint    string
}

// diagnose explains, in one sentence a person can act on, why a pod was
// not placed. It looks at the pod in its most relaxed form.
func (s *solver) diagnose(p *podState) string {
	if p.volErr != nil {
		return p.volErr.Error()
	}
	if p.relaxed != nil && p.cur != p.relaxed {
		p.cur = p.relaxed
		s.refreshPod(p)
	}
	var suffix string
	if n := s.usableExisting(); n > 0 {
		suffix = fmt.Sprintf(" (and it fits none of the %d existing nodes)", n)
	}
	if s.opts.MaxNewNodeClaims == 0 {
		return "it fits none of the existing nodes and this simulation may not add nodes"
	}
	if s.opts.MaxNewNodeClaims > 0 && len(s.claims) >= s.opts.MaxNewNodeClaims {
		return fmt.Sprintf("it fits none of the existing nodes and this simulation may add at most %d NodeClaim(s)", s.opts.MaxNewNodeClaims)
	}
	if len(s.templates) == 0 {
		if len(s.skipped) == 0 {
			return "no NodePool exists" + suffix
		}
		var parts []string
		for _, sk := range s.skipped {
			parts = append(parts, fmt.Sprintf("NodePool %s %s", sk.name, sk.why))
		}
		return "no NodePool can launch nodes: " + strings.Join(parts, "; ") + suffix
	}
	var vs []verdict
	for _, t := range s.templates {
		vs = append(vs, s.templateVerdict(t, p))
	}
	return summarize(vs) + suffix
}

func (s *solver) usableExisting() int {
	n := 0
	for _, e := range s.existing {
		if e.usable {
			n++
		}
	}
	return n
}

func summarize(vs []verdict) string {
	same := true
	for _, v := range vs[1:] {
		if v.category != vs[0].category {
			same = false
		}
	}
	if same && vs[0].category == "taint" {
		taints := map[string]bool{}
		for _, v := range vs {
			taints[v.taint] = true
		}
		if len(taints) == 1 {
			return fmt.Sprintf("no NodePool tolerates taint %s", vs[0].taint)
		}
		var parts []string
		for _, v := range vs {
			parts = append(parts, fmt.Sprintf("%s (%s)", v.pool, v.taint))
		}
		return "no NodePool's taints are tolerated: " + strings.Join(parts, ", ")
	}
	if len(vs) == 1 {
		return vs[0].text
	}
	var parts []string
	for _, v := range vs {
		parts = append(parts, v.text)
	}
	return strings.Join(parts, "; ")
}

// templateVerdict explains why a new NodeClaim of t cannot take p.
func (s *solver) templateVerdict(t *template, p *podState) verdict {
	v := verdict{pool: t.name}
	if t.nodesLeft == 0 {
		q := t.np.Spec.Limits[wellknown.ResourceNodes]
		v.category, v.text = "limits", fmt.Sprintf("NodePool %s nodes limit %s reached", t.name, q.String())
		return v
	}
	if bad := untolerated(t.taints, p.cur.Spec.Tolerations); bad != nil {
		v.category, v.taint = "taint", taintString(bad)
		v.text = fmt.Sprintf("NodePool %s has taint %s, which the pod does not tolerate", t.name, v.taint)
		return v
	}
	cr := t.compile(s, p.reqID)
	if cr.fail != nil {
		v.category = "requirements"
		if cr.fail.Have == nil {
			// Karpenter's hint names the well-known label a typo may have missed.
			v.text = fmt.Sprintf("NodePool %s does not set label %s%s (pod requires %s)", t.name, cr.fail.Key, cr.fail.typoHint(), cr.fail.Want)
		} else {
			v.text = fmt.Sprintf("pod requires %s but NodePool %s allows %s", cr.fail.Want, t.name, cr.fail.Have)
		}
		if cr.fail.Key == wellknown.NodePoolLabel && cr.fail.Want.Operator() == corev1.NodeSelectorOpDoesNotExist {
			v.text = fmt.Sprintf("pod requires %s DoesNotExist: it must not run on nodes Karpless launches", wellknown.NodePoolLabel)
		}
		return v
	}
	if cr.host != nil {
		v.category, v.text = "requirements", fmt.Sprintf("pod requires %s, which a new node cannot have", cr.host)
		return v
	}
	if cr.mask != nil && cr.mask.empty() {
		v.category = "requirements"
		var keys []string
		for _, k := range cr.rest.Keys() {
			if s.isTypeKey(k) {
				keys = append(keys, cr.rest[k].String())
			}
		}
		v.text = fmt.Sprintf("no instance type of NodePool %s (EC2NodeClass %s) has %s", t.name, t.class.Name, strings.Join(keys, ", "))
		return v
	}
	f := s.freshClaim(t)
	var ev claimEval
	if s.evalClaim(f, p, &ev) {
		v.category, v.text = "ok", fmt.Sprintf("NodePool %s could launch a node for it", t.name)
		return v
	}
	v.category = ev.why
	switch ev.why {
	case "requirements":
		v.text = fmt.Sprintf("pod requirements %s cannot be met by NodePool %s", p.reqs, t.name)
	case "host ports":
		v.text = fmt.Sprintf("the pod's host ports are taken by DaemonSets on every instance type of NodePool %s", t.name)
	case "volume topology":
		v.text = fmt.Sprintf("the pod's volumes can only attach in %s, where NodePool %s cannot launch", volumeZones(p), t.name)
	case "topology":
		if ev.topoFail != nil {
			v.text = fmt.Sprintf("NodePool %s: %s cannot be satisfied (%s)", t.name, ev.topoFail.describe(), s.groupCounts(ev.topoFail))
		} else {
			v.text = fmt.Sprintf("NodePool %s: the pod's topology constraints leave no zone it can launch in", t.name)
		}
	case "minValues":
		// Karpenter's words first, so the event reads as it does there.
		v.text = fmt.Sprintf("NodePool %s: minValues requirement is not met for label(s) (label(s)=%v): too few instance types fit the pod", t.name, s.minShort)
	default:
		v.category, v.text = s.resourceVerdict(t, p, cr)
	}
	return v
}

func volumeZones(p *podState) string {
	var zs []string
	for _, a := range p.volAlts {
		if r, ok := a[wellknown.ZoneLabel]; ok {
			zs = append(zs, r.Values()...)
		}
	}
	sort.Strings(zs)
	return "zones [" + strings.Join(zs, " ") + "]"
}

func (s *solver) groupCounts(g *group) string {
	if g.hostname {
		return fmt.Sprintf("%d nodes already have matching pods", g.nonEmpty)
	}
	var parts []string
	maskEach(g.registered, func(d int) { parts = append(parts, fmt.Sprintf("%s=%d", g.dom.names[d], g.count(int32(d)))) })
	return "matching pods per domain: " + strings.Join(parts, ", ")
}

// resourceVerdict explains a resource or limit failure: which resources no
// instance type has, where.
func (s *solver) resourceVerdict(t *template, p *podState, cr *compiled) (string, string) {
	zm, ctm := cr.zm, cr.ctm
	for _, a := range p.volAlts {
		m, _ := s.zoneMask(a)
		zm &= m
	}
	zones := describeMask(s.zones, zm)
	largest := make([]int64, s.d.n())
	fitAny, fitLimits := false, false
	for i, tt := range t.types {
		if cr.mask != nil && !cr.mask.has(i) {
			continue
		}
		if math.IsInf(tt.priceIn(zm, ctm, len(s.zones)), 1) {
			continue
		}
		for d := range largest {
			largest[d] = max(largest[d], tt.alloc[d])
		}
		if fits(p.req, tt.alloc) {
			fitAny = true
			if t.withinLimits(tt, nil) {
				fitLimits = true
			}
		}
	}
	if fitAny && !fitLimits {
		var parts []string
		for d, l := range t.limits {
			if l < 0 {
				continue
			}
			used := l - t.remaining[d]
			parts = append(parts, fmt.Sprintf("%s limit %s reached (%s in use or reserved by new NodeClaims)", s.d.names[d], quantityString(s.d, d, l), quantityString(s.d, d, max(used, 0))))
		}
		return "limits", fmt.Sprintf("NodePool %s %s", t.name, strings.Join(parts, ", "))
	}
	var short []string
	for d, r := range p.req {
		if r > largest[d] {
			short = append(short, quantityString(s.d, d, r)+" "+string(s.d.names[d]))
		}
	}
	where := fmt.Sprintf("in zones %s", zones)
	if ctm != allCT {
		var cts []string
		for ct := 0; ct < numCT; ct++ {
			if ctm&(1<<ct) != 0 {
				cts = append(cts, ctNames[ct])
			}
		}
		where += " as " + strings.Join(cts, "/")
	}
	if len(short) == 0 {
		return "resources", fmt.Sprintf("no instance type of NodePool %s has %s together %s", t.name, s.d.format(p.req), where)
	}
	return "resources", fmt.Sprintf("no instance type of NodePool %s has %s %s", t.name, strings.Join(short, " and "), where)
}
