package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/core/migrate"
)

// The AWS half of karpless migrate check: read-only calls (STS
// GetCallerIdentity, EKS DescribeCluster, ListAccessEntries and
// DescribeAccessEntry, IAM GetRole, GetInstanceProfile and GetPolicy, SQS
// GetQueueUrl and GetQueueAttributes, EventBridge ListRuleNamesByTarget),
// with the SDK's usual configuration (profile, environment, region).

// cliAWSAttempts is how often the check tries each AWS call, backing off
// at most cliAWSMaxBackoff (tests shorten it: the emulator does not care
// how fast it is retried).
const cliAWSAttempts = 10

var cliAWSMaxBackoff = awsconfig.MaxBackoff

type awsClients struct {
	eks    *eks.Client
	iam    *iam.Client
	sqs    *sqs.Client
	sts    *sts.Client
	events *eventbridge.Client
}

// checkAWS runs the AWS checks; what cannot be checked is a WARN that
// says why.
func checkAWS(ctx context.Context, f migrateFlags, in *clusterInput) []migrate.Result {
	cluster := f.name
	if cluster == "" {
		cluster, _ = in.karpenterEnv("CLUSTER_NAME")
	}
	region := f.region
	if region == "" {
		region, _ = in.karpenterEnv("AWS_REGION")
	}
	notChecked := func(why error) []migrate.Result {
		return []migrate.Result{
			{Check: migrate.NameAccessEntry, Status: migrate.Warn, Subject: "node roles", Detail: "not checked: " + why.Error()},
			{Check: migrate.NameIAM, Status: migrate.Warn, Subject: "KarpenterController*Policy-<cluster>", Detail: "not checked: " + why.Error()},
			{Check: migrate.NameQueue, Status: migrate.Warn, Subject: "Karpenter's interruption queue", Detail: "not checked: " + why.Error()},
		}
	}
	if cluster == "" {
		return notChecked(errors.New("the cluster's name is unknown (no Karpenter Deployment with CLUSTER_NAME): pass --cluster-name, or --aws=false"))
	}
	// Try the SDK's own region first (AWS_REGION, the profile), then
	// Karpenter's.
	cfg, err := awsconfig.Load(ctx, f.region)
	if err != nil && f.region == "" && region != "" {
		cfg, err = awsconfig.Load(ctx, region)
	}
	if err != nil {
		return notChecked(fmt.Errorf("%v: pass --region, set AWS credentials, or --aws=false", err))
	}
	// A person waits for this answer: outlast the throttling bursts that a
	// function's tick (awsconfig's few attempts) leaves to its next tick.
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = cliAWSAttempts
			o.MaxBackoff = cliAWSMaxBackoff
			o.RateLimiter = ratelimit.None
		})
	}
	c := awsClients{eks: eks.NewFromConfig(cfg), iam: iam.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg), sts: sts.NewFromConfig(cfg), events: eventbridge.NewFromConfig(cfg)}
	who, err := c.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return notChecked(fmt.Errorf("AWS credentials: %v", short(err)))
	}
	partition := "aws"
	if a, err := arn.Parse(aws.ToString(who.Arn)); err == nil {
		partition = a.Partition
	}
	account := aws.ToString(who.Account)

	var out []migrate.Result
	out = append(out, migrate.CheckAccessEntries(nodeRoleEntries(ctx, c, f, in, cluster))...)
	policies, err := controllerPolicies(ctx, c, partition, account, cluster)
	out = append(out, migrate.CheckControllerPolicies(cluster, policies, err))
	out = append(out, migrate.CheckQueue(karpenterQueue(ctx, c, f, in, cluster)))
	return out
}

// nodeRoleEntries finds the access entry of each node role: those given
// with --node-role, else those the EC2NodeClasses use.
func nodeRoleEntries(ctx context.Context, c awsClients, f migrateFlags, in *clusterInput, cluster string) []migrate.NodeRoleEntry {
	roles := map[string]string{}
	if f.nodeRoles != "" {
		for _, r := range splitList(f.nodeRoles) {
			// A role's ARN names it after its path.
			if strings.HasPrefix(r, "arn:") {
				r = r[strings.LastIndexByte(r, '/')+1:]
			}
			roles[r] = "--node-role"
		}
	} else {
		for r, where := range in.nodeRoles {
			roles[r] = where
		}
		for _, p := range sortedKeys(in.profiles) {
			out, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(p)})
			if err != nil || len(out.InstanceProfile.Roles) == 0 {
				continue
			}
			if r := aws.ToString(out.InstanceProfile.Roles[0].RoleName); roles[r] == "" {
				roles[r] = in.profiles[p] + " (instance profile " + p + ")"
			}
		}
	}
	if len(roles) == 0 {
		return nil
	}
	authMode := ""
	if d, err := c.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(cluster)}); err == nil && d.Cluster.AccessConfig != nil {
		authMode = string(d.Cluster.AccessConfig.AuthenticationMode)
	}
	var principals []string
	p := eks.NewListAccessEntriesPaginator(c.eks, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster)})
	var listErr error
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			listErr = fmt.Errorf("eks:ListAccessEntries on cluster %s: %v", cluster, short(err))
			break
		}
		principals = append(principals, page.AccessEntries...)
	}
	var out []migrate.NodeRoleEntry
	for _, role := range sortedKeys(roles) {
		e := migrate.NodeRoleEntry{Role: role, Where: roles[role], AuthMode: authMode}
		e.InAWSAuth = strings.Contains(in.awsAuth, ":role/"+role+"\n") || strings.Contains(in.awsAuth, "/"+role+"\n") ||
			strings.HasSuffix(strings.TrimSpace(in.awsAuth), "/"+role)
		got, err := c.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
		switch {
		case err != nil:
			e.Err = fmt.Errorf("iam:GetRole: %v", short(err))
		case listErr != nil:
			e.ARN, e.Err = aws.ToString(got.Role.Arn), listErr
		default:
			e.ARN = aws.ToString(got.Role.Arn)
			// An entry names the role's ARN, with or without its path.
			for _, pr := range principals {
				if pr == e.ARN || strings.HasSuffix(pr, ":role/"+role) {
					d, err := c.eks.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(pr)})
					if err != nil {
						e.Err = fmt.Errorf("eks:DescribeAccessEntry: %v", short(err))
						break
					}
					e.Found, e.Type = true, aws.ToString(d.AccessEntry.Type)
					e.Stack = d.AccessEntry.Tags["aws:cloudformation:stack-name"]
					break
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// controllerPolicies looks up each of Karpenter's controller policies by
// ARN.
func controllerPolicies(ctx context.Context, c awsClients, partition, account, cluster string) ([]migrate.Policy, error) {
	var found []migrate.Policy
	for _, name := range migrate.ControllerPolicyNames(cluster) {
		a := fmt.Sprintf("arn:%s:iam::%s:policy/%s", partition, account, name)
		out, err := c.iam.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(a)})
		var nse *iamtypes.NoSuchEntityException
		switch {
		case errors.As(err, &nse):
			continue
		case err != nil:
			return found, fmt.Errorf("iam:GetPolicy %s: %v", name, short(err))
		}
		found = append(found, migrate.Policy{Name: name, ARN: a, Attachments: int(aws.ToInt32(out.Policy.AttachmentCount))})
	}
	return found, nil
}

// karpenterQueue reads Karpenter's interruption queue and the rules that
// target it.
func karpenterQueue(ctx context.Context, c awsClients, f migrateFlags, in *clusterInput, cluster string) migrate.Queue {
	name, readBy := f.queue, ""
	if v, d := in.karpenterEnv("INTERRUPTION_QUEUE"); name == "" || name == v {
		if name == "" {
			name = v
		}
		readBy = d
	}
	if name == "" {
		name = cluster
	}
	q := migrate.Queue{Name: name, Messages: -1}
	if readBy != "" {
		for _, d := range in.deployments {
			if "Deployment "+d.Namespace+"/"+d.Name == readBy && d.Replicas == 0 && d.Ready == 0 {
				readBy = "" // scaled to zero: nobody reads it now
			}
		}
	}
	q.ReadBy = readBy
	u, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	var missing *sqstypes.QueueDoesNotExist
	switch {
	case errors.As(err, &missing):
		return q
	case err != nil:
		q.Err = fmt.Errorf("sqs:GetQueueUrl: %v", short(err))
		return q
	}
	q.Exists = true
	attrs, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		q.Err = fmt.Errorf("sqs:GetQueueAttributes: %v", short(err))
		return q
	}
	q.ARN = attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if n, err := strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]); err == nil {
		q.Messages = n
	}
	var next *string
	for {
		out, err := c.events.ListRuleNamesByTarget(ctx, &eventbridge.ListRuleNamesByTargetInput{TargetArn: aws.String(q.ARN), NextToken: next})
		if err != nil {
			q.Err = fmt.Errorf("events:ListRuleNamesByTarget: %v", short(err))
			return q
		}
		q.Rules = append(q.Rules, out.RuleNames...)
		if next = out.NextToken; next == nil {
			return q
		}
	}
}

// short is an AWS error as code and message, without the SDK's wrapping.
func short(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}
