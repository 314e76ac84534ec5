package launchtemplate

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
)

var (
	stdReqs = func(arch string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
			{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
		}
	}
	gpuReqs = func(arch string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
			{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpExists},
		}
	}
)

func readyClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:             "NodeRole",
			Tags:             map[string]string{"team": "platform", "Name": "from-spec"},
			MetadataOptions: &awsv1.MetadataOptions{HTTPEndpoint: aws.String("enabled"), HTTPProtocolIPv6: aws.String("disabled"),
				HTTPPutResponseHopLimit: aws.Int64(1), HTTPTokens: aws.String("required")},
		},
		Status: awsv1.EC2NodeClassStatus{
			Subnets:         []awsv1.Subnet{{ID: "subnet-1", Zone: "eu-west-1a"}},
			SecurityGroups:  []awsv1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}},
			InstanceProfile: "c1_123",
			AMIs: []awsv1.AMI{
				{ID: "ami-arm", Requirements: stdReqs("arm64")},
				{ID: "ami-gpu", Requirements: gpuReqs("amd64")},
				{ID: "ami-x86", Requirements: stdReqs("amd64")},
			},
		},
	}
}

func claim() *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-abcde", Labels: map[string]string{
			wellknown.NodePoolLabel:     "general",
			wellknown.EC2NodeClassLabel: "default",
			wellknown.ZoneLabel:         "eu-west-1a", // kubelets may not set kubernetes.io labels
			"team":                      "platform",
		}},
		Spec: karpv1.NodeClaimSpec{
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

func itype(name, arch string, pods int64, extra ...string) *scheduling.InstanceType {
	labels := map[string]string{wellknown.ArchLabel: arch, wellknown.InstanceTypeLabel: name}
	for i := 0; i+1 < len(extra); i += 2 {
		labels[extra[i]] = extra[i+1]
	}
	return &scheduling.InstanceType{Name: name, Labels: labels, Capacity: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}}
}

func request() Request {
	return Request{
		NodeClass: readyClass(), NodeClaim: claim(), CapacityType: wellknown.CapacityTypeSpot, Cluster: testCluster,
		InstanceTypes: []*scheduling.InstanceType{
			itype("m5.large", "amd64", 29),
			itype("m6g.large", "arm64", 29),
			itype("g5.xlarge", "amd64", 58, wellknown.InstanceGPUCountLabel, "1"),
			itype("m5.xlarge", "amd64", 58),
			itype("c5.large", "amd64", 29),
			itype("inf2.xlarge", "amd64", 58, wellknown.InstanceAcceleratorCountLabel, "1"), // no neuron AMI resolved
		},
	}
}

func TestBuildGroupsByAMIAndMaxPods(t *testing.T) {
	res, err := Build(request())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s %d %v", r.ImageID, r.MaxPods, r.InstanceTypes))
	}
	want := []string{
		"ami-arm 29 [m6g.large]",
		"ami-gpu 58 [g5.xlarge]",
		"ami-x86 29 [m5.large c5.large]",
		"ami-x86 58 [m5.xlarge]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	names := map[string]bool{}
	for _, r := range res {
		name := aws.ToString(r.Input.LaunchTemplateName)
		if !strings.HasPrefix(name, NamePrefix) || len(name) > 128 || names[name] {
			t.Errorf("bad or duplicate name %q", name)
		}
		names[name] = true
		nb, err := ParseUserData(catalog.FamilyAL2023, r.UserData)
		if err != nil || nb.MaxPods != r.MaxPods {
			t.Errorf("%s: user data maxPods %d (%v), want %d", name, nb.MaxPods, err, r.MaxPods)
		}
	}
	// Same request, same names; any change to the content, another name.
	again, _ := Build(request())
	for i := range res {
		if aws.ToString(again[i].Input.LaunchTemplateName) != aws.ToString(res[i].Input.LaunchTemplateName) {
			t.Fatal("names are not deterministic")
		}
	}
	for name, edit := range map[string]func(*Request){
		"capacity type": func(r *Request) { r.CapacityType = wellknown.CapacityTypeOnDemand },
		"label":         func(r *Request) { r.NodeClaim.Labels["team"] = "other" },
		"taint":         func(r *Request) { r.NodeClaim.Spec.Taints = nil },
		"nodepool":      func(r *Request) { r.NodeClaim.Labels[wellknown.NodePoolLabel] = "batch" },
		"user data":     func(r *Request) { r.NodeClass.Spec.UserData = aws.String("#!/bin/bash\ntrue") },
		"tags":          func(r *Request) { r.NodeClass.Spec.Tags["team"] = "x" },
		"profile":       func(r *Request) { r.NodeClass.Status.InstanceProfile = "other" },
		"groups":        func(r *Request) { r.NodeClass.Status.SecurityGroups = r.NodeClass.Status.SecurityGroups[:1] },
		"monitoring":    func(r *Request) { r.NodeClass.Spec.DetailedMonitoring = aws.Bool(true) },
		"CA":            func(r *Request) { r.Cluster.CABundle = "b3RoZXI=" },
	} {
		r := request()
		edit(&r)
		changed, err := Build(r)
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(changed[0].Input.LaunchTemplateName) == aws.ToString(res[0].Input.LaunchTemplateName) {
			t.Errorf("%s did not change the name", name)
		}
	}
}

func TestBuildTemplateContent(t *testing.T) {
	res, err := Build(request())
	if err != nil {
		t.Fatal(err)
	}
	in := res[2].Input
	d := in.LaunchTemplateData
	wantTags := map[string]string{
		"team": "platform", "Name": "from-spec",
		"kubernetes.io/cluster/test-cluster": "owned", "karpenter.sh/nodepool": "general",
		"eks:eks-cluster-name": "test-cluster", "karpenter.k8s.aws/ec2nodeclass": "default",
	}
	tagMap := func(tags []ec2types.Tag) map[string]string {
		m := map[string]string{}
		for _, t := range tags {
			m[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		return m
	}
	if len(in.TagSpecifications) != 1 || in.TagSpecifications[0].ResourceType != ec2types.ResourceTypeLaunchTemplate || !reflect.DeepEqual(tagMap(in.TagSpecifications[0].Tags), wantTags) {
		t.Errorf("launch template tags %+v", in.TagSpecifications)
	}
	var types []string
	for _, ts := range d.TagSpecifications {
		types = append(types, string(ts.ResourceType))
		if !reflect.DeepEqual(tagMap(ts.Tags), wantTags) {
			t.Errorf("%s tags %v", ts.ResourceType, tagMap(ts.Tags))
		}
	}
	if !reflect.DeepEqual(types, []string{"network-interface", "spot-instances-request"}) {
		t.Errorf("data tag specs %v", types)
	}
	if aws.ToString(d.ImageId) != "ami-x86" || aws.ToString(d.IamInstanceProfile.Name) != "c1_123" || !reflect.DeepEqual(d.SecurityGroupIds, []string{"sg-1", "sg-2"}) || d.NetworkInterfaces != nil {
		t.Errorf("data %+v", d)
	}
	if aws.ToBool(d.Monitoring.Enabled) {
		t.Error("monitoring should be off")
	}
	m := d.MetadataOptions
	if m.HttpTokens != "required" || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.HttpEndpoint != "enabled" || m.InstanceMetadataTags != "disabled" || m.HttpProtocolIpv6 != "disabled" {
		t.Errorf("metadata %+v", m)
	}
	if len(d.BlockDeviceMappings) != 1 || aws.ToString(d.BlockDeviceMappings[0].DeviceName) != "/dev/xvda" ||
		aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || d.BlockDeviceMappings[0].Ebs.VolumeType != "gp3" || !aws.ToBool(d.BlockDeviceMappings[0].Ebs.Encrypted) {
		t.Errorf("volumes %+v", d.BlockDeviceMappings)
	}
	raw, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	nb, err := ParseUserData(catalog.FamilyAL2023, string(raw))
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"karpenter.sh/nodepool": "general", "karpenter.k8s.aws/ec2nodeclass": "default", "team": "platform",
		"karpenter.sh/capacity-type": "spot", "karpenter.sh/do-not-sync-taints": "true",
	}
	if !reflect.DeepEqual(nb.Labels, wantLabels) {
		t.Errorf("labels %v", nb.Labels)
	}
	if got := fmt.Sprint(nb.Taints); got != "[{dedicated ml NoSchedule <nil>} {node.cilium.io/agent-not-ready  NoExecute <nil>} {karpenter.sh/unregistered  NoExecute <nil>}]" {
		t.Errorf("taints %s", got)
	}
	// On-demand: no spot request tags.
	r := request()
	r.CapacityType = wellknown.CapacityTypeOnDemand
	od, _ := Build(r)
	if n := len(od[0].Input.LaunchTemplateData.TagSpecifications); n != 1 {
		t.Errorf("on-demand data tag specs: %d", n)
	}
}

func TestBuildFamiliesAndNetwork(t *testing.T) {
	r := request()
	r.NodeClass.Spec.AMIFamily = aws.String(catalog.FamilyBottlerocket)
	r.NodeClass.Spec.MetadataOptions = nil
	r.NodeClass.Spec.AssociatePublicIPAddress = aws.Bool(false)
	r.NodeClass.Spec.IPPrefixCount = aws.Int32(1)
	r.Cluster.IPFamily = "ipv6"
	res, err := Build(r)
	if err != nil {
		t.Fatal(err)
	}
	d := res[0].Input.LaunchTemplateData
	var vols []string
	for _, b := range d.BlockDeviceMappings {
		vols = append(vols, fmt.Sprintf("%s=%d", aws.ToString(b.DeviceName), aws.ToInt32(b.Ebs.VolumeSize)))
	}
	if !reflect.DeepEqual(vols, []string{"/dev/xvda=4", "/dev/xvdb=20"}) {
		t.Errorf("bottlerocket volumes %v", vols)
	}
	if d.MetadataOptions.HttpProtocolIpv6 != "enabled" || d.MetadataOptions.HttpTokens != "required" {
		t.Errorf("ipv6 metadata %+v", d.MetadataOptions)
	}
	if d.SecurityGroupIds != nil || len(d.NetworkInterfaces) != 1 {
		t.Fatalf("want one explicit interface: %+v", d)
	}
	ni := d.NetworkInterfaces[0]
	if aws.ToInt32(ni.DeviceIndex) != 0 || !reflect.DeepEqual(ni.Groups, []string{"sg-1", "sg-2"}) || aws.ToBool(ni.AssociatePublicIpAddress) ||
		aws.ToInt32(ni.Ipv6PrefixCount) != 1 || ni.Ipv4PrefixCount != nil || !aws.ToBool(ni.PrimaryIpv6) {
		t.Errorf("interface %+v", ni)
	}
	if !strings.Contains(res[0].UserData, "[settings.kubernetes]") {
		t.Errorf("not bottlerocket user data:\n%s", res[0].UserData)
	}

	// Windows: 50Gi /dev/sda1; Custom: AMI volumes, user data untouched,
	// one template per AMI whatever the pods.
	r = request()
	r.NodeClass.Spec.AMIFamily = aws.String(catalog.FamilyWindows2022)
	res, _ = Build(r)
	if b := res[0].Input.LaunchTemplateData.BlockDeviceMappings; aws.ToString(b[0].DeviceName) != "/dev/sda1" || aws.ToInt32(b[0].Ebs.VolumeSize) != 50 {
		t.Errorf("windows volumes %+v", b)
	}
	r = request()
	r.NodeClass.Spec.AMIFamily = aws.String(catalog.FamilyCustom)
	r.NodeClass.Spec.UserData = aws.String("custom")
	res, _ = Build(r)
	if len(res) != 3 || res[0].Input.LaunchTemplateData.BlockDeviceMappings != nil || res[0].UserData != "custom" {
		t.Errorf("custom: %d templates, %+v", len(res), res[0].Input.LaunchTemplateData)
	}

	// Class volumes win; sizes round up to GiB.
	r = request()
	q := resource.MustParse("100G")
	r.NodeClass.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: &q, VolumeType: aws.String("io2"), IOPS: aws.Int64(3000), DeleteOnTermination: aws.Bool(true)}}}
	res, _ = Build(r)
	if b := res[0].Input.LaunchTemplateData.BlockDeviceMappings[0].Ebs; aws.ToInt32(b.VolumeSize) != 94 || b.VolumeType != "io2" || aws.ToInt32(b.Iops) != 3000 || !aws.ToBool(b.DeleteOnTermination) {
		t.Errorf("class volume %+v", b)
	}

	// EFA requested: one interface per EFA device, grouped by count.
	r = request()
	r.NodeClaim.Spec.Resources.Requests = corev1.ResourceList{wellknown.ResourceEFA: resource.MustParse("1")}
	efaType := itype("p5.48xlarge", "amd64", 100, wellknown.InstanceGPUCountLabel, "8")
	efaType.Capacity[wellknown.ResourceEFA] = resource.MustParse("4")
	r.InstanceTypes = []*scheduling.InstanceType{efaType}
	res, _ = Build(r)
	nis := res[0].Input.LaunchTemplateData.NetworkInterfaces
	if res[0].EFA != 4 || len(nis) != 4 || aws.ToString(nis[0].InterfaceType) != "efa" || aws.ToInt32(nis[0].DeviceIndex) != 0 || aws.ToInt32(nis[3].DeviceIndex) != 1 || aws.ToInt32(nis[3].NetworkCardIndex) != 3 {
		t.Errorf("efa interfaces %+v", nis)
	}
}

func TestBuildErrors(t *testing.T) {
	for name, edit := range map[string]func(*Request){
		"no amis":            func(r *Request) { r.NodeClass.Status.AMIs = nil },
		"no groups":          func(r *Request) { r.NodeClass.Status.SecurityGroups = nil },
		"no profile":         func(r *Request) { r.NodeClass.Status.InstanceProfile = "" },
		"no matching type":   func(r *Request) { r.InstanceTypes = r.InstanceTypes[5:] },
		"no cidr for al2023": func(r *Request) { r.Cluster.ServiceCIDR = "" },
		"too large": func(r *Request) {
			r.NodeClass.Spec.UserData = aws.String("#!/bin/bash\n" + strings.Repeat("echo 0123456789\n", 1100))
		},
	} {
		r := request()
		edit(&r)
		if _, err := Build(r); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestValidateHook(t *testing.T) {
	nc := readyClass()
	if err := Validate(context.Background(), nc, nc.Status, testCluster); err != nil {
		t.Fatal(err)
	}
	nc.Spec.UserData = aws.String("#!/bin/bash\n" + strings.Repeat("x", MaxUserDataBytes))
	err := Validate(context.Background(), nc, nc.Status, testCluster)
	if ve, ok := err.(*nodeclass.ValidationError); !ok || ve.Reason != "UserDataSizeLimitExceeded" {
		t.Fatalf("err %v", err)
	}
	nc = readyClass()
	nc.Spec.AMIFamily = aws.String(catalog.FamilyBottlerocket)
	nc.Spec.UserData = aws.String("[settings")
	err = Validate(context.Background(), nc, nc.Status, testCluster)
	if ve, ok := err.(*nodeclass.ValidationError); !ok || ve.Reason != "UserDataInvalid" {
		t.Fatalf("err %v", err)
	}
	nc = readyClass()
	noCIDR := testCluster
	noCIDR.ServiceCIDR = ""
	err = Validate(context.Background(), nc, nc.Status, noCIDR)
	if ve, ok := err.(*nodeclass.ValidationError); !ok || ve.Reason != "ClusterCIDRUnknown" {
		t.Fatalf("err %v", err)
	}
}

// fakeEC2 keeps launch templates by name, like EC2 (names unique).
type fakeEC2 struct {
	mu        sync.Mutex
	lts       map[string]ec2types.LaunchTemplate
	creates   int
	describes int
	deletes   int
	next      int
	now       time.Time
	// hideFromDescribe makes DescribeLaunchTemplates miss existing
	// templates, as when another Lambda creates one between our look-up
	// and our create.
	hideFromDescribe int
}

func newFakeEC2() *fakeEC2 {
	return &fakeEC2{lts: map[string]ec2types.LaunchTemplate{}, now: time.Unix(1_700_000_000, 0)}
}

func ec2Err(code string) error { return &smithy.GenericAPIError{Code: code, Message: code} }

func (f *fakeEC2) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	name := aws.ToString(in.LaunchTemplateName)
	if _, ok := f.lts[name]; ok {
		return nil, ec2Err("InvalidLaunchTemplateName.AlreadyExistsException")
	}
	f.next++
	lt := ec2types.LaunchTemplate{LaunchTemplateName: in.LaunchTemplateName, LaunchTemplateId: aws.String(fmt.Sprintf("lt-%03d", f.next)),
		CreateTime: aws.Time(f.now), Tags: in.TagSpecifications[0].Tags}
	f.lts[name] = lt
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &lt}, nil
}

func (f *fakeEC2) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	out := &ec2.DescribeLaunchTemplatesOutput{}
	if len(in.LaunchTemplateNames) > 0 {
		for _, n := range in.LaunchTemplateNames {
			lt, ok := f.lts[n]
			if !ok || f.hideFromDescribe > 0 {
				if f.hideFromDescribe > 0 {
					f.hideFromDescribe--
				}
				return nil, ec2Err("InvalidLaunchTemplateName.NotFoundException")
			}
			out.LaunchTemplates = append(out.LaunchTemplates, lt)
		}
		return out, nil
	}
	var names []string
	for n := range f.lts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		lt := f.lts[n]
		ok := true
		for _, fl := range in.Filters {
			key, _ := strings.CutPrefix(aws.ToString(fl.Name), "tag:")
			found := false
			for _, t := range lt.Tags {
				if aws.ToString(t.Key) == key && aws.ToString(t.Value) == fl.Values[0] {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			out.LaunchTemplates = append(out.LaunchTemplates, lt)
		}
	}
	return out, nil
}

func (f *fakeEC2) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes++
	for n, lt := range f.lts {
		if aws.ToString(lt.LaunchTemplateId) == aws.ToString(in.LaunchTemplateId) {
			delete(f.lts, n)
			return &ec2.DeleteLaunchTemplateOutput{}, nil
		}
	}
	return nil, ec2Err("InvalidLaunchTemplateId.NotFound")
}

func TestEnsureCreatesThenReuses(t *testing.T) {
	f := newFakeEC2()
	p := &Provider{EC2: f}
	first, err := p.Ensure(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 4 || f.creates != 4 || len(f.lts) != 4 {
		t.Fatalf("%d templates, %d creates", len(first), f.creates)
	}
	if first[2].ImageID != "ami-x86" || !reflect.DeepEqual(first[2].InstanceTypes, []string{"m5.large", "c5.large"}) {
		t.Errorf("%+v", first[2])
	}
	second, err := p.Ensure(context.Background(), request())
	if err != nil || !reflect.DeepEqual(first, second) || f.creates != 4 {
		t.Fatalf("second ensure: %v, creates %d", err, f.creates)
	}
}

func TestEnsureAlreadyExistsRace(t *testing.T) {
	f := newFakeEC2()
	p := &Provider{EC2: f}
	r := request()
	r.InstanceTypes = r.InstanceTypes[:1]
	want, _ := p.Ensure(context.Background(), r)
	// The look-up misses it (another Lambda created it in between): the
	// create fails with AlreadyExists and the template is described.
	f.hideFromDescribe = 1
	got, err := p.Ensure(context.Background(), r)
	if err != nil || !reflect.DeepEqual(got, want) || f.creates != 2 || len(f.lts) != 1 {
		t.Fatalf("race: %v %+v creates %d templates %d", err, got, f.creates, len(f.lts))
	}
	// EC2 does not list the template yet even after saying it exists
	// (eventual consistency): its name is enough to launch with.
	f.hideFromDescribe = 2
	got, err = p.Ensure(context.Background(), r)
	if err != nil || !reflect.DeepEqual(got, want) || f.creates != 3 || len(f.lts) != 1 {
		t.Fatalf("lagging describe: %v %+v creates %d templates %d", err, got, f.creates, len(f.lts))
	}
	// Many Lambdas at once: one template.
	f2 := newFakeEC2()
	p2 := &Provider{EC2: f2}
	var wg sync.WaitGroup
	results := make([][]LaunchTemplate, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := p2.Ensure(context.Background(), r)
			if err != nil {
				t.Error(err)
			}
			results[i] = out
		}()
	}
	wg.Wait()
	if len(f2.lts) != 1 {
		t.Fatalf("%d templates", len(f2.lts))
	}
	for _, res := range results {
		if !reflect.DeepEqual(res, results[0]) {
			t.Fatal("concurrent ensures disagree")
		}
	}
}

func TestDeleteUnused(t *testing.T) {
	f := newFakeEC2()
	p := &Provider{EC2: f, Now: func() time.Time { return f.now.Add(10 * time.Minute) }}
	all, err := p.Ensure(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	// A template of another cluster and one of someone else's are never touched.
	f.lts["other-cluster"] = ec2types.LaunchTemplate{LaunchTemplateName: aws.String(NamePrefix + "1"), LaunchTemplateId: aws.String("lt-other"), CreateTime: aws.Time(f.now),
		Tags: []ec2types.Tag{{Key: aws.String(wellknown.EKSClusterNameTagKey), Value: aws.String("other")}}}
	f.lts["mine"] = ec2types.LaunchTemplate{LaunchTemplateName: aws.String("my-template"), LaunchTemplateId: aws.String("lt-mine"), CreateTime: aws.Time(f.now),
		Tags: []ec2types.Tag{{Key: aws.String(wellknown.EKSClusterNameTagKey), Value: aws.String("test-cluster")}}}
	keep := all[0].Name
	// Too young: nothing goes.
	deleted, err := p.DeleteUnused(context.Background(), "test-cluster", func(n string) bool { return n == keep }, time.Hour)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("young: %v %v", deleted, err)
	}
	deleted, err = p.DeleteUnused(context.Background(), "test-cluster", func(n string) bool { return n == keep }, 5*time.Minute)
	if err != nil || len(deleted) != 3 || len(f.lts) != 3 {
		t.Fatalf("deleted %v %v, left %d", deleted, err, len(f.lts))
	}
	for _, lt := range f.lts {
		if n := aws.ToString(lt.LaunchTemplateName); n != keep && n != "my-template" && n != NamePrefix+"1" {
			t.Errorf("left %s", n)
		}
	}
	deleted, err = p.DeleteForNodeClass(context.Background(), "test-cluster", "default")
	if err != nil || !reflect.DeepEqual(deleted, []string{keep}) {
		t.Fatalf("class deletion: %v %v", deleted, err)
	}
	// Ensure after collection recreates what is needed.
	creates := f.creates
	again, err := p.Ensure(context.Background(), request())
	if err != nil || again[0].Name != all[0].Name || f.creates == creates {
		t.Fatalf("recreate: %v %+v (%d creates before, %d after)", err, again[0], creates, f.creates)
	}
}

func TestCompatible(t *testing.T) {
	labels := map[string]string{"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-gpu-count": "4", "karpenter.k8s.aws/instance-generation": "5"}
	for _, tc := range []struct {
		req  corev1.NodeSelectorRequirement
		want bool
	}{
		{corev1.NodeSelectorRequirement{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}, true},
		{corev1.NodeSelectorRequirement{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}, false},
		{corev1.NodeSelectorRequirement{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"arm64"}}, true},
		{corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-gpu-count", Operator: corev1.NodeSelectorOpExists}, true},
		{corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-gpu-count", Operator: corev1.NodeSelectorOpDoesNotExist}, false},
		{corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-accelerator-count", Operator: corev1.NodeSelectorOpDoesNotExist}, true},
		{corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}, true},
		{corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpLt, Values: []string{"5"}}, false},
	} {
		if got := Compatible(labels, []corev1.NodeSelectorRequirement{tc.req}); got != tc.want {
			t.Errorf("%v: %v", tc.req, got)
		}
	}
}
