package nodeclass

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's EC2NodeClass status controller suites
// (aws/karpenter-provider-aws pkg/controllers/nodeclass/subnet_test.go,
// securitygroup_test.go) through Resolver.Resolve: one Resolve is the
// controller's reconcile, the status it returns what the tick writes. The
// account is Karpenter's fake EC2's default subnets and security groups.

func karpenterFakeEC2() *fakeEC2 {
	ec2, _, _ := world()
	subnet := func(id, zone, zoneID string, tags ...string) ec2types.Subnet {
		return ec2types.Subnet{SubnetId: aws.String(id), AvailabilityZone: aws.String(zone), AvailabilityZoneId: aws.String(zoneID),
			AvailableIpAddressCount: aws.Int32(100), Tags: ec2Tags(tags...)}
	}
	ec2.subnets = []ec2types.Subnet{
		subnet("subnet-test1", "test-zone-1a", "tstz1-1a", "Name", "test-subnet-1", "foo", "bar"),
		subnet("subnet-test2", "test-zone-1b", "tstz1-1b", "Name", "test-subnet-2", "foo", "bar"),
		subnet("subnet-test3", "test-zone-1c", "tstz1-1c", "Name", "test-subnet-3", "TestTag", "", "foo", "bar"),
		subnet("subnet-test4", "test-zone-1a-local", "tstz1-1alocal", "Name", "test-subnet-4"),
	}
	group := func(id, name string, tags ...string) ec2types.SecurityGroup {
		return ec2types.SecurityGroup{GroupId: aws.String(id), GroupName: aws.String(name), Tags: ec2Tags(tags...)}
	}
	ec2.groups = []ec2types.SecurityGroup{
		group("sg-test1", "securityGroup-test1", "Name", "test-security-group-1", "foo", "bar"),
		group("sg-test2", "securityGroup-test2", "Name", "test-security-group-2", "foo", "bar"),
		group("sg-test3", "securityGroup-test3", "Name", "test-security-group-3", "TestTag", "", "foo", "bar"),
	}
	return ec2
}

// statusClass is the suites' BeforeEach class: every subnet and security
// group.
func statusClass() *awsv1.EC2NodeClass {
	nc := defaultClass()
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"*": "*"}}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"*": "*"}}}
	return nc
}

// reconcile resolves nc against ec2 and stores the status, as the tick
// writes it.
func reconcile(t *testing.T, ec2 *fakeEC2, nc *awsv1.EC2NodeClass) {
	t.Helper()
	_, ssm, iam := world()
	st, err := resolver(ec2, ssm, iam).Resolve(context.Background(), nc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	nc.Status = st
}

var allSubnets = []awsv1.Subnet{
	{ID: "subnet-test1", Zone: "test-zone-1a", ZoneID: "tstz1-1a"},
	{ID: "subnet-test2", Zone: "test-zone-1b", ZoneID: "tstz1-1b"},
	{ID: "subnet-test3", Zone: "test-zone-1c", ZoneID: "tstz1-1c"},
	{ID: "subnet-test4", Zone: "test-zone-1a-local", ZoneID: "tstz1-1alocal"},
}

var allGroups = []awsv1.SecurityGroup{
	{ID: "sg-test1", Name: "securityGroup-test1"},
	{ID: "sg-test2", Name: "securityGroup-test2"},
	{ID: "sg-test3", Name: "securityGroup-test3"},
}

func TestConformanceNodeClassSubnets(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/nodeclass", File: "pkg/controllers/nodeclass/subnet_test.go",
			Spec: "NodeClass Subnet Status Controller > " + spec}, body)
	}
	expect := func(t *testing.T, nc *awsv1.EC2NodeClass, want []awsv1.Subnet, ready metav1.ConditionStatus) {
		t.Helper()
		if !reflect.DeepEqual(nc.Status.Subnets, want) {
			t.Errorf("subnets %+v\nwant %+v", nc.Status.Subnets, want)
		}
		if c := cond(nc.Status, awsv1.ConditionTypeSubnetsReady); c.Status != ready {
			t.Errorf("SubnetsReady %+v, want %s", c, ready)
		}
	}
	byName := []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"Name": "test-subnet-1"}}, {Tags: map[string]string{"Name": "test-subnet-2"}}}
	run("Should update EC2NodeClass status for Subnets", func(t *testing.T) {
		nc := statusClass()
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, allSubnets, metav1.ConditionTrue)
	})
	run("Should have the correct ordering for the Subnets", func(t *testing.T) {
		ec2 := karpenterFakeEC2()
		ec2.subnets = ec2.subnets[:3]
		for i, n := range []int32{20, 100, 50} {
			ec2.subnets[i].AvailableIpAddressCount = aws.Int32(n)
		}
		nc := statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, []awsv1.Subnet{allSubnets[1], allSubnets[2], allSubnets[0]}, metav1.ConditionTrue)
	})
	run("Should resolve a valid selectors for Subnet by tags", func(t *testing.T) {
		nc := statusClass()
		nc.Spec.SubnetSelectorTerms = byName
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, allSubnets[:2], metav1.ConditionTrue)
	})
	run("Should resolve a valid selectors for Subnet by ids", func(t *testing.T) {
		nc := statusClass()
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-test1"}}
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, allSubnets[:1], metav1.ConditionTrue)
	})
	run("Should update Subnet status when the Subnet selector gets updated by tags", func(t *testing.T) {
		ec2, nc := karpenterFakeEC2(), statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, allSubnets, metav1.ConditionTrue)
		nc.Spec.SubnetSelectorTerms = byName
		reconcile(t, ec2, nc)
		expect(t, nc, allSubnets[:2], metav1.ConditionTrue)
	})
	run("Should update Subnet status when the Subnet selector gets updated by ids", func(t *testing.T) {
		ec2, nc := karpenterFakeEC2(), statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, allSubnets, metav1.ConditionTrue)
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-test1"}}
		reconcile(t, ec2, nc)
		expect(t, nc, allSubnets[:1], metav1.ConditionTrue)
	})
	run("Should not resolve a invalid selectors for Subnet", func(t *testing.T) {
		nc := statusClass()
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, nil, metav1.ConditionFalse)
	})
	run("Should not resolve a invalid selectors for an updated subnet selector", func(t *testing.T) {
		ec2, nc := karpenterFakeEC2(), statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, allSubnets, metav1.ConditionTrue)
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
		reconcile(t, ec2, nc)
		expect(t, nc, nil, metav1.ConditionFalse)
	})
}

func TestConformanceNodeClassSecurityGroups(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/nodeclass", File: "pkg/controllers/nodeclass/securitygroup_test.go",
			Spec: "NodeClass Security Group Status Controller > " + spec}, body)
	}
	expect := func(t *testing.T, nc *awsv1.EC2NodeClass, want []awsv1.SecurityGroup, ready metav1.ConditionStatus) {
		t.Helper()
		if !reflect.DeepEqual(nc.Status.SecurityGroups, want) {
			t.Errorf("security groups %+v\nwant %+v", nc.Status.SecurityGroups, want)
		}
		if c := cond(nc.Status, awsv1.ConditionTypeSecurityGroupsReady); c.Status != ready {
			t.Errorf("SecurityGroupsReady %+v, want %s", c, ready)
		}
	}
	byName := []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"Name": "test-security-group-1"}}, {Tags: map[string]string{"Name": "test-security-group-2"}}}
	run("Should update EC2NodeClass status for Security Groups", func(t *testing.T) {
		nc := statusClass()
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, allGroups, metav1.ConditionTrue)
	})
	run("Should resolve a valid selectors for Security Groups by tags", func(t *testing.T) {
		nc := statusClass()
		nc.Spec.SecurityGroupSelectorTerms = byName
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, allGroups[:2], metav1.ConditionTrue)
	})
	run("Should resolve a valid selectors for Security Groups by ids", func(t *testing.T) {
		nc := statusClass()
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-test1"}}
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, allGroups[:1], metav1.ConditionTrue)
	})
	run("Should update Security Groups status when the Security Groups selector gets updated by tags", func(t *testing.T) {
		ec2, nc := karpenterFakeEC2(), statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, allGroups, metav1.ConditionTrue)
		nc.Spec.SecurityGroupSelectorTerms = byName
		reconcile(t, ec2, nc)
		expect(t, nc, allGroups[:2], metav1.ConditionTrue)
	})
	run("Should update Security Groups status when the Security Groups selector gets updated by ids", func(t *testing.T) {
		ec2, nc := karpenterFakeEC2(), statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, allGroups, metav1.ConditionTrue)
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-test1"}}
		reconcile(t, ec2, nc)
		expect(t, nc, allGroups[:1], metav1.ConditionTrue)
	})
	run("Should not resolve a invalid selectors for Security Groups", func(t *testing.T) {
		nc := statusClass()
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
		reconcile(t, karpenterFakeEC2(), nc)
		expect(t, nc, nil, metav1.ConditionFalse)
	})
	run("Should not resolve a invalid selectors for an updated Security Groups selector", func(t *testing.T) {
		ec2, nc := karpenterFakeEC2(), statusClass()
		reconcile(t, ec2, nc)
		expect(t, nc, allGroups, metav1.ConditionTrue)
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"foo": "invalid"}}}
		reconcile(t, ec2, nc)
		expect(t, nc, nil, metav1.ConditionFalse)
	})
}
