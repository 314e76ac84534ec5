package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// The IAM statements of the controller functions. They follow Karpenter's
// published controller policy (KarpenterController*Policy in its
// getting-started CloudFormation template) statement by statement, keep its
// Sids so the two can be compared, and are tighter where Karpless calls
// less: no capacity reservation or instance
// status reads, no zonal-shift read, and each function only gets the
// groups it calls.

// Tag keys Karpenter (and Karpless) writes on what it launches.
const (
	tagNodePool    = "karpenter.sh/nodepool"
	tagNodeClaim   = "karpenter.sh/nodeclaim"
	tagClusterName = "eks:eks-cluster-name"
	tagNodeClass   = "karpenter.k8s.aws/ec2nodeclass"
	tagRegion      = "topology.kubernetes.io/region"
)

func clusterTag(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// sub renders an Fn::Sub, so ARNs read like the ones in Karpenter's template.
func sub(s string) *string { return awscdk.Fn_Sub(jsii.String(s), nil) }

func subs(ss ...string) *[]*string {
	out := make([]*string, len(ss))
	for i, s := range ss {
		out[i] = sub(s)
	}
	return &out
}

type cond = map[string]interface{}

func statement(sid string, actions []string, resources *[]*string, conditions cond) awsiam.PolicyStatement {
	props := &awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: resources,
	}
	if conditions != nil {
		props.Conditions = &conditions
	}
	return awsiam.NewPolicyStatement(props)
}

const (
	ec2ARN = "arn:${AWS::Partition}:ec2:${AWS::Region}:*:"
	iamIP  = "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"
	ssmAWS = "arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*"
)

// ec2Referenced are the resource types a launch uses but does not create.
var ec2Referenced = []string{
	"arn:${AWS::Partition}:ec2:${AWS::Region}::image/*",
	"arn:${AWS::Partition}:ec2:${AWS::Region}::snapshot/*",
	ec2ARN + "security-group/*",
	ec2ARN + "subnet/*",
	ec2ARN + "capacity-reservation/*",
	ec2ARN + "placement-group/*",
}

// ec2Launched are the resource types a launch creates and tags.
var ec2Launched = []string{
	ec2ARN + "fleet/*",
	ec2ARN + "instance/*",
	ec2ARN + "volume/*",
	ec2ARN + "network-interface/*",
	ec2ARN + "launch-template/*",
	ec2ARN + "spot-instances-request/*",
}

// clusterARN is this cluster's ARN.
func clusterARN(cluster string) *string {
	return sub("arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/" + cluster)
}

func describeClusterStatement(cluster string) awsiam.PolicyStatement {
	return statement("AllowAPIServerEndpointDiscovery",
		[]string{"eks:DescribeCluster"},
		&[]*string{clusterARN(cluster)}, nil)
}

// vpcStatement is what Lambda needs of a function's execution role to
// place it in the VPC: the network interfaces in the given subnets, and
// nothing else. The AWS managed AWSLambdaVPCAccessExecutionRole grants the
// same actions on every network interface of the account ("*").
// Describe calls have no resource-level permissions; creating an
// interface names the interface, its subnet and its security groups; the
// others act on interfaces of the given subnets only (ec2:Subnet).
func vpcStatements(subnets []string, securityGroups []*string) []awsiam.PolicyStatement {
	var subnetARNs []*string
	for _, id := range subnets {
		subnetARNs = append(subnetARNs, sub(ec2ARN+"subnet/"+id))
	}
	inSubnets := cond{"ArnLike": cond{"ec2:Subnet": subnetARNs}}
	sgARNs := make([]*string, len(securityGroups))
	for i, id := range securityGroups {
		sgARNs[i] = awscdk.Fn_Join(jsii.String(""), &[]*string{sub(ec2ARN + "security-group/"), id})
	}
	referenced := append(subnetARNs, sgARNs...)
	return []awsiam.PolicyStatement{
		statement("AllowVPCNetworkInterfaceReads",
			[]string{"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"},
			jsii.Strings("*"),
			cond{"StringEquals": cond{"aws:RequestedRegion": awscdk.Aws_REGION()}}),
		statement("AllowVPCNetworkInterfaceCreation",
			[]string{"ec2:CreateNetworkInterface"},
			&[]*string{sub(ec2ARN + "network-interface/*")},
			inSubnets),
		statement("AllowVPCNetworkInterfaceSubnetsAndGroups",
			[]string{"ec2:CreateNetworkInterface"},
			&referenced, nil),
		statement("AllowVPCNetworkInterfaceManagement",
			[]string{"ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"},
			&[]*string{sub(ec2ARN + "network-interface/*")},
			inSubnets),
	}
}

// describeOwnStackStatement lets the bootstrap read the status of its own
// stack, and of no other: it acts on a Delete only while CloudFormation
// shows that stack being deleted.
func describeOwnStackStatement() awsiam.PolicyStatement {
	return statement("AllowReadingOwnStackStatus",
		[]string{"cloudformation:DescribeStacks"},
		&[]*string{awscdk.Aws_STACK_ID()}, nil)
}

// readStatements: discovery reads every controller function makes.
// ssmPaths widen SSM reads beyond the public AMI parameters to the
// account's parameters under those prefixes (ssmParameterPaths), for
// EC2NodeClasses whose amiSelectorTerms name their own ssmParameter.
func readStatements(cluster string, ssmPaths []string) []awsiam.PolicyStatement {
	ssm := []string{ssmAWS}
	for _, p := range ssmPaths {
		ssm = append(ssm, "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"+p+"*")
	}
	return []awsiam.PolicyStatement{
		// Describe* calls do not support resource-level permissions: "*",
		// pinned to the stack's region.
		statement("AllowRegionalReadActions",
			[]string{
				// capacityReservationSelectorTerms, and what reservations
				// can still take (Karpenter's policy grants it too).
				"ec2:DescribeCapacityReservations",
				"ec2:DescribeImages",
				"ec2:DescribeInstanceTypeOfferings",
				"ec2:DescribeInstanceTypes",
				"ec2:DescribeInstances",
				"ec2:DescribeLaunchTemplates",
				"ec2:DescribePlacementGroups",
				"ec2:DescribeSecurityGroups",
				"ec2:DescribeSpotPriceHistory",
				"ec2:DescribeSubnets",
			},
			jsii.Strings("*"),
			cond{"StringEquals": cond{"aws:RequestedRegion": awscdk.Aws_REGION()}}),
		// Public parameters (AMI aliases), and the prefixes the stack
		// was given.
		statement("AllowSSMReadActions",
			[]string{"ssm:GetParameter"},
			subs(ssm...), nil),
		statement("AllowInstanceProfileReadActions",
			[]string{"iam:GetInstanceProfile"},
			subs(iamIP), nil),
		// The region's on-demand prices. The Price List API answers from
		// a few regions only (us-east-1 for most) and has no resource-level
		// permissions: "*", no region condition, as Karpenter's policy.
		statement("AllowPricingReadActions",
			[]string{"pricing:GetProducts"},
			jsii.Strings("*"), nil),
		describeClusterStatement(cluster),
	}
}

// ec2PassedToService are the values iam:PassedToService takes when a role
// is passed to EC2, in every partition.
var ec2PassedToService = []string{"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}

// launchStatements: CreateFleet with its launch template, creation-time
// and post-registration tags, rollback of what the function launched, and
// passing the node roles to EC2.
func launchStatements(cluster string, nodeRoleARNs []*string) []awsiam.PolicyStatement {
	owned := clusterTag(cluster)
	requestTags := cond{
		"StringEquals": cond{
			"aws:RequestTag/" + owned:          "owned",
			"aws:RequestTag/" + tagClusterName: cluster,
		},
		"StringLike": cond{"aws:RequestTag/" + tagNodePool: "*"},
	}
	resourceTags := cond{
		"StringEquals": cond{"aws:ResourceTag/" + owned: "owned"},
		"StringLike":   cond{"aws:ResourceTag/" + tagNodePool: "*"},
	}
	creationTagging := cond{
		"StringEquals": cond{
			"aws:RequestTag/" + owned:          "owned",
			"aws:RequestTag/" + tagClusterName: cluster,
			"ec2:CreateAction":                 []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"},
		},
		"StringLike": cond{"aws:RequestTag/" + tagNodePool: "*"},
	}
	// An instant CreateFleet launches with the caller's authority, so
	// ec2:RunInstances is evaluated for the same resources: the two are
	// granted together, as in Karpenter's policy.
	return []awsiam.PolicyStatement{
		// Resources a launch references but does not create (AMIs, their
		// snapshots, subnets, security groups, reservations, placement
		// groups) carry no Karpless tags to condition on; they are pinned
		// to the region, in the ARN and by condition.
		statement("AllowScopedEC2InstanceAccessActions",
			[]string{"ec2:RunInstances", "ec2:CreateFleet"},
			subs(ec2Referenced...),
			cond{"StringEquals": cond{"aws:RequestedRegion": awscdk.Aws_REGION()}}),
		// Launch templates are used only if this cluster's controllers
		// made them.
		statement("AllowScopedEC2LaunchTemplateAccessActions",
			[]string{"ec2:RunInstances", "ec2:CreateFleet"},
			subs(ec2ARN+"launch-template/*"),
			resourceTags),
		// Whatever a launch creates must be tagged as this cluster's.
		statement("AllowScopedEC2InstanceActionsWithTags",
			[]string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
			subs(ec2Launched...),
			requestTags),
		// Tags at creation, only as part of those calls.
		statement("AllowScopedResourceCreationTagging",
			[]string{"ec2:CreateTags"},
			subs(ec2Launched...),
			creationTagging),
		// After registration: Name, karpenter.sh/nodeclaim and
		// eks:eks-cluster-name on this cluster's instances, nothing else.
		statement("AllowScopedResourceTagging",
			[]string{"ec2:CreateTags"},
			subs(ec2ARN+"instance/*"),
			cond{
				"StringEquals":              cond{"aws:ResourceTag/" + owned: "owned"},
				"StringLike":                cond{"aws:ResourceTag/" + tagNodePool: "*"},
				"StringEqualsIfExists":      cond{"aws:RequestTag/" + tagClusterName: cluster},
				"ForAllValues:StringEquals": cond{"aws:TagKeys": []string{tagClusterName, tagNodeClaim, "Name"}},
			}),
		// Rollback of failed launches and NodeClaims that never registered;
		// only this cluster's instances and launch templates.
		statement("AllowScopedDeletion",
			[]string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
			subs(ec2ARN+"instance/*", ec2ARN+"launch-template/*"),
			resourceTags),
		// Every node role: launching with an instance profile passes the
		// role it holds, and so does AddRoleToInstanceProfile. EC2's name
		// as the passed-to service is ec2.amazonaws.com.cn in the China
		// regions; both are listed, as in Karpenter's policy. (A tag
		// condition cannot stand in for the list: IAM does not evaluate
		// iam:ResourceTag for PassRole.)
		statement("AllowPassingInstanceRole",
			[]string{"iam:PassRole"},
			&nodeRoleARNs,
			cond{"StringEquals": cond{"iam:PassedToService": ec2PassedToService}}),
	}
}

// instanceProfileTags are the request tags an instance profile is created with.
func instanceProfileRequestTags(cluster string) cond {
	return cond{
		"aws:RequestTag/" + clusterTag(cluster): "owned",
		"aws:RequestTag/" + tagClusterName:      cluster,
		"aws:RequestTag/" + tagRegion:           awscdk.Aws_REGION(),
	}
}

func instanceProfileResourceTags(cluster string) cond {
	return cond{
		"aws:ResourceTag/" + clusterTag(cluster): "owned",
		"aws:ResourceTag/" + tagRegion:           awscdk.Aws_REGION(),
	}
}

// instanceProfileStatements: an EC2NodeClass's spec.role becomes an
// instance profile the controllers create, tag and fill.
func instanceProfileStatements(cluster string) []awsiam.PolicyStatement {
	both := instanceProfileResourceTags(cluster)
	for k, v := range instanceProfileRequestTags(cluster) {
		both[k] = v
	}
	return []awsiam.PolicyStatement{
		statement("AllowScopedInstanceProfileCreationActions",
			[]string{"iam:CreateInstanceProfile"},
			subs(iamIP),
			cond{
				"StringEquals": instanceProfileRequestTags(cluster),
				"StringLike":   cond{"aws:RequestTag/" + tagNodeClass: "*"},
			}),
		statement("AllowScopedInstanceProfileTagActions",
			[]string{"iam:TagInstanceProfile"},
			subs(iamIP),
			cond{
				"StringEquals": both,
				"StringLike": cond{
					"aws:ResourceTag/" + tagNodeClass: "*",
					"aws:RequestTag/" + tagNodeClass:  "*",
				},
			}),
		statement("AllowScopedInstanceProfileActions",
			[]string{"iam:AddRoleToInstanceProfile"},
			subs(iamIP),
			cond{
				"StringEquals": instanceProfileResourceTags(cluster),
				"StringLike":   cond{"aws:ResourceTag/" + tagNodeClass: "*"},
			}),
	}
}

// instanceProfileGCStatements: deleting the instance profiles made for
// EC2NodeClasses: a deleted class's, by its finalizer (provisioner), and
// unused ones, by garbage collection (disruption).
func instanceProfileGCStatements(cluster string) []awsiam.PolicyStatement {
	return []awsiam.PolicyStatement{
		statement("AllowScopedInstanceProfileDeletionActions",
			[]string{"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"},
			subs(iamIP),
			cond{
				"StringEquals": instanceProfileResourceTags(cluster),
				"StringLike":   cond{"aws:ResourceTag/" + tagNodeClass: "*"},
			}),
		// ListInstanceProfiles is read-only and, as in Karpenter's policy,
		// granted unscoped.
		statement("AllowUnscopedInstanceProfileListAction",
			[]string{"iam:ListInstanceProfiles"},
			jsii.Strings("*"), nil),
	}
}

// instanceStatusStatement: the disruption function reads EC2's status
// checks and scheduled events of instances once a minute, as Karpenter's
// instance status controller does, to replace impaired instances and those
// scheduled for retirement. Only that function calls it. Describe* calls
// support no resource-level permissions: "*", pinned to the region.
// zonalShiftStatement lets a controller read this cluster's ARC zonal
// shifts (enableZonalShift) and no other resource's: Karpenter's statement
// (KarpenterControllerZonalShiftPolicy), which names the resource in
// arc-zonal-shift:ResourceIdentifier, the key ARC documents for it.
func zonalShiftStatement(cluster string) awsiam.PolicyStatement {
	return statement("AllowZonalShiftStatusReadOnly",
		[]string{"arc-zonal-shift:GetManagedResource"},
		jsii.Strings("*"),
		cond{"StringEquals": cond{"arc-zonal-shift:ResourceIdentifier": clusterARN(cluster)}})
}

func instanceStatusStatement() awsiam.PolicyStatement {
	return statement("AllowInstanceStatusReadActions",
		[]string{"ec2:DescribeInstanceStatus"},
		jsii.Strings("*"),
		cond{"StringEquals": cond{"aws:RequestedRegion": awscdk.Aws_REGION()}})
}

// queueConsumerStatement: what is called on the interruption queue with the
// interruption function's role. The event source mapping receives and
// deletes messages and reads the queue's attributes (ReceiveMessage,
// DeleteMessage, GetQueueAttributes). The interruption function itself calls
// ChangeMessageVisibility: it makes a transiently failed message visible
// again after a few seconds, where the queue's visibility timeout (six
// function timeouts, 360 s, Lambda's guidance) would outlast a spot
// warning's two minutes.
func queueConsumerStatement(queueARN *string) awsiam.PolicyStatement {
	return statement("AllowInterruptionQueueActions",
		[]string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"},
		&[]*string{queueARN}, nil)
}

// invokeStatement lets the watcher invoke the provisioner, by its
// unqualified ARN, and nothing else.
func invokeStatement(functionARN *string) awsiam.PolicyStatement {
	return statement("AllowInvokingTheProvisioner",
		[]string{"lambda:InvokeFunction"},
		&[]*string{functionARN}, nil)
}

// logStatement lets a function write to its own log group only.
func logStatement(logGroupARN *string) awsiam.PolicyStatement {
	return statement("AllowWritingOwnLogs",
		[]string{"logs:CreateLogStream", "logs:PutLogEvents"},
		&[]*string{logGroupARN}, nil)
}
