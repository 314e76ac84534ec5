package repair

import (
	"slices"
	"testing"
	"time"

	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's interruption suite (aws/karpenter-provider-aws
// pkg/controllers/interruption/suite_test.go), its instance status cases,
// through Judge: which instances the disruption tick replaces, by which
// categories (the reason of karpenter_nodeclaims_disrupted_total and the
// category of karpenter_interruption_instance_status_unhealthy_total), and
// whether forcefully (the NodeClaim's termination timestamp set to now
// before its deletion). The deletion itself is shared/ticks/disrupt's
// instanceStatus.
func TestConformanceInstanceStatus(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	impairedAt := now.Add(-time.Hour) // Karpenter's suite steps its clock an hour
	const id = "i-0123456789abcdef0"
	failed := func(c Category) Check {
		return Check{Category: c, Name: "reachability", Failed: true, ImpairedSince: impairedAt}
	}
	initializing := Check{Category: CategoryInstance, Name: "reachability"}
	retirement := Check{Category: CategoryEvent, Name: "instance-retirement", Failed: true}
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/interruption", File: "pkg/controllers/interruption/suite_test.go",
			Spec: "InterruptionHandling > Processing Messages > " + spec}, body)
	}
	judge := func(checks ...Check) Impaired {
		out := Judge([]InstanceStatus{{InstanceID: id, Checks: checks}}, now)
		if len(out) != 1 {
			t.Fatalf("judged %+v, want the instance impaired", out)
		}
		return out[0]
	}
	reasons := func(u Impaired) []string {
		var out []string
		for _, c := range u.Categories {
			out = append(out, c.Reason())
		}
		return out
	}
	for _, c := range []struct {
		spec     string
		checks   []Check
		reasons  []string
		forceful bool
	}{
		{"should forcefully terminate the NodeClaim when an instance is unhealthy due to EC2 system status checks",
			[]Check{failed(CategorySystem), initializing}, []string{"system_status"}, true},
		{"should forcefully terminate the NodeClaim when an instance has InstanceStatus check failure",
			[]Check{failed(CategoryInstance)}, []string{"instance_status"}, true},
		{"should annotate the NodeClaim with a termination timestamp for forceful termination",
			[]Check{failed(CategorySystem)}, []string{"system_status"}, true},
		{"should NOT annotate the NodeClaim with a termination timestamp for scheduled maintenance events",
			[]Check{retirement}, []string{"event_status"}, false},
		{"should forcefully terminate when an instance has both system status failure and a scheduled event",
			[]Check{failed(CategorySystem), retirement}, []string{"system_status", "event_status"}, true},
		{"should delete the NodeClaim when an instance has a scheduled maintenance event",
			[]Check{retirement}, []string{"event_status"}, false},
	} {
		run(c.spec, func(t *testing.T) {
			u := judge(c.checks...)
			if u.InstanceID != id || u.Forceful != c.forceful || !slices.Equal(reasons(u), c.reasons) {
				t.Errorf("judged %+v (reasons %v), want reasons %v, forceful %v", u, reasons(u), c.reasons, c.forceful)
			}
		})
	}
	// Karpenter's InstanceStatusDryRun is a package variable (off) that no
	// option sets; the dry run's in-memory count of instances seen
	// unhealthy goes with it.
	for _, spec := range []string{
		"should NOT delete the NodeClaim when dry run is enabled but should still emit the metric",
		"should only emit the metric once across multiple reconciles for the same unhealthy instance",
		"should emit the metric for each unique unhealthy instance",
		"should re-emit the metric when an instance recovers and becomes unhealthy again",
	} {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/interruption", File: "pkg/controllers/interruption/suite_test.go",
			Spec: "InterruptionHandling > Processing Messages > " + spec,
			Differs: "Karpless has no dry run of instance status remediation (Karpenter's InstanceStatusDryRun is a variable no option sets): " +
				"an impaired instance's NodeClaim is always replaced, and karpenter_interruption_instance_status_unhealthy_total counts once per replacement " +
				"(shadow mode records the decision instead)"}, func(t *testing.T) {})
	}
}
