package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// withTenancyChoices gives every test type the AWS provider's tenancy
// choices: launched default unless the claim allows dedicated only.
func withTenancyChoices(s *Snapshot) *Snapshot {
	for _, it := range s.NodeClasses["default"].InstanceTypes {
		it.Labels[wellknown.InstanceTenancyLabel] = "default"
		it.LabelChoices = map[string][]string{wellknown.InstanceTenancyLabel: {"default", "dedicated"}}
	}
	return s
}

func TestLabelChoices(t *testing.T) {
	const key = wellknown.InstanceTenancyLabel
	tenancy := func(op corev1.NodeSelectorOperator, vals ...string) podOpt {
		return requiredAffinity([]corev1.NodeSelectorRequirement{expr(key, op, vals...)})
	}
	for _, tc := range []struct {
		name string
		pool []poolOpt
		pods []podOpt
		// claims is the NodeClaims wanted (-1: the pods are not all placed),
		// req what the first claim must require of the key ("" nothing).
		claims int
		req    string
	}{
		{name: "no requirement", pods: []podOpt{nil}, claims: 1},
		{name: "a choice", pods: []podOpt{nodeSelector(key, "dedicated")}, claims: 1, req: "dedicated"},
		{name: "the label's value", pods: []podOpt{nodeSelector(key, "default")}, claims: 1, req: "default"},
		{name: "no choice", pods: []podOpt{nodeSelector(key, "host")}, claims: -1},
		{name: "pool and pod choose alike", pool: []poolOpt{withReq(key, corev1.NodeSelectorOpIn, "dedicated")}, pods: []podOpt{nodeSelector(key, "dedicated")}, claims: 1, req: "dedicated"},
		{name: "pool and pod choose apart", pool: []poolOpt{withReq(key, corev1.NodeSelectorOpIn, "dedicated")}, pods: []podOpt{nodeSelector(key, "default")}, claims: -1},
		{name: "choices apart go on two claims", pods: []podOpt{nodeSelector(key, "dedicated"), nodeSelector(key, "default")}, claims: 2, req: "dedicated"},
		// Each allows one choice, both none: Karpenter's types (tenancy
		// In [default, dedicated]) meet each pod and not the two at once.
		{name: "exclusions that leave no choice go on two claims", pods: []podOpt{tenancy(corev1.NodeSelectorOpNotIn, "default"), tenancy(corev1.NodeSelectorOpNotIn, "dedicated")}, claims: 2},
		{name: "the pool's exclusion and the pod's leave no choice", pool: []poolOpt{withReq(key, corev1.NodeSelectorOpNotIn, "default")}, pods: []podOpt{tenancy(corev1.NodeSelectorOpNotIn, "dedicated")}, claims: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for i, o := range tc.pods {
				var opts []podOpt
				if o != nil {
					opts = append(opts, o)
				}
				pods = append(pods, mkPod(string(rune('a'+i)), "100m", "128Mi", opts...))
			}
			r := solve(t, withTenancyChoices(snapshot([]*karpv1.NodePool{mkPool("default", tc.pool...)}, pods...)))
			placed := 0
			for _, p := range pods {
				if placementOf(r, p) != "" {
					placed++
				}
			}
			if tc.claims < 0 {
				if placed == len(pods) {
					t.Fatalf("all pods placed on %d claims, want some left out", len(r.NewNodeClaims))
				}
				return
			}
			if placed != len(pods) || len(r.NewNodeClaims) != tc.claims {
				t.Fatalf("%d of %d pods placed on %d claims, want all on %d (unschedulable: %v)", placed, len(pods), len(r.NewNodeClaims), tc.claims, r.Unschedulable)
			}
			got := reqOf(claimOf(r, pods[0]), key)
			if tc.req == "" && tc.claims == 1 {
				if RequirementsFromNodePool(claimOf(r, pods[0]).Requirements).Has(key) {
					t.Errorf("claim requires %s, want nothing", got)
				}
			} else if tc.req != "" && (got.Len() != 1 || !got.Has(tc.req)) {
				t.Errorf("claim requires %s, want %s", got, tc.req)
			}
		})
	}
}

func TestInstanceTypeLabelMatches(t *testing.T) {
	it := &InstanceType{
		Labels:       map[string]string{"arch": "amd64", "tenancy": "default"},
		LabelChoices: map[string][]string{"tenancy": {"default", "dedicated"}},
	}
	for _, tc := range []struct {
		r    *Requirement
		want bool
	}{
		{NewRequirement("arch", corev1.NodeSelectorOpIn, "amd64"), true},
		{NewRequirement("arch", corev1.NodeSelectorOpIn, "arm64"), false},
		{NewRequirement("tenancy", corev1.NodeSelectorOpIn, "dedicated"), true},
		{NewRequirement("tenancy", corev1.NodeSelectorOpNotIn, "default"), true},
		{NewRequirement("tenancy", corev1.NodeSelectorOpNotIn, "default", "dedicated"), false},
		{NewRequirement("tenancy", corev1.NodeSelectorOpIn, "host"), false},
		{NewRequirement("tenancy", corev1.NodeSelectorOpDoesNotExist), false},
		{NewRequirement("tenancy", corev1.NodeSelectorOpExists), true},
		{NewRequirement("gpu", corev1.NodeSelectorOpDoesNotExist), true},
	} {
		if got := it.LabelMatches(tc.r); got != tc.want {
			t.Errorf("LabelMatches(%s) = %v, want %v", tc.r, got, tc.want)
		}
	}
	if got := it.LabelValues("tenancy"); len(got) != 2 {
		t.Errorf("LabelValues(tenancy) = %v", got)
	}
	if got := it.LabelValues("arch"); len(got) != 1 || got[0] != "amd64" {
		t.Errorf("LabelValues(arch) = %v", got)
	}
	if got := it.LabelValues("gpu"); got != nil {
		t.Errorf("LabelValues(gpu) = %v", got)
	}
}
