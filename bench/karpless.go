package main

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/cluster"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/planning"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// karplessWorld is the fixed part of Karpless's inputs for one case.
type karplessWorld struct {
	pools   []*karpv1.NodePool
	classes map[string]*scheduling.NodeClass
	daemons []*appsv1.DaemonSet
}

// runKarpless solves once, as the provisioning tick does.
func (w *karplessWorld) runKarpless(pods []*corev1.Pod) (outcome, sample, *scheduling.Results) {
	snap := &scheduling.Snapshot{Pods: pods, NodePools: w.pools, NodeClasses: w.classes, DaemonSets: w.daemons}
	var r *scheduling.Results
	s := measure(func() { r = scheduling.Solve(snap, scheduling.Provisioning()) })
	o := outcome{claims: len(r.NewNodeClaims), failed: len(r.Unschedulable)}
	for _, c := range r.NewNodeClaims {
		it, off := c.CheapestOffering()
		o.cost.add(nodeCost(it, off, c.Pods))
		o.count(it, off)
	}
	return o, s, r
}

// consolidated is the cluster after one consolidation decision.
type consolidated struct {
	nodes int
	cost  cost
	what  string
	cpu   time.Duration
}

// consolidate launches the solve's NodeClaims as running nodes (each the
// type and offering its launch would buy, its pods and DaemonSet pods
// bound, initialized an hour ago) and runs Karpless's disruption decision
// once on that cluster, with the mix's PDBs.
func (w *karplessWorld) consolidate(r *scheduling.Results, pdbs []*policyv1.PodDisruptionBudget, before cost) consolidated {
	now := time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-time.Hour))
	snap := &cluster.Snapshot{
		NodePools:   w.pools,
		NodeClasses: []*awsv1.EC2NodeClass{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		DaemonSets:  w.daemons,
		PDBs:        pdbs,
	}
	pools := map[string]*karpv1.NodePool{}
	for _, np := range w.pools {
		pools[np.Name] = np
	}
	costs := map[string]cost{}
	for i, c := range r.NewNodeClaims {
		it, off := c.CheapestOffering()
		if it == nil {
			continue
		}
		np := pools[c.NodePool]
		name := fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/62500, i/250%250, i%250)
		claimName := fmt.Sprintf("%s-%05d", c.NodePool, i)
		pid := wellknown.ProviderID(off.Zone, fmt.Sprintf("i-%017d", i))
		labels := map[string]string{}
		for k, v := range it.Labels {
			labels[k] = v
		}
		for k, v := range c.Labels {
			labels[k] = v
		}
		labels[wellknown.ZoneLabel] = off.Zone
		labels[wellknown.CapacityTypeLabel] = off.CapacityType
		labels[wellknown.HostnameLabel] = name
		labels[wellknown.NodePoolLabel] = c.NodePool
		labels[wellknown.EC2NodeClassLabel] = "default"
		labels[wellknown.InitializedLabel] = "true"
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claimName, UID: types.UID("nc-" + claimName), Labels: labels, CreationTimestamp: created,
				Annotations: map[string]string{wellknown.NodePoolHashAnnotation: np.Hash(), wellknown.NodePoolHashVersionAnnotation: wellknown.NodePoolHashVersion}},
			Spec:   karpv1.NodeClaimSpec{NodeClassRef: np.Spec.Template.Spec.NodeClassRef, ExpireAfter: np.Spec.Template.Spec.ExpireAfter, Taints: c.Taints, Requirements: c.Requirements},
			Status: karpv1.NodeClaimStatus{ProviderID: pid, NodeName: name, Allocatable: it.Allocatable, Capacity: it.Capacity},
		}
		for _, cond := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable} {
			nc.SetCondition(cond, metav1.ConditionTrue, cond, "", created)
		}
		snap.NodeClaims = append(snap.NodeClaims, nc)
		snap.Nodes = append(snap.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
			Spec:       corev1.NodeSpec{ProviderID: pid, Taints: c.Taints},
			Status:     corev1.NodeStatus{Allocatable: it.Allocatable, Capacity: it.Capacity, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
		bind := func(p *corev1.Pod) {
			p.Spec.NodeName = name
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			}}
			p.CreationTimestamp = created
			snap.Pods = append(snap.Pods, p)
		}
		for _, p := range c.Pods {
			bind(p.DeepCopy())
		}
		for _, ds := range w.daemons {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + claimName, Namespace: ds.Namespace, UID: types.UID(ds.Name + "-" + claimName),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}}},
				Spec: *ds.Spec.Template.Spec.DeepCopy()}
			bind(p)
		}
		costs[claimName] = nodeCost(it, off, c.Pods)
	}
	in := &disruption.Input{Cluster: snap, Simulation: planning.SimulationInput(snap, nil, w.classes), Classes: w.classes, Now: now}
	c0 := cpuTime()
	plan := disruption.Compute(in)
	out := consolidated{nodes: len(snap.NodeClaims), cost: before, what: "no command", cpu: cpuTime() - c0}
	if plan.Command == nil {
		return out
	}
	out.what = plan.Command.String()
	for _, cand := range plan.Command.Candidates {
		c := costs[cand.NodeClaim.Name]
		out.cost.instances -= c.instances
		out.cost.volumes -= c.volumes
		out.cost.credits -= c.credits
		out.nodes--
	}
	for _, rep := range plan.Command.Replacements {
		it, off := rep.CheapestOffering()
		out.cost.add(nodeCost(it, off, rep.Pods))
		out.nodes++
	}
	return out
}
