package stack

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

var vpcManaged = []string{`{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"]]}`}

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
	checkRoleActions(t, s, d, vpcManaged)
	for _, v := range guardViolations(d) {
		t.Error(v)
	}
	checkNag(t, s)
}

func TestVPCPlacementWithGivenSecurityGroups(t *testing.T) {
	p := defaultProps()
	p.SubnetIDs = []string{"subnet-0123456789abcdef0"}
	p.SecurityGroupIDs = []string{"sg-0123456789abcdef0"}
	_, tm, _, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
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
