package disruption

import (
	"fmt"
	"sort"
	"time"

	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/static"
)

// StaticInput is what static.Plan reads for snap: the disruption commands
// recorded on its NodeClaims say which claims are being replaced and which
// replace them.
func StaticInput(snap *cluster.Snapshot, classes map[string]*scheduling.NodeClass, now time.Time) *static.Input {
	cmds := Commands(snap)
	in := &static.Input{Cluster: snap, Classes: classes, Disrupting: ExecutingClaims(cmds), Replacements: map[string]bool{}, Now: now}
	for _, p := range cmds {
		if p.Record.Phase == Executing && p.Live() {
			for _, name := range p.Record.Replacements {
				in.Replacements[name] = true
			}
		}
	}
	return in
}

// splitStatic separates the candidates of static NodePools from the others.
func splitStatic(cands []*Candidate) (fixed, dynamic []*Candidate) {
	for _, cn := range cands {
		if static.IsStatic(cn.NodePool) {
			fixed = append(fixed, cn)
		} else {
			dynamic = append(dynamic, cn)
		}
	}
	return fixed, dynamic
}

// staticDrift is Karpenter's StaticDrift: the drifted nodes of a static
// NodePool are replaced one for one by claims from the pool's template,
// not by what their pods need (the pool's size is fixed; its pods go
// wherever they fit), as many at once as the pool's drift budget and
// limits.nodes allow. Karpenter makes one command per node, all at once;
// here they are one command, for the first pool (by name) that can act,
// the next pool's on a later pass.
func (w *world) staticDrift(cands []*Candidate, left map[string]int, plan *Plan) *Command {
	byPool := map[string][]*Candidate{}
	var pools []string
	for _, cn := range cands {
		name := cn.NodePool.Name
		if _, ok := byPool[name]; !ok {
			pools = append(pools, name)
		}
		byPool[name] = append(byPool[name], cn)
	}
	sort.Strings(pools)
	for _, name := range pools {
		ordered := driftOrder(byPool[name])
		k := min(left[name], len(ordered))
		if k <= 0 {
			continue
		}
		cmd, why := w.replaceStatic(ordered[:k])
		if cmd != nil {
			return cmd
		}
		for _, cn := range ordered {
			plan.Blocked = append(plan.Blocked, Note{NodeClaim: cn.Name(), Node: cn.Node.Name, Message: why})
		}
	}
	return nil
}

// replaceStatic is the command replacing cands (drifted nodes of one
// static NodePool, in drift order) with claims from the pool's template:
// as many as limits.nodes leaves room for, counting every claim of the
// pool, the replacements included (they exist before their candidates
// go). It returns nil and why when none can go now.
//
// Like Karpenter, drift waits while the pool has more than its replicas
// (scale-down goes first) and while an earlier drift's replacements are
// on their way. Unlike Karpenter it also waits while the pool
// has fewer: the provisioner creates the missing claims under its own
// lease, and the two creating at once could pass limits.nodes; a pool at
// its size is one the provisioner leaves alone.
func (w *world) replaceStatic(cands []*Candidate) (*Command, string) {
	np := cands[0].NodePool
	in := w.c.in
	c := static.Counts(&static.Input{Cluster: in.Cluster, Disrupting: ExecutingClaims(w.c.cmds)})[np.Name]
	replicas, have := *np.Spec.Replicas, int64(c.Active+c.Disrupting)
	k := int64(len(cands))
	if lim := static.NodeLimit(np); lim >= 0 {
		k = min(k, lim-int64(c.Nodes()))
	}
	switch {
	case c.Disrupting > 0:
		// Its replacements count among the active claims: the pool looks
		// over its size until the candidates go (Karpenter waits too).
		return nil, fmt.Sprintf("static nodepool %s has %d node(s) being replaced: the next drift waits for them", np.Name, c.Disrupting)
	case have > replicas:
		return nil, fmt.Sprintf("static nodepool %s has %d of %d replicas: drift waits for the scale-down", np.Name, have, replicas)
	case k <= 0:
		return nil, fmt.Sprintf("static nodepool %s is at its node limit (%d): no room for a replacement", np.Name, static.NodeLimit(np))
	case have < replicas:
		return nil, fmt.Sprintf("static nodepool %s has %d of %d replicas: drift waits for the scale-up", np.Name, have, replicas)
	}
	tmpl, why := static.Template(np, in.Classes)
	if tmpl == nil {
		return nil, fmt.Sprintf("static nodepool %s cannot launch a replacement: %s", np.Name, why)
	}
	cmd := &Command{Method: Drift, Candidates: cands[:k]}
	_, o := tmpl.CheapestOffering()
	for _, cn := range cmd.Candidates {
		r := *tmpl
		cmd.Replacements = append(cmd.Replacements, &r)
		cmd.PriceBefore += cn.Price
		cmd.PriceAfter += o.Price
	}
	cmd.Why = fmt.Sprintf("static nodepool %s: %d drifted node(s) replaced from its template", np.Name, k)
	return cmd, ""
}
