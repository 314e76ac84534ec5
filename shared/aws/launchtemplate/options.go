package launchtemplate

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// ResourceNIPSlots is the extended resource of Nitro Enclaves slots
// (Karpenter's v1.ResourceNIPSlots): a NodeClaim that requests it gets an
// instance with enclaves enabled.
const ResourceNIPSlots corev1.ResourceName = "eks.amazonaws.com/nip-slots"

// ipv6MetadataUnsupported are the regions whose EC2 takes no
// HttpProtocolIpv6 metadata option, as Karpenter v1.14.1 lists them.
var ipv6MetadataUnsupported = map[string]bool{
	"us-iso-east-1": true, "us-iso-west-1": true,
	"us-isob-east-1": true, "us-isob-west-1": true,
	"us-isof-south-1": true, "us-isof-east-1": true,
}

// launchOptions sets what Karpenter's launch template builder sets
// beside the class's settings: enclave options (enabled when the claim
// requests enclave slots, explicitly disabled otherwise) and no IMDS
// IPv6 setting in the regions that refuse one.
func launchOptions(d *ec2types.RequestLaunchTemplateData, claim *karpv1.NodeClaim, region string) {
	_, enclave := claim.Spec.Resources.Requests[ResourceNIPSlots]
	d.EnclaveOptions = &ec2types.LaunchTemplateEnclaveOptionsRequest{Enabled: aws.Bool(enclave)}
	if ipv6MetadataUnsupported[region] && d.MetadataOptions != nil {
		d.MetadataOptions.HttpProtocolIpv6 = ""
	}
}
