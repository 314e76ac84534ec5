package launchtemplate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/emulator/emulatortest"
)

// TestIntegrationDedicatedLaunch: a claim that requires
// karpenter.k8s.aws/instance-tenancy=dedicated is launched, through its
// template's Placement.Tenancy, as a Dedicated Instance EC2 reports as
// such; a claim without the requirement gets a shared one.
func TestIntegrationDedicatedLaunch(t *testing.T) {
	emu, c := emulatortest.SDKClients(t, 12, "provisioner", func(cfg *emulator.Config) {
		// The class's new instance profile would take EC2 up to 20 s to
		// know, and random fleet errors move launches: neither is what
		// this test is about.
		h := emulator.DefaultHostility()
		h.ProfilePropagationMin, h.ProfilePropagationMax, h.FleetErrorRate = 0, 0, 0
		cfg.Hostility = &h
	})
	ctx := context.Background()
	cl := emu.ClusterName()
	info, err := eksauth.New(eksauth.ClusterSource{Name: cl, Endpoint: "https://" + cl + ".example", CAData: "Y2EtYnVuZGxlCg==", EKS: c.EKS}).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-3", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{wellknown.DiscoveryTagKey: cl}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{wellknown.DiscoveryTagKey: cl}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       emulator.NodeRoleName(cl),
		},
	}
	st, err := (&nodeclass.Resolver{EC2: c.EC2, SSM: c.SSM, IAM: c.IAM, Region: emu.Region(), Validate: launchtemplate.Validate}).Resolve(ctx, nc, info)
	if err != nil {
		t.Fatal(err)
	}
	nc.Status = st
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	m5, _ := cat.Get("m5.large")
	types := []*scheduling.InstanceType{{Name: "m5.large", Labels: m5.Labels(),
		Capacity: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(m5.Pods(catalog.NodeConfigFor(nc, nodeclass.Family(nc))), resource.DecimalSI)}}}
	subnets := map[string][]string{}
	var offerings []instance.Offering
	for _, s := range st.Subnets {
		if len(subnets[s.Zone]) == 0 {
			offerings = append(offerings, instance.Offering{InstanceType: "m5.large", Zone: s.Zone, Price: 0.096})
		}
		subnets[s.Zone] = append(subnets[s.Zone], s.ID)
	}
	lt := &launchtemplate.Provider{EC2: c.EC2}
	ec2 := instance.NewProvider(c.EC2, cl)

	for _, tc := range []struct {
		name string
		reqs []karpv1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{"dedicated", []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.InstanceTenancyLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"dedicated"}}}, "dedicated"},
		{"no requirement", nil, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "general-" + tc.want, UID: k8stypes.UID("uid-" + tc.want), Labels: map[string]string{wellknown.NodePoolLabel: "general"}},
				Spec:       karpv1.NodeClaimSpec{Requirements: tc.reqs},
			}
			// The emulator lists a new template and answers launches with
			// hostile errors for a while: try again with the next token,
			// as a launch does.
			var inst *instance.Instance
			for attempt := 0; inst == nil; attempt++ {
				if attempt == 30 {
					t.Fatal("no launch in 30 attempts")
				}
				lts, err := lt.Ensure(ctx, launchtemplate.Request{NodeClass: nc, NodeClaim: claim, InstanceTypes: types, CapacityType: wellknown.CapacityTypeOnDemand, Cluster: info})
				if err != nil {
					t.Fatal(err)
				}
				var templates []instance.LaunchTemplate
				for _, l := range lts {
					templates = append(templates, instance.LaunchTemplate{Name: l.Name, ImageID: l.ImageID, InstanceTypes: l.InstanceTypes})
				}
				res, err := ec2.Create(ctx, instance.Request{
					NodeClaimName: claim.Name, NodeClaimUID: string(claim.UID), Attempt: attempt, CapacityType: wellknown.CapacityTypeOnDemand,
					Offerings: offerings, LaunchTemplates: templates, Subnets: subnets, Tenancy: tc.want,
					Tags: map[string]string{wellknown.ClusterTagKey(cl): wellknown.OwnedTagValue, wellknown.NodePoolTagKey: "general", wellknown.NodeClaimTagKey: claim.Name},
				})
				if err != nil {
					if !errors.Is(err, instance.ErrNothingLaunched) && !isRetryable(err) {
						t.Fatal(err)
					}
					time.Sleep(200 * time.Millisecond)
					continue
				}
				inst = res.Instance
			}
			if got, ok := emu.Instance(inst.ID); !ok || got.Tenancy != tc.want {
				t.Fatalf("EC2 holds %+v, want tenancy %s", got, tc.want)
			}
			// DescribeInstances reports it (once it lists the instance).
			for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
				got, err := ec2.Get(ctx, inst.ID)
				if err == nil {
					if got.Tenancy != tc.want {
						t.Fatalf("described tenancy %q, want %q", got.Tenancy, tc.want)
					}
					break
				}
				if time.Since(start) > 20*time.Second {
					t.Fatalf("instance never listed: %v", err)
				}
			}
		})
	}
}

// isRetryable is what a launch tries again: a template EC2 does not list
// yet, or throttling.
func isRetryable(err error) bool {
	switch awserr.Code(err) {
	case "InvalidLaunchTemplateName.NotFoundException", "RequestLimitExceeded":
		return true
	}
	return false
}
