package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func ec2Tags(kv ...string) []ec2types.Tag {
	var out []ec2types.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, ec2types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

func image(id, name, arch, created string, tags ...string) ec2types.Image {
	return ec2types.Image{ImageId: aws.String(id), Name: aws.String(name), Architecture: ec2types.ArchitectureValues(arch),
		CreationDate: aws.String(created), State: ec2types.ImageStateAvailable, Tags: ec2Tags(tags...)}
}

const al2023Prefix = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/"

// world is a small account: three subnets of the cluster in two zones, one
// foreign subnet, two security groups and the AL2023 AMIs of 1.33.
func world() (*fakeEC2, *fakeSSM, *fakeIAM) {
	ec2 := &fakeEC2{
		subnets: []ec2types.Subnet{
			{SubnetId: aws.String("subnet-a1"), AvailabilityZone: aws.String("eu-west-1a"), AvailabilityZoneId: aws.String("euw1-az1"), AvailableIpAddressCount: aws.Int32(100), Tags: ec2Tags("karpenter.sh/discovery", "c1")},
			{SubnetId: aws.String("subnet-a2"), AvailabilityZone: aws.String("eu-west-1a"), AvailabilityZoneId: aws.String("euw1-az1"), AvailableIpAddressCount: aws.Int32(4000), Tags: ec2Tags("karpenter.sh/discovery", "c1", "tier", "private")},
			{SubnetId: aws.String("subnet-b1"), AvailabilityZone: aws.String("eu-west-1b"), AvailabilityZoneId: aws.String("euw1-az2"), AvailableIpAddressCount: aws.Int32(100), Tags: ec2Tags("karpenter.sh/discovery", "c1", "tier", "private")},
			{SubnetId: aws.String("subnet-x"), AvailabilityZone: aws.String("eu-west-1c"), AvailabilityZoneId: aws.String("euw1-az3"), AvailableIpAddressCount: aws.Int32(9), Tags: ec2Tags("karpenter.sh/discovery", "other")},
		},
		groups: []ec2types.SecurityGroup{
			{GroupId: aws.String("sg-2"), GroupName: aws.String("eks-cluster-sg-c1"), Tags: ec2Tags("karpenter.sh/discovery", "c1")},
			{GroupId: aws.String("sg-1"), GroupName: aws.String("nodes"), Tags: ec2Tags("karpenter.sh/discovery", "c1")},
			{GroupId: aws.String("sg-9"), GroupName: aws.String("other")},
		},
		images: []ec2types.Image{
			image("ami-x86", "amazon-eks-node-al2023-x86_64-standard-1.33-v20260501", "x86_64", "2026-05-01T00:00:00.000Z"),
			image("ami-x86gpu", "amazon-eks-node-al2023-x86_64-nvidia-1.33-v20260501", "x86_64", "2026-05-01T00:00:00.000Z"),
			image("ami-x86neuron", "amazon-eks-node-al2023-x86_64-neuron-1.33-v20260501", "x86_64", "2026-05-01T00:00:00.000Z"),
			image("ami-arm", "amazon-eks-node-al2023-arm64-standard-1.33-v20260501", "arm64", "2026-05-02T00:00:00.000Z"),
			image("ami-armgpu", "amazon-eks-node-al2023-arm64-nvidia-1.33-v20260501", "arm64", "2026-05-02T00:00:00.000Z"),
		},
	}
	ssm := &fakeSSM{params: map[string]string{
		al2023Prefix + "x86_64/standard/recommended/image_id": "ami-x86",
		al2023Prefix + "x86_64/nvidia/recommended/image_id":   "ami-x86gpu",
		al2023Prefix + "x86_64/neuron/recommended/image_id":   "ami-x86neuron",
		al2023Prefix + "arm64/standard/recommended/image_id":  "ami-arm",
		al2023Prefix + "arm64/nvidia/recommended/image_id":    "ami-armgpu",
	}}
	return ec2, ssm, newFakeIAM("KarpenterNodeRole-c1", "OtherRole")
}

var cluster = eksauth.ClusterInfo{Name: "c1", Endpoint: "https://c1.example", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16",
	IPFamily: "ipv4", KubernetesVersion: "1.33", ClusterDNS: "10.100.0.10"}

func defaultClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: types.UID("4b6c7f3e-uid"), Generation: 3},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole-c1",
			Tags:                       map[string]string{"team": "platform"},
		},
	}
}

func resolver(ec2 *fakeEC2, ssm *fakeSSM, iam *fakeIAM) *Resolver {
	return &Resolver{EC2: ec2, SSM: ssm, IAM: iam, Region: "eu-west-1", Now: func() time.Time { return testNow }}
}

func cond(st awsv1.EC2NodeClassStatus, t string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestResolveAll(t *testing.T) {
	ec2, ssm, iam := world()
	nc := defaultClass()
	st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Subnets, []awsv1.Subnet{
		{ID: "subnet-a2", Zone: "eu-west-1a", ZoneID: "euw1-az1"},
		{ID: "subnet-a1", Zone: "eu-west-1a", ZoneID: "euw1-az1"},
		{ID: "subnet-b1", Zone: "eu-west-1b", ZoneID: "euw1-az2"},
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("subnets = %+v\nwant %+v", got, want)
	}
	if got, want := st.SecurityGroups, []awsv1.SecurityGroup{{ID: "sg-1", Name: "nodes"}, {ID: "sg-2", Name: "eks-cluster-sg-c1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("security groups = %+v", got)
	}
	std := func(arch string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
			{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
		}
	}
	gpu := func(arch string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
			{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpExists},
		}
	}
	wantAMIs := []awsv1.AMI{
		{ID: "ami-arm", Name: "amazon-eks-node-al2023-arm64-standard-1.33-v20260501", Requirements: std("arm64")},
		{ID: "ami-armgpu", Name: "amazon-eks-node-al2023-arm64-nvidia-1.33-v20260501", Requirements: gpu("arm64")},
		{ID: "ami-x86", Name: "amazon-eks-node-al2023-x86_64-standard-1.33-v20260501", Requirements: std("amd64")},
		{ID: "ami-x86gpu", Name: "amazon-eks-node-al2023-x86_64-nvidia-1.33-v20260501", Requirements: gpu("amd64")},
		{ID: "ami-x86neuron", Name: "amazon-eks-node-al2023-x86_64-neuron-1.33-v20260501", Requirements: []corev1.NodeSelectorRequirement{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpExists},
		}},
	}
	if !reflect.DeepEqual(st.AMIs, wantAMIs) {
		t.Errorf("amis =\n%+v\nwant\n%+v", st.AMIs, wantAMIs)
	}
	wantProfile := InstanceProfileName("c1", "eu-west-1", "4b6c7f3e-uid", "KarpenterNodeRole-c1")
	if st.InstanceProfile != wantProfile || !strings.HasPrefix(wantProfile, "c1_") {
		t.Errorf("instance profile = %q, want %q", st.InstanceProfile, wantProfile)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, c.Type)
		if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 || c.Reason != ReasonReady || !c.LastTransitionTime.Time.Equal(testNow) {
			t.Errorf("condition %+v", c)
		}
	}
	if want := []string{"SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady", "ValidationSucceeded", "PlacementGroupReady", "CapacityReservationsReady", "Ready"}; !reflect.DeepEqual(types, want) {
		t.Errorf("conditions %v, want %v", types, want)
	}
	if got := iam.state(); got != "c1_"+wantProfile[3:]+" path=/karpenter/eu-west-1/c1/4b6c7f3e-uid/ roles=[KarpenterNodeRole-c1] tags=eks:eks-cluster-name=c1,karpenter.k8s.aws/ec2nodeclass=default,kubernetes.io/cluster/c1=owned,team=platform,topology.kubernetes.io/region=eu-west-1\n" {
		t.Errorf("iam state:\n%s", got)
	}

	// A second run changes nothing, keeps transition times, makes no IAM write.
	nc.Status = st
	before := len(iam.log)
	st2, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if err != nil || !reflect.DeepEqual(st, st2) {
		t.Fatalf("second resolve differs: %v\n%+v\n%+v", err, st, st2)
	}
	if got := iam.log[before:]; !reflect.DeepEqual(got, []string{"Get"}) {
		t.Errorf("second run IAM calls %v, want only Get", got)
	}
}

func TestResolveNothingMatches(t *testing.T) {
	ec2, ssm, iam := world()
	nc := defaultClass()
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "missing"}}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"golden": "yes"}}}
	nc.Spec.AMIFamily = aws.String("AL2023")
	nc.Spec.Role = "NoSuchRole"
	st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]string{
		"SubnetsReady":         `SubnetsNotFound: no subnets match subnetSelectorTerms [{"tags":{"karpenter.sh/discovery":"nope"}}]`,
		"SecurityGroupsReady":  `SecurityGroupsNotFound: no security groups match securityGroupSelectorTerms [{"name":"missing"}]`,
		"AMIsReady":            `AMINotFound: no available AMIs match amiSelectorTerms [{"tags":{"golden":"yes"}}]`,
		"InstanceProfileReady": `RoleNotFound: role "NoSuchRole" (spec.role) does not exist`,
		"ValidationSucceeded":  `DependenciesNotReady: waiting for SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady`,
		"Ready":                `UnhealthyDependents: SubnetsReady=False, SecurityGroupsReady=False, AMIsReady=False, InstanceProfileReady=False, ValidationSucceeded=False`,
	} {
		c := cond(st, typ)
		if c.Status != metav1.ConditionFalse || !strings.HasPrefix(c.Reason+": "+c.Message, want) {
			t.Errorf("%s = %s %s: %s\nwant prefix %s", typ, c.Status, c.Reason, c.Message, want)
		}
	}
	if len(st.Subnets)+len(st.SecurityGroups)+len(st.AMIs) != 0 || st.InstanceProfile != "" {
		t.Errorf("status should be empty: %+v", st)
	}
}

func TestResolveTransientErrorKeepsPreviousStatus(t *testing.T) {
	ec2, ssm, iam := world()
	nc := defaultClass()
	r := resolver(ec2, ssm, iam)
	st, err := r.Resolve(context.Background(), nc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	nc.Status = st
	ec2.err = apiErr("RequestLimitExceeded")
	st2, err := r.Resolve(context.Background(), nc, cluster)
	if err == nil || !strings.Contains(err.Error(), "RequestLimitExceeded") {
		t.Fatalf("want the throttle reported, got %v", err)
	}
	if !reflect.DeepEqual(st, st2) {
		t.Fatalf("status changed on a transient error:\n%+v\n%+v", st, st2)
	}
	// Access denied is for a person to fix: it shows in the condition.
	ec2.err = apiErr("UnauthorizedOperation")
	st3, err := r.Resolve(context.Background(), nc, cluster)
	if err == nil {
		t.Fatal("want the denial reported")
	}
	if c := cond(st3, "SubnetsReady"); c.Status != metav1.ConditionFalse || c.Reason != ReasonAccessDenied || !c.LastTransitionTime.Time.Equal(testNow) {
		t.Fatalf("SubnetsReady = %+v", c)
	}
	if cond(st3, "Ready").Status != metav1.ConditionFalse {
		t.Fatal("Ready should be false")
	}
}

func TestResolveUnsupportedAliases(t *testing.T) {
	ec2, ssm, iam := world()
	for _, tc := range []struct{ alias, version, reason, msg string }{
		{"al2@latest", "1.33", ReasonUnsupportedAlias, "AL2 AMIs are not published for Kubernetes 1.33"},
		{"windows2025@latest", "1.34", ReasonUnsupportedAlias, "requires EKS version 1.35 or higher"},
		{"al2023@latest", "", ReasonKubernetesVersion, "Kubernetes version, which is unknown"},
		{"bottlerocket@latest", "1.33", ReasonAMINotFound, "no SSM parameter found, e.g. /aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"},
	} {
		nc := defaultClass()
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tc.alias}}
		cl := cluster
		cl.KubernetesVersion = tc.version
		st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cl)
		if err != nil {
			t.Fatal(err)
		}
		c := cond(st, "AMIsReady")
		if c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%s on %s: %s %s %q", tc.alias, tc.version, c.Status, c.Reason, c.Message)
		}
	}
}

func TestResolveNonAliasTermsPickNewestNonDeprecated(t *testing.T) {
	ec2, ssm, iam := world()
	ec2.images = []ec2types.Image{
		image("ami-old", "golden-1", "x86_64", "2026-01-01T00:00:00.000Z", "golden", "yes"),
		image("ami-new", "golden-2", "x86_64", "2026-03-01T00:00:00.000Z", "golden", "yes"),
		image("ami-newest-deprecated", "golden-3", "x86_64", "2026-04-01T00:00:00.000Z", "golden", "yes"),
		image("ami-arm", "golden-arm", "arm64", "2026-02-01T00:00:00.000Z", "golden", "yes"),
		image("ami-mac", "golden-mac", "x86_64_mac", "2026-05-01T00:00:00.000Z", "golden", "yes"),
		image("ami-untagged", "golden-9", "x86_64", "2026-05-01T00:00:00.000Z"),
		image("ami-public", "my-name-1", "x86_64", "2026-05-01T00:00:00.000Z"),
		image("ami-mine", "my-name-0", "x86_64", "2026-01-01T00:00:00.000Z"),
		image("ami-ssm", "via-ssm", "arm64", "2026-01-01T00:00:00.000Z"),
	}
	ec2.images[2].DeprecationTime = aws.String("2026-05-01T00:00:00.000Z")
	ec2.owners = map[string]string{"ami-public": "123456789012", "ami-mine": "self"}
	ssm.params["/my/ami"] = "ami-ssm"

	nc := defaultClass()
	nc.Spec.AMIFamily = aws.String("AL2023")
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"golden": "*"}}}
	st, _ := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if got := amiIDs(st.AMIs); !reflect.DeepEqual(got, []string{"ami-new", "ami-arm"}) {
		t.Errorf("tag term: %v, want [ami-new ami-arm]", got)
	}
	// Only deprecated images left: the newest deprecated one is used, marked.
	ec2.images = ec2.images[2:3]
	st, _ = resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if len(st.AMIs) != 1 || st.AMIs[0].ID != "ami-newest-deprecated" || !st.AMIs[0].Deprecated {
		t.Errorf("deprecated only: %+v", st.AMIs)
	}
	ec2.images = nil
	ec2.images = append(ec2.images, image("ami-public", "my-name-1", "x86_64", "2026-05-01T00:00:00.000Z"),
		image("ami-mine", "my-name-0", "x86_64", "2026-01-01T00:00:00.000Z"), image("ami-ssm", "via-ssm", "arm64", "2026-01-01T00:00:00.000Z"))
	// Names default to owners self and amazon: the stranger's newer image is not used.
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "my-name-*"}, {SSMParameter: "/my/ami"}, {SSMParameter: "/missing"}}
	st, _ = resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if got := amiIDs(st.AMIs); !reflect.DeepEqual(got, []string{"ami-mine", "ami-ssm"}) {
		t.Errorf("name+ssm terms: %v, want [ami-mine ami-ssm]", got)
	}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "my-name-*", Owner: "123456789012"}}
	st, _ = resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if got := amiIDs(st.AMIs); !reflect.DeepEqual(got, []string{"ami-public"}) {
		t.Errorf("explicit owner: %v", got)
	}
}

func amiIDs(amis []awsv1.AMI) []string {
	var out []string
	for _, a := range amis {
		out = append(out, a.ID)
	}
	return out
}

func TestResolveBottlerocketAliasRequirements(t *testing.T) {
	ec2, ssm, iam := world()
	ec2.images = []ec2types.Image{
		image("ami-br", "bottlerocket-aws-k8s-1.33-x86_64-v1.40.0", "x86_64", "2026-05-01T00:00:00.000Z"),
		image("ami-brarm", "bottlerocket-aws-k8s-1.33-aarch64-v1.40.0", "arm64", "2026-05-01T00:00:00.000Z"),
		image("ami-brgpu", "bottlerocket-aws-k8s-1.33-nvidia-x86_64-v1.40.0", "x86_64", "2026-05-01T00:00:00.000Z"),
	}
	ssm.params = map[string]string{
		"/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.40.0/image_id":        "ami-br",
		"/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.40.0/image_id":         "ami-brarm",
		"/aws/service/bottlerocket/aws-k8s-1.33-nvidia/x86_64/1.40.0/image_id": "ami-brgpu",
	}
	nc := defaultClass()
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@v1.40.0"}}
	st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range st.AMIs {
		got = append(got, a.ID+" "+requirementsKey(a.Requirements))
	}
	want := []string{
		"ami-br kubernetes.io/arch In amd64;karpenter.k8s.aws/instance-accelerator-count Exists ;",
		"ami-br kubernetes.io/arch In amd64;karpenter.k8s.aws/instance-gpu-count DoesNotExist ;karpenter.k8s.aws/instance-accelerator-count DoesNotExist ;",
		"ami-brarm kubernetes.io/arch In arm64;karpenter.k8s.aws/instance-gpu-count DoesNotExist ;karpenter.k8s.aws/instance-accelerator-count DoesNotExist ;",
		"ami-brgpu kubernetes.io/arch In amd64;karpenter.k8s.aws/instance-gpu-count Exists ;",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInstanceProfileFromSpec(t *testing.T) {
	ec2, ssm, iam := world()
	iam.profiles["existing"] = profile("existing", "OtherRole")
	iam.profiles["roleless"] = profile("roleless", "")
	for _, tc := range []struct {
		profile string
		ok      bool
		msg     string
	}{
		{"existing", true, ""},
		{"roleless", false, "has no role"},
		{"missing", false, `instance profile "missing" (spec.instanceProfile) does not exist`},
	} {
		nc := defaultClass()
		nc.Spec.Role = ""
		nc.Spec.InstanceProfile = aws.String(tc.profile)
		st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
		if err != nil {
			t.Fatal(err)
		}
		c := cond(st, "InstanceProfileReady")
		if (c.Status == metav1.ConditionTrue) != tc.ok || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%s: %+v", tc.profile, c)
		}
		if tc.ok && st.InstanceProfile != tc.profile {
			t.Errorf("%s: status.instanceProfile = %q", tc.profile, st.InstanceProfile)
		}
	}
}

func profile(name, role string) *iamtypes.InstanceProfile {
	out := &iamtypes.InstanceProfile{InstanceProfileName: aws.String(name), Path: aws.String("/")}
	if role != "" {
		out.Roles = append(out.Roles, iamtypes.Role{RoleName: aws.String(role)})
	}
	return out
}

// TestInstanceProfileSurvivesInterruption kills the first run at every IAM
// call in turn, with the call either not done or done but unanswered; the
// next run must end in exactly the state of an uninterrupted run.
func TestInstanceProfileSurvivesInterruption(t *testing.T) {
	nc := defaultClass()
	clean := newFakeIAM("KarpenterNodeRole-c1")
	name, err := (&Resolver{IAM: clean, Region: "eu-west-1"}).EnsureInstanceProfile(context.Background(), nc, "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := clean.state()
	steps := len(clean.log)
	if steps != 3 { // Get, Create, AddRole
		t.Fatalf("clean run made %d calls: %v", steps, clean.log)
	}
	for k := 1; k <= steps; k++ {
		for _, lost := range []bool{false, true} {
			f := newFakeIAM("KarpenterNodeRole-c1")
			f.failAt, f.lostResponse = k, lost
			r := &Resolver{IAM: f, Region: "eu-west-1"}
			if _, err := r.EnsureInstanceProfile(context.Background(), nc, "c1"); err == nil {
				t.Fatalf("k=%d lost=%v: first run should fail", k, lost)
			}
			f.failAt = 0
			got, err := r.EnsureInstanceProfile(context.Background(), nc, "c1")
			if err != nil || got != name {
				t.Fatalf("k=%d lost=%v: rerun = %q, %v", k, lost, got, err)
			}
			if s := f.state(); s != want {
				t.Errorf("k=%d lost=%v: state\n%s\nwant\n%s", k, lost, s, want)
			}
			// A third run is a no-op beyond reading.
			n := len(f.log)
			if _, err := r.EnsureInstanceProfile(context.Background(), nc, "c1"); err != nil || !reflect.DeepEqual(f.log[n:], []string{"Get"}) {
				t.Errorf("k=%d lost=%v: third run calls %v err %v", k, lost, f.log[n:], err)
			}
		}
	}
}

func TestInstanceProfileConcurrentRunsMakeOne(t *testing.T) {
	nc := defaultClass()
	f := newFakeIAM("KarpenterNodeRole-c1")
	r := &Resolver{IAM: f, Region: "eu-west-1"}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := r.EnsureInstanceProfile(context.Background(), nc, "c1")
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if len(f.profiles) != 1 {
		t.Fatalf("%d profiles:\n%s", len(f.profiles), f.state())
	}
	for _, p := range f.profiles {
		if len(p.Roles) != 1 {
			t.Fatalf("roles %v", p.Roles)
		}
	}
}

func TestInstanceProfileRepairsTagsAndForeignRole(t *testing.T) {
	nc := defaultClass()
	f := newFakeIAM("KarpenterNodeRole-c1", "OtherRole")
	r := &Resolver{IAM: f, Region: "eu-west-1"}
	name, _ := r.EnsureInstanceProfile(context.Background(), nc, "c1")
	f.profiles[name].Roles = []iamtypes.Role{{RoleName: aws.String("OtherRole")}}
	f.profiles[name].Tags = nil
	if _, err := r.EnsureInstanceProfile(context.Background(), nc, "c1"); err != nil {
		t.Fatal(err)
	}
	if s := f.state(); !strings.Contains(s, "roles=[KarpenterNodeRole-c1]") || !strings.Contains(s, "team=platform") {
		t.Fatalf("state %s", s)
	}
	// A new role is a new profile; the old one stays for running nodes
	// until garbage collection finds it unused.
	nc.Spec.Role = "OtherRole"
	name2, err := r.EnsureInstanceProfile(context.Background(), nc, "c1")
	if err != nil || name2 == name || len(f.profiles) != 2 {
		t.Fatalf("role change: %q %v\n%s", name2, err, f.state())
	}
	f.now = f.now.Add(time.Hour)
	r.Now = func() time.Time { return f.now.Add(2 * time.Hour) }
	deleted, err := r.DeleteUnusedInstanceProfiles(context.Background(), "c1", func(n string) bool { return n == name2 }, time.Hour)
	if err != nil || !reflect.DeepEqual(deleted, []string{name}) || len(f.profiles) != 1 {
		t.Fatalf("gc: %v %v\n%s", deleted, err, f.state())
	}
	deleted, err = r.DeleteInstanceProfiles(context.Background(), "c1", nc)
	if err != nil || !reflect.DeepEqual(deleted, []string{name2}) || len(f.profiles) != 0 {
		t.Fatalf("class deletion: %v %v\n%s", deleted, err, f.state())
	}
}

func TestValidationRejectsRestrictedTagsAndRunsHook(t *testing.T) {
	ec2, ssm, iam := world()
	nc := defaultClass()
	nc.Spec.Tags = map[string]string{"kubernetes.io/cluster/c1": "shared"}
	st, _ := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if c := cond(st, "ValidationSucceeded"); c.Reason != ReasonTagValidationFailed || !strings.Contains(c.Message, `"kubernetes.io/cluster/c1"`) {
		t.Fatalf("%+v", c)
	}
	nc = defaultClass()
	r := resolver(ec2, ssm, iam)
	r.Validate = func(_ context.Context, _ *awsv1.EC2NodeClass, st awsv1.EC2NodeClassStatus, _ eksauth.ClusterInfo) error {
		if len(st.AMIs) == 0 {
			return errors.New("no amis passed to the hook")
		}
		return &ValidationError{Reason: "UserDataSizeLimitExceeded", Message: "user data is 20000 bytes"}
	}
	st, _ = r.Resolve(context.Background(), nc, cluster)
	if c := cond(st, "ValidationSucceeded"); c.Reason != "UserDataSizeLimitExceeded" || c.Status != metav1.ConditionFalse {
		t.Fatalf("%+v", c)
	}
	if c := cond(st, "Ready"); c.Status != metav1.ConditionFalse || c.Reason != ReasonUnhealthyDependents || c.Message != "ValidationSucceeded=False" {
		t.Fatalf("%+v", c)
	}
}

func TestHash(t *testing.T) {
	base := func() *awsv1.EC2NodeClass {
		nc := defaultClass()
		nc.Spec.Kubelet = &awsv1.KubeletConfiguration{ClusterDNS: []string{"10.0.0.10", "10.0.0.11"}, MaxPods: aws.Int32(110)}
		q := resource.MustParse("100Gi")
		nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{
			{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: &q, VolumeType: aws.String("gp3")}},
			{DeviceName: aws.String("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: &q}},
		}
		return nc
	}
	h := Hash(base(), cluster.CABundle)
	if h != Hash(base(), cluster.CABundle) {
		t.Fatal("hash is not deterministic")
	}
	same := map[string]func(*awsv1.EC2NodeClass){
		"subnet terms":         func(nc *awsv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0].Tags["x"] = "y" },
		"security group terms": func(nc *awsv1.EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms = nil },
		"ami terms": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20260101"}}
		},
		"capacity reservations": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-1"}}
		},
		"ip prefix count":   func(nc *awsv1.EC2NodeClass) { nc.Spec.IPPrefixCount = aws.Int32(2) },
		"amiFamily = alias": func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = aws.String("AL2023") },
		"list order": func(nc *awsv1.EC2NodeClass) {
			b := nc.Spec.BlockDeviceMappings
			b[0], b[1] = b[1], b[0]
			nc.Spec.Kubelet.ClusterDNS = []string{"10.0.0.11", "10.0.0.10"}
		},
		"false = unset":   func(nc *awsv1.EC2NodeClass) { nc.Spec.DetailedMonitoring = aws.Bool(false) },
		"empty map = nil": func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet.KubeReserved = map[string]string{} },
		"status, metadata": func(nc *awsv1.EC2NodeClass) {
			nc.Status.InstanceProfile = "x"
			nc.Generation = 9
			nc.Labels = map[string]string{"a": "b"}
		},
		"quantity spelling": func(nc *awsv1.EC2NodeClass) {
			q := resource.MustParse("107374182400")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
	}
	for name, edit := range same {
		nc := base()
		edit(nc)
		if name == "quantity spelling" {
			// 100Gi and 107374182400 are the same size but different strings;
			// like Karpenter (which hashes the string) this is a change.
			if Hash(nc, cluster.CABundle) == h {
				t.Errorf("%s: want a different hash", name)
			}
			continue
		}
		if got := Hash(nc, cluster.CABundle); got != h {
			t.Errorf("%s changed the hash", name)
		}
	}
	differ := map[string]func(*awsv1.EC2NodeClass){
		"amiFamily Custom": func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = aws.String("Custom") },
		"user data":        func(nc *awsv1.EC2NodeClass) { nc.Spec.UserData = aws.String("#!/bin/bash") },
		"role":             func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "other" },
		"instance profile": func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = ""; nc.Spec.InstanceProfile = aws.String("p") },
		"tags":             func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags["team"] = "other" },
		"tag added":        func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags["cost"] = "" },
		"kubelet maxPods":  func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet.MaxPods = aws.Int32(50) },
		"kubelet reserved": func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet.KubeReserved = map[string]string{"cpu": "1"} },
		"volume size": func(nc *awsv1.EC2NodeClass) {
			q := resource.MustParse("101Gi")
			nc.Spec.BlockDeviceMappings[1].EBS.VolumeSize = &q
		},
		"volume dropped":      func(nc *awsv1.EC2NodeClass) { nc.Spec.BlockDeviceMappings = nc.Spec.BlockDeviceMappings[:1] },
		"instance store":      func(nc *awsv1.EC2NodeClass) { p := awsv1.InstanceStorePolicyRAID0; nc.Spec.InstanceStorePolicy = &p },
		"detailed monitoring": func(nc *awsv1.EC2NodeClass) { nc.Spec.DetailedMonitoring = aws.Bool(true) },
		"metadata options": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPTokens: aws.String("optional")}
		},
		"public ip": func(nc *awsv1.EC2NodeClass) { nc.Spec.AssociatePublicIPAddress = aws.Bool(true) },
		"context":   func(nc *awsv1.EC2NodeClass) { nc.Spec.Context = aws.String("ctx") },
		"cpu options": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: aws.String("enabled")}
		},
		"network interfaces": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeInterface}}
		},
		"connection tracking": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: aws.Int32(30)}
		},
		"eviction grace": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Kubelet.EvictionSoftGracePeriod = map[string]metav1.Duration{"memory.available": {Duration: time.Minute}}
		},
		"placement group": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{ID: aws.String("pg-1")}
		},
	}
	seen := map[string]string{h: "base"}
	for name, edit := range differ {
		nc := base()
		edit(nc)
		got := Hash(nc, cluster.CABundle)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s gives the same hash as %s", name, prev)
		}
		seen[got] = name
	}
	// Hash of the family, not the literal: Custom with an alias differs
	// from the alias family; no amiFamily with al2 alias differs from al2023.
	a, b := base(), base()
	b.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}
	if Hash(a, cluster.CABundle) == Hash(b, cluster.CABundle) {
		t.Error("family change through the alias should change the hash")
	}
	if _, err := fmt.Sscan(h, new(uint64)); err != nil {
		t.Errorf("hash %q is not a decimal uint64", h)
	}
}

func TestIsStale(t *testing.T) {
	nc := defaultClass()
	if !IsStale(nc, testNow, 0) {
		t.Error("never resolved should be stale")
	}
	nc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 3}}
	nc.Annotations = map[string]string{ResolvedAtAnnotation: testNow.Add(-30 * time.Second).Format(time.RFC3339)}
	if IsStale(nc, testNow, 0) || !IsReady(nc) {
		t.Error("fresh and ready")
	}
	if !IsStale(nc, testNow.Add(time.Minute), 0) {
		t.Error("older than a minute should be stale")
	}
	nc.Generation = 4
	if !IsStale(nc, testNow, 0) || IsReady(nc) {
		t.Error("spec changed: stale, not ready")
	}
}
