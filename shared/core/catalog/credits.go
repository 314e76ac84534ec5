package catalog

import "math"

// CPU credits of burstable instance types: the one model that Karpless's
// decisions (shared/core/scheduling prices types and launches with it,
// shared/core/disruption compares nodes with it) and the bench's bill
// (shared/local/workload) all use.
//
// The facts, as AWS publishes them:
//
//   - t3, t3a and t4g launch in unlimited mode by default (EC2 API reference,
//     RunInstances CreditSpecification: "Default: standard (T2 instances) or
//     unlimited (T3/T3a/T4g instances)"), and Karpenter launches them with
//     that default, as Karpless does: every such node is unlimited.
//   - An unlimited instance whose average CPU utilization stays above its
//     baseline spends surplus credits, charged at a flat rate per vCPU-hour
//     (EC2 User Guide, "Unlimited mode for burstable performance
//     instances"; the rates on the EC2 On-Demand pricing page, section
//     "T2/T3/T4g Unlimited Mode Pricing"): $0.05 per vCPU-hour for T3 and
//     T3a on Linux, $0.04 for T4g. The rate is the same for spot and
//     on-demand instances.
//   - The baseline per vCPU is the same for the three families and depends
//     on the size only (EC2 User Guide, "Key concepts for burstable
//     performance instances", the table of credits earned per hour, and the
//     T3 and T4g product pages): nano 5%, micro 10%, small and medium 20%,
//     large 30%, xlarge and 2xlarge 40%.
//
// The model assumes a node's pods use what they request, on average, over
// the day: utilization is the CPU its pods and DaemonSets request over its
// vCPUs, at most 100%. Below the baseline a node earns more than it spends
// and pays nothing extra (earned credits are not valued: they only pay for
// later bursts, which requests do not show). Standard mode (no surplus
// charge, throttled to the baseline instead) is not modelled: Karpless
// launches with the default credit specification. The rates are Linux's.

// creditRates are the surplus-credit prices in USD per vCPU-hour of the
// burstable families that launch unlimited by default, Linux.
var creditRates = map[string]float64{
	"t3":  0.05,
	"t3a": 0.05,
	"t4g": 0.04,
}

// burstableBaseline is the baseline utilization per vCPU of t3, t3a and
// t4g by size.
var burstableBaseline = map[string]float64{
	"nano": 0.05, "micro": 0.10, "small": 0.20, "medium": 0.20,
	"large": 0.30, "xlarge": 0.40, "2xlarge": 0.40,
}

// Credits is the surplus-credit model of one burstable instance type.
type Credits struct {
	// Baseline is the utilization per vCPU the type's hourly price covers.
	Baseline float64
	// Rate is the price of surplus credits in USD per vCPU-hour.
	Rate float64
}

// Burstable returns the credit model of the instance family and size
// (karpenter.k8s.aws/instance-family and -size), and false for types that
// are not burstable in unlimited mode (they run at 100% at their price).
func Burstable(family, size string) (Credits, bool) {
	rate, ok := creditRates[family]
	if !ok {
		return Credits{}, false
	}
	base, ok := burstableBaseline[size]
	if !ok {
		return Credits{}, false
	}
	return Credits{Baseline: base, Rate: rate}, true
}

// BaselineMilli is the CPU, in millicores, that a node of vcpus vCPUs can
// use on average without surplus credits.
func (c Credits) BaselineMilli(vcpus int64) int64 {
	return int64(math.Round(c.Baseline * float64(vcpus) * 1000))
}

// Hourly is the $/h of surplus credits a node of vcpus vCPUs spends when
// its pods and DaemonSets use requestedMilli millicores on average: the
// vCPU-hours above its baseline, at most all of its vCPUs, at the rate.
func (c Credits) Hourly(vcpus, requestedMilli int64) float64 {
	if vcpus <= 0 || c.Rate == 0 {
		return 0
	}
	used := min(requestedMilli, vcpus*1000)
	over := used - c.BaselineMilli(vcpus)
	if over <= 0 {
		return 0
	}
	return float64(over) / 1000 * c.Rate
}

// CreditHourly is Credits.Hourly for the family and size, 0 for types that
// are not burstable.
func CreditHourly(family, size string, vcpus, requestedMilli int64) float64 {
	c, ok := Burstable(family, size)
	if !ok {
		return 0
	}
	return c.Hourly(vcpus, requestedMilli)
}
