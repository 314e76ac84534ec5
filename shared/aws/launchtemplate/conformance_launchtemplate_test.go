package launchtemplate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/scheduling"
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

// builds returns the templates of req, failing the test when there are none.
func builds(t *testing.T, req Request) []Resolved {
	t.Helper()
	res, err := Build(req)
	if err != nil || len(res) == 0 {
		t.Fatal(res, err)
	}
	return res
}

// withPods gives every instance type of req the pods capacity the catalog
// computes when the class's kubelet sets maxPods (allocatable.go): the
// launch template's maxPods comes from that capacity.
func withPods(req Request, pods int64) Request {
	for _, it := range req.InstanceTypes {
		it.Capacity[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	}
	return req
}

// withFamily points the suite's default class at an alias's family.
func withFamily(req Request, alias string) Request {
	req.NodeClass.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
	return req
}

// nodeConfigs are the NodeConfig documents of AL2023 user data, as
// Karpenter's ExpectParseNodeConfigs reads them: every
// application/node.eks.aws part, decoded.
func nodeConfigs(t *testing.T, userData string) []map[string]any {
	t.Helper()
	parts, err := parseMIME(userData)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, p := range parts {
		if p.ContentType != contentTypeNodeCfg {
			continue
		}
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(p.Body), &doc); err != nil {
			t.Fatalf("NodeConfig part: %v\n%s", err, p.Body)
		}
		out = append(out, doc)
	}
	return out
}

// kubeletConfig is spec.kubelet of AL2023 user data's only NodeConfig.
func kubeletConfig(t *testing.T, userData string) map[string]any {
	t.Helper()
	docs := nodeConfigs(t, userData)
	if len(docs) != 1 {
		t.Fatalf("%d NodeConfigs in\n%s", len(docs), userData)
	}
	spec, _ := docs[0]["spec"].(map[string]any)
	kubelet, _ := spec["kubelet"].(map[string]any)
	return kubelet
}

// kubeletField is spec.kubelet.config[field] of AL2023 user data as JSON.
func kubeletField(t *testing.T, userData, field string) string {
	t.Helper()
	cfg, _ := kubeletConfig(t, userData)["config"].(map[string]any)
	raw, err := json.Marshal(cfg[field])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// brKubernetes is settings.kubernetes of Bottlerocket user data.
func brKubernetes(t *testing.T, userData string) map[string]any {
	t.Helper()
	doc := map[string]any{}
	if err := toml.Unmarshal([]byte(userData), &doc); err != nil {
		t.Fatalf("user data is not TOML: %v\n%s", err, userData)
	}
	settings, _ := doc["settings"].(map[string]any)
	k8s, _ := settings["kubernetes"].(map[string]any)
	return k8s
}

func TestConformanceLaunchTemplateContent(t *testing.T) {
	const kms = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	conformance.Run(t, launchTemplateCase("should default to a generated launch template"), func(t *testing.T) {
		for _, r := range builds(t, request()) {
			d := r.Input.LaunchTemplateData
			if !strings.HasPrefix(aws.ToString(r.Input.LaunchTemplateName), NamePrefix) || len(d.BlockDeviceMappings) == 0 || !aws.ToBool(d.BlockDeviceMappings[0].Ebs.Encrypted) {
				t.Errorf("template %s: %+v", aws.ToString(r.Input.LaunchTemplateName), d.BlockDeviceMappings)
			}
		}
	})
	conformance.Run(t, launchTemplateCase("should fail to provision if the instance profile isn't ready"), func(t *testing.T) {
		req := request()
		req.NodeClass.Status.InstanceProfile = ""
		if res, err := Build(req); err == nil {
			t.Errorf("templates without an instance profile: %v", res)
		}
	})
	conformance.Run(t, launchTemplateCase("should use the instance profile on the EC2NodeClass when specified"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.Role = ""
		req.NodeClass.Spec.InstanceProfile = aws.String("overridden-profile")
		req.NodeClass.Status.InstanceProfile = "overridden-profile"
		for _, r := range builds(t, req) {
			if p := r.Input.LaunchTemplateData.IamInstanceProfile; p == nil || aws.ToString(p.Name) != "overridden-profile" {
				t.Errorf("instance profile %+v", p)
			}
		}
	})

	conformance.Run(t, launchTemplateCase("Tags > should request that tags be applied to both network interfaces and spot instance requests"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.Tags = map[string]string{"tag1": "tag1value", "tag2": "tag2value"}
		req.CapacityType = wellknown.CapacityTypeSpot
		for _, r := range builds(t, req) {
			specs := r.Input.LaunchTemplateData.TagSpecifications
			if len(specs) != 2 || specs[0].ResourceType != ec2types.ResourceTypeNetworkInterface || specs[1].ResourceType != ec2types.ResourceTypeSpotInstancesRequest {
				t.Fatalf("tag specifications %+v", specs)
			}
			for _, s := range specs {
				got := map[string]string{}
				for _, tag := range s.Tags {
					got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
				}
				for k, v := range req.NodeClass.Spec.Tags {
					if got[k] != v {
						t.Errorf("%s tags %v lack %s=%s", s.ResourceType, got, k, v)
					}
				}
			}
		}
	})

	// Block device mappings.
	bdm := func(t *testing.T, req Request, check func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest)) {
		t.Helper()
		for _, r := range builds(t, req) {
			check(t, r.Input.LaunchTemplateData.BlockDeviceMappings)
		}
	}
	gp3 := func(t *testing.T, m ec2types.LaunchTemplateBlockDeviceMappingRequest, size int32) {
		t.Helper()
		if m.Ebs == nil || aws.ToInt32(m.Ebs.VolumeSize) != size || m.Ebs.VolumeType != "gp3" || aws.ToInt32(m.Ebs.Iops) != 0 {
			t.Errorf("mapping %s %+v, want %dGiB gp3", aws.ToString(m.DeviceName), m.Ebs, size)
		}
	}
	for _, tc := range []struct{ spec, alias string }{
		{"should default AL2 block device mappings", "al2@latest"},
		{"should default AL2023 block device mappings", "al2023@latest"},
	} {
		conformance.Run(t, launchTemplateCase("Block Device Mappings > "+tc.spec), func(t *testing.T) {
			bdm(t, withFamily(request(), tc.alias), func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest) {
				if len(m) != 1 {
					t.Fatalf("mappings %+v", m)
				}
				gp3(t, m[0], 20)
			})
		})
	}
	io2 := func(size string) *awsv1.BlockDevice {
		return &awsv1.BlockDevice{DeleteOnTermination: aws.Bool(true), Encrypted: aws.Bool(true), VolumeType: aws.String("io2"),
			VolumeSize: ptrTo(resource.MustParse(size)), IOPS: aws.Int64(10_000), KMSKeyID: aws.String(kms)}
	}
	io2Want := func(size int32) *ec2types.LaunchTemplateEbsBlockDeviceRequest {
		return &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(size), VolumeType: "io2", Iops: aws.Int32(10_000),
			DeleteOnTermination: aws.Bool(true), Encrypted: aws.Bool(true), KmsKeyId: aws.String(kms)}
	}
	conformance.Run(t, launchTemplateCase("Block Device Mappings > should use custom block device mapping"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{
			{DeviceName: aws.String("/dev/xvda"), EBS: io2("200G")},
			{DeviceName: aws.String("/dev/xvdb"), EBS: io2("200Gi")},
		}
		bdm(t, req, func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest) {
			if len(m) != 2 || !reflect.DeepEqual(m[0].Ebs, io2Want(187)) || !reflect.DeepEqual(m[1].Ebs, io2Want(200)) {
				t.Errorf("mappings %+v %+v", m[0].Ebs, m[1].Ebs)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Block Device Mappings > should round up for custom block device mappings when specified in gigabytes"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{
			{DeviceName: aws.String("/dev/xvda"), EBS: io2("4G")},
			{DeviceName: aws.String("/dev/xvdb"), EBS: io2("2G")},
		}
		bdm(t, req, func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest) {
			if len(m) != 2 || aws.ToInt32(m[0].Ebs.VolumeSize) != 4 || aws.ToInt32(m[1].Ebs.VolumeSize) != 2 {
				t.Errorf("mappings %+v", m)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Block Device Mappings > should default bottlerocket second volume with root volume size"), func(t *testing.T) {
		bdm(t, withFamily(request(), "bottlerocket@latest"), func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest) {
			if len(m) != 2 {
				t.Fatalf("mappings %+v", m)
			}
			gp3(t, m[0], 4)
			gp3(t, m[1], 20)
		})
	})
	customClass := func(req Request) Request {
		req.NodeClass.Spec.AMIFamily = aws.String(catalog.FamilyCustom)
		req.NodeClass.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"*": "*"}}}
		return req
	}
	conformance.Run(t, launchTemplateCase("Block Device Mappings > should not default block device mappings for custom AMIFamilies"), func(t *testing.T) {
		bdm(t, customClass(request()), func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest) {
			if len(m) != 0 {
				t.Errorf("mappings %+v", m)
			}
		})
	})
	conformance.Run(t, launchTemplateCase("Block Device Mappings > should use custom block device mapping for custom AMIFamilies"), func(t *testing.T) {
		req := customClass(request())
		req.NodeClass.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), EBS: io2("40Gi")}}
		bdm(t, req, func(t *testing.T, m []ec2types.LaunchTemplateBlockDeviceMappingRequest) {
			if len(m) != 1 || !reflect.DeepEqual(m[0].Ebs, io2Want(40)) {
				t.Errorf("mappings %+v", m)
			}
		})
	})

	// User data: the suite's default class is AL2023 (nodeadm NodeConfig).
	userData := func(t *testing.T, req Request) []string {
		t.Helper()
		var out []string
		for _, r := range builds(t, req) {
			out = append(out, r.UserData)
		}
		return out
	}
	udCase := func(spec string) conformance.Case { return launchTemplateCase("User Data > " + spec) }
	conformance.Run(t, udCase("should specify --use-max-pods=false when using ENI-based pod density"), func(t *testing.T) {
		for _, ud := range userData(t, withFamily(request(), "al2@latest")) {
			if !strings.Contains(ud, "--use-max-pods false") {
				t.Errorf("user data\n%s", ud)
			}
		}
	})
	conformance.Run(t, udCase("should specify --use-max-pods=false and --max-pods user value when user specifies maxPods in NodePool"), func(t *testing.T) {
		req := withPods(withFamily(request(), "al2@latest"), 10)
		req.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(10)}
		for _, ud := range userData(t, req) {
			if !strings.Contains(ud, "--use-max-pods false") || !strings.Contains(ud, "--max-pods=10") {
				t.Errorf("user data\n%s", ud)
			}
		}
	})
	conformance.Run(t, udCase("should generate different launch templates for different maxPods values when specifying kubelet configuration"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{ClusterDNS: []string{"test"}}
		// one template per AMI and maxPods: the x86 AMI's 29- and 58-pod
		// types are not combined.
		res := builds(t, req)
		names := map[string]int32{}
		for _, r := range res {
			names[aws.ToString(r.Input.LaunchTemplateName)] = r.MaxPods
			if !strings.Contains(r.UserData, fmt.Sprintf("maxPods: %d", r.MaxPods)) {
				t.Errorf("template for %v (maxPods %d): user data\n%s", r.InstanceTypes, r.MaxPods, r.UserData)
			}
		}
		if len(res) != 4 || len(names) != 4 {
			t.Errorf("templates %v", names)
		}
	})
	for _, tc := range []struct {
		spec, field string
		kubelet     awsv1.KubeletConfiguration
		want        string
	}{
		{"should specify systemReserved when overriding system reserved values", "systemReserved",
			awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}},
			`{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`},
		{"should specify kubeReserved when overriding system reserved values", "kubeReserved",
			awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}},
			`{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`},
		{"should pass evictionHard threshold values when specified", "evictionHard",
			awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"}},
			`{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`},
		{"should pass evictionSoft threshold values when specified", "evictionSoft",
			awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"},
				EvictionSoftGracePeriod: softGrace()},
			`{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`},
		{"should pass evictionSoftGracePeriod values when specified", "evictionSoftGracePeriod",
			awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"},
				EvictionSoftGracePeriod: softGrace()},
			`{"memory.available":"1m0s","nodefs.available":"3m0s","nodefs.inodesFree":"5m0s"}`},
		{"should pass evictionMaxPodGracePeriod when specified", "evictionMaxPodGracePeriod",
			awsv1.KubeletConfiguration{EvictionMaxPodGracePeriod: aws.Int32(300)}, `300`},
		{"should specify podsPerCore", "podsPerCore", awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(2)}, `2`},
		{"should pass ImageGCHighThresholdPercent when specified", "imageGCHighThresholdPercent",
			awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: aws.Int32(50)}, `50`},
		{"should pass ImageGCLowThresholdPercent when specified", "imageGCLowThresholdPercent",
			awsv1.KubeletConfiguration{ImageGCLowThresholdPercent: aws.Int32(50)}, `50`},
		{"should pass cpuCFSQuota when specified", "cpuCFSQuota", awsv1.KubeletConfiguration{CPUCFSQuota: aws.Bool(false)}, `false`},
	} {
		conformance.Run(t, udCase(tc.spec), func(t *testing.T) {
			req := request()
			req.NodeClass.Spec.Kubelet = tc.kubelet.DeepCopy()
			for _, ud := range userData(t, req) {
				if got := kubeletField(t, ud, tc.field); got != tc.want {
					t.Errorf("%s %s, want %s", tc.field, got, tc.want)
				}
			}
		})
	}
	conformance.Run(t, udCase("should specify podsPerCore with maxPods enabled"), func(t *testing.T) {
		// The catalog caps the types' pods at min(maxPods, podsPerCore x
		// vCPUs); the kubelet configuration keeps the class's maxPods.
		req := withPods(request(), 8)
		req.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(2), MaxPods: aws.Int32(100)}
		for _, ud := range userData(t, req) {
			if ppc, mp := kubeletField(t, ud, "podsPerCore"), kubeletField(t, ud, "maxPods"); ppc != "2" || mp != "100" {
				t.Errorf("podsPerCore %s maxPods %s", ppc, mp)
			}
		}
	})
	for _, tc := range []struct{ spec, dns string }{
		{"should specify clusterDNS when running in an ipv6 cluster", "fd4b:121b:812b::a"},
		{"should specify clusterDNS when running in an ipv4 cluster", "10.0.100.10"},
	} {
		conformance.Run(t, udCase(tc.spec), func(t *testing.T) {
			req := request()
			req.Cluster.ClusterDNS = tc.dns
			for _, ud := range userData(t, req) {
				if got := kubeletField(t, ud, "clusterDNS"); got != `["`+tc.dns+`"]` {
					t.Errorf("clusterDNS %s", got)
				}
			}
		})
	}
	for _, tc := range []struct{ entry, label string }{
		{"node-restriction.kubernetes.io", "node-restriction.kubernetes.io/bar"},
		{"kubernetes.io", "kubernetes.io/bar"},
		{"k8s.io", "k8s.io/bar"},
		{"*.node-restriction.kubernetes.io", "foo.node-restriction.kubernetes.io/bar"},
		{"kubernetes.io suffix", "foo.kubernetes.io/bar"},
		{"*.k8s.io", "foo.k8s.io/bar"},
	} {
		conformance.Run(t, udCase("should not pass any labels in restricted domains > "+tc.entry), func(t *testing.T) {
			req := request()
			req.NodeClaim.Labels[tc.label] = "foobar"
			req.NodeClaim.Spec.Requirements = append(req.NodeClaim.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
				Key: tc.label, Operator: corev1.NodeSelectorOpIn, Values: []string{"foobar"}})
			for _, ud := range userData(t, req) {
				if strings.Contains(ud, tc.label) {
					t.Errorf("user data has %s:\n%s", tc.label, ud)
				}
			}
		})
	}
	conformance.Run(t, udCase("should specify --local-disks raid0 when instance-store policy is set on AL2"), func(t *testing.T) {
		req := withFamily(request(), "al2@latest")
		req.NodeClass.Spec.InstanceStorePolicy = ptrTo(awsv1.InstanceStorePolicyRAID0)
		for _, ud := range userData(t, req) {
			if !strings.Contains(ud, "--local-disks raid0") {
				t.Errorf("user data\n%s", ud)
			}
		}
	})
}

func softGrace() map[string]metav1.Duration {
	return map[string]metav1.Duration{"memory.available": {Duration: time.Minute}, "nodefs.available": {Duration: 180 * time.Second}, "nodefs.inodesFree": {Duration: 5 * time.Minute}}
}

// brSettings is settings of Bottlerocket user data.
func brSettings(t *testing.T, userData string) map[string]any {
	t.Helper()
	doc := map[string]any{}
	if err := toml.Unmarshal([]byte(userData), &doc); err != nil {
		t.Fatalf("user data is not TOML: %v\n%s", err, userData)
	}
	settings, _ := doc["settings"].(map[string]any)
	return settings
}

// asJSON renders a decoded value for comparison.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestConformanceLaunchTemplateFamilies(t *testing.T) {
	userData := func(t *testing.T, req Request) []string {
		t.Helper()
		var out []string
		for _, r := range builds(t, req) {
			out = append(out, r.UserData)
		}
		return out
	}
	udCase := func(spec string) conformance.Case { return launchTemplateCase("User Data > " + spec) }

	// Bottlerocket's instance store bootstrap command.
	mount := func(bind ...string) string {
		return asJSON(t, map[string]any{"commands": []any{[]any{"apiclient", "ephemeral-storage", "init"}, append([]any{"apiclient", "ephemeral-storage", "bind"}, toAny(bind)...)},
			"mode": "always", "essential": true})
	}
	for _, tc := range []struct {
		spec, alias, custom string
		want                map[string]string
	}{
		{"should specify RAID0 bootstrap-command when instance-store policy is set on Bottlerocket", "bottlerocket@latest", "",
			map[string]string{"000-mount-instance-storage": mount()}},
		{"should merge bootstrap-commands when instance-store policy is set on Bottlerocket", "bottlerocket@latest",
			"[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\nessential = true\n",
			map[string]string{"000-mount-instance-storage": mount(), "111-say-hello": `{"commands":[["echo","hello"]],"essential":true,"mode":"always"}`}},
		{"should use explicit directories for Bottlerocket v1.45.0", "bottlerocket@v1.45.0", "",
			map[string]string{"000-mount-instance-storage": mount("--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")}},
		{"should use default bind for Bottlerocket v1.46.0", "bottlerocket@v1.46.0", "",
			map[string]string{"000-mount-instance-storage": mount()}},
	} {
		conformance.Run(t, udCase(tc.spec), func(t *testing.T) {
			req := withFamily(request(), tc.alias)
			req.NodeClass.Spec.InstanceStorePolicy = ptrTo(awsv1.InstanceStorePolicyRAID0)
			if tc.custom != "" {
				req.NodeClass.Spec.UserData = aws.String(tc.custom)
			}
			for _, ud := range userData(t, req) {
				cmds, _ := brSettings(t, ud)["bootstrap-commands"].(map[string]any)
				if len(cmds) != len(tc.want) {
					t.Errorf("bootstrap commands %v", cmds)
				}
				for name, want := range tc.want {
					if got := asJSON(t, cmds[name]); got != want {
						t.Errorf("%s %s, want %s", name, got, want)
					}
				}
			}
		})
	}

	// Context Bottlerocket: a bottlerocket@latest class with maxPods 110.
	bottlerocket := func() Request {
		req := withPods(withFamily(request(), "bottlerocket@latest"), 110)
		req.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}
		req.Cluster.ClusterDNS = "10.0.100.10"
		return req
	}
	brCase := func(spec string) conformance.Case { return udCase("Bottlerocket > " + spec) }
	conformance.Run(t, brCase("should not bootstrap on invalid toml user data"), func(t *testing.T) {
		req := bottlerocket()
		req.NodeClass.Spec.UserData = aws.String("#/bin/bash\n ./not-toml.sh")
		if res, err := Build(req); err == nil {
			t.Errorf("templates from invalid TOML: %d", len(res))
		}
	})
	for _, tc := range []struct {
		spec    string
		kubelet *awsv1.KubeletConfiguration
		pods    int64
		want    map[string]string // settings.kubernetes key: JSON value
	}{
		{"should override system reserved values in user data",
			&awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "2", "memory": "3Gi", "ephemeral-storage": "10Gi"}}, 0,
			map[string]string{"system-reserved": `{"cpu":"2","ephemeral-storage":"10Gi","memory":"3Gi"}`}},
		// Karpenter's Context has two Its of this title: kubeReserved, then
		// evictionHard; both are checked here.
		{"should override kube reserved values in user data",
			&awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "2", "memory": "3Gi", "ephemeral-storage": "10Gi"},
				EvictionHard: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"}}, 0,
			map[string]string{"kube-reserved": `{"cpu":"2","ephemeral-storage":"10Gi","memory":"3Gi"}`,
				"eviction-hard": `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`}},
		{"should override soft eviction values in user data",
			&awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%"},
				EvictionSoftGracePeriod: map[string]metav1.Duration{"memory.available": {Duration: time.Minute}}}, 0,
			map[string]string{"eviction-soft": `{"memory.available":"10%"}`, "eviction-soft-grace-period": `{"memory.available":"1m0s"}`}},
		{"should override max pod grace period in user data",
			&awsv1.KubeletConfiguration{MaxPods: aws.Int32(35), EvictionMaxPodGracePeriod: aws.Int32(10)}, 35,
			map[string]string{"api-server": `"https://test-cluster"`, "cluster-certificate": `"Y2EtYnVuZGxlCg=="`, "cluster-name": `"test-cluster"`,
				"cluster-dns-ip": `"10.0.100.10"`, "max-pods": `35`, "eviction-max-pod-grace-period": `10`}},
		{"should specify max pods value when passing maxPods in configuration", &awsv1.KubeletConfiguration{MaxPods: aws.Int32(10)}, 10,
			map[string]string{"max-pods": `10`}},
		{"should pass ImageGCHighThresholdPercent when specified", &awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: aws.Int32(50)}, 0,
			map[string]string{"image-gc-high-threshold-percent": `"50"`}},
		{"should pass ImageGCLowThresholdPercent when specified", &awsv1.KubeletConfiguration{ImageGCLowThresholdPercent: aws.Int32(50)}, 0,
			map[string]string{"image-gc-low-threshold-percent": `"50"`}},
		{"should pass ClusterDNSIP when discovered", nil, 0, map[string]string{"cluster-dns-ip": `"10.0.100.10"`}},
		{"should pass CPUCFSQuota when specified", &awsv1.KubeletConfiguration{CPUCFSQuota: aws.Bool(false)}, 0,
			map[string]string{"cpu-cfs-quota-enforced": `false`}},
	} {
		conformance.Run(t, brCase(tc.spec), func(t *testing.T) {
			req := bottlerocket()
			if tc.kubelet != nil {
				req = withPods(request(), 29)
				req = withFamily(req, "bottlerocket@latest")
				req.Cluster.ClusterDNS = "10.0.100.10"
				if tc.pods > 0 {
					req = withPods(req, tc.pods)
				}
				req.NodeClass.Spec.Kubelet = tc.kubelet
			}
			for _, ud := range userData(t, req) {
				k8s := brKubernetes(t, ud)
				for key, want := range tc.want {
					if got := asJSON(t, k8s[key]); got != want {
						t.Errorf("%s %s, want %s", key, got, want)
					}
				}
			}
		})
	}

	// Labels reach the kubelet from the NodeClaim: the NodePool template's
	// labels and its single-valued requirements (which the provisioner
	// writes as the claim's labels, scheduling.NewNodeClaim.Labels).
	desired := map[string]string{"test-label-1": "value-1", "test-label-2": "value-2"}
	labelled := func(req Request, asRequirements bool) Request {
		for k, v := range desired {
			req.NodeClaim.Labels[k] = v
			if asRequirements {
				req.NodeClaim.Spec.Requirements = append(req.NodeClaim.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
					Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
			}
		}
		return req
	}
	for _, tc := range []struct {
		spec           string
		asRequirements bool
	}{
		{"should specify labels in the Kubelet flags when specified in NodePool", false},
		{"should specify labels in the Kubelet flags when single value requirements are specified in NodePool", true},
	} {
		conformance.Run(t, brCase(tc.spec), func(t *testing.T) {
			for _, ud := range userData(t, labelled(bottlerocket(), tc.asRequirements)) {
				labels, _ := brKubernetes(t, ud)["node-labels"].(map[string]any)
				for k, v := range desired {
					if labels[k] != v {
						t.Errorf("node-labels %v lack %s=%s", labels, k, v)
					}
				}
			}
		})
		conformance.Run(t, udCase("AL2023 > Kubelet > "+tc.spec), func(t *testing.T) {
			for _, ud := range userData(t, labelled(request(), tc.asRequirements)) {
				flags, _ := kubeletConfig(t, ud)["flags"].([]any)
				var flag string
				for _, f := range flags {
					if s, _ := f.(string); strings.HasPrefix(s, "--node-labels") {
						flag = s
					}
				}
				for k, v := range desired {
					if !strings.Contains(flag, k+"="+v) {
						t.Errorf("flags %v lack %s=%s", flags, k, v)
					}
				}
			}
		})
	}

	conformance.Run(t, udCase("AL2023 > Kubelet > should specify taints in the KubeletConfiguration when specified in NodePool"), func(t *testing.T) {
		req := request()
		want := []corev1.Taint{{Key: "test-taint-1", Effect: corev1.TaintEffectNoSchedule}, {Key: "test-taint-2", Effect: corev1.TaintEffectNoExecute}}
		req.NodeClaim.Spec.Taints, req.NodeClaim.Spec.StartupTaints = want, nil
		for _, ud := range userData(t, req) {
			var got []corev1.Taint
			if err := json.Unmarshal([]byte(kubeletField(t, ud, "registerWithTaints")), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || !reflect.DeepEqual(got[:2], want) {
				t.Errorf("registerWithTaints %v", got)
			}
		}
	})
	for _, tc := range []struct {
		field   string
		kubelet awsv1.KubeletConfiguration
		want    string
	}{
		{"systemReserved", awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}},
			`{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`},
		{"kubeReserved", awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}},
			`{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`},
		{"evictionHard", awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"}},
			`{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`},
		{"evictionSoft", awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"},
			EvictionSoftGracePeriod: softGrace()}, `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`},
		{"evictionSoftGracePeriod", awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"},
			EvictionSoftGracePeriod: softGrace()}, `{"memory.available":"1m0s","nodefs.available":"3m0s","nodefs.inodesFree":"5m0s"}`},
		{"evictionMaxPodGracePeriod", awsv1.KubeletConfiguration{EvictionMaxPodGracePeriod: aws.Int32(300)}, `300`},
		{"podsPerCore", awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(2)}, `2`},
		{"clusterDNS", awsv1.KubeletConfiguration{ClusterDNS: []string{"10.0.100.0"}}, `["10.0.100.0"]`},
		{"imageGCHighThresholdPercent", awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: aws.Int32(50)}, `50`},
		{"imageGCLowThresholdPercent", awsv1.KubeletConfiguration{ImageGCLowThresholdPercent: aws.Int32(50)}, `50`},
		{"cpuCFSQuota", awsv1.KubeletConfiguration{CPUCFSQuota: aws.Bool(false)}, `false`},
	} {
		conformance.Run(t, udCase("AL2023 > Kubelet > should specify KubletConfiguration field when specified in NodePool > "+tc.field), func(t *testing.T) {
			req := request()
			req.NodeClass.Spec.Kubelet = tc.kubelet.DeepCopy()
			for _, ud := range userData(t, req) {
				if got := kubeletField(t, ud, tc.field); got != tc.want {
					t.Errorf("%s %s, want %s", tc.field, got, tc.want)
				}
			}
		})
	}
	conformance.Run(t, udCase("AL2023 > should set LocalDiskStrategy to Raid0 when specified by the InstanceStorePolicy"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.InstanceStorePolicy = ptrTo(awsv1.InstanceStorePolicyRAID0)
		for _, ud := range userData(t, req) {
			docs := nodeConfigs(t, ud)
			if len(docs) != 1 {
				t.Fatalf("%d NodeConfigs", len(docs))
			}
			spec, _ := docs[0]["spec"].(map[string]any)
			instance, _ := spec["instance"].(map[string]any)
			if got := asJSON(t, instance["localStorage"]); got != `{"strategy":"RAID0"}` {
				t.Errorf("localStorage %s", got)
			}
		}
	})
	conformance.Run(t, udCase("AL2023 > should fail to create launch templates if cluster CIDR is unresolved"), func(t *testing.T) {
		req := request()
		req.Cluster.ServiceCIDR = ""
		if res, err := Build(req); err == nil {
			t.Errorf("templates without the service CIDR: %d", len(res))
		}
	})

	// Custom AMI selector: one amd64 image.
	custom := func() Request {
		req := request()
		req.NodeClass.Spec.AMIFamily = aws.String(catalog.FamilyCustom)
		req.NodeClass.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"*": "*"}}}
		req.NodeClass.Status.AMIs = []awsv1.AMI{{ID: "ami-123", Requirements: []corev1.NodeSelectorRequirement{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
		return req
	}
	customCase := func(spec string) conformance.Case { return udCase("Custom AMI Selector > " + spec) }
	conformance.Run(t, customCase("should use ami selector specified in EC2NodeClass"), func(t *testing.T) {
		res := builds(t, custom())
		if len(res) != 1 || aws.ToString(res[0].Input.LaunchTemplateData.ImageId) != "ami-123" {
			t.Errorf("templates %+v", res)
		}
	})
	conformance.Run(t, customCase("should copy over userData untouched when AMIFamily is Custom"), func(t *testing.T) {
		req := custom()
		req.NodeClass.Spec.UserData = aws.String("special user data")
		for _, ud := range userData(t, req) {
			if ud != "special user data" {
				t.Errorf("user data %q", ud)
			}
		}
	})
	conformance.Run(t, customCase("should fail if no amis match selector."), func(t *testing.T) {
		req := custom()
		req.NodeClass.Status.AMIs = nil
		if res, err := Build(req); err == nil {
			t.Errorf("templates without AMIs: %d", len(res))
		}
	})
	conformance.Run(t, customCase("should fail if no instanceType matches ami requirements."), func(t *testing.T) {
		req := custom()
		req.NodeClass.Status.AMIs[0].Requirements[0].Values = []string{"newnew"}
		if res, err := Build(req); err == nil {
			t.Errorf("templates without a compatible type: %d", len(res))
		}
	})
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func TestConformanceLaunchTemplateNetworking(t *testing.T) {
	// efa makes the suite's default launch one of a pod requesting two EFA
	// devices: the claim requests them and every type offered has them.
	efa := func(req Request) Request {
		req.NodeClaim.Spec.Resources.Requests = corev1.ResourceList{wellknown.ResourceEFA: resource.MustParse("2")}
		for _, it := range req.InstanceTypes {
			it.Capacity[wellknown.ResourceEFA] = resource.MustParse("2")
		}
		return req
	}
	// first is the first interface of every template (Karpenter pops one).
	first := func(t *testing.T, req Request, check func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest)) {
		t.Helper()
		for _, r := range builds(t, req) {
			nis := r.Input.LaunchTemplateData.NetworkInterfaces
			if len(nis) == 0 {
				t.Fatalf("template for %v has no network interfaces", r.InstanceTypes)
			}
			check(t, nis)
		}
	}
	for _, tc := range []struct {
		entry            string
		set, want, isEFA bool
	}{
		{"AssociatePublicIPAddress is true", true, true, false},
		{"AssociatePublicIPAddress is false", false, false, false},
		{"AssociatePublicIPAddress is true (EFA)", true, true, true},
		{"AssociatePublicIPAddress is false (EFA)", false, false, true},
	} {
		conformance.Run(t, launchTemplateCase("User Data > Public IP Association > should set 'AssociatePublicIPAddress' based on EC2NodeClass > "+tc.entry), func(t *testing.T) {
			req := request()
			if tc.isEFA {
				req = efa(req)
			}
			req.NodeClass.Spec.AssociatePublicIPAddress = aws.Bool(tc.set)
			first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
				if nis[0].AssociatePublicIpAddress == nil || *nis[0].AssociatePublicIpAddress != tc.want || (tc.isEFA && aws.ToString(nis[0].InterfaceType) != "efa") {
					t.Errorf("interface %+v", nis[0])
				}
			})
		})
	}
	for _, family := range []string{"IPv4", "IPv6"} {
		for _, n := range []int32{0, 1, 10, 100} {
			conformance.Run(t, launchTemplateCase(fmt.Sprintf("User Data > IP Prefix Delegation > should set '%sPrefixCount' based on EC2NodeClass > %sPrefixCount is %d", family, family, n)), func(t *testing.T) {
				req := request()
				req.NodeClass.Spec.IPPrefixCount = aws.Int32(n)
				if family == "IPv6" {
					req.Cluster.IPFamily = "ipv6"
				}
				first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
					got := nis[0].Ipv4PrefixCount
					if family == "IPv6" {
						got = nis[0].Ipv6PrefixCount
					}
					if got == nil || *got != n {
						t.Errorf("interface %+v", nis[0])
					}
				})
			})
		}
	}
	for _, tc := range []struct {
		entry                  string
		publicSet, public, efa bool
	}{
		{"AssociatePublicIPAddress is not set and EFA is false", false, true, false},
		{"AssociatePublicIPAddress is not set and EFA is true", false, false, true},
		{"AssociatePublicIPAddress is set as true and EFA is true", true, true, true},
		{"AssociatePublicIPAddress is set as false and EFA is false", true, false, false},
	} {
		conformance.Run(t, launchTemplateCase("Networking > should provision a v6 address and set v6 primary IP as true when running in an ipv6 cluster > should set Primary IPv6 as true and provision a IPv6 address > "+tc.entry), func(t *testing.T) {
			req := request()
			req.Cluster.IPFamily = "ipv6"
			if tc.efa {
				req = efa(req)
			}
			if tc.publicSet {
				req.NodeClass.Spec.AssociatePublicIPAddress = aws.Bool(tc.public)
			}
			first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
				ni := nis[0]
				if !tc.publicSet && !tc.efa && ni.AssociatePublicIpAddress != nil {
					t.Errorf("public IP %v", *ni.AssociatePublicIpAddress)
				}
				if tc.efa && (aws.ToString(ni.InterfaceType) != "efa" || aws.ToBool(ni.AssociatePublicIpAddress) != tc.public) {
					t.Errorf("interface %+v", ni)
				}
				if aws.ToInt32(ni.Ipv6AddressCount) != 1 || !aws.ToBool(ni.PrimaryIpv6) {
					t.Errorf("IPv6 address count %v primary %v", ni.Ipv6AddressCount, ni.PrimaryIpv6)
				}
			})
		})
	}

	ctCase := func(spec string) conformance.Case {
		return launchTemplateCase("Networking > Connection Tracking settings > " + spec)
	}
	conformance.Run(t, ctCase("should set 'ConnectionTracking' based on EC2NodeClass > ConnectionTracking is nil"), func(t *testing.T) {
		// Karpless writes no interfaces when nothing needs one (the
		// template then carries the security groups); none tracks.
		for _, r := range builds(t, request()) {
			for _, ni := range r.Input.LaunchTemplateData.NetworkInterfaces {
				if ni.ConnectionTrackingSpecification != nil {
					t.Errorf("connection tracking %+v", ni.ConnectionTrackingSpecification)
				}
			}
		}
	})
	for _, tc := range []struct {
		entry string
		ct    *awsv1.ConnectionTracking
		want  *ec2types.ConnectionTrackingSpecificationRequest
	}{
		{"ConnectionTracking with AWS defaults",
			&awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(432000), UDPStreamTimeout: aws.Int32(180), UDPTimeout: aws.Int32(30)},
			&ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(432000), UdpStreamTimeout: aws.Int32(180), UdpTimeout: aws.Int32(30)}},
		{"ConnectionTracking with non-default TCP timeout",
			&awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(86400)},
			&ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(86400)}},
	} {
		conformance.Run(t, ctCase("should set 'ConnectionTracking' based on EC2NodeClass > "+tc.entry), func(t *testing.T) {
			req := request()
			req.NodeClass.Spec.ConnectionTracking = tc.ct
			first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
				if !reflect.DeepEqual(nis[0].ConnectionTrackingSpecification, tc.want) {
					t.Errorf("connection tracking %+v", nis[0].ConnectionTrackingSpecification)
				}
			})
		})
	}
	tracked := func() Request {
		req := request()
		req.NodeClass.Spec.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(86400), UDPStreamTimeout: aws.Int32(120), UDPTimeout: aws.Int32(45)}
		return req
	}
	trackedWant := &ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(86400), UdpStreamTimeout: aws.Int32(120), UdpTimeout: aws.Int32(45)}
	conformance.Run(t, ctCase("propagation across all ENIs > should apply ConnectionTracking to every EFA ENI in the launch template"), func(t *testing.T) {
		first(t, efa(tracked()), func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
			if len(nis) <= 1 {
				t.Errorf("%d interfaces", len(nis))
			}
			for _, ni := range nis {
				if aws.ToString(ni.InterfaceType) != "efa" || !reflect.DeepEqual(ni.ConnectionTrackingSpecification, trackedWant) {
					t.Errorf("interface %+v", ni)
				}
			}
		})
	})
	fourInterfaces := []*awsv1.NetworkInterface{
		{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
		{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 1, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeInterface},
	}
	conformance.Run(t, ctCase("propagation across all ENIs > should apply ConnectionTracking to every user-configured NetworkInterface in the launch template except efa-only"), func(t *testing.T) {
		req := tracked()
		req.NodeClass.Spec.NetworkInterfaces = fourInterfaces
		first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
			if len(nis) != 4 {
				t.Fatalf("%d interfaces", len(nis))
			}
			for _, ni := range nis {
				want := trackedWant
				if aws.ToString(ni.InterfaceType) == "efa-only" {
					want = nil
				}
				if !reflect.DeepEqual(ni.ConnectionTrackingSpecification, want) {
					t.Errorf("interface %+v", ni)
				}
			}
		})
	})

	niCase := func(spec string) conformance.Case { return launchTemplateCase("Network Interfaces > " + spec) }
	for _, tc := range []struct {
		entry string
		efa   bool
	}{{"when pod does not request EFA", false}, {"when pod does request EFA", true}} {
		conformance.Run(t, niCase("should configure network interfaces with same configuration as NodeClass > "+tc.entry), func(t *testing.T) {
			req := request()
			if tc.efa {
				req = efa(req)
			}
			req.NodeClass.Spec.NetworkInterfaces = fourInterfaces
			first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
				var got []string
				for _, ni := range nis {
					got = append(got, fmt.Sprintf("%d/%d %s", aws.ToInt32(ni.NetworkCardIndex), aws.ToInt32(ni.DeviceIndex), aws.ToString(ni.InterfaceType)))
				}
				if want := []string{"0/0 interface", "0/1 efa-only", "1/0 efa-only", "1/1 interface"}; !reflect.DeepEqual(got, want) {
					t.Errorf("interfaces %v, want %v", got, want)
				}
			})
		})
	}
	conformance.Run(t, niCase("should not set prefix count on EFA-only interfaces"), func(t *testing.T) {
		req := request()
		req.NodeClass.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
			{NetworkCardIndex: 1, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeInterface},
		}
		req.NodeClass.Spec.IPPrefixCount = aws.Int32(2)
		first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
			if len(nis) != 3 || aws.ToInt32(nis[0].Ipv4PrefixCount) != 2 || nis[1].Ipv4PrefixCount != nil || aws.ToString(nis[1].InterfaceType) != "efa-only" || aws.ToInt32(nis[2].Ipv4PrefixCount) != 2 {
				t.Errorf("interfaces %+v", nis)
			}
		})
	})
	conformance.Run(t, niCase("should not set Ipv6 specs on EFA-only interfaces"), func(t *testing.T) {
		req := request()
		req.Cluster.IPFamily = "ipv6"
		req.NodeClass.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		}
		first(t, req, func(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
			if len(nis) != 2 || !aws.ToBool(nis[0].PrimaryIpv6) || aws.ToInt32(nis[0].Ipv6AddressCount) != 1 ||
				aws.ToBool(nis[1].PrimaryIpv6) || nis[1].Ipv6AddressCount != nil {
				t.Errorf("interfaces %+v", nis)
			}
		})
	})

	for _, tc := range []struct {
		entry string
		want  ec2types.Tenancy
	}{
		{"when not specified", ec2types.TenancyDefault},
		{"when default specified", ec2types.TenancyDefault},
		{"when dedicated specified", ec2types.TenancyDedicated},
	} {
		conformance.Run(t, launchTemplateCase("Tenancy > should set tenancy on launch template > "+tc.entry), func(t *testing.T) {
			req := request()
			req.NodeClaim.Spec.Requirements = append(req.NodeClaim.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
				Key: wellknown.InstanceTenancyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{string(tc.want)}})
			for _, r := range builds(t, req) {
				// A default-tenancy launch carries no Placement: EC2's
				// default tenancy is the same as naming it.
				got := ec2types.TenancyDefault
				if p := r.Input.LaunchTemplateData.Placement; p != nil && p.Tenancy != "" {
					got = p.Tenancy
				}
				if got != tc.want {
					t.Errorf("tenancy %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// TestConformanceLaunchTemplateNames ports the suite's Cache cases on
// launch template names. Karpenter hashes its internal launch template
// struct; Karpless names a template by a hash of the request it sends
// (Name), so each variation is made through a Request.
func TestConformanceLaunchTemplateNames(t *testing.T) {
	// names is the sorted names of req's templates, as one key.
	names := func(t *testing.T, req Request) string {
		t.Helper()
		var out []string
		for _, r := range builds(t, req) {
			out = append(out, aws.ToString(r.Input.LaunchTemplateName))
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	unique := func(t *testing.T, variations map[string]func(*Request)) {
		t.Helper()
		seen := map[string]string{}
		for what, change := range variations {
			req := request()
			change(&req)
			key := names(t, req)
			if other, dup := seen[key]; dup {
				t.Errorf("%q and %q give the same launch templates", what, other)
			}
			seen[key] = what
		}
	}
	cacheCase := func(spec string) conformance.Case { return launchTemplateCase("Cache > " + spec) }
	conformance.Run(t, cacheCase("should generate different launch template names based on amifamily option configuration"), func(t *testing.T) {
		unique(t, map[string]func(*Request){
			"default":          func(*Request) {},
			"cluster name":     func(r *Request) { r.Cluster.Name = "test-name" },
			"cluster endpoint": func(r *Request) { r.Cluster.Endpoint = "test-endpoint" },
			"cluster CIDR":     func(r *Request) { r.Cluster.ServiceCIDR = "10.200.0.0/16" },
			"instance profile": func(r *Request) { r.NodeClass.Status.InstanceProfile = "test-profile" },
			"instance store":   func(r *Request) { r.NodeClass.Spec.InstanceStorePolicy = ptrTo(awsv1.InstanceStorePolicyRAID0) },
			"security groups": func(r *Request) {
				r.NodeClass.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-test", Name: "test-sg"}}
			},
			"tags":            func(r *Request) { r.NodeClass.Spec.Tags = map[string]string{"test-key": "test-value"} },
			"kube DNS IP":     func(r *Request) { r.Cluster.ClusterDNS = "192.0.0.2" },
			"public IP":       func(r *Request) { r.NodeClass.Spec.AssociatePublicIPAddress = aws.Bool(true) },
			"node class name": func(r *Request) { r.NodeClass.Name = "test-name" },
		})
	})
	conformance.Run(t, cacheCase("should generate different launch template names based on kubelet configuration"), func(t *testing.T) {
		unique(t, map[string]func(*Request){
			"empty": func(r *Request) { r.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{} },
			"kubeReserved": func(r *Request) {
				r.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "20"}}
			},
			"systemReserved": func(r *Request) {
				r.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{SystemReserved: map[string]string{"memory": "10Gi"}}
			},
			"evictionHard": func(r *Request) {
				r.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "52%"}}
			},
			"evictionSoft": func(r *Request) {
				r.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"nodefs.available": "132%"}}
			},
			"maxPods": func(r *Request) {
				*r = withPods(*r, 20)
				r.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(20)}
			},
		})
	})
	conformance.Run(t, cacheCase("should generate different launch template names based on bootstrap configuration"), func(t *testing.T) {
		unique(t, map[string]func(*Request){
			"default":          func(*Request) {},
			"cluster name":     func(r *Request) { r.Cluster.Name = "test-name" },
			"cluster endpoint": func(r *Request) { r.Cluster.Endpoint = "test-endpoint" },
			"cluster CIDR":     func(r *Request) { r.Cluster.ServiceCIDR = "10.200.0.0/16" },
			"taints": func(r *Request) {
				r.NodeClaim.Spec.Taints = []corev1.Taint{{Key: "test-key", Value: "test-value", Effect: corev1.TaintEffectNoSchedule}}
			},
			"labels":           func(r *Request) { r.NodeClaim.Labels["test-key"] = "test-value" },
			"CA bundle":        func(r *Request) { r.Cluster.CABundle = "dGVzdC1idW5kbGUK" },
			"custom user data": func(r *Request) { r.NodeClass.Spec.UserData = aws.String("#!/bin/bash\necho test\n") },
		})
	})
	conformance.Run(t, cacheCase("should generate different launch template names based on launchtemplate option configuration"), func(t *testing.T) {
		unique(t, map[string]func(*Request){
			"default": func(*Request) {},
			"block device mappings": func(r *Request) {
				r.NodeClass.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: aws.String("test-block")}}
			},
			"AMI":                 func(r *Request) { r.NodeClass.Status.AMIs[2].ID = "ami-test" },
			"detailed monitoring": func(r *Request) { r.NodeClass.Spec.DetailedMonitoring = aws.Bool(true) },
			"EFA": func(r *Request) {
				r.NodeClaim.Spec.Resources.Requests = corev1.ResourceList{wellknown.ResourceEFA: resource.MustParse("1")}
				for _, it := range r.InstanceTypes {
					it.Capacity[wellknown.ResourceEFA] = resource.MustParse("12")
				}
			},
			"capacity type": func(r *Request) { r.CapacityType = wellknown.CapacityTypeOnDemand },
			"enclave": func(r *Request) {
				r.NodeClaim.Spec.Resources.Requests = corev1.ResourceList{ResourceNIPSlots: resource.MustParse("1")}
			},
		})
	})
	conformance.Run(t, cacheCase("should not generate different launch template names based on instance types"), func(t *testing.T) {
		base := builds(t, request())
		req := request()
		req.InstanceTypes = append(req.InstanceTypes, itype("test-instance-type", "amd64", 29))
		for i, r := range builds(t, req) {
			if got, want := aws.ToString(r.Input.LaunchTemplateName), aws.ToString(base[i].Input.LaunchTemplateName); got != want {
				t.Errorf("template for %v named %s, without the new type %s", r.InstanceTypes, got, want)
			}
		}
	})
}

// TestConformanceLaunchTemplateCustomUserData ports the suite's merges of
// spec.userData (Karpenter compares them with golden files; here the
// merged documents are decoded and compared part by part) for the
// suite's launch: NodePool "default" labelled testing/cluster=unspecified,
// on-demand unless said, maxPods 110, cluster DNS 10.0.100.10.
func TestConformanceLaunchTemplateCustomUserData(t *testing.T) {
	suiteLaunch := func(alias string, custom *string) Request {
		req := withPods(withFamily(request(), alias), 110)
		req.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}
		req.NodeClass.Spec.UserData = custom
		req.Cluster.ClusterDNS = "10.0.100.10"
		req.CapacityType = wellknown.CapacityTypeOnDemand
		req.NodeClaim.Labels = map[string]string{wellknown.NodePoolLabel: "default", "testing/cluster": "unspecified"}
		req.NodeClaim.Spec.Taints, req.NodeClaim.Spec.StartupTaints = nil, nil
		return req
	}
	userData := func(t *testing.T, req Request) []string {
		t.Helper()
		var out []string
		for _, r := range builds(t, req) {
			out = append(out, r.UserData)
		}
		return out
	}
	labelsFlag := `--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,testing/cluster=unspecified"`

	// Bottlerocket.
	brInput := `[settings.kubernetes]
"unknown-setting" = "unknown"
api-server = 'replaceme'
cloud-provider = 'external'
cluster-certificate = "replaceme"
cluster-name = 'replaceme'
max-pods = 9999999999 # replaceme

[settings.kubernetes.eviction-hard]
"memory.available" = "12%"

[settings.kubernetes.labels]
"replace" = "me"

[settings.kubernetes.node-labels]
"custom-node-label" = "custom"
"karpenter.sh/nodepool" = "should-be-overridden"

[settings.kubernetes.node-taints]
"replace" = ["me:Schedule"]

[settings.network]
hostname = "test.local"
https-proxy = "1.2.3.4:8080"
no-proxy = ["localhost", "127.0.0.1"]
hosts = [["10.0.0.0", ["test.example.com", "test1.example.com"]]]

[settings.ntp]
time-servers = ["169.254.169.123"]
`
	brWant := func(custom bool) map[string]any {
		labels := map[string]any{"karpenter.k8s.aws/ec2nodeclass": "default", "karpenter.sh/capacity-type": "on-demand",
			"karpenter.sh/do-not-sync-taints": "true", "karpenter.sh/nodepool": "default", "testing/cluster": "unspecified"}
		k8s := map[string]any{"api-server": "https://test-cluster", "cluster-certificate": testCluster.CABundle, "cluster-name": "test-cluster",
			"cluster-dns-ip": "10.0.100.10", "max-pods": 110, "node-labels": labels,
			"node-taints": map[string]any{"baz": []any{"bin:NoExecute"}, "foo": []any{"bar:NoExecute"}, "karpenter.sh/unregistered": []any{":NoExecute"}}}
		settings := map[string]any{"kubernetes": k8s}
		if custom {
			k8s["cloud-provider"] = "external"
			k8s["eviction-hard"] = map[string]any{"memory.available": "12%"}
			labels["custom-node-label"] = "custom"
			settings["network"] = map[string]any{"hostname": "test.local", "https-proxy": "1.2.3.4:8080", "no-proxy": []any{"localhost", "127.0.0.1"},
				"hosts": []any{[]any{"10.0.0.0", []any{"test.example.com", "test1.example.com"}}}}
			settings["ntp"] = map[string]any{"time-servers": []any{"169.254.169.123"}}
		}
		return settings
	}
	for _, tc := range []struct {
		spec   string
		custom *string
	}{
		{"should merge in custom user data", &brInput},
		{"should bootstrap when custom user data is empty", nil},
	} {
		conformance.Run(t, launchTemplateCase("User Data > Bottlerocket > "+tc.spec), func(t *testing.T) {
			req := suiteLaunch("bottlerocket@latest", tc.custom)
			req.NodeClaim.Spec.Taints = []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoExecute}}
			req.NodeClaim.Spec.StartupTaints = []corev1.Taint{{Key: "baz", Value: "bin", Effect: corev1.TaintEffectNoExecute}}
			want := asJSON(t, brWant(tc.custom != nil))
			for _, ud := range userData(t, req) {
				if got := asJSON(t, brSettings(t, ud)); got != want {
					t.Errorf("settings\n%s\nwant\n%s", got, want)
				}
			}
		})
	}

	// mimeParts decodes a MIME archive into "content type: trimmed body".
	mimeParts := func(t *testing.T, ud string) []string {
		t.Helper()
		parts, err := parseMIME(ud)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range parts {
			out = append(out, p.ContentType+": "+strings.TrimSpace(p.Body))
		}
		return out
	}

	// AL2.
	al2Script := "#!/bin/bash\necho \"Running custom user data script\""
	al2Bootstrap := `text/x-shellscript; charset="us-ascii": #!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint 'https://test-cluster' --b64-cluster-ca 'Y2EtYnVuZGxlCg==' \
--dns-cluster-ip '10.0.100.10' \
--use-max-pods false \
--kubelet-extra-args '` + labelsFlag + ` --register-with-taints="karpenter.sh/unregistered:NoExecute" --max-pods=110'`
	for _, tc := range []struct {
		spec   string
		custom *string
	}{
		{"should merge in custom user data", aws.String("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + al2Script + "\n\n--BOUNDARY--")},
		{"should merge in custom user data when Content-Type is before MIME-Version", aws.String("Content-Type: multipart/mixed; boundary=\"BOUNDARY\"\nMIME-Version: 1.0\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + al2Script + "\n\n--BOUNDARY--")},
		{"should merge in custom user data not in multi-part mime format", aws.String(al2Script + "\n")},
		{"should handle empty custom user data", nil},
	} {
		conformance.Run(t, launchTemplateCase("User Data > AL2 Custom UserData > "+tc.spec), func(t *testing.T) {
			want := []string{al2Bootstrap}
			if tc.custom != nil {
				want = []string{contentTypeShell + ": " + al2Script, al2Bootstrap}
			}
			for _, ud := range userData(t, suiteLaunch("al2@latest", tc.custom)) {
				if got := mimeParts(t, ud); !reflect.DeepEqual(got, want) {
					t.Errorf("parts\n%q\nwant\n%q", got, want)
				}
			}
		})
	}

	// AL2023: the user's parts first, then Karpenter's NodeConfig.
	al2023Config := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: test-cluster\n    clusterEndpoint: https://test-cluster\n    certificateAuthority: cluster-ca\n    cidr: 10.100.0.0/16\n  kubelet:\n    config:\n      maxPods: 42"
	al2023Script := "#!/bin/bash\necho \"Hello, AL2023!\""
	generated := contentTypeNodeCfg + ": " + strings.TrimSpace(NodeConfigHeader+`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata: {}
spec:
  cluster:
    apiServerEndpoint: https://test-cluster
    certificateAuthority: Y2EtYnVuZGxlCg==
    cidr: 10.100.0.0/16
    name: test-cluster
  containerd: {}
  instance:
    localStorage: {}
  kubelet:
    config:
      clusterDNS:
      - 10.0.100.10
      maxPods: 110
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
    flags:
    - --node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,testing/cluster=unspecified"`)
	for _, tc := range []struct {
		entry  string
		custom *string
		want   []string
	}{
		{"MIME", aws.String("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n" + al2023Config + "\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + al2023Script + "\n--//\n"),
			[]string{contentTypeNodeCfg + ": " + al2023Config, contentTypeShell + ": " + al2023Script, generated}},
		{"YAML", aws.String(al2023Config + "\n"), []string{contentTypeNodeCfg + ": " + al2023Config, generated}},
		{"shell", aws.String(al2023Script + "\n"), []string{contentTypeShell + ": " + al2023Script, generated}},
		{"empty", nil, []string{generated}},
	} {
		conformance.Run(t, launchTemplateCase("User Data > AL2023 > should merge custom user data > "+tc.entry), func(t *testing.T) {
			for _, ud := range userData(t, suiteLaunch("al2023@latest", tc.custom)) {
				if got := mimeParts(t, ud); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("parts\n%q\nwant\n%q", got, tc.want)
				}
			}
		})
	}

	// Windows: Karpenter's Windows cases launch spot.
	winScript := "Write-Host \"Running custom user data script\"\nWrite-Host \"Finished running custom user data script\""
	winBootstrap := "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
		"& $EKSBootstrapScriptFile -EKSClusterName 'test-cluster' -APIServerEndpoint 'https://test-cluster' -Base64ClusterCA 'Y2EtYnVuZGxlCg==' -KubeletExtraArgs '" +
		strings.Replace(labelsFlag, "on-demand", "spot", 1) + " --register-with-taints=\"karpenter.sh/unregistered:NoExecute\" --max-pods=110' -DNSClusterIP '10.0.100.10'\n</powershell>"
	for _, tc := range []struct {
		spec   string
		custom *string
		want   string
	}{
		{"should merge and bootstrap with custom user data", aws.String(winScript + "\n"), "<powershell>\n" + winScript + "\n" + winBootstrap},
		{"should bootstrap when custom user data is empty", nil, "<powershell>\n" + winBootstrap},
	} {
		conformance.Run(t, launchTemplateCase("User Data > Windows Custom UserData > "+tc.spec), func(t *testing.T) {
			req := suiteLaunch("windows2022@latest", tc.custom)
			req.CapacityType = wellknown.CapacityTypeSpot
			for _, ud := range userData(t, req) {
				// Karpenter compares user data with line breaks removed.
				if strings.ReplaceAll(ud, "\n", "") != strings.ReplaceAll(tc.want, "\n", "") {
					t.Errorf("user data\n%s\nwant\n%s", ud, tc.want)
				}
			}
		})
	}
}

func TestConformanceLaunchTemplateReservationsAndAMIs(t *testing.T) {
	reserved := func(id string) Request {
		req := request()
		req.CapacityType = wellknown.CapacityTypeReserved
		req.CapacityReservationID = id
		return req
	}
	reservation := func(id, typ string, interruptible bool) awsv1.CapacityReservation {
		return awsv1.CapacityReservation{ID: id, InstanceType: "m5.large", AvailabilityZone: "eu-west-1a", OwnerID: "012345678901",
			InstanceMatchCriteria: "targeted", ReservationType: typ, Interruptible: interruptible, State: "active"}
	}
	for _, tc := range []struct {
		entry         string
		typ           string
		interruptible bool
		want          ec2types.MarketType
	}{
		{"with default interruptible reservation type", "default", true, ec2types.MarketTypeInterruptibleCapacityReservation},
		{"with capacity block reservation type", "capacity-block", false, ec2types.MarketTypeCapacityBlock},
	} {
		conformance.Run(t, launchTemplateCase("should correctly assign the market type for reserved capacity > "+tc.entry), func(t *testing.T) {
			req := reserved("cr-m5.large-1a-1")
			req.CapacityReservationType = tc.typ
			req.NodeClass.Status.CapacityReservations = []awsv1.CapacityReservation{reservation("cr-m5.large-1a-1", tc.typ, tc.interruptible)}
			for _, r := range builds(t, req) {
				if m := r.Input.LaunchTemplateData.InstanceMarketOptions; m == nil || m.MarketType != tc.want {
					t.Errorf("market options %+v, want %s", m, tc.want)
				}
			}
		})
	}
	conformance.Run(t, launchTemplateCase("should set the capacity reservation specification according to the capacity reservation feature flag > enabled"), func(t *testing.T) {
		for _, r := range builds(t, request()) {
			crs := r.Input.LaunchTemplateData.CapacityReservationSpecification
			if crs == nil || !reflect.DeepEqual(*crs, ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}) {
				t.Errorf("capacity reservation specification %+v", crs)
			}
		}
	})
	conformance.Run(t, launchTemplateCase("should generate a unique launch template per capacity reservation"), func(t *testing.T) {
		names := map[string]string{}
		for _, id := range []string{"cr-m5.large-1a-1", "cr-m5.large-1a-2", "cr-m5.xlarge-1b-1"} {
			req := reserved(id)
			req.InstanceTypes = req.InstanceTypes[:1] // the reservation's type
			for _, r := range builds(t, req) {
				crs := r.Input.LaunchTemplateData.CapacityReservationSpecification
				if crs == nil || crs.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly ||
					crs.CapacityReservationTarget == nil || aws.ToString(crs.CapacityReservationTarget.CapacityReservationId) != id {
					t.Errorf("%s: specification %+v", id, crs)
				}
				name := aws.ToString(r.Input.LaunchTemplateName)
				if other, dup := names[name]; dup {
					t.Errorf("%s and %s share template %s", id, other, name)
				}
				names[name] = id
			}
		}
	})

	conformance.Run(t, launchTemplateCase("should create unique launch templates for multiple identical nodeClasses"), func(t *testing.T) {
		req1 := request()
		req2 := request()
		req2.NodeClass.Name = "default-2"
		req2.NodeClaim.Labels[wellknown.EC2NodeClassLabel] = "default-2"
		req2.NodeClass.Status.InstanceProfile = "test-profile"
		req2.NodeClass.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-test1"}, {ID: "sg-test2"}, {ID: "sg-test3"}}
		seen := map[string]bool{}
		for _, req := range []Request{req1, req2} {
			for _, r := range builds(t, req) {
				name := aws.ToString(r.Input.LaunchTemplateName)
				if seen[name] {
					t.Errorf("template %s shared by the two classes", name)
				}
				seen[name] = true
				for _, tag := range r.Input.LaunchTemplateData.TagSpecifications[0].Tags {
					if aws.ToString(tag.Key) == wellknown.EC2NodeClassTagKey && aws.ToString(tag.Value) != req.NodeClass.Name {
						t.Errorf("class %s's template tagged %s", req.NodeClass.Name, aws.ToString(tag.Value))
					}
				}
			}
		}
	})

	amiReq := func(ami ...awsv1.AMI) Request {
		req := request()
		req.NodeClass.Spec.AMIFamily = aws.String(catalog.FamilyCustom)
		req.NodeClass.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"*": "*"}}}
		req.NodeClass.Status.AMIs = ami
		return req
	}
	archAMI := func(id, arch string) awsv1.AMI {
		return awsv1.AMI{ID: id, Requirements: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}}
	}
	conformance.Run(t, launchTemplateCase("User Data > Custom AMI Selector > should create multiple launch templates when multiple amis are discovered with non-equivalent requirements"), func(t *testing.T) {
		got := map[string]bool{}
		for _, r := range builds(t, amiReq(archAMI("ami-123", "amd64"), archAMI("ami-456", "arm64"))) {
			got[aws.ToString(r.Input.LaunchTemplateData.ImageId)] = true
		}
		if !reflect.DeepEqual(got, map[string]bool{"ami-123": true, "ami-456": true}) {
			t.Errorf("images %v", got)
		}
	})
	conformance.Run(t, launchTemplateCase("User Data > Custom AMI Selector > should create a launch template with the newest compatible AMI when multiple amis are discovered"), func(t *testing.T) {
		// status.amis lists the images newest first (the class's status
		// tick sorts them); the NodePool allows amd64 only.
		req := amiReq(archAMI("ami-789", "arm64"), archAMI("ami-456", "amd64"), archAMI("ami-123", "amd64"))
		var amd64 []*scheduling.InstanceType
		for _, it := range req.InstanceTypes {
			if it.Labels[wellknown.ArchLabel] == "amd64" {
				amd64 = append(amd64, it)
			}
		}
		req.InstanceTypes = amd64
		for _, r := range builds(t, req) {
			if id := aws.ToString(r.Input.LaunchTemplateData.ImageId); id != "ami-456" {
				t.Errorf("image %s for %v", id, r.InstanceTypes)
			}
		}
	})
}

func TestConformanceLaunchTemplateCache(t *testing.T) {
	conformance.Run(t, launchTemplateCase("Cache > should use same launch template for equivalent constraints"), func(t *testing.T) {
		// The same constraints in another order (Karpenter's pods list
		// their tolerations in another order; here the claim's
		// requirements and taints) name the same templates.
		reqs := []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
			{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
		}
		taints := []corev1.Taint{{Key: "Abacus", Value: "Zebra", Effect: corev1.TaintEffectNoSchedule}, {Key: "Zebra", Value: "Abacus", Effect: corev1.TaintEffectNoSchedule}}
		a, b := request(), request()
		a.NodeClaim.Spec.Requirements = reqs
		b.NodeClaim.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{reqs[1], reqs[0]}
		a.NodeClaim.Spec.Taints = taints
		b.NodeClaim.Spec.Taints = taints
		ra, rb := builds(t, a), builds(t, b)
		if len(ra) != len(rb) {
			t.Fatalf("%d and %d templates", len(ra), len(rb))
		}
		for i := range ra {
			if na, nb := aws.ToString(ra[i].Input.LaunchTemplateName), aws.ToString(rb[i].Input.LaunchTemplateName); na != nb {
				t.Errorf("template %d: %s and %s", i, na, nb)
			}
		}
	})
	conformance.Run(t, launchTemplateCase("Cache > should recover from an out-of-sync launch template cache"), func(t *testing.T) {
		ctx := context.Background()
		f := newFakeEC2()
		p := &Provider{EC2: f}
		req := withPods(request(), 1)
		req.NodeClass.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(1)}
		req.Seen = &Seen{}
		lts, err := p.Ensure(ctx, req)
		if err != nil || len(lts) == 0 {
			t.Fatal(lts, err)
		}
		// The templates disappear behind the invocation's memory; the
		// launch meets InvalidLaunchTemplateName.NotFoundException and
		// forgets them, and the next Ensure makes them again.
		f.mu.Lock()
		f.lts = map[string]ec2types.LaunchTemplate{}
		f.mu.Unlock()
		for _, lt := range lts {
			req.Seen.Forget(lt.Name)
		}
		again, err := p.Ensure(ctx, req)
		if err != nil || len(again) != len(lts) {
			t.Fatal(again, err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, lt := range again {
			if _, ok := f.lts[lt.Name]; !ok {
				t.Errorf("template %s not made again", lt.Name)
			}
		}
	})
}
