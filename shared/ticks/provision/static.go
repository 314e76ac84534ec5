package provision

import (
	"context"
	"errors"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/static"
)

// keepStatic creates the NodeClaims static NodePools lack (core/static
// decides how many, from the pool's template) and launches them, the way
// a pass creates and launches any claim. A claim counts from the moment it
// exists, launched or not, so a pass killed anywhere here, or run twice,
// finds it and creates no other. Deleting what a pool has too many of is
// the disruption tick's: it drains nodes.
func (p *Provisioner) keepStatic(ctx context.Context, inv *invocation, snap *cluster.Snapshot, res *passResult) error {
	plan := static.Plan(disruption.StaticInput(snap, inv.cloud.InstanceTypes(), p.Clock.Now()))
	pools := map[string]*karpv1.NodePool{}
	var news []*scheduling.NewNodeClaim
	for _, sp := range plan {
		pools[sp.NodePool.Name] = sp.NodePool
		if int64(sp.Count.Active+sp.Count.Disrupting) < sp.Replicas {
			p.Log.Info("static nodepool below its replicas", "nodepool", sp.NodePool.Name, "replicas", sp.Replicas,
				"active", sp.Count.Active, "deleting", sp.Count.Deleting, "being_replaced", sp.Count.Disrupting, "creating", sp.Create, "why", sp.Why)
		}
		for range sp.Create {
			news = append(news, sp.Claim)
		}
	}
	if len(news) == 0 {
		return nil
	}
	res.work = true
	created, err := p.createClaims(ctx, inv, pools, news, "static", res)
	before := inv.cloud.Launched()
	lerr := inv.cloud.LaunchAll(ctx, created)
	res.launched += inv.cloud.Launched() - before
	return errors.Join(err, lerr)
}
