// Package repair decides which nodes to replace because they have been
// unhealthy too long: Karpenter v1.14.1's node repair (its node health
// controller) with the AWS provider's repair policies.
//
// A node is unhealthy when one of its conditions has a policy's type and
// status; it is due once that condition's lastTransitionTime is older than
// the policy's toleration (with several matching policies, the one due
// first counts). A due node's NodeClaim is deleted forcefully (no
// disruption budget, no do-not-disrupt, its termination grace period cut
// to now), unless too many of its neighbours are unhealthy: at most 20% of
// a NodePool's nodes, rounded up, may be unhealthy (counting every
// unhealthy node, due or not) for any of them to be repaired; a NodeClaim
// without a NodePool is held to the same share of the cluster's nodes.
// Past that share nothing in the pool is repaired: a fleet-wide failure
// (a bad AMI, a broken network) is not made worse by replacing everything.
//
// Judge does the same for EC2's own view of the instance (its status
// checks and scheduled events), as Karpenter's instance status controller
// does, without the node repair gate and without the 20% rule.
//
// Decide and Judge are pure: nodes, claims or statuses in, decisions out.
package repair

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Policy is one node condition that, held for Toleration, makes the node
// due for replacement.
type Policy struct {
	Type       corev1.NodeConditionType
	Status     corev1.ConditionStatus
	Toleration time.Duration
}

// AWSPolicies are the AWS provider's repair policies: the kubelet's Ready
// condition, and the conditions the EKS node monitoring agent reports.
func AWSPolicies() []Policy {
	return []Policy{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Toleration: timing.RepairToleration},
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Toleration: timing.RepairToleration},
		{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, Toleration: timing.RepairAcceleratedHardwareToleration},
		{Type: "StorageReady", Status: corev1.ConditionFalse, Toleration: timing.RepairToleration},
		{Type: "NetworkingReady", Status: corev1.ConditionFalse, Toleration: timing.RepairToleration},
		{Type: "KernelReady", Status: corev1.ConditionFalse, Toleration: timing.RepairToleration},
		{Type: "ContainerRuntimeReady", Status: corev1.ConditionFalse, Toleration: timing.RepairToleration},
	}
}

// AllowedUnhealthyPercent is the share of a NodePool's (or the cluster's)
// nodes that may be unhealthy for repair to go on, Karpenter's.
const AllowedUnhealthyPercent = 20

// AllowedUnhealthy is how many of total nodes may be unhealthy: 20%,
// rounded up as a PodDisruptionBudget's percentages are, so one of three
// nodes may be repaired.
func AllowedUnhealthy(total int) int {
	return (total*AllowedUnhealthyPercent + 99) / 100
}

// Input is what Decide reads.
type Input struct {
	Nodes      []*corev1.Node
	NodeClaims []*karpv1.NodeClaim
	Policies   []Policy
	Now        time.Time
}

// Repair is a NodeClaim to delete forcefully, and why.
type Repair struct {
	NodeClaim *karpv1.NodeClaim
	Node      *corev1.Node
	// Condition is the node condition that made it due.
	Condition corev1.NodeCondition
	// Toleration is its policy's.
	Toleration time.Duration
}

// Blocked is a node due for repair that the 20% rule holds back.
type Blocked struct {
	NodeClaim *karpv1.NodeClaim
	Node      *corev1.Node
	// NodePool is the claim's; empty for a claim without one (the
	// cluster-wide share applied).
	NodePool string
	// Message is Karpenter's NodeRepairBlocked message.
	Message string
}

// Plan is Decide's answer.
type Plan struct {
	Repairs []Repair
	Blocked []Blocked
	// Next is when the first unhealthy node not yet due becomes due; zero
	// when there is none.
	Next time.Time
}

// Decide returns the NodeClaims to repair now. Claims already being
// deleted are returned too (their termination grace period is still cut,
// as Karpenter does), nodes without a NodeClaim, or with more than one,
// are not Karpenter's to repair.
func Decide(in Input) Plan {
	var plan Plan
	claims := map[string][]*karpv1.NodeClaim{}
	for _, nc := range in.NodeClaims {
		if nc.Status.ProviderID != "" {
			claims[nc.Status.ProviderID] = append(claims[nc.Status.ProviderID], nc)
		}
	}
	unhealthy, total := map[string]int{}, map[string]int{}
	clusterUnhealthy := 0
	for _, n := range in.Nodes {
		pool := n.Labels[wellknown.NodePoolLabel]
		total[pool]++
		if Unhealthy(n, in.Policies) {
			unhealthy[pool]++
			clusterUnhealthy++
		}
	}
	for _, n := range in.Nodes {
		ncs := claims[n.Spec.ProviderID]
		if n.Spec.ProviderID == "" || len(ncs) != 1 {
			continue
		}
		nc := ncs[0]
		cond, tol, ok := dueCondition(n, in.Policies)
		if !ok {
			continue
		}
		if at := cond.LastTransitionTime.Add(tol); in.Now.Before(at) {
			if plan.Next.IsZero() || at.Before(plan.Next) {
				plan.Next = at
			}
			continue
		}
		pool, inPool := nc.Labels[wellknown.NodePoolLabel]
		switch {
		case inPool && unhealthy[pool] > AllowedUnhealthy(total[pool]):
			plan.Blocked = append(plan.Blocked, Blocked{NodeClaim: nc, Node: n, NodePool: pool,
				Message: fmt.Sprintf("more than %d%% nodes are unhealthy in the nodepool", AllowedUnhealthyPercent)})
		case !inPool && clusterUnhealthy > AllowedUnhealthy(len(in.Nodes)):
			plan.Blocked = append(plan.Blocked, Blocked{NodeClaim: nc, Node: n,
				Message: fmt.Sprintf("more then %d%% nodes are unhealthy in the cluster", AllowedUnhealthyPercent)})
		default:
			plan.Repairs = append(plan.Repairs, Repair{NodeClaim: nc, Node: n, Condition: cond, Toleration: tol})
		}
	}
	return plan
}

// Unhealthy reports whether a condition of the node matches a policy,
// however recent.
func Unhealthy(n *corev1.Node, policies []Policy) bool {
	return slices.ContainsFunc(policies, func(p Policy) bool {
		c, ok := condition(n, p.Type)
		return ok && c.Status == p.Status
	})
}

// dueCondition is the matching condition that reaches its toleration
// first, with that toleration.
func dueCondition(n *corev1.Node, policies []Policy) (corev1.NodeCondition, time.Duration, bool) {
	var best corev1.NodeCondition
	var bestTol time.Duration
	var bestAt time.Time
	found := false
	for _, p := range policies {
		c, ok := condition(n, p.Type)
		if !ok || c.Status != p.Status {
			continue
		}
		if at := c.LastTransitionTime.Add(p.Toleration); !found || at.Before(bestAt) {
			best, bestTol, bestAt, found = c, p.Toleration, at, true
		}
	}
	return best, bestTol, found
}

func condition(n *corev1.Node, t corev1.NodeConditionType) (corev1.NodeCondition, bool) {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return corev1.NodeCondition{}, false
}

// TerminationTimestamp is the karpenter.sh/nodeclaim-termination-timestamp
// to write on a claim being repaired so its drain ends now, or "" when the
// claim's own deadline has already passed (an earlier one is kept).
func TerminationTimestamp(nc *karpv1.NodeClaim, now time.Time) string {
	if v, ok := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; ok {
		if at, err := time.Parse(time.RFC3339, v); err == nil && at.Before(now) {
			return ""
		}
	}
	return now.UTC().Format(time.RFC3339)
}
