package repair

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// badNode is the policy Karpenter's health suite uses (its fake cloud
// provider's): BadNode False for 30 minutes.
var badNode = []Policy{{Type: "BadNode", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute}}

type nodeSpec struct {
	pool  string // "" for a standalone claim and node
	conds []corev1.NodeCondition
	// noClaim leaves the node without a NodeClaim; twoClaims gives it two.
	noClaim, twoClaims bool
	annotations        map[string]string
}

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(since)}
}

func build(specs []nodeSpec) ([]*corev1.Node, []*karpv1.NodeClaim) {
	var nodes []*corev1.Node
	var claims []*karpv1.NodeClaim
	for i, s := range specs {
		pid := fmt.Sprintf("aws:///us-west-2a/i-%02d", i)
		labels := map[string]string{}
		if s.pool != "" {
			labels[wellknown.NodePoolLabel] = s.pool
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: labels, Annotations: s.annotations},
			Spec: corev1.NodeSpec{ProviderID: pid}, Status: corev1.NodeStatus{Conditions: s.conds}}
		nodes = append(nodes, n)
		if s.noClaim {
			continue
		}
		for j := range 1 + boolInt(s.twoClaims) {
			claims = append(claims, &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d-%d", i, j), Labels: labels},
				Status:     karpv1.NodeClaimStatus{ProviderID: pid, NodeName: n.Name},
			})
		}
	}
	return nodes, claims
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func repeat(n int, s nodeSpec) []nodeSpec {
	out := make([]nodeSpec, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestDecide ports Karpenter v1.14.1's node health suite
// (pkg/controllers/node/health/suite_test.go) and adds the AWS policies.
func TestDecide(t *testing.T) {
	bad := func(since time.Time) []corev1.NodeCondition {
		return []corev1.NodeCondition{cond("BadNode", corev1.ConditionFalse, since)}
	}
	healthy := nodeSpec{pool: "default"}
	tests := []struct {
		name     string
		policies []Policy
		nodes    []nodeSpec
		now      time.Time
		repaired []string // node names
		blocked  []string
		next     time.Time
	}{
		{name: "unhealthy past its toleration is repaired", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0)}}, now: t0.Add(time.Hour), repaired: []string{"node-0"}},
		{name: "a condition type no policy names is ignored", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{cond("FakeHealthyNode", corev1.ConditionFalse, t0)}}}, now: t0.Add(time.Hour)},
		{name: "a status the policy does not name is ignored", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{cond("BadNode", corev1.ConditionTrue, t0)}}}, now: t0.Add(time.Hour)},
		{name: "not repaired before the toleration; due at its end", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0)}}, now: t0.Add(20 * time.Minute), next: t0.Add(30 * time.Minute)},
		{name: "due exactly at the toleration's end", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0)}}, now: t0.Add(30 * time.Minute), repaired: []string{"node-0"}},
		{name: "the condition closest to its toleration sets the next check",
			policies: []Policy{
				{Type: "BadNode", Status: corev1.ConditionFalse, Toleration: time.Hour},
				{Type: "ValidUnhealthyCondition", Status: corev1.ConditionFalse, Toleration: 30 * time.Minute},
			},
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{
				cond("ValidUnhealthyCondition", corev1.ConditionFalse, t0), cond("BadNode", corev1.ConditionFalse, t0)}}},
			now: t0.Add(27 * time.Minute), next: t0.Add(30 * time.Minute)},
		{name: "do-not-disrupt does not protect an unhealthy node", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0), annotations: map[string]string{wellknown.DoNotDisruptAnnotation: "true"}}},
			now:   t0.Add(time.Hour), repaired: []string{"node-0"}},
		{name: "more than 20% of a nodepool unhealthy: nothing repaired", policies: badNode,
			nodes: append(repeat(3, nodeSpec{pool: "default", conds: bad(t0)}), repeat(7, healthy)...),
			now:   t0.Add(time.Hour), blocked: []string{"node-0", "node-1", "node-2"}},
		{name: "20% of a nodepool unhealthy: all repaired", policies: badNode,
			nodes: append(repeat(2, nodeSpec{pool: "default", conds: bad(t0)}), repeat(8, healthy)...),
			now:   t0.Add(time.Hour), repaired: []string{"node-0", "node-1"}},
		{name: "more than 20% of the cluster unhealthy blocks claims without a nodepool", policies: badNode,
			nodes: append(repeat(3, nodeSpec{conds: bad(t0)}), repeat(7, nodeSpec{})...),
			now:   t0.Add(time.Hour), blocked: []string{"node-0", "node-1", "node-2"}},
		{name: "rounds up: one of three nodes may be repaired", policies: badNode,
			nodes: append([]nodeSpec{{pool: "default", conds: bad(t0)}}, repeat(2, healthy)...),
			now:   t0.Add(time.Hour), repaired: []string{"node-0"}},
		{name: "nodes unhealthy but not yet due count toward the limit", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0)}, {pool: "default", conds: bad(t0.Add(50 * time.Minute))}, healthy, healthy, healthy},
			now:   t0.Add(time.Hour), blocked: []string{"node-0"}, next: t0.Add(80 * time.Minute)},
		{name: "the limit is per nodepool", policies: badNode,
			nodes: []nodeSpec{{pool: "a", conds: bad(t0)}, {pool: "a", conds: bad(t0)}, {pool: "a"}, {pool: "b", conds: bad(t0)}, {pool: "b"}, {pool: "b"}},
			now:   t0.Add(time.Hour), repaired: []string{"node-3"}, blocked: []string{"node-0", "node-1"}},
		{name: "a node without a NodeClaim is not repaired", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0), noClaim: true}}, now: t0.Add(time.Hour)},
		{name: "a node with two NodeClaims is not repaired", policies: badNode,
			nodes: []nodeSpec{{pool: "default", conds: bad(t0), twoClaims: true}}, now: t0.Add(time.Hour)},
		{name: "AWS: Ready Unknown for 30 minutes", policies: AWSPolicies(),
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown, t0)}}},
			now:   t0.Add(30 * time.Minute), repaired: []string{"node-0"}},
		{name: "AWS: Ready False for 29 minutes is tolerated", policies: AWSPolicies(),
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, t0)}}},
			now:   t0.Add(29 * time.Minute), next: t0.Add(30 * time.Minute)},
		{name: "AWS: Ready True is healthy", policies: AWSPolicies(),
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue, t0)}}},
			now:   t0.Add(time.Hour)},
		{name: "AWS: accelerated hardware failed for 10 minutes", policies: AWSPolicies(),
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionFalse, t0), cond("AcceleratedHardwareReady", corev1.ConditionFalse, t0)}}},
			now: t0.Add(10 * time.Minute), repaired: []string{"node-0"}},
		{name: "AWS: the node monitoring agent's kernel condition", policies: AWSPolicies(),
			nodes: []nodeSpec{{pool: "default", conds: []corev1.NodeCondition{cond("KernelReady", corev1.ConditionFalse, t0)}}},
			now:   t0.Add(20 * time.Minute), next: t0.Add(30 * time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes, claims := build(tc.nodes)
			plan := Decide(Input{Nodes: nodes, NodeClaims: claims, Policies: tc.policies, Now: tc.now})
			var repaired, blocked []string
			for _, r := range plan.Repairs {
				if r.Node.Spec.ProviderID != r.NodeClaim.Status.ProviderID {
					t.Errorf("repair pairs node %s with claim %s", r.Node.Name, r.NodeClaim.Name)
				}
				repaired = append(repaired, r.Node.Name)
			}
			for _, b := range plan.Blocked {
				blocked = append(blocked, b.Node.Name)
				if b.Message == "" {
					t.Errorf("blocked %s without a message", b.Node.Name)
				}
			}
			if !slices.Equal(repaired, tc.repaired) {
				t.Errorf("repaired %v, want %v", repaired, tc.repaired)
			}
			if !slices.Equal(blocked, tc.blocked) {
				t.Errorf("blocked %v, want %v", blocked, tc.blocked)
			}
			if !plan.Next.Equal(tc.next) {
				t.Errorf("next %v, want %v", plan.Next, tc.next)
			}
		})
	}
}

func TestDecideReportsTheCondition(t *testing.T) {
	nodes, claims := build([]nodeSpec{{pool: "gpu", conds: []corev1.NodeCondition{
		cond(corev1.NodeReady, corev1.ConditionFalse, t0), cond("AcceleratedHardwareReady", corev1.ConditionFalse, t0.Add(5*time.Minute))}}})
	plan := Decide(Input{Nodes: nodes, NodeClaims: claims, Policies: AWSPolicies(), Now: t0.Add(time.Hour)})
	if len(plan.Repairs) != 1 {
		t.Fatalf("repairs %v, want one", plan.Repairs)
	}
	// The accelerated hardware condition is due at t0+15m, Ready at t0+30m.
	if r := plan.Repairs[0]; r.Condition.Type != "AcceleratedHardwareReady" || r.Toleration != 10*time.Minute {
		t.Errorf("condition %s (%s), want AcceleratedHardwareReady (10m)", r.Condition.Type, r.Toleration)
	}
}

func TestAllowedUnhealthy(t *testing.T) {
	for total, want := range map[int]int{0: 0, 1: 1, 3: 1, 5: 1, 6: 2, 10: 2, 11: 3, 100: 20} {
		if got := AllowedUnhealthy(total); got != want {
			t.Errorf("AllowedUnhealthy(%d) = %d, want %d", total, got, want)
		}
	}
}

// TestTerminationTimestamp ports the suite's termination grace period
// cases: the deadline is cut to now, unless it has already passed.
func TestTerminationTimestamp(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name, annotation, want string
	}{
		{name: "none: now", want: now.Format(time.RFC3339)},
		{name: "later, from the nodepool's terminationGracePeriod: now", annotation: now.Add(2 * time.Hour).Format(time.RFC3339), want: now.Format(time.RFC3339)},
		{name: "already passed: kept", annotation: now.Add(-3 * time.Minute).Format(time.RFC3339)},
		{name: "unparsable: now", annotation: "soon", want: now.Format(time.RFC3339)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{}
			if tc.annotation != "" {
				nc.Annotations = map[string]string{wellknown.NodeClaimTerminationTimestampAnnotation: tc.annotation}
			}
			if got := TerminationTimestamp(nc, now); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
