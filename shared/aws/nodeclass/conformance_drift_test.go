package nodeclass

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's cloud provider suite (aws/karpenter-provider-aws
// pkg/cloudprovider/suite_test.go), its Static Drift Detection cases: an
// edit to the class drifts its NodeClaims (NodeClassDrift) exactly when it
// changes Hash, since the class's hash annotation is compared with the one
// its NodeClaims were launched with (the comparison itself is
// shared/core/disruption's).
func staticDriftCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/cloudprovider", File: "pkg/cloudprovider/suite_test.go",
		Spec: "CloudProvider > NodeClaim Drift > Static Drift Detection > " + spec}
}

// staticDriftClass is the context's BeforeEach class.
func staticDriftClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"*": "*"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"*": "*"}}},
			Role:                       "test-role",
			UserData:                   ptr.To("Fake Userdata"),
			Tags:                       map[string]string{"fakeKey": "fakeValue"},
			Context:                    ptr.To("fake-context"),
			DetailedMonitoring:         ptr.To(false),
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			AssociatePublicIPAddress:   ptr.To(false),
			MetadataOptions: &awsv1.MetadataOptions{
				HTTPEndpoint: ptr.To("disabled"), HTTPProtocolIPv6: ptr.To("disabled"),
				HTTPPutResponseHopLimit: ptr.To(int64(1)), HTTPTokens: ptr.To("optional"),
			},
			BlockDeviceMappings: []*awsv1.BlockDeviceMapping{{
				DeviceName: ptr.To("fakeName"),
				EBS: &awsv1.BlockDevice{
					DeleteOnTermination: ptr.To(false), Encrypted: ptr.To(false), IOPS: ptr.To(int64(0)),
					KMSKeyID: ptr.To("fakeKMSKeyID"), SnapshotID: ptr.To("fakeSnapshot"), Throughput: ptr.To(int64(0)),
					VolumeSize: resource.NewScaledQuantity(2, resource.Giga), VolumeType: ptr.To("standard"),
				},
			}},
		},
	}
}

func TestConformanceStaticDrift(t *testing.T) {
	bdm := func(f func(*awsv1.BlockDeviceMapping)) func(*awsv1.EC2NodeClassSpec) {
		return func(s *awsv1.EC2NodeClassSpec) { f(s.BlockDeviceMappings[0]) }
	}
	ebs := func(f func(*awsv1.BlockDevice)) func(*awsv1.EC2NodeClassSpec) {
		return bdm(func(b *awsv1.BlockDeviceMapping) { f(b.EBS) })
	}
	// Each entry as mergo merges it into the class (override, slices
	// element by element): one field set, the rest kept.
	for _, tc := range []struct {
		entry string
		edit  func(*awsv1.EC2NodeClassSpec)
	}{
		{"UserData", func(s *awsv1.EC2NodeClassSpec) { s.UserData = ptr.To("userdata-test-2") }},
		{"Tags", func(s *awsv1.EC2NodeClassSpec) { s.Tags["keyTag-test-3"] = "valueTag-test-3" }},
		{"Context", func(s *awsv1.EC2NodeClassSpec) { s.Context = ptr.To("context-2") }},
		{"DetailedMonitoring", func(s *awsv1.EC2NodeClassSpec) { s.DetailedMonitoring = ptr.To(true) }},
		{"InstanceStorePolicy", func(s *awsv1.EC2NodeClassSpec) {
			p := awsv1.InstanceStorePolicyRAID0
			s.InstanceStorePolicy = &p
		}},
		{"AssociatePublicIPAddress", func(s *awsv1.EC2NodeClassSpec) { s.AssociatePublicIPAddress = ptr.To(true) }},
		{"MetadataOptions HTTPEndpoint", func(s *awsv1.EC2NodeClassSpec) { s.MetadataOptions.HTTPEndpoint = ptr.To("enabled") }},
		{"MetadataOptions HTTPProtocolIPv6", func(s *awsv1.EC2NodeClassSpec) { s.MetadataOptions.HTTPProtocolIPv6 = ptr.To("enabled") }},
		{"MetadataOptions HTTPPutResponseHopLimit", func(s *awsv1.EC2NodeClassSpec) { s.MetadataOptions.HTTPPutResponseHopLimit = ptr.To(int64(10)) }},
		{"MetadataOptions HTTPTokens", func(s *awsv1.EC2NodeClassSpec) { s.MetadataOptions.HTTPTokens = ptr.To("required") }},
		{"BlockDeviceMapping DeviceName", bdm(func(b *awsv1.BlockDeviceMapping) { b.DeviceName = ptr.To("map-device-test-3") })},
		{"BlockDeviceMapping RootVolume", bdm(func(b *awsv1.BlockDeviceMapping) { b.RootVolume = true })},
		{"BlockDeviceMapping DeleteOnTermination", ebs(func(e *awsv1.BlockDevice) { e.DeleteOnTermination = ptr.To(true) })},
		{"BlockDeviceMapping Encrypted", ebs(func(e *awsv1.BlockDevice) { e.Encrypted = ptr.To(true) })},
		{"BlockDeviceMapping IOPS", ebs(func(e *awsv1.BlockDevice) { e.IOPS = ptr.To(int64(10)) })},
		{"BlockDeviceMapping KMSKeyID", ebs(func(e *awsv1.BlockDevice) { e.KMSKeyID = ptr.To("test") })},
		{"BlockDeviceMapping SnapshotID", ebs(func(e *awsv1.BlockDevice) { e.SnapshotID = ptr.To("test") })},
		{"BlockDeviceMapping Throughput", ebs(func(e *awsv1.BlockDevice) { e.Throughput = ptr.To(int64(10)) })},
		{"BlockDeviceMapping VolumeType", ebs(func(e *awsv1.BlockDevice) { e.VolumeType = ptr.To("io1") })},
	} {
		conformance.Run(t, staticDriftCase("should return drifted if a statically drifted EC2NodeClass.Spec field is updated > "+tc.entry), func(t *testing.T) {
			nc := staticDriftClass()
			before := Hash(nc, cluster.CABundle)
			tc.edit(&nc.Spec)
			if Hash(nc, cluster.CABundle) == before {
				t.Errorf("hash unchanged by the %s edit: NodeClaims would not drift", tc.entry)
			}
		})
	}
	conformance.Run(t, staticDriftCase("should return drifted when updating blockDeviceMapping volumeSize"), func(t *testing.T) {
		nc := staticDriftClass()
		before := Hash(nc, cluster.CABundle)
		nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = resource.NewScaledQuantity(10, resource.Giga)
		if Hash(nc, cluster.CABundle) == before {
			t.Error("hash unchanged by the volumeSize edit")
		}
	})
	for _, tc := range []struct {
		entry string
		edit  func(*awsv1.EC2NodeClassSpec)
	}{
		{"AMI Drift", func(s *awsv1.EC2NodeClassSpec) {
			s.AMIFamily = ptr.To("AL2023")
			s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"ami-key-1": "ami-value-1"}}}
		}},
		{"Subnet Drift", func(s *awsv1.EC2NodeClassSpec) {
			s.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"sn-key-1": "sn-value-1"}}}
		}},
		{"SecurityGroup Drift", func(s *awsv1.EC2NodeClassSpec) {
			s.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"sg-key": "sg-value"}}}
		}},
	} {
		conformance.Run(t, staticDriftCase("should not return drifted if dynamic fields are updated > "+tc.entry), func(t *testing.T) {
			nc := staticDriftClass()
			before := Hash(nc, cluster.CABundle)
			tc.edit(&nc.Spec)
			if Hash(nc, cluster.CABundle) != before {
				t.Errorf("hash changed by the %s edit: NodeClaims would drift statically", tc.entry)
			}
		})
	}
}
