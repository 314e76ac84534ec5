// Package budget computes how many nodes of a NodePool voluntary disruption
// may take at once, from spec.disruption.budgets, as Karpenter v1 does.
//
// A budget is active always (no schedule) or, with a cron schedule and a
// duration, from each schedule hit until the duration has passed. The
// allowed count for a reason is the smallest "nodes" value of the active
// budgets that apply to the reason (budgets without reasons apply to all).
// Percentages are of the NodePool's counted nodes, rounded up. A budget that
// cannot be evaluated (bad cron, bad value) blocks the whole NodePool: the
// count is 0, as Karpenter fails closed.
package budget

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// Unbounded is the count when no active budget applies.
const Unbounded = math.MaxInt32

// Default is the budget a NodePool has when it lists none; the CRD defaults
// spec.disruption.budgets to it, so this only matters for objects that
// bypassed defaulting.
var Default = karpv1.Budget{Nodes: "10%"}

// IsActive reports whether b is active at now. A budget with neither
// schedule nor duration is always active; one with only one of the two, or
// whose schedule does not parse, is an error.
func IsActive(b karpv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, errors.New("schedule and duration must be set together")
	}
	sched, err := cron.ParseStandard("TZ=UTC " + strings.TrimSpace(*b.Schedule))
	if err != nil {
		return false, fmt.Errorf("invalid schedule %q: %w", *b.Schedule, err)
	}
	// The window is open when the first hit after (now - duration) is not
	// after now: some hit happened within the last duration.
	now = now.UTC()
	next := sched.Next(now.Add(-b.Duration.Duration))
	if next.IsZero() {
		return false, nil
	}
	return !next.After(now), nil
}

// Nodes is the count b allows out of total nodes when active, rounding
// percentages up.
func Nodes(b karpv1.Budget, total int) (int, error) {
	v := intstr.FromString(b.Nodes)
	if n, err := strconv.Atoi(b.Nodes); err == nil {
		v = intstr.FromInt(n)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, true)
	if err != nil {
		return 0, fmt.Errorf("invalid nodes %q: %w", b.Nodes, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("invalid nodes %q: negative", b.Nodes)
	}
	return n, nil
}

// Allowed is how many of the NodePool's total nodes may be disrupted for
// reason at now, before subtracting nodes already disrupting. Any budget
// that cannot be evaluated makes it 0 and is returned as the error.
func Allowed(np *karpv1.NodePool, reason karpv1.DisruptionReason, total int, now time.Time) (int, error) {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{Default}
	}
	allowed := Unbounded
	var errs []error
	for i, b := range budgets {
		active, err := IsActive(b, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("budget %d: %w", i, err))
			continue
		}
		if !active {
			continue
		}
		// Like Karpenter, an active budget's value is checked even when its
		// reasons do not apply: a broken budget blocks every reason.
		n, err := Nodes(b, total)
		if err != nil {
			errs = append(errs, fmt.Errorf("budget %d: %w", i, err))
			continue
		}
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		allowed = min(allowed, n)
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("nodepool %s: %w", np.Name, errors.Join(errs...))
	}
	return allowed, nil
}

// Count is what Mapping needs to know about one NodePool's nodes.
type Count struct {
	// Total are the NodePool's managed, initialized nodes whose instance is
	// not being terminated.
	Total int
	// Disrupting are those of them NotReady, deleting or already taken by
	// a disruption command.
	Disrupting int
}

// Remaining is one NodePool's budget for one reason.
type Remaining struct {
	// Allowed is the budget before subtracting nodes already disrupting.
	Allowed int
	// Left is what new commands may still take (never negative).
	Left int
	// Disrupting are the nodes already counted against it.
	Disrupting int
	// Total are the NodePool's counted nodes.
	Total int
	// Err is set when a budget could not be evaluated (Left is then 0).
	Err error
}

// Mapping computes every NodePool's remaining budget for reason.
func Mapping(pools []*karpv1.NodePool, counts map[string]Count, reason karpv1.DisruptionReason, now time.Time) map[string]Remaining {
	out := make(map[string]Remaining, len(pools))
	for _, np := range pools {
		c := counts[np.Name]
		allowed, err := Allowed(np, reason, c.Total, now)
		out[np.Name] = Remaining{Allowed: allowed, Left: max(allowed-c.Disrupting, 0), Disrupting: c.Disrupting, Total: c.Total, Err: err}
	}
	return out
}
