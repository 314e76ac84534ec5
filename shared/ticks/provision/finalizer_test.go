package provision_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// finalizerAccount is what a deleted class's finalizer must clean up and
// what it must leave: the class's profiles and templates, Karpenter's
// legacy profile of it, and another class's template.
type finalizerAccount struct {
	class, other string // template names
	legacy       string
}

// seedLegacyAndOther adds Karpenter's legacy profile of class "default"
// (tagged as Karpenter tagged it) and a launch template of another class.
func seedLegacyAndOther(t *testing.T, a *app.Env) finalizerAccount {
	t.Helper()
	ctx := context.Background()
	cluster := a.Config.ClusterName
	acct := finalizerAccount{legacy: nodeclass.LegacyInstanceProfileName(cluster, a.Config.Region, "default")}
	if _, err := a.AWS.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(acct.legacy),
		Tags: []iamtypes.Tag{{Key: aws.String(wellknown.ClusterTagKey(cluster)), Value: aws.String("owned")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AWS.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(acct.legacy), RoleName: aws.String("KarpenterNodeRole-" + cluster)}); err != nil {
		t.Fatal(err)
	}
	acct.other = createTemplate(t, a, "other", "0")
	return acct
}

// createTemplate makes a launch template tagged as Karpless tags those of
// a class.
func createTemplate(t *testing.T, a *app.Env, class, suffix string) string {
	t.Helper()
	name := launchtemplate.NamePrefix + a.Config.ClusterName + "/" + class + "-" + suffix
	tags := []ec2types.Tag{
		{Key: aws.String(wellknown.EKSClusterNameTagKey), Value: aws.String(a.Config.ClusterName)},
		{Key: aws.String(wellknown.EC2NodeClassTagKey), Value: aws.String(class)},
		{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")},
		{Key: aws.String(wellknown.ClusterTagKey(a.Config.ClusterName)), Value: aws.String("owned")},
	}
	if _, err := a.AWS.EC2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0123456789abcdef0")},
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}},
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// leftOf lists what the finalizer of class nc has not cleaned up yet, and
// anything it deleted that it must not have.
func leftOf(emu *emulator.Emulator, region, cluster string, nc *awsv1.EC2NodeClass, acct finalizerAccount) []string {
	var left []string
	path := nodeclass.InstanceProfilePath(region, cluster, string(nc.UID))
	for _, p := range emu.InstanceProfiles() {
		if strings.HasPrefix(p.Path, path) || p.Name == acct.legacy {
			left = append(left, "instance profile "+p.Name)
		}
	}
	otherKept := false
	for _, lt := range emu.LaunchTemplates() {
		if lt.Tags[wellknown.EC2NodeClassTagKey] == nc.Name {
			left = append(left, "launch template "+lt.Name)
		}
		otherKept = otherKept || lt.Name == acct.other
	}
	if !otherKept {
		left = append(left, "MISSING another class's launch template "+acct.other)
	}
	return left
}

// TestNodeClassFinalizer: an EC2NodeClass with a live NodeClaim is
// deleted; it stays (finalizer karpenter.k8s.aws/termination) with the
// Event WaitingOnNodeClaimTermination while the claim exists; once the
// claim is gone, the next tick deletes the instance profile Karpless made
// for its spec.role, Karpenter's legacy profile of it and its launch
// templates (not another class's), and the class disappears.
func TestNodeClassFinalizer(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large"))); err != nil {
		t.Fatal(err)
	}
	c := newCrashWorld(t, w)
	setWebPods(t, w, 1)
	if n := freshTicks(t, w, c, "launch", 1, 12, 5*time.Second); n > 12 {
		t.Fatalf("the claim did not launch: %+v", inspect(w, c.emu))
	}
	a := killableEnv(t, w, c, nil)
	nc, err := w.E.Clients.EC2NodeClasses.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(nc.Finalizers, wellknown.AWSTerminationFinalizer) {
		t.Fatalf("the class has no %s finalizer: %v", wellknown.AWSTerminationFinalizer, nc.Finalizers)
	}
	acct := seedLegacyAndOther(t, a)
	c.clk.Advance(10 * time.Second) // past the launch template's listing lag
	before := leftOf(c.emu, a.Config.Region, a.Config.ClusterName, nc, acct)
	if len(before) < 3 {
		t.Fatalf("the account lacks the class's profile, legacy profile or template: %v", before)
	}

	if err := w.E.Clients.EC2NodeClasses.Delete(ctx, nc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Provisioner().Run(ctx, "while-claimed"); err != nil {
		t.Logf("tick: %v", err)
	}
	if _, err := w.E.Clients.EC2NodeClasses.Get(ctx, nc.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the class went while its claim lives: %v", err)
	}
	if got := leftOf(c.emu, a.Config.Region, a.Config.ClusterName, nc, acct); !slices.Equal(got, before) {
		t.Fatalf("the finalizer cleaned up while a claim lives: %v, was %v", got, before)
	}
	events, err := w.E.Clients.Core.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + nc.Name})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == provision.WaitingOnNodeClaimTermination && strings.HasPrefix(e.Message, "Waiting on NodeClaim termination for ")
	}) {
		t.Errorf("no %s Event on the class: %+v", provision.WaitingOnNodeClaimTermination, events.Items)
	}

	c.reset(t, w) // the claim and its instance go
	if _, err := killableEnv(t, w, c, nil).Provisioner().Run(ctx, "after-claim"); err != nil {
		t.Logf("tick: %v", err)
	}
	if got := leftOf(c.emu, a.Config.Region, a.Config.ClusterName, nc, acct); len(got) > 0 {
		t.Errorf("left after the claim went: %v", got)
	}
	if _, err := w.E.Clients.EC2NodeClasses.Get(ctx, nc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the class is still there (%v)", err)
	}
}

// finalizerCase is a deleted class with everything its finalizer
// removes, and no NodeClaim.
func finalizerCase(t *testing.T) (*testworld.World, crashWorld, *awsv1.EC2NodeClass, finalizerAccount) {
	t.Helper()
	w := testworld.New(t, env, "provisioner")
	c := newCrashWorld(t, w)
	ctx := context.Background()
	a := killableEnv(t, w, c, nil)
	nc := deploy.DefaultNodeClass(testworld.Cluster, "")
	nc.Finalizers = []string{wellknown.AWSTerminationFinalizer}
	nc, err := w.E.Clients.EC2NodeClasses.Create(ctx, nc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &nodeclass.Resolver{IAM: a.AWS.IAM, Region: a.Config.Region}
	if _, err := r.EnsureInstanceProfile(ctx, nc, a.Config.ClusterName); err != nil {
		t.Fatal(err)
	}
	acct := seedLegacyAndOther(t, a)
	createTemplate(t, a, nc.Name, "1")
	createTemplate(t, a, nc.Name, "2")
	c.clk.Advance(10 * time.Second)
	if err := w.E.Clients.EC2NodeClasses.Delete(ctx, nc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return w, c, nc, acct
}

// TestNodeClassFinalizerKilledAtEveryCall kills the finalizer of a deleted
// class with no NodeClaim in each gap between its calls (deploy.Gaps over
// the calls an undisturbed finalization makes), then runs a fresh
// provisioner tick: the class's profile (with its role), the legacy
// profile and both templates end deleted, another class's template kept,
// and the class gone.
func TestNodeClassFinalizerKilledAtEveryCall(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the calls of a real control plane's world")
	}
	var baseline []string
	t.Run("undisturbed", func(t *testing.T) {
		w, c, nc, acct := finalizerCase(t)
		counter := &deploy.KillSwitch{}
		a := killableEnvWith(t, w, c, counter, nil)
		if err := a.Provisioner().FinalizeNodeClasses(context.Background()); err != nil {
			t.Fatal(err)
		}
		baseline = counter.Calls()
		t.Logf("an undisturbed finalization makes %d calls: %v", len(baseline), baseline)
		if got := leftOf(c.emu, a.Config.Region, a.Config.ClusterName, nc, acct); len(got) > 0 {
			t.Errorf("left: %v", got)
		}
	})
	if len(baseline) == 0 {
		t.FailNow()
	}
	gaps := deploy.Gaps(baseline)
	sample := deploy.SampleGaps(baseline, gaps) // every gap with make test-kills
	for i, gap := range gaps {
		if !sample[i] {
			continue
		}
		name := fmt.Sprintf("%s call %d (%s)", gap.Side(), gap.At, baseline[gap.At-1])
		testworld.KillCase(t, name, 3, func(t *testing.T, diverged func(string, ...any)) {
			w, c, nc, acct := finalizerCase(t)
			k := gap.Switch()
			_ = killableEnvWith(t, w, c, k, nil).Provisioner().FinalizeNodeClasses(context.Background())
			if got := k.Calls(); !k.Dead() || len(got) != gap.At || got[gap.At-1] != baseline[gap.At-1] {
				diverged("the killed finalization did not reach call %d of the baseline; it made %v", gap.At, got)
			}
			a := killableEnv(t, w, c, nil)
			if _, err := a.Provisioner().Run(context.Background(), "fresh"); err != nil {
				t.Logf("fresh tick: %v", err)
			}
			if got := leftOf(c.emu, a.Config.Region, a.Config.ClusterName, nc, acct); len(got) > 0 {
				t.Errorf("left after a fresh tick: %v", got)
			}
			if _, err := w.E.Clients.EC2NodeClasses.Get(context.Background(), nc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the class is still there (%v)", err)
			}
		})
	}
}
