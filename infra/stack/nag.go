package stack

import (
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// AddAwsSolutionsChecks runs cdk-nag's AwsSolutions pack on everything
// under scope at synthesis; a finding that is not suppressed is an error
// annotation, which fails `cdk synth`.
func AddAwsSolutionsChecks(scope constructs.IConstruct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// cdk-nag (AwsSolutions pack) suppressions. Each one names the exact
// findings it covers (appliesTo), so a new wildcard or managed policy is
// still reported; and each says why the finding is accepted. The checks
// themselves run with -c nag=true (infra/main.go) and in TestNagAwsSolutions.

// nagResource is how cdk-nag prints a resource of an IAM5 finding:
// ${AWS::Region} becomes <AWS::Region>.
func nagResource(arn string) string {
	return "Resource::" + subVarRE.ReplaceAllString(arn, "<$1>")
}

var subVarRE = regexp.MustCompile(`\$\{([^}]+)\}`)

func nagManagedPolicy(name string) string {
	return "Policy::arn:<AWS::Partition>:iam::aws:policy/" + name
}

func appliesTo(findings ...string) *[]interface{} {
	out := make([]interface{}, len(findings))
	for i, f := range findings {
		out[i] = f
	}
	return &out
}

func suppression(id, reason string, findings ...string) *cdknag.NagPackSuppression {
	return &cdknag.NagPackSuppression{
		Id:        jsii.String(id),
		Reason:    jsii.String(reason),
		AppliesTo: appliesTo(findings...),
	}
}

// suppress adds suppressions to construct; a nil one (a managed policy a
// shadow stack does not define) has none to suppress.
func suppress(construct interface{}, s ...*cdknag.NagPackSuppression) {
	if construct == nil {
		return
	}
	cdknag.NagSuppressions_AddResourceSuppressions(construct, &s, jsii.Bool(true))
}

func addNagSuppressions(s *Stack) {
	names := make([]string, len(nodeRoleManagedPolicies))
	for i, n := range nodeRoleManagedPolicies {
		names[i] = nagManagedPolicy(n)
	}
	nodeRole := func(role interface{}) {
		suppress(role, suppression("AwsSolutions-IAM4",
			"The EKS node role needs exactly these AWS managed policies (kubelet registration, VPC CNI, ECR image pulls, SSM agent); "+
				"they are the set EKS documents for node roles and Karpenter's own template attaches, and AWS keeps them current with EKS.",
			names...))
	}
	if !s.Props.ImportNodeRole {
		nodeRole(s.NodeRole)
	}
	for _, r := range s.Props.NodeRoles {
		if r.Create {
			nodeRole(s.NodeRoles[r.Name])
		}
	}

	if s.Props.InVPC() {
		findings := []string{"Resource::*", "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:*:network-interface/*"}
		for _, id := range s.Props.SubnetIDs {
			findings = append(findings, "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:*:subnet/"+id)
		}
		sgs := s.Props.SecurityGroupIDs
		if len(sgs) == 0 {
			sgs = []string{"<FunctionsSecurityGroup.GroupId>"}
		}
		for _, id := range sgs {
			findings = append(findings, "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:*:security-group/"+id)
		}
		suppress(s.ManagedPolicies[VPCPolicyID], suppression("AwsSolutions-IAM5",
			"Placed in a VPC, Lambda creates and deletes the functions' network interfaces with their roles. "+
				"DescribeNetworkInterfaces and DescribeSubnets support no resource-level permissions ('*', pinned to the region); "+
				"a new interface's ID is unknown ('network-interface/*'), so creating, deleting and re-addressing one is limited by "+
				"ec2:Subnet to the functions' subnets; the subnets and security groups are named by ID, in any account "+
				"(a shared VPC's belong to its owner).",
			findings...))
	}

	suppress(s.Roles[Disruption],
		suppression("AwsSolutions-IAM5",
			"ec2:DescribeInstanceStatus supports no resource-level permissions, so the resource must be '*'; "+
				"the statement is read-only, only the disruption function has it, and a condition pins it to the stack's region.",
			"Resource::*"))

	suppress(s.ManagedPolicies[ReadPolicyID],
		suppression("AwsSolutions-IAM5",
			"EC2 Describe* calls support no resource-level permissions, so the resource must be '*'; "+
				"the statement is read-only and a condition pins it to the stack's region (aws:RequestedRegion).",
			"Resource::*"),
		suppression("AwsSolutions-IAM5",
			"Read-only access to AWS's public SSM parameters (/aws/service/...), which resolve AMI aliases of EC2NodeClasses; "+
				"the parameter names depend on the user's EC2NodeClasses and are not known at deploy time.",
			nagResource(ssmAWS)),
		suppression("AwsSolutions-IAM5",
			"Read-only GetInstanceProfile: the controllers create one instance profile per EC2NodeClass role at run time, "+
				"with generated names, so the names are not known at deploy time.",
			nagResource(iamIP)),
	)

	launch := make([]string, 0, len(ec2Referenced)+len(ec2Launched))
	for _, r := range ec2Referenced {
		launch = append(launch, nagResource(r))
	}
	suppress(s.ManagedPolicies[LaunchPolicyID],
		suppression("AwsSolutions-IAM5",
			"AMIs, snapshots, subnets, security groups, capacity reservations and placement groups are chosen at run time by the "+
				"user's EC2NodeClass selectors, and carry no Karpless tags to condition on; the ARNs and a condition pin them to the "+
				"region, and using them launches nothing without the tag-conditioned statements on what is created.",
			launch...),
		suppression("AwsSolutions-IAM5",
			"Fleets, instances, volumes, network interfaces, launch templates and spot requests get their IDs when created, so their "+
				"ARNs cannot be listed; every statement on them requires this cluster's ownership tags, in the request (creation, "+
				"creation-time tagging) or on the resource (launch template use, tagging after registration, termination, deletion), "+
				"exactly as Karpenter's controller policy does.",
			func() []string {
				var out []string
				for _, r := range ec2Launched {
					out = append(out, nagResource(r))
				}
				return out
			}()...),
	)

	suppress(s.ManagedPolicies[InstanceProfilePolicyID],
		suppression("AwsSolutions-IAM5",
			"Instance profiles are created per EC2NodeClass at run time with generated names; creating, tagging and filling one "+
				"requires this cluster's ownership, cluster-name and region tags (request and/or resource tags), as in Karpenter's policy.",
			nagResource(iamIP)))

	suppress(s.ManagedPolicies[InstanceProfileGCPolicyID],
		suppression("AwsSolutions-IAM5",
			"Garbage collection removes roles from and deletes only instance profiles tagged as this cluster's, in this region; "+
				"their names are generated at run time.",
			nagResource(iamIP)),
		suppression("AwsSolutions-IAM5",
			"iam:ListInstanceProfiles is a read-only listing used to find this cluster's leftover instance profiles; "+
				"Karpenter's controller policy grants it unscoped in the same way.",
			"Resource::*"),
	)
}
