package launchtemplate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// The parts of Karpenter v1.14.1's EC2NodeClass controller suites
// (aws/karpenter-provider-aws pkg/controllers/nodeclass) that Karpless
// answers here: the validation cases on the cluster CIDR and the user data
// (through Validate, the Resolver's validation hook, and Build), and the
// termination cases on launch templates (through DeleteForNodeClass, the
// finalizer's launch template step; the finalizer keeps the class while it
// fails).
func nodeClassCase(file, spec string) conformance.Case {
	return conformance.Case{Suite: "aws/controllers/nodeclass", File: "pkg/controllers/nodeclass/" + file, Spec: spec}
}

func TestConformanceNodeClassValidationUserData(t *testing.T) {
	ctx := context.Background()
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, nodeClassCase("validation_test.go", "NodeClass Validation Status Controller > "+spec), body)
	}
	// Without the service CIDR (Karpless reads it from eks:DescribeCluster
	// or CLUSTER_SERVICE_CIDR), only AL2023 cannot be validated: nodeadm
	// needs it, the other families' user data does not.
	noCIDR := testCluster
	noCIDR.ServiceCIDR, noCIDR.ClusterDNS = "", ""
	windowsAMI := func(build string) []awsv1.AMI {
		return []awsv1.AMI{{ID: "ami-win", Requirements: []corev1.NodeSelectorRequirement{
			{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
			{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: wellknown.WindowsBuildLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{build}},
		}}}
	}
	for _, tc := range []struct {
		family string
		terms  []awsv1.AMISelectorTerm
		amis   []awsv1.AMI
	}{
		{"AL2", []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}, nil},
		{"Bottlerocket", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}, nil},
		{"Windows2019", []awsv1.AMISelectorTerm{{Alias: "windows2019@latest"}}, windowsAMI("10.0.17763")},
		{"Windows2022", []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}, windowsAMI("10.0.20348")},
		{"Windows2025", []awsv1.AMISelectorTerm{{Alias: "windows2025@latest"}}, windowsAMI("10.0.26100")},
		{"Custom", []awsv1.AMISelectorTerm{{ID: "ami-12345"}}, nil},
	} {
		run("CIDR Resolution Precondition > shouldn't resolve cluster CIDR for non-AL2023 NodeClasses > "+tc.family, func(t *testing.T) {
			nc := readyClass()
			nc.Spec.AMIFamily = aws.String(tc.family)
			nc.Spec.AMISelectorTerms = tc.terms
			if tc.amis != nil {
				nc.Status.AMIs = tc.amis
			}
			if err := Validate(ctx, nc, nc.Status, noCIDR); err != nil {
				t.Errorf("validation failed without the service CIDR: %v", err)
			}
		})
	}
	// cidrIn validates an AL2023 class on cluster and expects its nodes'
	// user data to carry the cluster's service CIDR.
	cidrIn := func(t *testing.T, cluster eksauth.ClusterInfo) {
		nc := readyClass()
		if err := Validate(ctx, nc, nc.Status, cluster); err != nil {
			t.Fatalf("validation failed: %v", err)
		}
		req := request()
		req.Cluster = cluster
		res, err := Build(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !strings.Contains(r.UserData, "cidr: "+cluster.ServiceCIDR) {
				t.Errorf("user data of %s does not carry the service CIDR %s:\n%s", r.ImageID, cluster.ServiceCIDR, r.UserData)
			}
		}
	}
	run("CIDR Resolution Precondition > should resolve cluster CIDR for IPv4 clusters", func(t *testing.T) {
		cidrIn(t, testCluster)
	})
	run("CIDR Resolution Precondition > should resolve cluster CIDR for IPv6 clusters", func(t *testing.T) {
		v6 := testCluster
		v6.ServiceCIDR, v6.IPFamily = "2001:db8::/64", "ipv6"
		dns, _, err := eksauth.ClusterDNS(v6.ServiceCIDR)
		if err != nil {
			t.Fatal(err)
		}
		v6.ClusterDNS = dns
		cidrIn(t, v6)
	})
	reason := func(err error) string {
		var ve *nodeclass.ValidationError
		if errors.As(err, &ve) {
			return ve.Reason
		}
		return ""
	}
	run("UserData size > should surface an oversized user data rejection as UserDataSizeLimitExceeded", func(t *testing.T) {
		// Karpless measures the rendered user data against EC2's limit
		// itself, before any CreateLaunchTemplate.
		nc := readyClass()
		nc.Spec.UserData = aws.String("#!/bin/bash\n" + strings.Repeat("x", MaxUserDataBytes))
		if got := reason(Validate(ctx, nc, nc.Status, testCluster)); got != "UserDataSizeLimitExceeded" {
			t.Errorf("reason %q", got)
		}
	})
	run("UserData size > should not surface a non-size InvalidUserData.Malformed rejection as UserDataSizeLimitExceeded", func(t *testing.T) {
		// Karpless encodes the user data itself; what it cannot render is
		// malformed user data, which is reported as such.
		nc := readyClass()
		nc.Spec.AMIFamily = aws.String("Bottlerocket")
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
		nc.Spec.UserData = aws.String("[settings")
		err := Validate(ctx, nc, nc.Status, testCluster)
		if err == nil || reason(err) == "UserDataSizeLimitExceeded" {
			t.Errorf("err %v (reason %q)", err, reason(err))
		}
	})
}

// failingDeletes is EC2 refusing every DeleteLaunchTemplate.
type failingDeletes struct{ *fakeEC2 }

func (failingDeletes) DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	return nil, errors.New("delete Launch Template Error")
}

func TestConformanceNodeClassTerminationTemplates(t *testing.T) {
	ctx := context.Background()
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, nodeClassCase("suite_test.go", "NodeClass Termination > "+spec), body)
	}
	const cluster, class = "test-cluster", "default"
	store := func(f *fakeEC2, name string, tags ...string) {
		var ts []ec2types.Tag
		for i := 0; i+1 < len(tags); i += 2 {
			ts = append(ts, ec2types.Tag{Key: aws.String(tags[i]), Value: aws.String(tags[i+1])})
		}
		f.next++
		f.lts[name] = ec2types.LaunchTemplate{LaunchTemplateName: aws.String(name), LaunchTemplateId: aws.String("lt-" + name[len(NamePrefix):]), Tags: ts}
	}
	run("should not delete the NodeClass if launch template deletion fails", func(t *testing.T) {
		f := newFakeEC2()
		store(f, NamePrefix+"one", wellknown.EKSClusterNameTagKey, cluster, wellknown.EC2NodeClassTagKey, class)
		p := &Provider{EC2: failingDeletes{f}}
		// The finalizer removes itself only after this step succeeds.
		if _, err := p.DeleteForNodeClass(ctx, cluster, class); err == nil || !strings.Contains(err.Error(), "delete Launch Template Error") {
			t.Errorf("err = %v", err)
		}
		if len(f.lts) != 1 {
			t.Errorf("templates %v", f.lts)
		}
	})
	run("should not delete the launch template not associated with the nodeClass", func(t *testing.T) {
		f := newFakeEC2()
		store(f, NamePrefix+"other", "karpenter.k8s.aws/cluster", cluster)
		if deleted, err := (&Provider{EC2: f}).DeleteForNodeClass(ctx, cluster, class); err != nil || len(deleted) != 0 {
			t.Errorf("deleted %v, %v", deleted, err)
		}
		if len(f.lts) != 1 {
			t.Errorf("templates %v", f.lts)
		}
	})
	run("should succeed to delete the launch template", func(t *testing.T) {
		f := newFakeEC2()
		store(f, NamePrefix+"one", wellknown.EKSClusterNameTagKey, cluster, wellknown.EC2NodeClassTagKey, class)
		store(f, NamePrefix+"two", wellknown.EKSClusterNameTagKey, cluster, wellknown.EC2NodeClassTagKey, class)
		deleted, err := (&Provider{EC2: f}).DeleteForNodeClass(ctx, cluster, class)
		if err != nil || len(deleted) != 2 || len(f.lts) != 0 {
			t.Errorf("deleted %v, %v; left %v", deleted, err, f.lts)
		}
	})
}
