package workload

import (
	"strings"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// RootVolumeHourly is what a node's root volume costs per hour: 20 GiB of
// gp3 (Karpenter's default block device for AL2023) at $0.08 per GB-month
// in us-east-1, over 730 hours a month.
const RootVolumeHourly = 20 * 0.08 / 730

// CreditPrice is the price of surplus CPU credits of burstable types in
// unlimited mode (the default of t3, t3a and t4g), Linux, per vCPU-hour.
const CreditPrice = 0.05

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

// burstableBaseline is the baseline utilization per vCPU of t3, t3a and
// t4g by size (the same for the three families, EC2 documentation
// "Key concepts for burstable performance instances").
var burstableBaseline = map[string]float64{
	"nano": 0.05, "micro": 0.10, "small": 0.20, "medium": 0.20,
	"large": 0.30, "xlarge": 0.40, "2xlarge": 0.40,
}

// Baseline is the baseline utilization per vCPU of a burstable type, and
// false for types that are not burstable (they run at 100%).
func Baseline(labels map[string]string) (float64, bool) {
	switch labels[wellknown.InstanceFamilyLabel] {
	case "t3", "t3a", "t4g":
		b, ok := burstableBaseline[labels[wellknown.InstanceSizeLabel]]
		return b, ok
	}
	return 0, false
}

// CreditHourly is the $/h of surplus CPU credits a burstable node spends
// when its average utilization is what its pods and DaemonSets request
// (requestedMilli over its vCPUs, at most 100%): the vCPU-hours above its
// baseline, at CreditPrice. Zero for types that are not burstable.
func CreditHourly(labels map[string]string, vcpus int, requestedMilli int64) float64 {
	base, ok := Baseline(labels)
	if !ok || vcpus <= 0 {
		return 0
	}
	util := min(float64(requestedMilli)/1000/float64(vcpus), 1)
	return max(util-base, 0) * float64(vcpus) * CreditPrice
}
