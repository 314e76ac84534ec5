package crds_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/poolstatus"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// awsWellKnownLabels is Karpenter's WellKnownLabels once the AWS provider
// has added its own (its pkg/apis/v1/labels.go init).
var awsWellKnownLabels = append(append([]string{}, coreWellKnownLabels...),
	"karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-type",
	"karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/instance-hypervisor",
	"karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category",
	"karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/instance-family",
	"karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-size",
	"karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-cpu",
	"karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
	"karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth",
	"karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name",
	"karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count",
	"karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name",
	"karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count",
	"topology.k8s.aws/zone-id", wellknown.InstanceTenancyLabel,
	"karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition",
)

// awsPool is the NodePool of the provider's CEL suite as its client sends
// it: an EC2NodeClass and one capacity-type requirement.
func awsPool() *karpv1.NodePool {
	np := celPool()
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	return np
}

// replaceRequirements is Karpenter's test.ReplaceRequirements: requirements
// on the same keys are dropped, then reqs appended.
func replaceRequirements(np *karpv1.NodePool, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	var kept []karpv1.NodeSelectorRequirementWithMinValues
	for _, have := range np.Spec.Template.Spec.Requirements {
		replaced := false
		for _, r := range reqs {
			replaced = replaced || r.Key == have.Key
		}
		if !replaced {
			kept = append(kept, have)
		}
	}
	np.Spec.Template.Spec.Requirements = append(kept, reqs...)
	return np
}

func TestConformanceAWSNodePoolValidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: awsAPISuite, File: "pkg/apis/v1/nodepool_validation_cel_test.go", Spec: "CEL/Validation > " + spec}
	}
	// Every case is admitted; RuntimeValidate decides.
	check := func(t *testing.T, np *karpv1.NodePool, runtimeOK bool) {
		t.Helper()
		admitted(t, poolVerdict(t, np))
		if runtimeOK {
			valid(t, poolstatus.Validate(np))
		} else {
			invalid(t, poolstatus.Validate(np))
		}
	}
	r := "Requirements > "
	conformance.Run(t, c(r+"should allow well known label exceptions"), func(t *testing.T) {
		for _, label := range awsWellKnownLabels {
			switch label {
			case wellknown.NodePoolLabel, wellknown.CapacityTypeLabel, wellknown.InstanceTenancyLabel:
				continue
			}
			np := awsPool()
			np.Spec.Template.Spec.Requirements = reqs(rq(label, corev1.NodeSelectorOpIn, "test"))
			check(t, np, true)
		}
	})
	for _, e := range []struct {
		title, key string
		values     []string
		ok         bool
	}{
		{"should fail validation with only invalid capacity types", wellknown.CapacityTypeLabel, []string{"xspot"}, false},
		{"should pass validation with valid capacity types", wellknown.CapacityTypeLabel, []string{"on-demand"}, true},
		{"should fail open if invalid and valid capacity types are present", wellknown.CapacityTypeLabel, []string{"on-demand", "xspot"}, true},
		{"should fail validation with only invalid tenancy types", wellknown.InstanceTenancyLabel, []string{"xdedicated"}, false},
		{"should pass validation with valid tenancy types", wellknown.InstanceTenancyLabel, []string{"default"}, true},
		{"should fail open if invalid and valid tenancy types are present", wellknown.InstanceTenancyLabel, []string{"default", "xdedicated"}, true},
	} {
		conformance.Run(t, c(r+e.title), func(t *testing.T) {
			check(t, replaceRequirements(awsPool(), rq(e.key, corev1.NodeSelectorOpIn, e.values...)), e.ok)
		})
	}
	conformance.Run(t, c("Labels > should allow well known label exceptions"), func(t *testing.T) {
		for _, label := range awsWellKnownLabels {
			if label == wellknown.NodePoolLabel {
				continue
			}
			np := awsPool()
			np.Spec.Template.Labels = map[string]string{label: "test"}
			check(t, np, true)
		}
	})
}
