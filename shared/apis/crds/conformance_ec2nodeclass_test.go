package crds_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/local/kubetest"
)

const awsAPISuite = "aws/apis/v1"

// The AWS provider's AMI families (pkg/apis/v1/labels.go); Ubuntu is a
// family it names but no longer supports.
const (
	familyAL2          = "AL2"
	familyAL2023       = "AL2023"
	familyBottlerocket = "Bottlerocket"
	familyWindows2019  = "Windows2019"
	familyWindows2022  = "Windows2022"
	familyWindows2025  = "Windows2025"
	familyCustom       = "Custom"
	familyUbuntu       = "Ubuntu"
)

var amiFamilies = []string{familyAL2, familyAL2023, familyBottlerocket, familyWindows2019, familyWindows2022, familyWindows2025, familyCustom}

// celNodeClass is the EC2NodeClass of the provider's CEL suite.
func celNodeClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{
		AMIFamily:                  new(familyAL2023),
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "role-1",
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"*": "*"}}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"*": "*"}}},
	}}
}

// blockDeviceClass is the suite's BlockDeviceMappings class: the base
// class's selectors and role, no amiFamily.
func blockDeviceClass(mappings ...*awsv1.BlockDeviceMapping) *awsv1.EC2NodeClass {
	nc := celNodeClass()
	nc.Spec.AMIFamily = nil
	nc.Spec.BlockDeviceMappings = mappings
	return nc
}

func mapping(device string, size *resource.Quantity, root bool) *awsv1.BlockDeviceMapping {
	return &awsv1.BlockDeviceMapping{DeviceName: &device, EBS: &awsv1.BlockDevice{VolumeSize: size}, RootVolume: root}
}

func classVerdict(t *testing.T, nc *awsv1.EC2NodeClass) error {
	t.Helper()
	return verdict(t, kubetest.Need(t, env).Clients.EC2NodeClasses, nc.DeepCopy())
}

func TestConformanceEC2NodeClassValidation(t *testing.T) {
	c := func(spec string) conformance.Case {
		return conformance.Case{Suite: awsAPISuite, File: "pkg/apis/v1/ec2nodeclass_validation_cel_test.go", Spec: "CEL/Validation > " + spec}
	}
	expect := func(t *testing.T, nc *awsv1.EC2NodeClass, ok bool) {
		t.Helper()
		if ok {
			admitted(t, classVerdict(t, nc))
		} else {
			refused(t, classVerdict(t, nc))
		}
	}
	with := func(change func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
		nc := celNodeClass()
		change(nc)
		return nc
	}
	type entry struct {
		title  string
		change func(*awsv1.EC2NodeClass)
		ok     bool
	}
	run := func(prefix string, entries []entry) {
		for _, e := range entries {
			conformance.Run(t, c(prefix+e.title), func(t *testing.T) { expect(t, with(e.change), e.ok) })
		}
	}

	run("", []entry{
		{"should succeed if just specifying role", func(*awsv1.EC2NodeClass) {}, true},
		{"should succeed if just specifying instance profile", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.InstanceProfile, nc.Spec.Role = new("test-instance-profile"), ""
		}, true},
		{"should fail if specifying both instance profile and role", func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceProfile = new("test-instance-profile") }, false},
		{"should fail if not specifying one of instance profile and role", func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "" }, false},
		{"UserData > should succeed if user data is empty", func(*awsv1.EC2NodeClass) {}, true},
	})

	// AMIFamily
	af := "AMIFamily > "
	for _, family := range amiFamilies {
		conformance.Run(t, c(af+"should succeed with valid families > "+family), func(t *testing.T) {
			expect(t, with(func(nc *awsv1.EC2NodeClass) {
				nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef"}}
				nc.Spec.AMIFamily = new(family)
			}), true)
		})
	}
	conformance.Run(t, c(af+"should fail with the ubuntu family"), func(t *testing.T) {
		expect(t, with(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef"}}
			nc.Spec.AMIFamily = new(familyUbuntu)
		}), false)
	})
	aliasOf := func(family string) string { return strings.ToLower(family) + "@latest" }
	withAlias := func(family, alias string) *awsv1.EC2NodeClass {
		return with(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
			nc.Spec.AMIFamily = new(family)
		})
	}
	for _, family := range amiFamilies[:6] {
		alias := aliasOf(family)
		conformance.Run(t, c(af+"should succeed when the amiFamily matches amiSelectorTerms[].alias > "+fmt.Sprintf("family %q with alias %q", family, alias)), func(t *testing.T) {
			expect(t, withAlias(family, alias), true)
		})
	}
	for _, family := range amiFamilies[:6] {
		alias := aliasOf(family)
		conformance.Run(t, c(af+"should succeed when the amiFamily is custom with amiSelectorTerms[].alias > "+fmt.Sprintf(`family "Custom" with alias %q`, alias)), func(t *testing.T) {
			expect(t, withAlias(familyCustom, alias), true)
		})
	}
	for _, family := range amiFamilies[:6] {
		for _, other := range amiFamilies[:6] {
			if other == family {
				continue
			}
			alias := aliasOf(other)
			conformance.Run(t, c(af+"should fail when then amiFamily does not match amiSelectorTerms[].alias > "+fmt.Sprintf("family %q with alias %q", family, alias)), func(t *testing.T) {
				expect(t, withAlias(family, alias), false)
			})
		}
	}
	conformance.Run(t, c(af+"should fail when neither amiFamily nor an alias are specified"), func(t *testing.T) {
		expect(t, with(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-01234567890abcdef"}}
			nc.Spec.AMIFamily = nil
		}), false)
	})

	// Tags
	tg := "Tags > "
	run(tg, []entry{
		{"should succeed when tags are empty", func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags = map[string]string{} }, true},
		{"should succeed if tags aren't in restricted tag keys", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Tags = map[string]string{"karpenter.sh/custom-key": "value", "karpenter.sh/managed": "true", "kubernetes.io/role/key": "value"}
		}, true},
	})
	conformance.Run(t, c(tg+"should fail if tags contain a restricted domain key"), func(t *testing.T) {
		for _, tags := range []map[string]string{
			{"karpenter.sh/nodepool": "value"},
			{"kubernetes.io/cluster/test": "value"},
			{"eks:eks-cluster-name": "test"},
			{"karpenter.k8s.aws/ec2nodeclass": "test"},
			{"karpenter.sh/nodeclaim": "test"},
		} {
			expect(t, with(func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags = tags }), false)
		}
	})

	// Selector terms: subnets, security groups and capacity reservations
	// share the suite's tag cases.
	lastInvalid := []map[string]string{{"test": "testvalue"}, {"test2": "testvalue2"}, {"test3": "testvalue3"}, {"": "testvalue4"}}
	subnets := func(terms ...awsv1.SubnetSelectorTerm) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms = terms }
	}
	var lastSubnets []awsv1.SubnetSelectorTerm
	for _, tags := range lastInvalid {
		lastSubnets = append(lastSubnets, awsv1.SubnetSelectorTerm{Tags: tags})
	}
	run("SubnetSelectorTerms > ", []entry{
		{"should succeed with a valid subnet selector on tags", subnets(awsv1.SubnetSelectorTerm{Tags: map[string]string{"test": "testvalue"}}), true},
		{"should succeed with a valid subnet selector on id", subnets(awsv1.SubnetSelectorTerm{ID: "subnet-12345749"}), true},
		{"should fail when subnet selector terms is set to nil", subnets(), false},
		{"should fail when no subnet selector terms exist", subnets([]awsv1.SubnetSelectorTerm{}...), false},
		{"should fail when a subnet selector term has no values", subnets(awsv1.SubnetSelectorTerm{}), false},
		{"should fail when a subnet selector term has no tag map values", subnets(awsv1.SubnetSelectorTerm{Tags: map[string]string{}}), false},
		{"should fail when a subnet selector term has a tag map key that is empty", subnets(awsv1.SubnetSelectorTerm{Tags: map[string]string{"test": ""}}), false},
		{"should fail when a subnet selector term has a tag map value that is empty", subnets(awsv1.SubnetSelectorTerm{Tags: map[string]string{"": "testvalue"}}), false},
		{"should fail when the last subnet selector is invalid", subnets(lastSubnets...), false},
		{"should fail when specifying id with tags", subnets(awsv1.SubnetSelectorTerm{ID: "subnet-12345749", Tags: map[string]string{"test": "testvalue"}}), false},
	})
	groups := func(terms ...awsv1.SecurityGroupSelectorTerm) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms = terms }
	}
	var lastGroups []awsv1.SecurityGroupSelectorTerm
	for _, tags := range lastInvalid {
		lastGroups = append(lastGroups, awsv1.SecurityGroupSelectorTerm{Tags: tags})
	}
	run("SecurityGroupSelectorTerms > ", []entry{
		{"should succeed with a valid security group selector on tags", groups(awsv1.SecurityGroupSelectorTerm{Tags: map[string]string{"test": "testvalue"}}), true},
		{"should succeed with a valid security group selector on id", groups(awsv1.SecurityGroupSelectorTerm{ID: "sg-12345749"}), true},
		{"should succeed with a valid security group selector on name", groups(awsv1.SecurityGroupSelectorTerm{Name: "testname"}), true},
		{"should fail when security group selector terms is set to nil", groups(), false},
		{"should fail when no security group selector terms exist", groups([]awsv1.SecurityGroupSelectorTerm{}...), false},
		{"should fail when a security group selector term has no values", groups(awsv1.SecurityGroupSelectorTerm{}), false},
		{"should fail when a security group selector term has no tag map values", groups(awsv1.SecurityGroupSelectorTerm{Tags: map[string]string{}}), false},
		{"should fail when a security group selector term has a tag map key that is empty", groups(awsv1.SecurityGroupSelectorTerm{Tags: map[string]string{"test": ""}}), false},
		{"should fail when a security group selector term has a tag map value that is empty", groups(awsv1.SecurityGroupSelectorTerm{Tags: map[string]string{"": "testvalue"}}), false},
		{"should fail when the last security group selector is invalid", groups(lastGroups...), false},
		{"should fail when specifying id with tags", groups(awsv1.SecurityGroupSelectorTerm{ID: "sg-12345749", Tags: map[string]string{"test": "testvalue"}}), false},
		{"should fail when specifying id with name", groups(awsv1.SecurityGroupSelectorTerm{ID: "sg-12345749", Name: "my-security-group"}), false},
		{"should fail when specifying name with tags", groups(awsv1.SecurityGroupSelectorTerm{Name: "my-security-group", Tags: map[string]string{"test": "testvalue"}}), false},
	})
	reservations := func(terms ...awsv1.CapacityReservationSelectorTerm) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.CapacityReservationSelectorTerms = terms }
	}
	var lastReservations []awsv1.CapacityReservationSelectorTerm
	for _, tags := range lastInvalid {
		lastReservations = append(lastReservations, awsv1.CapacityReservationSelectorTerm{Tags: tags})
	}
	test := map[string]string{"test": "testvalue"}
	run("CapacityReservationSelectorTerms > ", []entry{
		{"should succeed with a valid capacity reservation selector on tags", reservations(awsv1.CapacityReservationSelectorTerm{Tags: test}), true},
		{"should succeed with a valid capacity reservation selector on id", reservations(awsv1.CapacityReservationSelectorTerm{ID: "cr-12345749"}), true},
		{"should succeed for a valid ownerID", reservations(awsv1.CapacityReservationSelectorTerm{OwnerID: "012345678901", Tags: test}), true},
		{"should fail with a capacity reservation selector on a malformed id", reservations(awsv1.CapacityReservationSelectorTerm{ID: "r-12345749"}), false},
		{"should succeed when capacity group selector terms is set to nil", reservations(), true},
		{"should fail when a capacity reservation selector term has no values", reservations(awsv1.CapacityReservationSelectorTerm{}), false},
		{"should fail when a capacity reservation selector term has no tag map values", reservations(awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{}}), false},
		{"should fail when a capacity reservation selector term has a tag map key that is empty", reservations(awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{"test": ""}}), false},
		{"should fail when a capacity reservation selector term has a tag map value that is empty", reservations(awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{"": "testvalue"}}), false},
		{"should fail when the last capacity reservation selector is invalid", reservations(lastReservations...), false},
		{"should fail when specifying id with tags in a single term", reservations(awsv1.CapacityReservationSelectorTerm{ID: "cr-12345749", Tags: test}), false},
		{"should fail when specifying id with ownerID in a single term", reservations(awsv1.CapacityReservationSelectorTerm{OwnerID: "012345678901", ID: "cr-12345749"}), false},
		{"should fail when the ownerID is malformed", reservations(awsv1.CapacityReservationSelectorTerm{OwnerID: "01234567890", Tags: test}), false},
		{"should fail when the ownerID is set by itself", reservations(awsv1.CapacityReservationSelectorTerm{OwnerID: "012345678901"}), false},
		{"should succeed with a valid instanceMatchCriteria 'open'", reservations(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "open"}), true},
		{"should succeed with a valid instanceMatchCriteria 'targeted'", reservations(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "targeted"}), true},
		{"should succeed with instanceMatchCriteria combined with tags", reservations(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "open", Tags: test}), true},
		{"should succeed with instanceMatchCriteria combined with ownerID and tags", reservations(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "targeted", OwnerID: "012345678901", Tags: test}), true},
		{"should fail with invalid instanceMatchCriteria value", reservations(awsv1.CapacityReservationSelectorTerm{InstanceMatchCriteria: "invalid"}), false},
		{"should fail when specifying id with instanceMatchCriteria", reservations(awsv1.CapacityReservationSelectorTerm{ID: "cr-12345749", InstanceMatchCriteria: "open"}), false},
	})

	// AMISelectorTerms
	as := "AMISelectorTerms > "
	amis := func(terms ...awsv1.AMISelectorTerm) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.AMISelectorTerms = terms }
	}
	var lastAMIs []awsv1.AMISelectorTerm
	for _, tags := range lastInvalid {
		lastAMIs = append(lastAMIs, awsv1.AMISelectorTerm{Tags: tags})
	}
	run(as, []entry{
		{"should succeed with a valid ami selector on alias", amis(awsv1.AMISelectorTerm{Alias: "al2023@latest"}), true},
		{"should succeed with a valid ami selector on tags", amis(awsv1.AMISelectorTerm{Tags: test}), true},
		{"should succeed with a valid ami selector on id", amis(awsv1.AMISelectorTerm{ID: "ami-12345749"}), true},
		{"should succeed with a valid ami selector on name", amis(awsv1.AMISelectorTerm{Name: "testname"}), true},
		{"should succeed with a valid ami selector on name and owner", amis(awsv1.AMISelectorTerm{Name: "testname", Owner: "testowner"}), true},
		{"should succeed when an ami selector term has an owner key with tags", amis(awsv1.AMISelectorTerm{Owner: "testowner", Tags: test}), true},
		{"should fail when a ami selector term has no values", amis(awsv1.AMISelectorTerm{}), false},
		{"should fail when a ami selector term has no tag map values", amis(awsv1.AMISelectorTerm{Tags: map[string]string{}}), false},
		{"should fail when a ami selector term has a tag map key that is empty", amis(awsv1.AMISelectorTerm{Tags: map[string]string{"test": ""}}), false},
		{"should fail when a ami selector term has a tag map value that is empty", amis(awsv1.AMISelectorTerm{Tags: map[string]string{"": "testvalue"}}), false},
		{"should fail when the last ami selector is invalid", amis(lastAMIs...), false},
	})
	// mergo.Merge of a mutation into {ID} or {Alias}: the other field added.
	mutations := []struct {
		name string
		term awsv1.AMISelectorTerm
	}{
		{"alias", awsv1.AMISelectorTerm{Alias: "al2023@latest"}},
		{"id", awsv1.AMISelectorTerm{ID: "ami-1234749"}},
		{"tags", awsv1.AMISelectorTerm{Tags: test}},
		{"name", awsv1.AMISelectorTerm{Name: "my-custom-ami"}},
		{"owner", awsv1.AMISelectorTerm{Owner: "123456789"}},
	}
	merge := func(base, m awsv1.AMISelectorTerm) awsv1.AMISelectorTerm {
		if base.Alias == "" {
			base.Alias = m.Alias
		}
		if base.ID == "" {
			base.ID = m.ID
		}
		if base.Tags == nil {
			base.Tags = m.Tags
		}
		if base.Name == "" {
			base.Name = m.Name
		}
		if base.Owner == "" {
			base.Owner = m.Owner
		}
		return base
	}
	for _, m := range mutations {
		if m.name != "id" {
			conformance.Run(t, c(as+"should fail when specifying id with other fields > "+m.name), func(t *testing.T) {
				expect(t, with(amis(merge(awsv1.AMISelectorTerm{ID: "ami-1234749"}, m.term))), false)
			})
		}
	}
	for _, m := range mutations {
		if m.name != "alias" {
			conformance.Run(t, c(as+"should fail when specifying alias with other fields > "+m.name), func(t *testing.T) {
				expect(t, with(amis(merge(awsv1.AMISelectorTerm{Alias: "al2023@latest"}, m.term))), false)
			})
		}
	}
	conformance.Run(t, c(as+"should fail when specifying alias with other terms"), func(t *testing.T) {
		expect(t, with(amis(awsv1.AMISelectorTerm{Alias: "al2023@latest"}, awsv1.AMISelectorTerm{ID: "ami-1234749"})), false)
	})
	for _, e := range []struct{ name, alias, family string }{
		{"al2 (latest)", "al2@latest", familyAL2},
		{"al2 (pinned)", "al2@v20240625", familyAL2},
		{"al2023 (latest)", "al2023@latest", familyAL2023},
		{"al2023 (pinned)", "al2023@v20240625", familyAL2023},
		{"bottlerocket (latest)", "bottlerocket@latest", familyBottlerocket},
		{"bottlerocket (pinned)", "bottlerocket@1.10.0", familyBottlerocket},
		{"windows2019 (latest)", "windows2019@latest", familyWindows2019},
		{"windows2022 (latest)", "windows2022@latest", familyWindows2022},
		{"windows2025 (latest)", "windows2025@latest", familyWindows2025},
	} {
		conformance.Run(t, c(as+"should succeed for valid aliases > "+e.name), func(t *testing.T) {
			expect(t, withAlias(e.family, e.alias), true)
		})
	}
	for _, e := range []struct {
		name    string
		aliases []string
	}{
		{"missing family", []string{"@latest"}},
		{"missing version", []string{"al2023", "al2023@"}},
		{"invalid separator", []string{"al2023-latest"}},
	} {
		conformance.Run(t, c(as+"should fail for incorrectly formatted aliases > "+e.name), func(t *testing.T) {
			for _, alias := range e.aliases {
				expect(t, with(amis(awsv1.AMISelectorTerm{Alias: alias})), false)
			}
		})
	}
	conformance.Run(t, c(as+"should fail for an alias with an invalid family"), func(t *testing.T) {
		expect(t, with(amis(awsv1.AMISelectorTerm{Alias: "ubuntu@latest"})), false)
	})
	for _, e := range []struct{ name, alias string }{
		{"Windows2019", "windows2019@v1.0.0"}, {"Windows2022", "windows2022@v1.0.0"}, {"Windows2025", "windows2025@v1.0.0"},
	} {
		conformance.Run(t, c(as+"should fail when specifying non-latest versions with Windows aliases > "+e.name), func(t *testing.T) {
			expect(t, with(amis(awsv1.AMISelectorTerm{Alias: e.alias})), false)
		})
	}

	// Kubelet
	kubelet := func(k awsv1.KubeletConfiguration) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet = &k }
	}
	signals := []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
	validSoft := awsv1.KubeletConfiguration{
		EvictionSoft: map[string]string{"memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "15%", "imagefs.available": "5%", "imagefs.inodesFree": "5%", "pid.available": "5%"},
		EvictionSoftGracePeriod: map[string]metav1.Duration{
			"memory.available": {Duration: time.Minute}, "nodefs.available": {Duration: 90 * time.Second}, "nodefs.inodesFree": {Duration: 5 * time.Minute},
			"imagefs.available": {Duration: time.Hour}, "imagefs.inodesFree": {Duration: 24 * time.Hour}, "pid.available": {Duration: time.Minute},
		},
	}
	soft := func(key, value string) awsv1.KubeletConfiguration {
		return awsv1.KubeletConfiguration{EvictionSoft: map[string]string{key: value}, EvictionSoftGracePeriod: map[string]metav1.Duration{key: {Duration: time.Minute}}}
	}
	hard := map[string]string{}
	for i, s := range signals {
		hard[s] = []string{"5%", "10%", "15%", "5%", "5%", "5%"}[i]
	}
	k := "Kubelet > "
	run(k, []entry{
		{"should fail on kubeReserved with invalid keys", kubelet(awsv1.KubeletConfiguration{KubeReserved: map[string]string{string(corev1.ResourcePods): "2"}}), false},
		{"should fail on systemReserved with invalid keys", kubelet(awsv1.KubeletConfiguration{SystemReserved: map[string]string{string(corev1.ResourcePods): "2"}}), false},
		{"Eviction Signals > Eviction Hard > should succeed on evictionHard with valid keys", kubelet(awsv1.KubeletConfiguration{EvictionHard: hard}), true},
		{"Eviction Signals > Eviction Hard > should fail on evictionHard with invalid keys", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory": "5%"}}), false},
		{"Eviction Signals > Eviction Hard > should fail on invalid formatted percentage value in evictionHard", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "5%3"}}), false},
		{"Eviction Signals > Eviction Hard > should fail on invalid percentage value (too large) in evictionHard", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "110%"}}), false},
		{"Eviction Signals > Eviction Hard > should fail on invalid quantity value in evictionHard", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "110GB"}}), false},
		{"Eviction Soft > should succeed on evictionSoft with valid keys", kubelet(validSoft), true},
		{"Eviction Soft > should fail on evictionSoft with invalid keys", kubelet(soft("memory", "5%")), false},
		{"Eviction Soft > should fail on invalid formatted percentage value in evictionSoft", kubelet(soft("memory.available", "5%3")), false},
		{"Eviction Soft > should fail on invalid percentage value (too large) in evictionSoft", kubelet(soft("memory.available", "110%")), false},
		{"Eviction Soft > should fail on invalid quantity value in evictionSoft", kubelet(soft("memory.available", "110GB")), false},
		{"Eviction Soft > should fail when eviction soft doesn't have matching grace period", kubelet(awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "200Mi"}}), false},
		{"GCThresholdPercent > should succeed on a valid imageGCHighThresholdPercent", kubelet(awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: new(int32(10))}), true},
		{"GCThresholdPercent > should fail when imageGCHighThresholdPercent is less than imageGCLowThresholdPercent", kubelet(awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: new(int32(50)), ImageGCLowThresholdPercent: new(int32(60))}), false},
		{"GCThresholdPercent > should fail when imageGCLowThresholdPercent is greather than imageGCHighThresheldPercent", kubelet(awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: new(int32(50)), ImageGCLowThresholdPercent: new(int32(60))}), false},
		{"Eviction Soft Grace Period > should succeed on evictionSoftGracePeriod with valid keys", kubelet(validSoft), true},
		{"Eviction Soft Grace Period > should fail on evictionSoftGracePeriod with invalid keys", kubelet(awsv1.KubeletConfiguration{EvictionSoftGracePeriod: map[string]metav1.Duration{"memory": {Duration: time.Minute}}}), false},
		{"Eviction Soft Grace Period > should fail when eviction soft grace period doesn't have matching threshold", kubelet(awsv1.KubeletConfiguration{EvictionSoftGracePeriod: map[string]metav1.Duration{"memory.available": {Duration: time.Minute}}}), false},
	})

	// MetadataOptions
	metadata := func(m awsv1.MetadataOptions) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.MetadataOptions = &m }
	}
	run("MetadataOptions > ", []entry{
		{"should succeed for valid inputs", metadata(awsv1.MetadataOptions{HTTPEndpoint: new("disabled"), HTTPProtocolIPv6: new("enabled"), HTTPPutResponseHopLimit: new(int64(34)), HTTPTokens: new("optional")}), true},
		{"should fail for invalid for HTTPEndpoint", metadata(awsv1.MetadataOptions{HTTPEndpoint: new("test")}), false},
		{"should fail for invalid for HTTPProtocolIPv6", metadata(awsv1.MetadataOptions{HTTPProtocolIPv6: new("test")}), false},
		{"should fail for invalid for HTTPPutResponseHopLimit", metadata(awsv1.MetadataOptions{HTTPPutResponseHopLimit: new(int64(-5))}), false},
		{"should fail for invalid for HTTPTokens", metadata(awsv1.MetadataOptions{HTTPTokens: new("test")}), false},
	})

	// BlockDeviceMappings
	withRate := func(m *awsv1.BlockDeviceMapping, snapshot *string, rate int32) *awsv1.BlockDeviceMapping {
		m.EBS.SnapshotID, m.EBS.VolumeInitializationRate = snapshot, &rate
		return m
	}
	for _, e := range []struct {
		title    string
		mappings []*awsv1.BlockDeviceMapping
		ok       bool
	}{
		{"should succeed if more than one root volume is specified", []*awsv1.BlockDeviceMapping{
			mapping("map-device-1", resource.NewScaledQuantity(500, resource.Giga), true),
			mapping("map-device-2", resource.NewScaledQuantity(50, resource.Tera), false),
		}, true},
		{"should succeed for valid VolumeSize in G", []*awsv1.BlockDeviceMapping{mapping("map-device-1", resource.NewScaledQuantity(58, resource.Giga), false)}, true},
		{"should succeed for valid VolumeSize in T", []*awsv1.BlockDeviceMapping{mapping("map-device-1", resource.NewScaledQuantity(45, resource.Tera), false)}, true},
		{"should fail if more than one root volume is specified", []*awsv1.BlockDeviceMapping{
			mapping("map-device-1", resource.NewScaledQuantity(50, resource.Giga), true),
			mapping("map-device-2", resource.NewScaledQuantity(50, resource.Giga), true),
		}, false},
		{"should fail VolumeSize is less then 1Gi/1G", []*awsv1.BlockDeviceMapping{mapping("map-device-1", resource.NewScaledQuantity(1, resource.Milli), false)}, false},
		{"should fail VolumeSize is greater then 64T", []*awsv1.BlockDeviceMapping{mapping("map-device-1", resource.NewScaledQuantity(100, resource.Tera), false)}, false},
		{"should fail for VolumeSize that do not parse into quantity values", []*awsv1.BlockDeviceMapping{mapping("map-device-1", &resource.Quantity{}, false)}, false},
		{"should fail if VolumeInitializationRate set but SnapshotID not specified", []*awsv1.BlockDeviceMapping{withRate(mapping("map-device-1", &resource.Quantity{}, false), nil, 100)}, false},
		{"should fail if VolumeInitializationRate too low", []*awsv1.BlockDeviceMapping{withRate(mapping("map-device-1", &resource.Quantity{}, false), new("snap-1"), 99)}, false},
		{"should fail if VolumeInitializationRate too high", []*awsv1.BlockDeviceMapping{withRate(mapping("map-device-1", &resource.Quantity{}, false), new("snap-1"), 888)}, false},
	} {
		conformance.Run(t, c("BlockDeviceMappings > "+e.title), func(t *testing.T) { expect(t, blockDeviceClass(e.mappings...), e.ok) })
	}

	// NetworkInterfaces
	nic := func(card, device int32, typ awsv1.InterfaceType) *awsv1.NetworkInterface {
		return &awsv1.NetworkInterface{NetworkCardIndex: card, DeviceIndex: device, InterfaceType: typ}
	}
	nics := func(ns ...*awsv1.NetworkInterface) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.NetworkInterfaces = ns }
	}
	ena, efa := awsv1.InterfaceTypeInterface, awsv1.InterfaceTypeEFAOnly
	run("NetworkInterfaces > ", []entry{
		{"should succeed with valid multiple network interfaces", nics(nic(0, 0, ena), nic(0, 1, efa), nic(1, 0, efa), nic(1, 1, ena)), true},
		{"should succeed when network interfaces is empty", nics([]*awsv1.NetworkInterface{}...), true},
		{"should fail with an invalid interface type", nics(nic(0, 0, "efa")), false},
		{"should fail with a negative NetworkCardIndex", nics(nic(0, 0, ena), nic(-1, 0, ena)), false},
		{"should fail with a negative DeviceIndex", nics(nic(-1, 0, ena), nic(0, -1, ena)), false},
		{"should fail with duplicate Network Interface and Device Index fields", nics(nic(0, 0, ena), nic(0, 1, efa), nic(1, 0, ena), nic(1, 0, efa)), false},
		{"should fail with no primary network interface", nics(nic(0, 1, ena)), false},
		{"should fail when primary network interface is not ENA", nics(nic(0, 0, efa)), false},
		{"should fail when multiple EFA devices on one network card", nics(nic(0, 0, ena), nic(1, 0, efa), nic(1, 1, efa)), false},
	})

	// ConnectionTracking
	tracking := func(tcp, udpStream, udp *int32) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) {
			nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: tcp, UDPStreamTimeout: udpStream, UDPTimeout: udp}
		}
	}
	n := func(v int32) *int32 { return &v }
	run("ConnectionTracking > ", []entry{
		{"should fail when connectionTracking is specified with no fields set", tracking(nil, nil, nil), false},
		{"should succeed with valid tcpEstablishedTimeout", tracking(n(60), nil, nil), true},
		{"should succeed with valid udpStreamTimeout", tracking(nil, n(120), nil), true},
		{"should succeed with valid udpTimeout", tracking(nil, nil, n(45)), true},
		{"should succeed with all valid connection tracking settings", tracking(n(432000), n(180), n(60)), true},
		{"should fail when tcpEstablishedTimeout is below minimum (60s)", tracking(n(59), nil, nil), false},
		{"should fail when tcpEstablishedTimeout is above maximum (432000s)", tracking(n(432001), nil, nil), false},
		{"should fail when udpStreamTimeout is below minimum (60s)", tracking(nil, n(59), nil), false},
		{"should fail when udpStreamTimeout is above maximum (180s)", tracking(nil, n(181), nil), false},
		{"should fail when udpTimeout is below minimum (30s)", tracking(nil, nil, n(29)), false},
		{"should fail when udpTimeout is above maximum (60s)", tracking(nil, nil, n(61)), false},
	})

	// Role Immutability: create, then update.
	ri := "Role Immutability > "
	run(ri, []entry{{"should fail if role is not defined", func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "" }, false}})
	update := func(t *testing.T, create, change func(*awsv1.EC2NodeClass)) {
		e := kubetest.Need(t, env)
		stored, err := store(t, e.Clients.EC2NodeClasses, with(create))
		admitted(t, err)
		change(stored)
		_, err = e.Clients.EC2NodeClasses.Update(context.Background(), stored, metav1.UpdateOptions{})
		admitted(t, err)
	}
	role := func(r string) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.Role, nc.Spec.InstanceProfile = r, nil }
	}
	profile := func(nc *awsv1.EC2NodeClass) { nc.Spec.Role, nc.Spec.InstanceProfile = "", new("test-instance-profile") }
	conformance.Run(t, c(ri+"should succeed when updating the role"), func(t *testing.T) {
		update(t, role("test-role"), role("test-role2"))
	})
	conformance.Run(t, c(ri+"should succeed to switch between an unmanaged and managed instance profile"), func(t *testing.T) {
		update(t, profile, role("test-role"))
	})
	conformance.Run(t, c(ri+"should succeed to switch between a managed and unmanaged instance profile"), func(t *testing.T) {
		update(t, role("test-role"), profile)
	})

	// CPUOptions
	cpu := func(o awsv1.CPUOptions) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.CPUOptions = &o }
	}
	run("CPUOptions > ", []entry{
		{"should succeed with nestedVirtualization enabled", cpu(awsv1.CPUOptions{NestedVirtualization: new("enabled")}), true},
		{"should succeed with nestedVirtualization disabled", cpu(awsv1.CPUOptions{NestedVirtualization: new("disabled")}), true},
		{"should fail with invalid nestedVirtualization value", cpu(awsv1.CPUOptions{NestedVirtualization: new("invalid")}), false},
		{"should succeed with empty CPUOptions", cpu(awsv1.CPUOptions{}), true},
	})
}
