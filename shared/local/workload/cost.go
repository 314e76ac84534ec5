package workload

import (
	"strings"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// RootVolumeHourly is what a node's root volume costs per hour: 20 GiB of
// gp3 (Karpenter's default block device for AL2023) at $0.08 per GB-month
// in us-east-1, over 730 hours a month.
const RootVolumeHourly = 20 * 0.08 / 730

// noSpotFamilies are the families EC2 sells without a spot market: high
// memory (u-*, u7i*, u7in*) and HPC (hpc*), on-demand and savings plans
// only. The catalog carries no spot data; this is the rule used instead.
var noSpotFamilies = []string{"u-", "u7i", "hpc"}

// HasSpotMarket says whether the instance type can be bought as spot.
func HasSpotMarket(instanceType string) bool {
	for _, p := range noSpotFamilies {
		if strings.HasPrefix(instanceType, p) {
			return false
		}
	}
	return true
}

// Baseline is the baseline utilization per vCPU of a burstable type, and
// false for types that are not burstable (they run at 100%): the core's
// model (catalog.Burstable), which Karpless's decisions use too.
func Baseline(labels map[string]string) (float64, bool) {
	c, ok := catalog.Burstable(labels[wellknown.InstanceFamilyLabel], labels[wellknown.InstanceSizeLabel])
	return c.Baseline, ok
}

// CreditHourly is the $/h of surplus CPU credits a burstable node spends
// when its average utilization is what its pods and DaemonSets request
// (requestedMilli over its vCPUs, at most 100%): the vCPU-hours above its
// baseline, at the family's rate (catalog.CreditHourly: $0.05 per
// vCPU-hour for t3 and t3a, $0.04 for t4g). Zero for types that are not
// burstable. Both schedulers' results are priced with it.
func CreditHourly(labels map[string]string, vcpus int, requestedMilli int64) float64 {
	return catalog.CreditHourly(labels[wellknown.InstanceFamilyLabel], labels[wellknown.InstanceSizeLabel], int64(vcpus), requestedMilli)
}
