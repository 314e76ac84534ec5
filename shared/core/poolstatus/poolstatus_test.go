package poolstatus

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func pool(mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 3}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func class(ready metav1.ConditionStatus, reason string) *awsv1.EC2NodeClass {
	c := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: ready, Reason: reason, Message: "m"}}
	}
	return c
}

// TestConditions ports Karpenter's NodePool readiness and validation
// cases: NodeClassReady follows the class (missing, terminating, readiness
// unknown, not ready with its reason), ValidationSucceeded the runtime
// validation, and Ready both.
func TestConditions(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	terminating := class(metav1.ConditionTrue, "Ready")
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	for _, tc := range []struct {
		name                  string
		np                    *karpv1.NodePool
		class                 *awsv1.EC2NodeClass
		valid, classReady     metav1.ConditionStatus
		classReason, readyMsg string
	}{
		{"a ready class", pool(), class(metav1.ConditionTrue, "Ready"), metav1.ConditionTrue, metav1.ConditionTrue, "NodeClassReady", ""},
		{"no class", pool(), nil, metav1.ConditionTrue, metav1.ConditionFalse, "NodeClassNotFound", "NodeClassReady=False"},
		{"a class being deleted", pool(), terminating, metav1.ConditionTrue, metav1.ConditionFalse, "NodeClassTerminating", "NodeClassReady=False"},
		{"a class not reconciled yet", pool(), class("", ""), metav1.ConditionTrue, metav1.ConditionFalse, "NodeClassReadinessUnknown", "NodeClassReady=False"},
		{"a class whose readiness is unknown", pool(), class(metav1.ConditionUnknown, "Resolving"), metav1.ConditionTrue, metav1.ConditionFalse, "NodeClassReadinessUnknown", "NodeClassReady=False"},
		{"a class not ready gives its reason", pool(), class(metav1.ConditionFalse, "SubnetsNotFound"), metav1.ConditionTrue, metav1.ConditionFalse, "SubnetsNotFound", "NodeClassReady=False"},
		{"an invalid label value", pool(func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "a b"} }), class(metav1.ConditionTrue, "Ready"),
			metav1.ConditionFalse, metav1.ConditionTrue, "NodeClassReady", "ValidationSucceeded=False"},
		{"a taint with an unknown effect, and no class", pool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: "Sometimes"}}
		}), nil, metav1.ConditionFalse, metav1.ConditionFalse, "NodeClassNotFound", "ValidationSucceeded=False, NodeClassReady=False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := Conditions(tc.np, tc.class, now)
			get := func(typ string) metav1.Condition {
				c := meta.FindStatusCondition(conds, typ)
				if c == nil {
					t.Fatalf("no %s condition in %+v", typ, conds)
				}
				if c.ObservedGeneration != 3 {
					t.Errorf("%s observedGeneration %d, want 3", typ, c.ObservedGeneration)
				}
				return *c
			}
			if c := get(karpv1.ConditionTypeValidationSucceeded); c.Status != tc.valid {
				t.Errorf("ValidationSucceeded = %s (%s), want %s", c.Status, c.Message, tc.valid)
			}
			if c := get(karpv1.ConditionTypeNodeClassReady); c.Status != tc.classReady || c.Reason != tc.classReason {
				t.Errorf("NodeClassReady = %s %s, want %s %s", c.Status, c.Reason, tc.classReady, tc.classReason)
			}
			ready := get(karpv1.ConditionTypeReady)
			if want := tc.readyMsg == ""; (ready.Status == metav1.ConditionTrue) != want || ready.Message != tc.readyMsg {
				t.Errorf("Ready = %s %s %q, want ready %v %q", ready.Status, ready.Reason, ready.Message, want, tc.readyMsg)
			}
		})
	}
	// A condition keeps its lastTransitionTime while its status holds.
	np := pool()
	np.Status.Conditions = Conditions(np, class(metav1.ConditionTrue, "Ready"), now)
	later := Conditions(np, class(metav1.ConditionTrue, "Ready"), now.Add(time.Hour))
	if c := meta.FindStatusCondition(later, karpv1.ConditionTypeReady); !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Ready moved its lastTransitionTime to %s without a transition", c.LastTransitionTime)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*karpv1.NodePool)
		want   string
	}{
		{"nothing wrong", func(*karpv1.NodePool) {}, ""},
		{"the nodepool label", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{wellknown.NodePoolLabel: "x"} }, "restricted"},
		{"a restricted domain", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"karpenter.sh/custom": "x"} }, "restricted"},
		{"an unqualified key", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"a/b/c": "x"} }, "invalid key name"},
		{"a nodepool requirement", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}
		}, "in requirements, restricted"},
		{"a startup taint with a bad key", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "bad key", Effect: corev1.TaintEffectNoSchedule}}
		}, "invalid taint key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(pool(tc.mutate))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestResources: status.resources sums the capacity of the pool's claims
// (a registered node's own, the claim's before), counts them in "nodes",
// leaves out claims being deleted and other pools', and is zero, not
// missing, for a pool with nothing.
func TestResources(t *testing.T) {
	claim := func(name, pool, cpu, provider string, deleting bool) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.NodePoolLabel: pool}}}
		nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")}
		nc.Status.ProviderID = provider
		if deleting {
			nc.DeletionTimestamp = &metav1.Time{}
		}
		return nc
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///a/i-1"}, Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("58")}}}
	claims := []*karpv1.NodeClaim{
		claim("a", "default", "2", "aws:///a/i-1", false), // registered: the node's capacity
		claim("b", "default", "2", "", false),             // in flight: the claim's
		claim("c", "default", "16", "", true),             // being deleted
		claim("d", "other", "16", "", false),
	}
	res, n := Resources("default", claims, []*corev1.Node{node})
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "6", corev1.ResourceMemory: "8Gi", corev1.ResourcePods: "58", corev1.ResourceEphemeralStorage: "0", "nodes": "2"}
	if n != 2 {
		t.Errorf("nodes = %d, want 2", n)
	}
	for name, q := range want {
		if got := res[name]; got.Cmp(resource.MustParse(q)) != 0 {
			t.Errorf("%s = %s, want %s", name, got.String(), q)
		}
	}
	empty, n := Resources("none", claims, nil)
	if n != 0 || len(empty) != 5 {
		t.Errorf("an empty pool: %v, %d", empty, n)
	}
}
