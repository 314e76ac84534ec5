package disruption

import (
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/buffer"
	"github.com/karpless/karpless/shared/core/disruption/budget"
	"github.com/karpless/karpless/shared/core/podutil"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// view indexes an Input once per call.
type view struct {
	in         *Input
	pools      map[string]*karpv1.NodePool
	classes    map[string]*awsv1.EC2NodeClass
	claims     map[string]*karpv1.NodeClaim
	nodeOf     map[string]*corev1.Node // by NodeClaim name
	podsOn     map[string][]*corev1.Pod
	pending    []*corev1.Pod
	pdbs       pdbLimits
	cmds       []*Pending
	simIndex   map[string]int // simulation node name -> index in in.Simulation.Nodes
	typeByName map[string]map[string]*scheduling.InstanceType

	// hosts are the nodes the CapacityBuffers' virtual pods sit on now
	// (see world.bufferHosts): emptiness leaves them.
	hosts map[string]int
	// poolTotals are the NodePools' Balanced denominators (totals).
	poolTotals map[string]poolTotals
	// settlingNodes caches settling().
	settlingNodes map[string]bool
}

func newCluster(in *Input) *view {
	snap := in.Cluster
	c := &view{
		in:         in,
		pools:      map[string]*karpv1.NodePool{},
		classes:    map[string]*awsv1.EC2NodeClass{},
		claims:     map[string]*karpv1.NodeClaim{},
		nodeOf:     map[string]*corev1.Node{},
		podsOn:     map[string][]*corev1.Pod{},
		simIndex:   map[string]int{},
		typeByName: map[string]map[string]*scheduling.InstanceType{},
	}
	for _, np := range snap.NodePools {
		c.pools[np.Name] = np
	}
	for _, nc := range snap.NodeClasses {
		c.classes[nc.Name] = nc
	}
	nodeByProvider := map[string]*corev1.Node{}
	nodeByName := map[string]*corev1.Node{}
	for _, n := range snap.Nodes {
		nodeByName[n.Name] = n
		if n.Spec.ProviderID != "" {
			nodeByProvider[n.Spec.ProviderID] = n
		}
	}
	for _, nc := range snap.NodeClaims {
		c.claims[nc.Name] = nc
		var n *corev1.Node
		if nc.Status.ProviderID != "" {
			n = nodeByProvider[nc.Status.ProviderID]
		}
		if n == nil && nc.Status.NodeName != "" {
			n = nodeByName[nc.Status.NodeName]
		}
		if n != nil {
			c.nodeOf[nc.Name] = n
		}
	}
	for _, p := range snap.Pods {
		switch {
		case p.Spec.NodeName != "":
			if !podutil.IsTerminal(p) {
				c.podsOn[p.Spec.NodeName] = append(c.podsOn[p.Spec.NodeName], p)
			}
		case podutil.IsProvisionable(p):
			c.pending = append(c.pending, p)
		}
	}
	// The buffers' virtual pods join every simulation as pending pods do
	// (Karpenter's GetPendingPods adds them): a command whose pods would
	// take their room needs a replacement big enough for both.
	c.pending = append(c.pending, buffer.VirtualPods(snap)...)
	c.pdbs = newPDBLimits(snap.PDBs)
	c.cmds = Commands(snap)
	if in.Simulation != nil {
		for i, n := range in.Simulation.Nodes {
			c.simIndex[n.Name] = i
		}
	}
	for name, class := range in.Classes {
		m := make(map[string]*scheduling.InstanceType, len(class.InstanceTypes))
		for _, it := range class.InstanceTypes {
			m[it.Name] = it
		}
		c.typeByName[name] = m
	}
	return c
}

// instanceType is the claim's instance type among its class's types.
func (c *view) instanceType(nc *karpv1.NodeClaim) *scheduling.InstanceType {
	if nc.Spec.NodeClassRef == nil {
		return nil
	}
	return c.typeByName[nc.Spec.NodeClassRef.Name][nc.Labels[wellknown.InstanceTypeLabel]]
}

// pool is the claim's NodePool, nil when it has none or it is gone.
func (c *view) pool(nc *karpv1.NodeClaim) *karpv1.NodePool {
	return c.pools[nc.Labels[wellknown.NodePoolLabel]]
}

// leavingClaims are the NodeClaims going away already: deleting (or their
// node is), or candidates of a live command other than except.
func (c *view) leavingClaims(except string) map[string]bool {
	out := Busy(c.cmds, except)
	for _, nc := range c.claims {
		if nc.DeletionTimestamp != nil {
			out[nc.Name] = true
		} else if n := c.nodeOf[nc.Name]; n != nil && n.DeletionTimestamp != nil {
			out[nc.Name] = true
		}
	}
	return out
}

// BudgetCounts is budgetCounts for callers outside a decision (the CLI's
// explanations), with no command excepted.
func BudgetCounts(in *Input) map[string]budget.Count { return newCluster(in).budgetCounts("") }

// budgetCounts counts, per NodePool, the nodes budgets are a share of
// (managed, initialized, instance not terminating) and how many of them are
// disrupting already (NotReady, deleting, or in a live command other than
// except).
func (c *view) budgetCounts(except string) map[string]budget.Count {
	busy := Busy(c.cmds, except)
	out := map[string]budget.Count{}
	for _, nc := range c.claims {
		np := nc.Labels[wellknown.NodePoolLabel]
		if np == "" || c.pools[np] == nil || !nc.IsTrue(karpv1.ConditionTypeInitialized) || nc.IsTrue(karpv1.ConditionTypeInstanceTerminating) {
			continue
		}
		n := c.nodeOf[nc.Name]
		if n == nil {
			continue
		}
		bc := out[np]
		bc.Total++
		if !nodeReady(n) || nc.DeletionTimestamp != nil || n.DeletionTimestamp != nil || busy[nc.Name] {
			bc.Disrupting++
		}
		out[np] = bc
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
