package disrupt

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/poolstatus"
)

// The NodePool gauges of Karpenter's NodePool metrics controller
// (core pkg/controllers/metrics/nodepool/controller.go), both labelled
// nodepool and resource_type.
const (
	// poolUsageMetric is status.resources: the capacity of the NodePool's
	// NodeClaims, with a "nodes" count.
	poolUsageMetric = "karpenter_nodepools_usage"
	// poolLimitMetric is spec.limits.
	poolLimitMetric = "karpenter_nodepools_limit"
)

// reportPools publishes each NodePool's usage and limit gauges. Karpenter
// sets them every 10 s from the stored NodePool; here each pass publishes
// the status it computes for stampPools (poolstatus.Resources, the same
// function poolstatus.Status uses), so the figure does not depend on the
// status write succeeding, and the invocation's flush keeps the last pass's
// value (a gauge).
func (d *Disrupter) reportPools(in *disruption.Input) {
	for _, np := range in.Cluster.NodePools {
		usage, _ := poolstatus.Resources(np.Name, in.Cluster.NodeClaims, in.Cluster.Nodes)
		for _, g := range poolGauges(np, usage) {
			d.Metrics.Gauge(g.name, g.value, map[string]string{"nodepool": np.Name, "resource_type": g.resourceType})
		}
	}
}

// poolGauge is one value of a NodePool gauge.
type poolGauge struct {
	name, resourceType string
	value              float64
}

// poolGauges are a NodePool's usage (one per resource of usage) and limit
// (one per resource of spec.limits; none without limits) gauges, in a
// stable order.
func poolGauges(np *karpv1.NodePool, usage corev1.ResourceList) []poolGauge {
	var out []poolGauge
	add := func(name string, l corev1.ResourceList) {
		for k, q := range l {
			out = append(out, poolGauge{name: name, resourceType: resourceType(k), value: resourceValue(k, q)})
		}
	}
	add(poolUsageMetric, usage)
	add(poolLimitMetric, corev1.ResourceList(np.Spec.Limits))
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name > out[j].name // usage first
		}
		return out[i].resourceType < out[j].resourceType
	})
	return out
}

// resourceType is Karpenter's resource_type label of a resource name:
// lower case, dashes turned to underscores ("ephemeral-storage" is
// "ephemeral_storage", "nvidia.com/gpu" stays as it is).
func resourceType(name corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(name)), "-", "_")
}

// resourceValue is Karpenter's value of a quantity: cores for cpu (its
// millicores / 1000), the integer value, rounded up, for anything else
// (bytes for memory and storage, a count for pods and nodes).
func resourceValue(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}
