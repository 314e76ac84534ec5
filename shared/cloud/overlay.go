package cloud

import (
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/overlay"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// ApplyOverlays applies NodeOverlays to the instance types the last Use
// built, so the simulation (InstanceTypes), the launches' offering order
// and the capacity a launched claim records all see the same prices and
// extended resources. Call it after every Use: Use builds the types
// afresh. It returns what each overlay became, for their status.
func (c *Cloud) ApplyOverlays(overlays []*v1alpha1.NodeOverlay, pools []*karpv1.NodePool) overlay.Result {
	in := make(map[string][]*scheduling.InstanceType, len(c.views))
	for name, v := range c.views {
		in[name] = v.types
	}
	res := overlay.Apply(overlay.Input{Classes: in, Pools: pools, Overlays: overlays})
	// New views and a new class map: a caller may still hold the old ones.
	views := make(map[string]*classView, len(c.views))
	for name, v := range c.views {
		cv := *v
		cv.types, cv.pools = res.Classes[name], res.PoolTypes(name)
		views[name] = &cv
	}
	c.views, c.classes = views, res.NodeClasses(c.classes)
	return res
}
