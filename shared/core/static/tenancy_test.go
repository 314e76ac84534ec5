package static

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestTypeAllowedTenancy: a static NodePool that requires dedicated
// tenancy can launch the types (each can be launched dedicated, as
// Karpenter's instance types require tenancy In [default, dedicated]); one
// that requires a tenancy EC2 has not cannot.
func TestTypeAllowedTenancy(t *testing.T) {
	const key = wellknown.InstanceTenancyLabel
	it := &scheduling.InstanceType{
		Name:         "m5.large",
		Labels:       map[string]string{wellknown.InstanceTypeLabel: "m5.large", key: "default"},
		LabelChoices: map[string][]string{key: {"default", "dedicated"}},
	}
	for _, tc := range []struct {
		vals []string
		want bool
	}{{[]string{"dedicated"}, true}, {[]string{"default"}, true}, {[]string{"host"}, false}} {
		reqs := scheduling.NewRequirements(scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, tc.vals...))
		if got := typeAllowed(it, reqs); got != tc.want {
			t.Errorf("tenancy In %v: allowed %v, want %v", tc.vals, got, tc.want)
		}
	}
}
