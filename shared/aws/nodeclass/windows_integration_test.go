package nodeclass_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

// TestIntegrationWindowsAndRoles resolves, against the emulator through
// the real SDK: the windows2019/2022/2025@latest aliases (the Core image
// of the cluster's version, x86_64, with Karpenter's os and windows-build
// requirements); a second node role in spec.role; a pre-made instance
// profile in spec.instanceProfile.
func TestIntegrationWindowsAndRoles(t *testing.T) {
	emu, c := emulatortest.SDKClients(t, 11, "provisioner")
	ctx := context.Background()
	cl := emu.ClusterName()
	info, err := eksauth.New(eksauth.ClusterSource{Name: cl, Endpoint: "https://" + cl + ".example", CAData: "Y2E=", EKS: c.EKS}).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &nodeclass.Resolver{EC2: c.EC2, SSM: c.SSM, IAM: c.IAM, Region: emu.Region()}
	discovery := map[string]string{wellknown.DiscoveryTagKey: cl}
	class := func(name string) *awsv1.EC2NodeClass {
		return &awsv1.EC2NodeClass{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
			Spec: awsv1.EC2NodeClassSpec{
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				Role:                       emulator.NodeRoleName(cl),
			},
		}
	}
	ready := func(st awsv1.EC2NodeClassStatus, what string) {
		t.Helper()
		if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s: not ready: %+v", what, st.Conditions)
		}
	}

	builds := map[string]string{"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}
	for year, build := range builds {
		t.Run("windows"+year, func(t *testing.T) {
			nc := class("windows" + year)
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows" + year + "@latest"}}
			st, err := r.Resolve(ctx, nc, info)
			if err != nil {
				t.Fatal(err)
			}
			ready(st, nc.Name)
			if len(st.AMIs) != 1 {
				t.Fatalf("amis %+v (conditions %+v)", st.AMIs, st.Conditions)
			}
			a := st.AMIs[0]
			if want := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s-", year, info.KubernetesVersion); !strings.HasPrefix(a.Name, want) {
				t.Errorf("ami %s, want %s*", a.Name, want)
			}
			want := map[string]string{wellknown.ArchLabel: "amd64", wellknown.OSLabel: string(corev1.Windows), wellknown.WindowsBuildLabel: build}
			for _, req := range a.Requirements {
				if v, ok := want[req.Key]; ok && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 && req.Values[0] == v {
					delete(want, req.Key)
				}
			}
			if len(want) > 0 {
				t.Errorf("requirements %+v lack %v", a.Requirements, want)
			}
		})
	}

	// A second role: its own managed profile.
	emu.AddRole("KarpenterWindowsNodeRole-" + cl)
	second := class("second-role")
	second.Spec.Role = "KarpenterWindowsNodeRole-" + cl
	st, err := r.Resolve(ctx, second, info)
	if err != nil {
		t.Fatal(err)
	}
	ready(st, "second role")
	var found bool
	for _, p := range emu.InstanceProfiles() {
		if p.Name == st.InstanceProfile {
			found = len(p.Roles) == 1 && p.Roles[0] == second.Spec.Role
		}
	}
	if !found {
		t.Errorf("profile %q of the second role: %+v", st.InstanceProfile, emu.InstanceProfiles())
	}

	// A role IAM does not know is the user's to fix, not an error to retry.
	unknown := class("unknown-role")
	unknown.Spec.Role = "NoSuchRole"
	st, _ = r.Resolve(ctx, unknown, info)
	if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionTypeInstanceProfileReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != nodeclass.ReasonRoleNotFound {
		t.Errorf("unknown role: %+v", c)
	}

	// A pre-made instance profile is used as it is: found, nothing created.
	if err := emu.AddInstanceProfile("windows-nodes", "/teams/", "KarpenterWindowsNodeRole-"+cl); err != nil {
		t.Fatal(err)
	}
	creates := emu.CallCount("CreateInstanceProfile")
	premade := class("premade")
	premade.Spec.Role, premade.Spec.InstanceProfile = "", aws.String("windows-nodes")
	st, err = r.Resolve(ctx, premade, info)
	if err != nil {
		t.Fatal(err)
	}
	ready(st, "pre-made profile")
	if st.InstanceProfile != "windows-nodes" || emu.CallCount("CreateInstanceProfile") != creates {
		t.Errorf("pre-made profile: status %q, CreateInstanceProfile %d -> %d", st.InstanceProfile, creates, emu.CallCount("CreateInstanceProfile"))
	}
	missing := class("missing-profile")
	missing.Spec.Role, missing.Spec.InstanceProfile = "", aws.String("nope")
	st, _ = r.Resolve(ctx, missing, info)
	if c := meta.FindStatusCondition(st.Conditions, awsv1.ConditionTypeInstanceProfileReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != nodeclass.ReasonInstanceProfileNotFound {
		t.Errorf("missing profile: %+v", c)
	}
}
