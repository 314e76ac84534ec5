package repair

import (
	"slices"
	"time"

	"github.com/karpless/karpless/shared/core/timing"
)

// Category is an EC2 DescribeInstanceStatus category, Karpenter's names.
type Category string

const (
	// CategoryInstance: the instance status check (the guest: kernel,
	// network configuration, memory).
	CategoryInstance Category = "InstanceStatus"
	// CategorySystem: the system status check (the host under the instance).
	CategorySystem Category = "SystemStatus"
	// CategoryEvent: a scheduled event (retirement, reboot, maintenance,
	// stop).
	CategoryEvent Category = "EventStatus"
	// CategoryEBS: the attached EBS status check. Ignored, as Karpenter
	// ignores it: a failed volume may be a pod's, not the node's.
	CategoryEBS Category = "EBSStatus"
)

// Reason is the category's message kind in Karpenter's interruption
// handling, the reason label of karpenter_nodeclaims_disrupted_total.
func (c Category) Reason() string {
	switch c {
	case CategoryInstance:
		return "instance_status"
	case CategorySystem:
		return "system_status"
	case CategoryEvent:
		return "event_status"
	}
	return "no_op"
}

// Check is one detail of an instance's status: a status check or a
// scheduled event.
type Check struct {
	Category Category
	// Name is the check's name (reachability) or the event's code
	// (instance-retirement).
	Name string
	// Failed: the check's status is failed. Scheduled events are always
	// failed.
	Failed bool
	// ImpairedSince is when the check began to fail; zero for events.
	ImpairedSince time.Time
}

// InstanceStatus is what EC2 reports about one instance, as plain data.
type InstanceStatus struct {
	InstanceID string
	Checks     []Check
}

// Impaired is an instance to replace because of what EC2 reports.
type Impaired struct {
	InstanceID string
	// Categories are those that count, in the order CategoryInstance,
	// CategorySystem, CategoryEvent.
	Categories []Category
	// Forceful: a status check failed (the instance is broken now), so
	// the replacement does not wait for a graceful drain; a scheduled
	// event alone leaves time for one.
	Forceful bool
	// Since is when the earliest counted check began to fail (now for an
	// event).
	Since time.Time
}

// Judge picks, from what EC2 reports, the instances to replace, as
// Karpenter v1.14.1's instance status controller does: an instance or
// system status check failed for at least InstanceStatusThreshold, or any
// scheduled event (it has a future date, but the host is degraded: leave
// now, as for a scheduled change from EventBridge). EBS checks and checks
// that are not failed (passed, initializing, insufficient-data) are
// ignored. The result is in the order of statuses.
func Judge(statuses []InstanceStatus, now time.Time) []Impaired {
	var out []Impaired
	for _, s := range statuses {
		u := Impaired{InstanceID: s.InstanceID}
		for _, c := range s.Checks {
			since := c.ImpairedSince
			switch {
			case !c.Failed:
				continue
			case c.Category == CategoryEvent:
				since = now
			case c.Category != CategoryInstance && c.Category != CategorySystem:
				continue
			case now.Sub(c.ImpairedSince) < timing.InstanceStatusThreshold:
				continue
			default:
				u.Forceful = true
			}
			if !slices.Contains(u.Categories, c.Category) {
				u.Categories = append(u.Categories, c.Category)
			}
			if u.Since.IsZero() || since.Before(u.Since) {
				u.Since = since
			}
		}
		if len(u.Categories) == 0 {
			continue
		}
		slices.SortFunc(u.Categories, func(a, b Category) int { return categoryOrder(a) - categoryOrder(b) })
		out = append(out, u)
	}
	return out
}

func categoryOrder(c Category) int {
	return slices.Index([]Category{CategoryInstance, CategorySystem, CategoryEvent}, c)
}
