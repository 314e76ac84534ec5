package launchtemplate

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's launch template provider suite
// (aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go),
// the cases ported so far, through Build (the templates of one launch,
// without AWS) and nodeLabels.
func launchTemplateCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/launchtemplate", File: "pkg/providers/launchtemplate/suite_test.go", Spec: "LaunchTemplate Provider > " + spec}
}

func TestConformanceLaunchTemplates(t *testing.T) {
	for _, tc := range []struct {
		spec, family string
		want         bool
	}{
		{"should not add the do not sync taints label to nodes when AMI type is custom", catalog.FamilyCustom, false},
		{"should add the do not sync taints label to nodes when AMI type is al2", catalog.FamilyAL2, true},
		{"should add the do not sync taints label to nodes when AMI type is al2023", catalog.FamilyAL2023, true},
		{"should add the do not sync taints label to nodes when AMI type is br", catalog.FamilyBottlerocket, true},
		{"should add the do not sync taints label to nodes when AMI type is windows", catalog.FamilyWindows2022, true},
	} {
		conformance.Run(t, launchTemplateCase(tc.spec), func(t *testing.T) {
			labels := nodeLabels(readyClass(), &karpv1.NodeClaim{}, "", tc.family)
			if v, ok := labels[wellknown.DoNotSyncTaintsLabel]; ok != tc.want || (ok && v != "true") {
				t.Errorf("labels %v", labels)
			}
		})
	}

	// each builds the templates of the suite's default launch and checks
	// every one of them.
	each := func(t *testing.T, req Request, check func(t *testing.T, d *ec2types.RequestLaunchTemplateData)) {
		t.Helper()
		res, err := Build(req)
		if err != nil || len(res) == 0 {
			t.Fatal(res, err)
		}
		for _, r := range res {
			check(t, r.Input.LaunchTemplateData)
		}
	}
	conformance.Run(t, launchTemplateCase("Detailed Monitoring > should default detailed monitoring to off"), func(t *testing.T) {
		each(t, request(), func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.Monitoring == nil || aws.ToBool(d.Monitoring.Enabled) {
				t.Errorf("monitoring %+v", d.Monitoring)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Detailed Monitoring > should pass detailed monitoring setting to the launch template at creation"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.DetailedMonitoring = aws.Bool(true)
		each(t, req, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.Monitoring == nil || !aws.ToBool(d.Monitoring.Enabled) {
				t.Errorf("monitoring %+v", d.Monitoring)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Enclave Options > should default enclave options to disabled"), func(t *testing.T) {
		each(t, request(), func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.EnclaveOptions == nil || aws.ToBool(d.EnclaveOptions.Enabled) {
				t.Errorf("enclave options %+v", d.EnclaveOptions)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Enclave Options > should enable enclave options when nip-slots is in the nodeclaim's resource requests"), func(t *testing.T) {
		req := request()
		req.NodeClaim.Spec.Resources.Requests = corev1.ResourceList{ResourceNIPSlots: resource.MustParse("1")}
		each(t, req, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.EnclaveOptions == nil || !aws.ToBool(d.EnclaveOptions.Enabled) {
				t.Errorf("enclave options %+v", d.EnclaveOptions)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Instance Metadata > should set the default instance metadata settings on instances"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.MetadataOptions = nil // the CRD's defaults, as Karpless fills them
		each(t, req, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			m := d.MetadataOptions
			if m.HttpEndpoint != ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled || m.HttpProtocolIpv6 != ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled ||
				aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired {
				t.Errorf("metadata options %+v", m)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Instance Metadata > should set instance metadata tags to disabled"), func(t *testing.T) {
		each(t, request(), func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.MetadataOptions.InstanceMetadataTags != ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled {
				t.Errorf("metadata tags %q", d.MetadataOptions.InstanceMetadataTags)
			}
		})
	})
}
