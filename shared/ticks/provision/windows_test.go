package provision_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// windowsRole is the Windows nodes' role: a role of their own, as EKS
// access entries require (the stack's nodeRoles=<name>:windows).
const windowsRole = "KarpenterWindowsNodeRole-" + testworld.Cluster

// windowsExample reads Karpenter's Windows Server 2022 example (a NodePool
// and its EC2NodeClass) for this cluster, its class on windowsRole.
func windowsExample(t *testing.T) (*karpv1.NodePool, *awsv1.EC2NodeClass) {
	t.Helper()
	raw, err := os.ReadFile("testdata/windows-2022.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "${CLUSTER_NAME}", testworld.Cluster)
	var np *karpv1.NodePool
	var nc *awsv1.EC2NodeClass
	for _, doc := range strings.Split(text, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "NodePool":
			np = &karpv1.NodePool{}
			err = yaml.UnmarshalStrict([]byte(doc), np)
		case "EC2NodeClass":
			nc = &awsv1.EC2NodeClass{}
			err = yaml.UnmarshalStrict([]byte(doc), nc)
		}
		if err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if np == nil || nc == nil {
		t.Fatalf("the example lacks its NodePool or EC2NodeClass")
	}
	if nc.Spec.Role != "KarpenterNodeRole-"+testworld.Cluster || len(nc.Spec.AMISelectorTerms) != 1 || nc.Spec.AMISelectorTerms[0].Alias != "windows2022@latest" {
		t.Fatalf("the example changed: %+v", nc.Spec)
	}
	nc.Spec.Role = windowsRole
	return np, nc
}

// TestWindowsNodePool: Karpenter's Windows Server 2022 example launches a
// Windows instance (the EKS-optimized 2022 Core image from its SSM path,
// PowerShell user data, the Windows role's instance profile), whose node
// registers as a Windows node, and a pod selecting kubernetes.io/os:
// windows (and requesting a vpc.amazonaws.com/PrivateIPv4Address, as EKS
// makes Windows pods do) runs there.
func TestWindowsNodePool(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	w.Emu.AddRole(windowsRole)
	np, nc := windowsExample(t)
	if err := deploy.Apply(ctx, w.E.Clients, nc, np); err != nil {
		t.Fatal(err)
	}
	w.Pods("win", 1, "1", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{wellknown.OSLabel: string(corev1.Windows)}
		// What EKS's VPC admission webhook adds to every Windows pod.
		one := resource.MustParse("1")
		c := &p.Spec.Containers[0]
		c.Resources.Requests[wellknown.ResourcePrivateIPv4] = one
		c.Resources.Limits = corev1.ResourceList{wellknown.ResourcePrivateIPv4: one}
	})
	w.WaitUnschedulable(1)
	start := time.Now()
	// 12-22 s here: the new instance profile's IAM propagation (5-20 s of
	// the world's clock) is most of it.
	w.Converge(2*time.Minute, nil)
	t.Logf("Windows pod running on a new Windows node after %s", time.Since(start).Round(100*time.Millisecond))

	claims := w.Claims()
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(claims))
	}
	claim := claims[0]
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady} {
		if !claim.IsTrue(c) {
			t.Errorf("nodeclaim %s: %s is not true", claim.Name, c)
		}
	}
	node, err := w.E.Clients.Core.CoreV1().Nodes().Get(ctx, claim.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		wellknown.OSLabel: "windows", wellknown.ArchLabel: "amd64", wellknown.WindowsBuildLabel: "10.0.20348",
		wellknown.NodePoolLabel: "windows2022", wellknown.CapacityTypeLabel: "on-demand",
	} {
		if node.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Status.NodeInfo.OperatingSystem != "windows" {
		t.Errorf("node OS %q", node.Status.NodeInfo.OperatingSystem)
	}
	if cat := node.Labels[wellknown.InstanceCategoryLabel]; cat != "c" && cat != "m" && cat != "r" {
		t.Errorf("instance category %q outside the example's c, m, r", cat)
	}
	for _, p := range w.ListPods() {
		if p.Spec.NodeName != node.Name || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s on %q, %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}

	insts := w.Emu.Instances(emulator.NotTerminated)
	if len(insts) != 1 {
		t.Fatalf("%d instances", len(insts))
	}
	inst := insts[0]
	var image emulator.Image
	for _, im := range w.Emu.Images() {
		if im.ID == inst.ImageID {
			image = im
		}
	}
	if image.Family != "Windows2022" || image.Variant != "core" || !strings.HasPrefix(image.Name, "Windows_Server-2022-English-Core-EKS_Optimized-") {
		t.Errorf("instance image %+v", image)
	}
	for _, want := range []string{"<powershell>", `Start-EKSBootstrap.ps1`, "-EKSClusterName '" + testworld.Cluster + "'", "-KubeletExtraArgs '", "karpenter.sh/nodepool=windows2022", "</powershell>"} {
		if !strings.Contains(inst.UserData, want) {
			t.Errorf("user data lacks %q:\n%s", want, inst.UserData)
		}
	}
	profileRoles := map[string][]string{}
	for _, p := range w.Emu.InstanceProfiles() {
		profileRoles[p.ARN] = p.Roles
	}
	if roles := profileRoles[inst.InstanceProfileARN]; len(roles) != 1 || roles[0] != windowsRole {
		t.Errorf("instance profile %s holds %v, want %s", inst.InstanceProfileARN, roles, windowsRole)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}

// TestSeveralNodeRoles: next to the default class, a class on a second
// role and a class on a pre-made instance profile launch, each instance
// with its class's profile.
func TestSeveralNodeRoles(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	const teamRole = "TeamB-Nodes"
	w.Emu.AddRole(teamRole)
	if err := w.Emu.AddInstanceProfile("premade-nodes", "/teams/", "TeamC-Nodes"); err != nil {
		t.Fatal(err)
	}
	classes := map[string]func(*awsv1.EC2NodeClass){
		"default": func(*awsv1.EC2NodeClass) {},
		"teamb":   func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = teamRole },
		"teamc":   func(nc *awsv1.EC2NodeClass) { nc.Spec.Role, nc.Spec.InstanceProfile = "", new("premade-nodes") },
	}
	for name, mutate := range classes {
		nc := deploy.DefaultNodeClass(testworld.Cluster, "")
		nc.Name = name
		mutate(nc)
		np := deploy.DefaultNodePool(name)
		np.Spec.Template.Spec.NodeClassRef.Name = name
		np.Spec.Template.Labels = map[string]string{"team": name}
		if err := deploy.Apply(ctx, w.E.Clients, nc, np); err != nil {
			t.Fatal(err)
		}
		w.Pods(name, 1, "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": name} })
	}
	w.WaitUnschedulable(3)
	w.Converge(2*time.Minute, nil)

	profileRoles := map[string]string{}
	for _, p := range w.Emu.InstanceProfiles() {
		if len(p.Roles) == 1 {
			profileRoles[p.ARN] = p.Roles[0]
		}
	}
	want := map[string]string{"default": emulator.NodeRoleName(testworld.Cluster), "teamb": teamRole, "teamc": "TeamC-Nodes"}
	for _, i := range w.Emu.Instances(emulator.NotTerminated) {
		class := i.Tags[wellknown.EC2NodeClassTagKey]
		if got := profileRoles[i.InstanceProfileARN]; got != want[class] {
			t.Errorf("instance %s of class %s runs with role %q (profile %s), want %q", i.ID, class, got, i.InstanceProfileARN, want[class])
		}
		if class == "teamc" && !strings.HasSuffix(i.InstanceProfileARN, ":instance-profile/teams/premade-nodes") {
			t.Errorf("teamc instance profile %s, want the pre-made one", i.InstanceProfileARN)
		}
		delete(want, class)
	}
	if len(want) > 0 {
		t.Errorf("no instance for %v", want)
	}
	assertOneInstancePerClaim(t, w.Emu)
	w.AssertNoLeaks()
}
