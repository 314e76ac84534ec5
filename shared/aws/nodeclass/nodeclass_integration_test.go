package nodeclass_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

func TestIntegrationResolve(t *testing.T) {
	emu, c := emulatortest.SDKClients(t, 7, "provisioner")
	ctx := context.Background()
	cl := emu.ClusterName()
	// Endpoint and CA are configured; DescribeCluster supplies the rest.
	info, err := eksauth.New(eksauth.ClusterSource{Name: cl, Endpoint: "https://" + cl + ".example", CAData: "Y2E=", EKS: c.EKS}).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.KubernetesVersion != emulator.DefaultKubernetesVersion || info.ServiceCIDR != emulator.DefaultServiceCIDR || info.ClusterDNS != "10.100.0.10" {
		t.Fatalf("cluster info %+v", info)
	}
	r := &nodeclass.Resolver{EC2: c.EC2, SSM: c.SSM, IAM: c.IAM, Region: emu.Region()}
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "0f7c-uid", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{wellknown.DiscoveryTagKey: cl}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{wellknown.DiscoveryTagKey: cl}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       emulator.NodeRoleName(cl),
			Tags:                       map[string]string{"team": "platform"},
		},
	}
	st, err := r.Resolve(ctx, nc, info)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("not ready: %+v", st.Conditions)
	}
	if len(st.Subnets) != 3 {
		t.Errorf("subnets %+v, want the three private ones", st.Subnets)
	}
	for _, s := range st.Subnets {
		if s.Zone == "" || s.ZoneID == "" {
			t.Errorf("subnet %+v lacks its zone", s)
		}
	}
	if len(st.SecurityGroups) != 1 || !strings.HasPrefix(st.SecurityGroups[0].Name, "eks-cluster-sg-") {
		t.Errorf("security groups %+v", st.SecurityGroups)
	}
	// AL2023 latest: x86_64 standard/nvidia/neuron, arm64 standard/nvidia.
	if len(st.AMIs) != 5 {
		t.Fatalf("amis %+v", st.AMIs)
	}
	for _, a := range st.AMIs {
		if !strings.Contains(a.Name, emulator.CurrentEKSRelease) || len(a.Requirements) < 2 || a.Requirements[0].Key != wellknown.ArchLabel {
			t.Errorf("ami %+v", a)
		}
	}
	profiles := emu.InstanceProfiles()
	if len(profiles) != 1 || profiles[0].Name != st.InstanceProfile || len(profiles[0].Roles) != 1 || profiles[0].Roles[0] != emulator.NodeRoleName(cl) ||
		profiles[0].Path != nodeclass.InstanceProfilePath(emu.Region(), cl, "0f7c-uid") || profiles[0].Tags["team"] != "platform" || profiles[0].Tags[wellknown.ClusterTagKey(cl)] != "owned" {
		t.Fatalf("instance profiles %+v", profiles)
	}

	// A second resolution (and a concurrent one) creates nothing more.
	nc.Status = st
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := r.Resolve(ctx, nc, info); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := emu.CallCount("CreateInstanceProfile"); n != 1 {
		t.Errorf("CreateInstanceProfile called %d times", n)
	}
	if n := len(emu.InstanceProfiles()); n != 1 {
		t.Errorf("%d instance profiles", n)
	}

	// Pinned and Bottlerocket aliases resolve through their SSM paths; AL2
	// is refused on this Kubernetes version.
	for alias, want := range map[string]string{
		"al2023@" + emulator.PinnedEKSReleases[0]:                 emulator.PinnedEKSReleases[0],
		"bottlerocket@latest":                                     "v" + emulator.CurrentBottlerocketRelease,
		"bottlerocket@v" + emulator.PinnedBottlerocketReleases[0]: "v" + emulator.PinnedBottlerocketReleases[0],
	} {
		nc := nc.DeepCopy()
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
		st, err := r.Resolve(ctx, nc, info)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.AMIs) == 0 {
			t.Errorf("%s: no AMIs: %+v", alias, st.Conditions)
		}
		for _, a := range st.AMIs {
			if !strings.Contains(a.Name, want) {
				t.Errorf("%s: ami %s", alias, a.Name)
			}
		}
	}
	nc2 := nc.DeepCopy()
	nc2.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}
	st, _ = r.Resolve(ctx, nc2, info)
	if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionTypeAMIsReady); c == nil || c.Reason != nodeclass.ReasonUnsupportedAlias {
		t.Errorf("al2 on %s: %+v", info.KubernetesVersion, c)
	}

	// Selectors by id and name, and AMIs by name (owner amazon).
	nc3 := nc.DeepCopy()
	nc3.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: st.Subnets[0].ID}}
	nc3.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "default"}}
	nc3.Spec.AMIFamily = aws.String("AL2023")
	nc3.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-arm64-standard-*"}}
	st3, err := r.Resolve(ctx, nc3, info)
	if err != nil {
		t.Fatal(err)
	}
	if len(st3.Subnets) != 1 || len(st3.SecurityGroups) != 1 || st3.SecurityGroups[0].Name != "default" || len(st3.AMIs) != 1 ||
		!strings.Contains(st3.AMIs[0].Name, emulator.CurrentEKSRelease) {
		t.Errorf("by id/name: %+v", st3)
	}

	// Garbage collection of the class's profiles.
	deleted, err := r.DeleteInstanceProfiles(ctx, cl, nc)
	if err != nil || len(deleted) != 1 || len(emu.InstanceProfiles()) != 0 {
		t.Fatalf("delete: %v %v %+v", deleted, err, emu.InstanceProfiles())
	}
}
