// Package stack defines Karpless's AWS side for one EKS cluster as a CDK
// stack: the Lambda functions (four, and the watcher with responsiveness
// continuous), their schedules, the interruption queue and its EventBridge
// rules, least-privilege IAM roles, the node role, EKS access entries, the
// bootstrap custom resource, the alarms on throttled and dropped
// invocations and a CloudWatch dashboard.
package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	fnconfig "github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// Function sizing, from measurements (docs/deploy.md, "Sizing"): a
// function's init peaks at 29-35 MiB RSS (go test ./functions -bench
// ColdStart); the largest heap is a full 500-node disruption pass at 85 MiB
// (go test ./shared/app -bench SteadyTicks). 512 MiB leaves room for the
// GC's doubling and buys about 0.3 vCPU, which keeps that pass near 13 s,
// well inside the tick's timeout; the bootstrap only applies manifests.
const (
	// Memory sizes from shared/local/scale BenchmarkScale (docs/deploy.md,
	// Sizing): on 50,000 pods the provisioner peaks near 250 MiB of heap
	// under its GOMEMLIMIT, 0.3 vCPU runs its ticks in 8 to 18 s.
	tickMemoryMiB = 512
	// The disruption function's full pass on 5,000 nodes holds near
	// 310 MiB under a 409 MiB GOMEMLIMIT, with the collector working
	// hard: 19 s of CPU, over a minute at 512 MiB's 0.3 vCPU. 1 GiB buys
	// 0.58 vCPU and room, about 26 s, at about the same GB-seconds (the
	// work is CPU-bound, and Lambda bills memory times time).
	disruptionMemoryMiB = 1024
	// The interruption batch launches replacements (a provisioning pass)
	// and drains: two snapshots, 10 s of CPU for 10 warnings on 5,000
	// nodes, 35 s at 512 MiB's share against its 60 s and the warning's
	// two minutes. At 1 GiB, about 18 s; batches are rare, so the cost is
	// small.
	interruptionMemoryMiB = 1024
	bootstrapMemoryMiB    = 256
	// The watcher only keeps watches (pods, nodes, one lease) and invokes
	// the provisioner; it builds no catalog.
	watcherMemoryMiB = 128

	// A tick runs once a minute and may keep a watch window open for most
	// of it; 70 s lets the last pass finish. The next tick, started while
	// it runs, finds the Lease held and returns at once.
	tickTimeout = 70 * time.Second
	// Interruption: one SQS batch. The queue's visibility timeout and
	// retention below are derived from it.
	interruptionTimeout = 60 * time.Second
	// Bootstrap: applies the CRDs and RBAC, waits for the CRDs to be
	// established, and answers CloudFormation.
	bootstrapTimeout = 5 * time.Minute
	// Watcher: started every minute, it watches for the minute and hands
	// over to the next one; 75 s lets the two overlap so that no moment
	// goes unwatched.
	watcherTimeout = 75 * time.Second
)

// Schedules and the interruption queue.
//
// The queue follows Lambda's guidance for SQS event sources ("Configuring
// a queue to use with Lambda", Lambda developer guide):
//
//   - visibility timeout at least six times the function's timeout, so that
//     Lambda can retry a batch that was throttled while another ran:
//     6 x 60 s = 360 s;
//   - maxReceiveCount at least 5, so that a transient failure is retried
//     before the message is set aside;
//   - a retention that outlives those receives. A message that fails every
//     time is received at 0, V, 2V, 3V and 4V after its first receive; the
//     receive that finds it over maxReceiveCount, and moves it to the
//     dead-letter queue, comes at 5 x 360 s = 1800 s. SQS counts retention
//     from the first enqueue, so the message must still exist then: 3600 s
//     leaves 1800 s (five more visibility timeouts) for the wait before the
//     first receive and poller back-off. (300 s, Karpenter's retention,
//     expired failing messages before their move: 5 x 70 s = 350 s.)
//
// Notices are time-critical (a spot warning gives two minutes), and 360 s
// is too long to wait for a retry: the interruption function makes a
// transiently failed message visible again after a few seconds with
// sqs:ChangeMessageVisibility. Only a crashed or timed-out batch waits the
// whole visibility timeout. A late retry is harmless: it finds the instance
// gone or its NodeClaim already deleting, and does nothing.
const (
	tickRate = time.Minute

	lambdaSQSVisibilityFactor = 6
	queueVisibility           = lambdaSQSVisibilityFactor * interruptionTimeout // 360 s
	maxReceiveCount           = 5
	queueRetention            = time.Hour // > maxReceiveCount x queueVisibility = 1800 s
	// SQS keeps a moved message's original enqueue time, so the dead-letter
	// queue must keep messages longer than the source queue; 14 days (the
	// maximum) leaves time to inspect them.
	dlqRetention = 14 * 24 * time.Hour

	interruptionBatchSize      = 10
	interruptionBatchingWindow = 1 * time.Second

	// The bootstrap custom resource: CloudFormation gives up waiting for an
	// answer after this (its default is an hour). Covers one run of the
	// function plus Lambda's two asynchronous retries.
	customResourceTimeout = 20 * time.Minute
)

// Construct IDs of the shared customer managed policies.
const (
	ReadPolicyID              = "ControllerReadPolicy"
	LaunchPolicyID            = "ControllerLaunchPolicy"
	InstanceProfilePolicyID   = "InstanceProfilePolicy"
	InstanceProfileGCPolicyID = "InstanceProfileGCPolicy"
	// VPCPolicyID: the network interfaces Lambda makes with each
	// function's role when the functions are placed in a VPC.
	VPCPolicyID = "FunctionsVPCPolicy"
)

// ControllersGroup is the Kubernetes group the controller functions'
// access entries map to; the bootstrap binds the Karpless ClusterRole to it.
const ControllersGroup = "karpless:controllers"

// WatcherGroup is the Kubernetes group the watcher's access entry maps to:
// read-only RBAC of its own (the bootstrap's bootstrap.WatcherGroup).
const WatcherGroup = "karpless:watcher"

// AWS managed policies of the node role (as in Karpenter's template).
var nodeRoleManagedPolicies = []string{
	"AmazonEKSWorkerNodePolicy",
	"AmazonEKS_CNI_Policy",
	"AmazonEC2ContainerRegistryPullOnly",
	"AmazonSSMManagedInstanceCore",
}

// Stack is the synthesized Karpless stack with handles on its main
// constructs (for tests and for callers that extend it).
type Stack struct {
	awscdk.Stack
	// Props as used, defaults applied.
	Props Props

	Functions map[string]awslambda.Function
	Roles     map[string]awsiam.Role
	LogGroups map[string]awslogs.LogGroup
	// NodeRole is the role of Props.NodeRoleName.
	NodeRole awsiam.IRole
	// NodeRoles holds every node role by name: NodeRole and the roles of
	// Props.NodeRoles.
	NodeRoles map[string]awsiam.IRole
	// NodeAccessEntries are the node roles' access entries, by role name
	// (none for a role whose entry is skipped).
	NodeAccessEntries map[string]awseks.CfnAccessEntry
	// ManagedPolicies are the customer managed policies shared by the
	// controller functions, by construct ID.
	ManagedPolicies map[string]awsiam.ManagedPolicy

	Queue           awssqs.Queue
	DeadLetterQueue awssqs.Queue
	// InterruptionRules maps a rule's construct ID to the rule.
	InterruptionRules map[string]awsevents.CfnRule
	// Schedules are the scheduled functions' EventBridge rules, by
	// function name.
	Schedules map[string]awsevents.Rule
	Bootstrap awscdk.CustomResource
	// AccessEntries are the functions' EKS access entries, by function name.
	AccessEntries map[string]awseks.CfnAccessEntry
	// Alarms, by construct ID (none with NoAlarms).
	Alarms map[string]awscloudwatch.Alarm
	// Dashboard is nil with NoDashboard.
	Dashboard awscloudwatch.Dashboard
}

// NewStack validates props and defines the stack. It returns an error, and
// defines nothing, if props are invalid.
func NewStack(scope constructs.Construct, id string, props Props) (*Stack, error) {
	props = props.withDefaults()
	if err := props.Validate(); err != nil {
		return nil, fmt.Errorf("karpless stack %q: %w", id, err)
	}

	stackProps := &awscdk.StackProps{
		Description: jsii.String(fmt.Sprintf("Karpless (Karpenter as Lambda functions) for EKS cluster %s", props.ClusterName)),
	}
	if props.Account != "" {
		stackProps.Env = &awscdk.Environment{
			Account: jsii.String(props.Account),
			Region:  jsii.String(props.Region),
		}
	}
	s := &Stack{
		Stack:             awscdk.NewStack(scope, jsii.String(id), stackProps),
		Props:             props,
		Functions:         map[string]awslambda.Function{},
		Roles:             map[string]awsiam.Role{},
		LogGroups:         map[string]awslogs.LogGroup{},
		ManagedPolicies:   map[string]awsiam.ManagedPolicy{},
		InterruptionRules: map[string]awsevents.CfnRule{},
		NodeRoles:         map[string]awsiam.IRole{},
		NodeAccessEntries: map[string]awseks.CfnAccessEntry{},
		Schedules:         map[string]awsevents.Rule{},
		AccessEntries:     map[string]awseks.CfnAccessEntry{},
		Alarms:            map[string]awscloudwatch.Alarm{},
	}
	awscdk.Tags_Of(s.Stack).Add(jsii.String("karpless:cluster"), jsii.String(props.ClusterName), nil)

	s.defineNodeRoles()
	s.defineQueue()
	if err := s.defineFunctions(); err != nil {
		return nil, fmt.Errorf("karpless stack %q: %w", id, err)
	}
	s.defineAccessEntries()
	if !props.NoAlarms {
		s.defineAlarms()
	}
	if !props.NoDashboard {
		s.defineDashboard()
	}
	s.defineOutputs()
	addNagSuppressions(s)
	return s, nil
}

func (s *Stack) cluster() string { return s.Props.ClusterName }

// defineNodeRoles creates (or imports) the roles nodes run with: the node
// role, then Props.NodeRoles. Construct IDs derive from role names, not
// positions, so reordering the list replaces nothing.
func (s *Stack) defineNodeRoles() {
	s.NodeRole = s.nodeRole("NodeRole", s.Props.NodeRoleName, s.Props.NodeRolePath, !s.Props.ImportNodeRole, "")
	s.NodeRoles[s.Props.NodeRoleName] = s.NodeRole
	for _, r := range s.Props.NodeRoles {
		kind := "Linux "
		if r.Windows {
			kind = "Windows "
		}
		s.NodeRoles[r.Name] = s.nodeRole("NodeRole-"+r.Name, r.Name, r.Path, r.Create, kind)
	}
}

// nodeRole creates the role name under path (or imports it when !create).
// kind goes into the description ("Windows ", or "" for the default node
// role). An imported role's ARN carries its path: iam:PassRole and the
// access entry are checked against the role's full ARN.
func (s *Stack) nodeRole(id, name, path string, create bool, kind string) awsiam.IRole {
	if path == "" {
		path = "/"
	}
	if !create {
		return awsiam.Role_FromRoleArn(s.Stack, jsii.String(id),
			sub("arn:${AWS::Partition}:iam::${AWS::AccountId}:role"+path+name), nil)
	}
	managed := make([]awsiam.IManagedPolicy, len(nodeRoleManagedPolicies))
	for i, name := range nodeRoleManagedPolicies {
		managed[i] = awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String(name))
	}
	return awsiam.NewRole(s.Stack, jsii.String(id), &awsiam.RoleProps{
		RoleName:        jsii.String(name),
		Path:            jsii.String(path),
		Description:     jsii.String("Role of the " + kind + "nodes Karpless launches for EKS cluster " + s.cluster()),
		AssumedBy:       ec2Principal(),
		ManagedPolicies: &managed,
	})
}

// ec2Principal is EC2 as the partition names it: ec2.amazonaws.com, and
// ec2.amazonaws.com.cn in the China regions, as Karpenter's template writes
// it (ec2.${AWS::URLSuffix}). CDK's ServicePrincipal would write
// ec2.amazonaws.com everywhere (aws-cdk-lib 2.270 standardizes every
// service principal), which the China regions' IAM console does not show
// for EC2 (aws/aws-cdk#24709).
func ec2Principal() awsiam.IPrincipal {
	return awsiam.ServicePrincipal_FromStaticServicePrincipleName(
		awscdk.Fn_Join(jsii.String(""), jsii.Strings("ec2.", *awscdk.Aws_URL_SUFFIX())))
}

// nodeRoleARNs are the ARNs of every node role, the node role first, then
// Props.NodeRoles in order.
func (s *Stack) nodeRoleARNs() []*string {
	out := []*string{s.NodeRole.RoleArn()}
	for _, r := range s.Props.NodeRoles {
		out = append(out, s.NodeRoles[r.Name].RoleArn())
	}
	return out
}

// defineQueue creates the interruption queue, its DLQ, the EventBridge
// rules feeding it and a queue policy that lets only those rules send.
func (s *Stack) defineQueue() {
	s.DeadLetterQueue = awssqs.NewQueue(s.Stack, jsii.String("InterruptionDeadLetterQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: duration(dlqRetention),
	})
	s.Queue = awssqs.NewQueue(s.Stack, jsii.String("InterruptionQueue"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   duration(queueRetention),
		VisibilityTimeout: duration(queueVisibility),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           s.DeadLetterQueue,
			MaxReceiveCount: jsii.Number(maxReceiveCount),
		},
	})

	patterns := []struct {
		id      string
		desc    string
		pattern cond
	}{
		{"SpotInterruptionRule", "EC2 Spot Instance Interruption Warning",
			cond{"source": []string{"aws.ec2"}, "detail-type": []string{"EC2 Spot Instance Interruption Warning"}}},
		{"RebalanceRule", "EC2 Instance Rebalance Recommendation",
			cond{"source": []string{"aws.ec2"}, "detail-type": []string{"EC2 Instance Rebalance Recommendation"}}},
		{"InstanceStateChangeRule", "EC2 Instance State-change Notification",
			cond{"source": []string{"aws.ec2"}, "detail-type": []string{"EC2 Instance State-change Notification"}}},
		{"CapacityReservationInterruptionRule", "EC2 Capacity Reservation Instance Interruption Warning",
			cond{"source": []string{"aws.ec2"}, "detail-type": []string{"EC2 Capacity Reservation Instance Interruption Warning"}}},
		// Karpless only (Karpenter polls the end dates instead): a Capacity
		// Block's instances are drained when EC2 warns of its end.
		{"CapacityBlockExpirationRule", "Capacity Block Reservation Expiration Warning",
			cond{"source": []string{"aws.ec2"}, "detail-type": []string{"Capacity Block Reservation Expiration Warning"}}},
		{"ScheduledChangeRule", "AWS Health scheduled changes of EC2",
			cond{
				"source":      []string{"aws.health"},
				"detail-type": []string{"AWS Health Event"},
				"detail": cond{
					"service":           []string{"EC2"},
					"eventTypeCategory": []string{"scheduledChange"},
				},
			}},
	}
	// A shadow stack's rules are disabled: no function reads the queue,
	// and messages kept for an hour would reach the interruption function
	// late once the stack turns active.
	ruleState := "ENABLED"
	if s.Props.Shadow() {
		ruleState = "DISABLED"
	}
	ruleARNs := make([]*string, 0, len(patterns))
	for _, p := range patterns {
		rule := awsevents.NewCfnRule(s.Stack, jsii.String(p.id), &awsevents.CfnRuleProps{
			Description:  jsii.String(fmt.Sprintf("Karpless %s: %s to the interruption queue", s.cluster(), p.desc)),
			EventPattern: p.pattern,
			State:        jsii.String(ruleState),
			Targets: &[]*awsevents.CfnRule_TargetProperty{{
				Id:  jsii.String("InterruptionQueue"),
				Arn: s.Queue.QueueArn(),
			}},
		})
		s.InterruptionRules[p.id] = rule
		ruleARNs = append(ruleARNs, rule.AttrArn())
	}

	// EventBridge may send, from these rules only ...
	s.Queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AllowEventBridgeRules"),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{s.Queue.QueueArn()},
		Conditions: &cond{"ArnEquals": cond{"aws:SourceArn": &ruleARNs}},
	}))
	// ... and nobody else, even with sqs:SendMessage in an identity policy.
	s.Queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DenySendExceptFromEventBridgeRules"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{s.Queue.QueueArn()},
		Conditions: &cond{"ArnNotEquals": cond{"aws:SourceArn": &ruleARNs}},
	}))
}

// function describes one Lambda function.
type function struct {
	name        string
	id          string // construct ID prefix
	description string
	memoryMiB   int
	timeout     time.Duration
	// reserved concurrency; 0 leaves it unreserved (Props.ReservedConcurrency).
	reserved int
	env      map[string]*string
	// managed: customer managed policies shared between functions.
	managed []awsiam.ManagedPolicy
	// inline: statements only this function needs.
	inline []awsiam.PolicyStatement
	// tick: invoked asynchronously by a schedule (every minute).
	tick bool
}

func (s *Stack) defineFunctions() error {
	cluster := s.cluster()

	policy := func(id, desc string, stmts []awsiam.PolicyStatement) awsiam.ManagedPolicy {
		mp := awsiam.NewManagedPolicy(s.Stack, jsii.String(id), &awsiam.ManagedPolicyProps{
			Description: jsii.String(fmt.Sprintf("Karpless %s: %s", cluster, desc)),
			Statements:  &stmts,
		})
		s.ManagedPolicies[id] = mp
		return mp
	}
	read := policy(ReadPolicyID, "discovery reads of the controller functions", readStatements(cluster, s.Props.SSMParameterPaths))
	// A shadow stack grants no mutating action at all: the functions'
	// transports refuse every mutation, and IAM would too.
	var launch, profiles, profilesGC awsiam.ManagedPolicy
	var queueConsumer []awsiam.PolicyStatement
	if !s.Props.Shadow() {
		launch = policy(LaunchPolicyID, "launch, tag and roll back this cluster's capacity", launchStatements(cluster, s.nodeRoleARNs()))
		profiles = policy(InstanceProfilePolicyID, "create and fill this cluster's instance profiles", instanceProfileStatements(cluster))
		profilesGC = policy(InstanceProfileGCPolicyID, "delete this cluster's instance profiles (EC2NodeClass finalizer, garbage collection)", instanceProfileGCStatements(cluster))
		queueConsumer = []awsiam.PolicyStatement{queueConsumerStatement(s.Queue.QueueArn())}
	}
	mutating := func(mps ...awsiam.ManagedPolicy) []awsiam.ManagedPolicy {
		out := []awsiam.ManagedPolicy{read}
		for _, mp := range mps {
			if mp != nil {
				out = append(out, mp)
			}
		}
		return out
	}

	clusterEnv := jsii.String(cluster)
	nodeRoleEnv := jsii.String(s.Props.NodeRoleName)
	metricsEnv := jsii.String(s.Props.MetricsLevel)
	// The settings people used to edit on the functions are context keys
	// (Props), written here whatever their value: a deploy sets them to
	// what the context says, never back to a default it does not show.
	batchIdleEnv := jsii.String(s.Props.BatchIdleDuration.String())
	batchMaxEnv := jsii.String(s.Props.BatchMaxDuration.String())
	// The controllers simulate alike: the provisioner, the disruption
	// function's replacements and the interruption function's.
	controllerEnv := func(env map[string]*string) map[string]*string {
		for k, v := range s.controllerSettings() {
			env[k] = v
		}
		return env
	}
	// enableZonalShift: the three read the cluster's zonal shifts, and
	// only they, and only then, may.
	controllerInline := func(stmts ...awsiam.PolicyStatement) []awsiam.PolicyStatement {
		if s.Props.EnableZonalShift {
			stmts = append(stmts, zonalShiftStatement(cluster))
		}
		return stmts
	}
	fns := []function{
		{
			name: Provisioner, id: "Provisioner", tick: true,
			description: "Karpless provisioner: pending pods to NodeClaims to EC2 capacity",
			memoryMiB:   tickMemoryMiB, timeout: tickTimeout, reserved: s.Props.ReservedConcurrency,
			env: controllerEnv(map[string]*string{
				"CLUSTER_NAME": clusterEnv, "NODE_ROLE_NAME": nodeRoleEnv, "METRICS_LEVEL": metricsEnv,
				"BATCH_IDLE_DURATION": batchIdleEnv, "BATCH_MAX_DURATION": batchMaxEnv,
				"RESPONSIVENESS": jsii.String(s.Props.Responsiveness),
			}),
			// profilesGC: the provisioner runs the EC2NodeClass finalizer,
			// which deletes a deleted class's instance profiles.
			managed: mutating(launch, profiles, profilesGC),
			inline:  controllerInline(),
		},
		{
			name: Disruption, id: "Disruption", tick: true,
			description: "Karpless disruption: expiry, drift, consolidation, termination, garbage collection",
			memoryMiB:   disruptionMemoryMiB, timeout: tickTimeout, reserved: s.Props.ReservedConcurrency,
			env: controllerEnv(map[string]*string{
				"CLUSTER_NAME": clusterEnv, "NODE_ROLE_NAME": nodeRoleEnv, "METRICS_LEVEL": metricsEnv,
				"SPOT_TO_SPOT_CONSOLIDATION": jsii.String(fmt.Sprint(s.Props.SpotToSpotConsolidation)),
				"NODE_REPAIR":                jsii.String(fmt.Sprint(s.Props.NodeRepair)),
			}),
			managed: mutating(launch, profiles, profilesGC),
			inline:  controllerInline(instanceStatusStatement()),
		},
		{
			name: Interruption, id: "Interruption",
			description: "Karpless interruption: spot, rebalance, state-change and health events",
			memoryMiB:   interruptionMemoryMiB, timeout: interruptionTimeout,
			env: controllerEnv(map[string]*string{
				"CLUSTER_NAME":           clusterEnv,
				"NODE_ROLE_NAME":         nodeRoleEnv,
				"INTERRUPTION_QUEUE_URL": s.Queue.QueueUrl(),
				"METRICS_LEVEL":          metricsEnv,
			}),
			managed: mutating(launch),
			inline:  controllerInline(queueConsumer...),
		},
		{
			name: Bootstrap, id: "Bootstrap",
			description: "Karpless bootstrap: installs CRDs, RBAC and defaults (CloudFormation custom resource)",
			memoryMiB:   bootstrapMemoryMiB, timeout: bootstrapTimeout,
			env:    s.bootstrapEnv(),
			inline: []awsiam.PolicyStatement{describeClusterStatement(cluster), describeOwnStackStatement()},
		},
	}

	var vpc *awslambda.CfnFunction_VpcConfigProperty
	var vpcPolicy []awsiam.ManagedPolicy
	if s.Props.InVPC() {
		vpc = s.vpcConfig()
		// Every function runs in the VPC: Lambda makes its network
		// interfaces with its role.
		vpcPolicy = append(vpcPolicy, policy(VPCPolicyID, "the functions' network interfaces in their subnets", vpcStatements(s.Props.SubnetIDs, *vpc.SecurityGroupIds)))
		for i := range fns {
			fns[i].managed = append(fns[i].managed, vpcPolicy...)
		}
	}

	for _, f := range fns {
		s.defineFunction(f, vpc)
	}
	scheduled := []string{Provisioner, Disruption}
	if s.Props.Continuous() {
		// The watcher invokes the provisioner asynchronously, by its ARN:
		// it may invoke that function and no other.
		s.defineFunction(function{
			name: Watcher, id: "Watcher", tick: true,
			description: "Karpless watcher: watches pending pods and new nodes between ticks, invokes the provisioner when work appears",
			memoryMiB:   watcherMemoryMiB, timeout: watcherTimeout,
			env: map[string]*string{
				"CLUSTER_NAME":              clusterEnv,
				"PROVISIONER_FUNCTION_NAME": s.Functions[Provisioner].FunctionName(),
				"BATCH_IDLE_DURATION":       batchIdleEnv, "BATCH_MAX_DURATION": batchMaxEnv,
			},
			managed: vpcPolicy,
			inline: []awsiam.PolicyStatement{
				describeClusterStatement(cluster),
				invokeStatement(s.Functions[Provisioner].FunctionArn()),
			},
		}, vpc)
		scheduled = append(scheduled, Watcher)
	}

	// Schedules: one invocation a minute each. Throttled or failed ones
	// are not retried (the next one takes over) and are dropped after a
	// minute (the alarms count them).
	for _, name := range scheduled {
		fn := s.Functions[name]
		s.Schedules[name] = awsevents.NewRule(s.Stack, jsii.String(titleID(name)+"Schedule"), &awsevents.RuleProps{
			Description: jsii.String(fmt.Sprintf("Karpless %s: %s tick", cluster, name)),
			Schedule:    awsevents.Schedule_Rate(duration(tickRate)),
			Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
				RetryAttempts: jsii.Number(0),
				MaxEventAge:   duration(time.Minute),
			})},
		})
	}

	if s.Props.Shadow() {
		// Shadow: the interruption function reads no queue. Karpenter
		// consumes its own queue; this stack's rules are disabled, so
		// nothing collects here that a later active deploy would act on
		// late.
		return s.defineBootstrap()
	}
	// Interruption: SQS event source with partial batch responses. The
	// mapping needs the SQS permissions in place when it is created.
	esm := awslambda.NewEventSourceMapping(s.Stack, jsii.String("InterruptionEventSource"), &awslambda.EventSourceMappingProps{
		Target:                  s.Functions[Interruption],
		EventSourceArn:          s.Queue.QueueArn(),
		BatchSize:               jsii.Number(interruptionBatchSize),
		MaxBatchingWindow:       duration(interruptionBatchingWindow),
		ReportBatchItemFailures: jsii.Bool(true),
	})
	esm.Node().AddDependency(s.Roles[Interruption])

	return s.defineBootstrap()
}

// vpcConfig returns the functions' VPC placement, creating a security group
// (outbound HTTPS only) when none is given.
func (s *Stack) vpcConfig() *awslambda.CfnFunction_VpcConfigProperty {
	sgs := jsii.Strings(s.Props.SecurityGroupIDs...)
	if len(s.Props.SecurityGroupIDs) == 0 {
		sg := awsec2.NewCfnSecurityGroup(s.Stack, jsii.String("FunctionsSecurityGroup"), &awsec2.CfnSecurityGroupProps{
			GroupDescription: jsii.String("Karpless functions of " + s.cluster() + ": HTTPS to the EKS and AWS APIs"),
			VpcId:            jsii.String(s.Props.VpcID),
			SecurityGroupEgress: &[]*awsec2.CfnSecurityGroup_EgressProperty{{
				Description: jsii.String("HTTPS to the Kubernetes API and AWS endpoints"),
				IpProtocol:  jsii.String("tcp"),
				FromPort:    jsii.Number(443),
				ToPort:      jsii.Number(443),
				CidrIp:      jsii.String("0.0.0.0/0"),
			}},
		})
		sgs = &[]*string{sg.AttrGroupId()}
	}
	return &awslambda.CfnFunction_VpcConfigProperty{
		SubnetIds:        jsii.Strings(s.Props.SubnetIDs...),
		SecurityGroupIds: sgs,
	}
}

func (s *Stack) defineFunction(f function, vpc *awslambda.CfnFunction_VpcConfigProperty) {
	id := f.id
	logGroup := awslogs.NewLogGroup(s.Stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     retention(s.Props.LogRetentionDays),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	s.LogGroups[f.name] = logGroup

	role := awsiam.NewRole(s.Stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		Description: jsii.String(fmt.Sprintf("Karpless %s function of EKS cluster %s", f.name, s.cluster())),
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
	for _, mp := range f.managed {
		role.AddManagedPolicy(mp)
	}
	role.AddToPrincipalPolicy(logStatement(logGroup.LogGroupArn()))
	for _, st := range f.inline {
		role.AddToPrincipalPolicy(st)
	}
	s.Roles[f.name] = role

	env := map[string]*string{
		// A soft limit below the function's memory: the GC works harder
		// near it instead of letting Lambda kill the function.
		"GOMEMLIMIT": jsii.String(fmt.Sprintf("%dMiB", f.memoryMiB*8/10)),
	}
	for k, v := range f.env {
		env[k] = v
	}
	for k, v := range s.commonSettings() {
		env[k] = v
	}
	props := &awslambda.FunctionProps{
		Description:  jsii.String(f.description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(s.Props.AssetsDir, f.name)), nil),
		Role:         role,
		LogGroup:     logGroup,
		MemorySize:   jsii.Number(f.memoryMiB),
		Timeout:      duration(f.timeout),
		Environment:  &env,
	}
	if f.reserved > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(f.reserved)
	}
	if f.tick {
		props.RetryAttempts = jsii.Number(0)
		props.MaxEventAge = duration(time.Minute)
	}
	fn := awslambda.NewFunction(s.Stack, jsii.String(id+"Function"), props)
	if vpc != nil {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetVpcConfig(vpc)
	}
	s.Functions[f.name] = fn
}

// commonSettings are every function's settings: how it reaches the
// cluster, where its state lives, how much it logs and whether it acts.
// Each is written on every deploy (a context key absent is its default),
// so a value edited on a function does not outlive the next deploy. The
// endpoint and CA are written only when set: a deploy without them
// removes them, and the functions read both from EKS.
func (s *Stack) commonSettings() map[string]*string {
	env := map[string]*string{
		"LOG_LEVEL":          jsii.String(s.Props.LogLevel),
		"MODE":               jsii.String(s.Props.Mode),
		"KARPLESS_NAMESPACE": jsii.String(s.Props.Namespace),
		"KUBE_CLIENT_QPS":    jsii.String(fmt.Sprint(s.Props.KubeClientQPS)),
		"KUBE_CLIENT_BURST":  jsii.String(fmt.Sprint(s.Props.KubeClientBurst)),
	}
	if s.Props.ClusterEndpoint != "" {
		env["CLUSTER_ENDPOINT"] = jsii.String(s.Props.ClusterEndpoint)
		env["CLUSTER_CA_DATA"] = jsii.String(s.Props.ClusterCABundle)
	}
	return env
}

// controllerSettings are Karpenter's scheduling and catalog settings, the
// same on the three functions that simulate (provisioner, disruption,
// interruption), as Karpenter's one controller reads them once.
func (s *Stack) controllerSettings() map[string]*string {
	env := map[string]*string{
		"PREFERENCE_POLICY":          jsii.String(s.Props.PreferencePolicy),
		"MIN_VALUES_POLICY":          jsii.String(s.Props.MinValuesPolicy),
		"RESERVED_ENIS":              jsii.String(fmt.Sprint(s.Props.ReservedENIs)),
		"VM_MEMORY_OVERHEAD_PERCENT": jsii.String(strconv.FormatFloat(*s.Props.VMMemoryOverheadPercent, 'f', -1, 64)),
		"ISOLATED_VPC":               jsii.String(fmt.Sprint(s.Props.IsolatedVPC)),
		"AMI_REFRESH_INTERVAL":       jsii.String(s.Props.AMIRefreshInterval.String()),
		"SUBNET_REFRESH_INTERVAL":    jsii.String(s.Props.SubnetRefreshInterval.String()),
		"ENABLE_ZONAL_SHIFT":         jsii.String(fmt.Sprint(s.Props.EnableZonalShift)),
	}
	if s.Props.EnableZonalShift {
		env["CLUSTER_ARN"] = clusterARN(s.cluster())
	}
	return env
}

// bootstrapEnv is the bootstrap function's settings: what it installs
// and removes is read from here, never from the CloudFormation event, so
// invoking the function cannot choose it (bootstrap.OptionsFrom).
// STACK_ID names the one stack whose requests it answers.
func (s *Stack) bootstrapEnv() map[string]*string {
	return map[string]*string{
		"CLUSTER_NAME":                  jsii.String(s.cluster()),
		"STACK_ID":                      awscdk.Aws_STACK_ID(),
		"NODE_ROLE_NAME":                jsii.String(s.Props.NodeRoleName),
		"INSTALL_DEFAULT_NODEPOOL":      jsii.String(fmt.Sprint(s.Props.InstallDefaultNodePool)),
		"REMOVE_USER_OBJECTS_ON_DELETE": jsii.String(fmt.Sprint(s.Props.RemoveUserObjectsOnDelete)),
		"PAUSED":                        jsii.String(fmt.Sprint(s.Props.Paused)),
		"CONTROLLERS_GROUP":             jsii.String(ControllersGroup),
	}
}

// BootstrapOptions are the options the bootstrap function reads from the
// environment the stack gives it (bootstrapEnv and the commonSettings
// every function gets).
func (s *Stack) BootstrapOptions() (bootstrap.Options, error) {
	env := map[string]string{}
	for k, v := range s.commonSettings() {
		env[k] = *v
	}
	for k, v := range s.bootstrapEnv() {
		env[k] = *v
	}
	cfg, err := fnconfig.FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return bootstrap.Options{}, fmt.Errorf("the bootstrap function's settings: %w", err)
	}
	return bootstrap.OptionsFrom(cfg), nil
}

// defineBootstrap adds the custom resource the bootstrap function answers.
// A plain Lambda-backed custom resource: the Go function replies to
// CloudFormation itself, so no Provider framework and no Node.js
// function. Its properties are only hashes: a change of any makes
// CloudFormation send an Update, and the function acts on one only when
// SettingsHash is that of its own settings.
func (s *Stack) defineBootstrap() error {
	// Any new bootstrap binary (new CRDs, RBAC or defaults embedded in it)
	// changes this property, so CloudFormation sends an Update and the
	// function re-applies everything, even when crdHash was not bumped.
	binary, err := fileSHA256(filepath.Join(s.Props.AssetsDir, Bootstrap, "bootstrap"))
	if err != nil {
		return err
	}
	opts, err := s.BootstrapOptions()
	if err != nil {
		return err
	}
	properties := map[string]interface{}{
		bootstrap.SettingsHashProperty: opts.SettingsHash(),
		"CRDHash":                      s.Props.CRDHash,
		"BootstrapSHA256":              binary,
	}
	s.Bootstrap = awscdk.NewCustomResource(s.Stack, jsii.String("Bootstrap"), &awscdk.CustomResourceProps{
		ServiceToken:   s.Functions[Bootstrap].FunctionArn(),
		ServiceTimeout: duration(customResourceTimeout),
		Properties:     &properties,
	})
	// CDK renders ServiceTimeout as a string; CloudFormation's schema says
	// integer.
	s.Bootstrap.Node().DefaultChild().(awscdk.CfnResource).AddPropertyOverride(
		jsii.String("ServiceTimeout"), jsii.Number(customResourceTimeout.Seconds()))
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// defineAccessEntries maps the functions' roles (and the node role) into
// the cluster through EKS access entries, without aws-auth.
func (s *Stack) defineAccessEntries() {
	cluster := jsii.String(s.cluster())
	for _, name := range []string{Provisioner, Disruption, Interruption, Watcher} {
		group := ControllersGroup
		if name == Watcher {
			if !s.Props.Continuous() {
				continue
			}
			// Read-only: the bootstrap binds its own RBAC to this group.
			group = WatcherGroup
		}
		s.AccessEntries[name] = awseks.NewCfnAccessEntry(s.Stack, jsii.String(titleID(name)+"AccessEntry"), &awseks.CfnAccessEntryProps{
			ClusterName:      cluster,
			PrincipalArn:     s.Roles[name].RoleArn(),
			Type:             jsii.String("STANDARD"),
			Username:         jsii.String("karpless:" + name),
			KubernetesGroups: jsii.Strings(group),
		})
	}

	// The bootstrap function installs CRDs and RBAC: cluster admin, through
	// an access policy bound to a role only that function assumes.
	bootstrapEntry := awseks.NewCfnAccessEntry(s.Stack, jsii.String("BootstrapAccessEntry"), &awseks.CfnAccessEntryProps{
		ClusterName:  cluster,
		PrincipalArn: s.Roles[Bootstrap].RoleArn(),
		Type:         jsii.String("STANDARD"),
		Username:     jsii.String("karpless:bootstrap"),
		AccessPolicies: &[]*awseks.CfnAccessEntry_AccessPolicyProperty{{
			PolicyArn:   sub("arn:${AWS::Partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"),
			AccessScope: &awseks.CfnAccessEntry_AccessScopeProperty{Type: jsii.String("cluster")},
		}},
	})
	// The custom resource runs with that access, and on stack deletion
	// runs (its Delete) before the access goes away.
	s.Bootstrap.Node().AddDependency(bootstrapEntry)

	// Node roles: EC2_LINUX or EC2_WINDOWS, the type EKS maps to the
	// node's groups (Windows nodes also get eks:kube-proxy-windows). The
	// node role keeps its construct ID from before there were several.
	//
	// The entry of a role the stack imports outlives the stack (DeletionPolicy
	// Retain): nodes of that role, Karpenter's too after a rollback, need it
	// to stay in the cluster, and cdk destroy must not cut them off. A
	// redeploy then passes skipNodeAccessEntry (karpless migrate check says
	// so). The entry of a role the stack creates goes with the role.
	node := func(id, role string, typ string, imported bool) {
		entry := awseks.NewCfnAccessEntry(s.Stack, jsii.String(id), &awseks.CfnAccessEntryProps{
			ClusterName:  cluster,
			PrincipalArn: s.NodeRoles[role].RoleArn(),
			Type:         jsii.String(typ),
		})
		if imported {
			entry.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN, nil)
		}
		s.NodeAccessEntries[role] = entry
		// Nodes of a default NodePool can join as soon as it exists, and
		// on deletion the bootstrap's Delete (which may remove the user's
		// NodeClaims) runs while nodes can still reach the cluster.
		s.Bootstrap.Node().AddDependency(entry)
	}
	if !s.Props.SkipNodeAccessEntry {
		node("NodeAccessEntry", s.Props.NodeRoleName, "EC2_LINUX", s.Props.ImportNodeRole)
	}
	for _, r := range s.Props.NodeRoles {
		if !r.SkipAccessEntry {
			node("NodeAccessEntry-"+r.Name, r.Name, r.AccessEntryType(), !r.Create)
		}
	}
}

func (s *Stack) defineOutputs() {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out("InterruptionQueueUrl", s.Queue.QueueUrl(), "URL of the interruption queue")
	out("InterruptionQueueName", s.Queue.QueueName(), "name of the interruption queue")
	out("NodeRoleName", jsii.String(s.Props.NodeRoleName), "IAM role for EC2NodeClass spec.role")
	if len(s.Props.NodeRoles) > 0 {
		var linux, windows []string
		for _, r := range s.Props.NodeRoles {
			if r.Windows {
				windows = append(windows, r.Name)
			} else {
				linux = append(linux, r.Name)
			}
		}
		if len(linux) > 0 {
			out("LinuxNodeRoleNames", jsii.String(strings.Join(linux, ",")), "further IAM roles for EC2NodeClass spec.role (Linux nodes)")
		}
		if len(windows) > 0 {
			out("WindowsNodeRoleNames", jsii.String(strings.Join(windows, ",")), "IAM roles for EC2NodeClass spec.role of Windows nodes")
		}
	}
	names := make([]string, 0, len(s.Functions))
	for name := range s.Functions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out(titleID(name)+"FunctionName", s.Functions[name].FunctionName(), "Lambda function "+name)
	}
}

func titleID(name string) string {
	if name == "" {
		return ""
	}
	return string(name[0]-'a'+'A') + name[1:]
}

func duration(d time.Duration) awscdk.Duration {
	if d%time.Minute == 0 {
		return awscdk.Duration_Minutes(jsii.Number(d.Minutes()))
	}
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// retention maps a validated number of days to CDK's enum.
func retention(days int) awslogs.RetentionDays {
	return map[int]awslogs.RetentionDays{
		1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS,
		5: awslogs.RetentionDays_FIVE_DAYS, 7: awslogs.RetentionDays_ONE_WEEK,
		14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
		60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS,
		120: awslogs.RetentionDays_FOUR_MONTHS, 150: awslogs.RetentionDays_FIVE_MONTHS,
		180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
		400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS,
		731: awslogs.RetentionDays_TWO_YEARS, 1096: awslogs.RetentionDays_THREE_YEARS,
		1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
		2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS,
		3288: awslogs.RetentionDays_NINE_YEARS, 3653: awslogs.RetentionDays_TEN_YEARS,
	}[days]
}
