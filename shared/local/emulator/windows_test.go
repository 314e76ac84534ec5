package emulator

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// windowsUserData is what Karpenter (and Karpless) write for a Windows
// node (pkg/providers/amifamily/bootstrap/windows.go, v1.14.1).
const windowsUserData = "<powershell>\nWrite-Host \"custom\"\n" +
	"[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
	"& $EKSBootstrapScriptFile -EKSClusterName 'win-cluster' -APIServerEndpoint 'https://x' -Base64ClusterCA 'Y2E='" +
	" -KubeletExtraArgs '--node-labels=\"karpenter.k8s.aws/ec2nodeclass=windows2022,karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=windows2022\"" +
	" --register-with-taints=\"karpenter.sh/unregistered=:NoExecute\" --max-pods=110' -DNSClusterIP '10.100.0.10'\n</powershell>"

func TestParseWindowsUserData(t *testing.T) {
	i32 := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		name string
		ud   string
		want bootConfig
	}{
		{"Karpenter's bootstrap call", windowsUserData, bootConfig{Family: "Windows", ClusterName: "win-cluster", MaxPods: i32(110),
			Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
			Labels: map[string]string{"karpenter.k8s.aws/ec2nodeclass": "windows2022", "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "windows2022"}}},
		{"no extra args", "<powershell>\r\n& $EKSBootstrapScriptFile -EKSClusterName 'c' -APIServerEndpoint 'https://x'\r\n</powershell>",
			bootConfig{Family: "Windows", ClusterName: "c", Labels: map[string]string{}}},
		{"custom script only", "<powershell>\nWrite-Host hi\n</powershell>", bootConfig{Family: "Windows", Labels: map[string]string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseUserData(tc.ud, ""); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestWindowsAMIs: the EKS-optimized Windows Server images are published
// under their real SSM paths for the cluster's version, and DescribeImages
// reports them as EC2 does (platform windows, amd64 only), through the
// real SDK.
func TestWindowsAMIs(t *testing.T) {
	e, _ := newTestEmulator(t)
	ctx := context.Background()
	s := ssm.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	c := ec2Client(t, e)
	k8s := e.Config().KubernetesVersion
	ids := map[string]string{}
	for _, year := range []string{"2019", "2022", "2025"} {
		for _, edition := range []string{"Core", "Full"} {
			path := fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-%s-EKS_Optimized-%s/image_id", year, edition, k8s)
			out, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(path)})
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			id := aws.ToString(out.Parameter.Value)
			ids[id] = year + "-" + edition
			im, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
			if err != nil || len(im.Images) != 1 {
				t.Fatalf("DescribeImages %s: %v %+v", id, err, im)
			}
			got := im.Images[0]
			want := fmt.Sprintf("Windows_Server-%s-English-%s-EKS_Optimized-%s-", year, edition, k8s)
			if got.Platform != "windows" || aws.ToString(got.PlatformDetails) != "Windows" || got.Architecture != ec2types.ArchitectureValuesX8664 ||
				aws.ToString(got.UsageOperation) != "RunInstances:0002" || aws.ToString(got.RootDeviceName) != "/dev/sda1" ||
				aws.ToString(got.ImageOwnerAlias) != "amazon" || len(aws.ToString(got.Name)) <= len(want) || aws.ToString(got.Name)[:len(want)] != want {
				t.Errorf("%s (%s): %+v", path, id, got)
			}
		}
	}
	if len(ids) != 6 {
		t.Errorf("%d distinct images for 6 parameters", len(ids))
	}

	// Filters: platform and platform-details pick the Windows images, and
	// no Linux image claims to be one.
	for _, f := range []ec2types.Filter{
		{Name: aws.String("platform"), Values: []string{"windows"}},
		{Name: aws.String("platform-details"), Values: []string{"Windows"}},
	} {
		out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"}, Filters: []ec2types.Filter{f}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) != 6 {
			t.Errorf("filter %s: %d images, want 6", aws.ToString(f.Name), len(out.Images))
		}
	}
	linux, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{imageFor(t, e, "AL2023", "x86_64", "standard")}})
	if err != nil || len(linux.Images) != 1 || linux.Images[0].Platform != "" || aws.ToString(linux.Images[0].PlatformDetails) != "Linux/UNIX" {
		t.Errorf("AL2023 image: %+v %v", linux, err)
	}

	// A new release moves the Windows parameters too (drift for
	// windows20xx@latest).
	path := fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-%s/image_id", k8s)
	before, _ := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(path)})
	e.UpdateAMIs("v20261001")
	after, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(path)})
	if err != nil || aws.ToString(after.Parameter.Value) == aws.ToString(before.Parameter.Value) || after.Parameter.Version != before.Parameter.Version+1 {
		t.Errorf("after UpdateAMIs: %+v -> %+v (%v)", before.Parameter, after.Parameter, err)
	}
}

// TestWindowsServer2025NeedsKubernetes135: below 1.35 there is no 2025 image,
// so its parameter is missing, as Karpenter expects.
func TestWindowsServer2025NeedsKubernetes135(t *testing.T) {
	e, _ := newTestEmulator(t, func(c *Config) { c.KubernetesVersion = "1.34" })
	s := ssm.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	_, err := s.GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String("/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id")})
	wantCode(t, err, "ParameterNotFound")
	if _, err := s.GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String("/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.34/image_id")}); err != nil {
		t.Error(err)
	}
}

// TestWindowsInstance: an instance of a Windows image is a Windows
// instance to DescribeInstances, and its node is a Windows node with the
// labels and taints its user data registers.
func TestWindowsInstance(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := ec2Client(t, e)
	ctx := context.Background()
	var image string
	for _, im := range e.Images() {
		if im.Family == "Windows2019" && im.Variant == "core" {
			image = im.ID
		}
	}
	out, err := c.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.large", ImageId: aws.String(image),
		SubnetId: aws.String(subnetIn(t, e, "us-west-2a")), ClientToken: aws.String("win-1"),
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(windowsUserData))),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	if out.Instances[0].Platform != "windows" || aws.ToString(out.Instances[0].PlatformDetails) != "Windows" {
		t.Errorf("RunInstances answer: platform %q, details %q", out.Instances[0].Platform, aws.ToString(out.Instances[0].PlatformDetails))
	}
	// Eventually consistent: found by the platform filter once listed.
	err = eventually(t, e, func() error {
		d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("platform"), Values: []string{"windows"}}}})
		if err != nil {
			return err
		}
		if len(d.Reservations) != 1 || aws.ToString(d.Reservations[0].Instances[0].InstanceId) != id {
			return fmt.Errorf("platform=windows lists %+v", d.Reservations)
		}
		if got := d.Reservations[0].Instances[0]; aws.ToString(got.UsageOperation) != "RunInstances:0002" || aws.ToString(got.RootDeviceName) != "/dev/sda1" {
			return fmt.Errorf("instance %+v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	e.mu.Lock()
	node := e.nodeFor(e.world.instByID[id], e.now())
	e.mu.Unlock()
	for k, v := range map[string]string{
		wellknown.OSLabel: "windows", "beta.kubernetes.io/os": "windows", wellknown.ArchLabel: "amd64",
		wellknown.WindowsBuildLabel: "10.0.17763", wellknown.NodePoolLabel: "windows2022", wellknown.InstanceTypeLabel: "m5.large",
	} {
		if node.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Status.NodeInfo.OperatingSystem != "windows" || node.Status.NodeInfo.OSImage != "Windows Server 2019 Datacenter" {
		t.Errorf("node info %+v", node.Status.NodeInfo)
	}
	if pods := node.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("allocatable pods %s, want the user data's 110", pods.String())
	}
	found := false
	for _, tt := range node.Spec.Taints {
		found = found || tt.Key == "karpenter.sh/unregistered"
	}
	if !found {
		t.Errorf("taints %v lack the user data's karpenter.sh/unregistered", node.Spec.Taints)
	}
}
