package emulator

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestAccessEntries: ListAccessEntries and DescribeAccessEntry through the
// real EKS client, a role ARN with a path included.
func TestAccessEntries(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := eks.NewFromConfig(sdkConfig(t, e, 1))
	ctx := context.Background()
	cluster := e.ClusterName()
	node := fmt.Sprintf("arn:aws:iam::%s:role/%s", DefaultAccountID, NodeRoleName(cluster))
	pathed := fmt.Sprintf("arn:aws:iam::%s:role/team/a/nodes", DefaultAccountID)

	out, err := c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster)})
	if err != nil || len(out.AccessEntries) != 0 {
		t.Fatalf("seeded world: %v %v", out, err)
	}
	e.AddAccessEntry(AccessEntry{PrincipalARN: node, Type: "EC2_LINUX", Tags: map[string]string{"aws:cloudformation:stack-name": "karpless-demo"}})
	e.AddAccessEntry(AccessEntry{PrincipalARN: pathed, KubernetesGroups: []string{"team-a"}})

	out, err = c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster), MaxResults: aws.Int32(1)})
	if err != nil || len(out.AccessEntries) != 1 || out.NextToken == nil {
		t.Fatalf("first page: %+v %v", out, err)
	}
	var all []string
	p := eks.NewListAccessEntriesPaginator(c, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster), MaxResults: aws.Int32(1)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.AccessEntries...)
	}
	if len(all) != 2 || all[0] != node || all[1] != pathed {
		t.Errorf("entries: %v", all)
	}

	d, err := c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(node)})
	if err != nil {
		t.Fatal(err)
	}
	a := d.AccessEntry
	if aws.ToString(a.Type) != "EC2_LINUX" || aws.ToString(a.PrincipalArn) != node || aws.ToString(a.ClusterName) != cluster ||
		aws.ToString(a.Username) != "system:node:{{EC2PrivateDNSName}}" || a.Tags["aws:cloudformation:stack-name"] != "karpless-demo" ||
		a.CreatedAt == nil || aws.ToString(a.AccessEntryArn) == "" {
		t.Errorf("entry decoded wrong: %+v", a)
	}
	d, err = c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(pathed)})
	if err != nil || aws.ToString(d.AccessEntry.Type) != "STANDARD" || len(d.AccessEntry.KubernetesGroups) != 1 {
		t.Fatalf("pathed role: %+v %v", d, err)
	}

	e.RemoveAccessEntry(node)
	_, err = c.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(node)})
	var nf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("removed entry: %v", err)
	}
	_, err = c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("nope")})
	if !errors.As(err, &nf) {
		t.Errorf("unknown cluster: %v", err)
	}
	_, err = c.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String(cluster), NextToken: aws.String("garbage")})
	var ip *ekstypes.InvalidParameterException
	if !errors.As(err, &ip) {
		t.Errorf("bad token: %v", err)
	}
}

// TestGetPolicy: IAM GetPolicy through the real client.
func TestGetPolicy(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := iam.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	arn := e.AddPolicy("KarpenterControllerNodeLifecyclePolicy-demo", "", 1)
	out, err := c.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Policy
	if aws.ToString(p.PolicyName) != "KarpenterControllerNodeLifecyclePolicy-demo" || aws.ToString(p.Arn) != arn || aws.ToInt32(p.AttachmentCount) != 1 ||
		!p.IsAttachable || aws.ToString(p.DefaultVersionId) != "v1" || aws.ToString(p.Path) != "/" || p.CreateDate == nil {
		t.Errorf("policy decoded wrong: %+v", p)
	}
	e.RemovePolicy(arn)
	_, err = c.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(arn)})
	var nse *iamtypes.NoSuchEntityException
	if !errors.As(err, &nse) {
		t.Errorf("removed: %v", err)
	}
	_, err = c.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String("not-an-arn")})
	var ii *iamtypes.InvalidInputException
	if !errors.As(err, &ii) {
		t.Errorf("malformed: %v", err)
	}
}

// TestListRuleNamesByTarget: EventBridge through the real client.
func TestListRuleNamesByTarget(t *testing.T) {
	e, _ := newTestEmulator(t)
	c := eventbridge.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	q := sqs.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	queueARN := fmt.Sprintf("arn:aws:sqs:%s:%s:%s", e.Region(), DefaultAccountID, e.ClusterName())
	for _, name := range []string{"karpenter-SpotInterruptionRule-1", "karpenter-RebalanceRule-2", "karpenter-ScheduledChangeRule-3"} {
		e.PutRule(Rule{Name: name, EventPattern: `{"source":["aws.ec2"]}`, Targets: map[string]string{"KarpenterInterruptionQueueTarget": queueARN}})
	}
	e.PutRule(Rule{Name: "other", Targets: map[string]string{"t": "arn:aws:sqs:us-west-2:1:other"}})

	out, err := c.ListRuleNamesByTarget(ctx, &eventbridge.ListRuleNamesByTargetInput{TargetArn: aws.String(queueARN), Limit: aws.Int32(2)})
	if err != nil || len(out.RuleNames) != 2 || out.NextToken == nil {
		t.Fatalf("first page: %+v %v", out, err)
	}
	rest, err := c.ListRuleNamesByTarget(ctx, &eventbridge.ListRuleNamesByTargetInput{TargetArn: aws.String(queueARN), NextToken: out.NextToken})
	if err != nil || len(rest.RuleNames) != 1 || rest.NextToken != nil {
		t.Fatalf("second page: %+v %v", rest, err)
	}
	got := append(out.RuleNames, rest.RuleNames...)
	if got[0] != "karpenter-RebalanceRule-2" || got[2] != "karpenter-SpotInterruptionRule-1" {
		t.Errorf("rules: %v", got)
	}
	e.RemoveRule("karpenter-RebalanceRule-2")
	out, err = c.ListRuleNamesByTarget(ctx, &eventbridge.ListRuleNamesByTargetInput{TargetArn: aws.String(queueARN)})
	if err != nil || len(out.RuleNames) != 2 {
		t.Errorf("after removal: %+v %v", out, err)
	}
	_, err = c.ListRuleNamesByTarget(ctx, &eventbridge.ListRuleNamesByTargetInput{TargetArn: aws.String(queueARN), EventBusName: aws.String("custom")})
	wantCode(t, err, "ResourceNotFoundException")

	// The queue itself: GetQueueUrl, and gone after RemoveQueue.
	if _, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(e.ClusterName())}); err != nil {
		t.Fatal(err)
	}
	e.RemoveQueue(e.ClusterName())
	_, err = q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(e.ClusterName())})
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")
}
