package stack

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// vpcActions are what every function's role gains in a VPC: the network
// interfaces Lambda makes with it, in place of the AWS managed
// AWSLambdaVPCAccessExecutionRole (which grants them on "*").
var vpcActions = []string{
	"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
	"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses",
}

// checkVPCPolicy: only Describe calls reach "*" (pinned to the region);
// every other network-interface action is limited to the functions'
// subnets, and creating one names those subnets and security groups.
func checkVPCPolicy(t *testing.T, d map[string]any, subnets []string, sg any) {
	t.Helper()
	var policy map[string]any
	for id, r := range resourcesOfType(d, "AWS::IAM::ManagedPolicy") {
		if strings.HasPrefix(id, VPCPolicyID) {
			policy = props(r)
		}
	}
	if policy == nil {
		t.Fatal("no VPC policy")
	}
	var subnetARNs []any
	for _, id := range subnets {
		subnetARNs = append(subnetARNs, map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:*:subnet/" + id})
	}
	inSubnets := map[string]any{"ArnLike": map[string]any{"ec2:Subnet": subnetARNs}}
	for _, st := range asList(policy["PolicyDocument"].(map[string]any)["Statement"]) {
		st := st.(map[string]any)
		actions := asStrings(st["Action"])
		res := jsonString(st["Resource"])
		switch {
		case slices.Contains(actions, "ec2:DescribeNetworkInterfaces"):
			if res != `"*"` || st["Condition"] == nil {
				t.Errorf("describe statement: %s", jsonString(st))
			}
		case strings.Contains(res, "network-interface/*"):
			if jsonString(st["Condition"]) != jsonString(inSubnets) {
				t.Errorf("%v on any network interface without the subnets' condition: %s", actions, jsonString(st))
			}
		default:
			if !slices.Equal(actions, []string{"ec2:CreateNetworkInterface"}) || strings.Contains(res, `"*"`) ||
				!strings.Contains(res, subnets[0]) || !strings.Contains(res, jsonString(sg)) {
				t.Errorf("unexpected statement: %s", jsonString(st))
			}
		}
	}
}

func TestVPCPlacementWithNewSecurityGroup(t *testing.T) {
	p := defaultProps()
	p.VpcID = "vpc-0123456789abcdef0"
	p.SubnetIDs = []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"}
	s, tm, d, err := synth(p, true)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "security group: outbound HTTPS only", func() {
		tm.HasResourceProperties(jsii.String("AWS::EC2::SecurityGroup"), &map[string]interface{}{
			"VpcId": "vpc-0123456789abcdef0",
			"SecurityGroupEgress": []interface{}{assertions.Match_ObjectLike(&map[string]interface{}{
				"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0",
			})},
			"SecurityGroupIngress": assertions.Match_Absent(),
		})
	})
	sg := ""
	for id := range resourcesOfType(d, "AWS::EC2::SecurityGroup") {
		sg = id
	}
	check(t, "every function in the subnets", func() {
		tm.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), &map[string]interface{}{
			"VpcConfig": map[string]interface{}{
				"SubnetIds":        []interface{}{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"},
				"SecurityGroupIds": []interface{}{getAtt(sg, "GroupId")},
			},
		})
	})
	checkRoleActions(t, s, d, vpcActions)
	checkVPCPolicy(t, d, p.SubnetIDs, getAtt(sg, "GroupId"))
	for _, v := range guardViolations(d) {
		t.Error(v)
	}
	checkNag(t, s)
}

func TestVPCPlacementWithGivenSecurityGroups(t *testing.T) {
	p := defaultProps()
	p.SubnetIDs = []string{"subnet-0123456789abcdef0"}
	p.SecurityGroupIDs = []string{"sg-0123456789abcdef0"}
	s, tm, d, err := synth(p, true)
	if err != nil {
		t.Fatal(err)
	}
	checkRoleActions(t, s, d, vpcActions)
	checkVPCPolicy(t, d, p.SubnetIDs, "sg-0123456789abcdef0")
	checkNag(t, s)
	check(t, "no security group created", func() { tm.ResourceCountIs(jsii.String("AWS::EC2::SecurityGroup"), jsii.Number(0)) })
	check(t, "given security group", func() {
		tm.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), &map[string]interface{}{
			"VpcConfig": map[string]interface{}{
				"SubnetIds":        []interface{}{"subnet-0123456789abcdef0"},
				"SecurityGroupIds": []interface{}{"sg-0123456789abcdef0"},
			},
		})
	})
}
