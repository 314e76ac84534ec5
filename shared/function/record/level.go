package record

import "slices"

// Level says which of an invocation's figures CloudWatch turns into metrics.
// Every figure is written as a JSON log line at every level, so Logs
// Insights can query all of them; a figure that is extracted also carries
// the EMF "_aws" block, and each of its name and dimension sets is then a
// custom metric billed by CloudWatch ($0.30 a month each in us-east-1).
type Level string

const (
	// Minimal extracts only the metrics an alarm needs (Alarmed). The
	// default: a small cluster's idle ticks emit about fifteen series a
	// tick under Full, which would cost more than the rest of the idle
	// AWS bill (docs/deploy.md).
	Minimal Level = "minimal"
	// Full extracts every figure under Karpenter's names.
	Full Level = "full"
)

// Extracts reports whether a figure named name becomes a CloudWatch metric
// at this level. The zero Level is Minimal, the default.
func (l Level) Extracts(name string) bool {
	return l == Full || Alarmed(name)
}

// Alarmed reports whether a metric is extracted even at the Minimal level,
// because an alarm in docs/operations.md reads it. Each is either one
// series or emitted only when something is wrong, so a healthy idle
// cluster pays for one metric:
//   - karpenter_scheduler_queue_depth: pods waiting for capacity (the
//     "pods waiting" alarm); one series, written by every provisioner pass.
//   - karpless_catalog_fallback: the build's catalog stands in for the
//     region's; written only while it does.
//   - karpenter_cloudprovider_instance_launch_failures_total: the launch
//     failures alarm; written only when CreateFleet reports errors.
//   - karpenter_voluntary_disruption_queue_failures_total: the abandoned
//     disruption commands alarm; written only when one is abandoned.
//   - karpless_paused: 1 from each tick that found the pause switch on
//     (tick.PausedMetric); written only while paused.
//
// Every other figure is extracted at Full only, among them those a
// healthy cluster writes every tick (karpenter_nodepools_usage and
// karpenter_nodepools_limit, several series per NodePool) and
// karpenter_cloudprovider_errors_total and
// karpenter_cloudprovider_instance_termination_failures_total, written
// only on failure but read by no alarm: a failing EC2 call fails its
// tick, which alarm 1 (the functions' Errors) watches.
func Alarmed(name string) bool {
	return slices.Contains(AlarmedMetrics(), name)
}

// AlarmedMetrics are the metrics Alarmed names (the docs count them).
func AlarmedMetrics() []string {
	return []string{
		"karpenter_scheduler_queue_depth",
		"karpless_catalog_fallback",
		"karpenter_cloudprovider_instance_launch_failures_total",
		"karpenter_voluntary_disruption_queue_failures_total",
		"karpless_paused",
	}
}
