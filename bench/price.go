package main

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/local/workload"
)

// daemonCPU is the millicores the DaemonSets request on every node.
var daemonCPU = func() int64 { o := workload.DaemonOverhead(); return o.Cpu().MilliValue() }()

// cost is the $/h of a set of nodes, split by where it comes from.
type cost struct {
	instances, volumes, credits float64
}

func (c cost) total() float64 { return c.instances + c.volumes + c.credits }

func (c *cost) add(o cost) {
	c.instances += o.instances
	c.volumes += o.volumes
	c.credits += o.credits
}

// nodeCost prices one node the same way on both sides: the offering the
// AWS launch would pick (scheduling.LaunchOrder's rules: exotic and
// dear-spot filters, the 60 cheapest types, cheapest offering), its 20 GiB
// gp3 root volume, and for burstable types the CPU credits it spends when
// busy as its pods and DaemonSets request.
func nodeCost(it *scheduling.InstanceType, off scheduling.Offering, pods []*corev1.Pod) cost {
	if it == nil {
		return cost{}
	}
	requested := daemonCPU
	for _, p := range pods {
		r := scheduling.PodRequests(p)
		requested += r.Cpu().MilliValue()
	}
	vcpus := it.Capacity[corev1.ResourceCPU]
	return cost{
		instances: off.Price,
		volumes:   workload.RootVolumeHourly,
		credits:   workload.CreditHourly(it.Labels, int(vcpus.Value()), requested),
	}
}
