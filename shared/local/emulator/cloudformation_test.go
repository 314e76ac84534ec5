package emulator

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// DescribeStacks through the real client: by ID (also once deleted) and
// by name (live only), the status a test sets, and CloudFormation's
// ValidationError for a stack it does not have.
func TestCloudFormationDescribeStacks(t *testing.T) {
	e, _ := newTestEmulator(t, calm(DefaultHostility()))
	c := cloudformation.NewFromConfig(sdkConfig(t, e, carefulAttempts))
	ctx := context.Background()
	id := e.AddStack("Karpless-demo")
	other := e.AddStack("other")
	if id == other {
		t.Fatal("two stacks got one ID")
	}
	status := func(name string) cfntypes.StackStatus {
		t.Helper()
		out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
		if err != nil {
			t.Fatalf("DescribeStacks(%s): %v", name, err)
		}
		if len(out.Stacks) != 1 || aws.ToString(out.Stacks[0].StackId) != id || aws.ToString(out.Stacks[0].StackName) != "Karpless-demo" || out.Stacks[0].CreationTime == nil {
			t.Fatalf("DescribeStacks(%s) = %+v", name, out.Stacks)
		}
		return out.Stacks[0].StackStatus
	}
	if s := status(id); s != cfntypes.StackStatusCreateInProgress {
		t.Errorf("a new stack is %s", s)
	}
	e.SetStackStatus(id, StackDeleteInProgress)
	if s := status("Karpless-demo"); s != cfntypes.StackStatusDeleteInProgress {
		t.Errorf("by name: %s", s)
	}
	e.SetStackStatus(id, StackDeleteComplete)
	if s := status(id); s != cfntypes.StackStatusDeleteComplete {
		t.Errorf("a deleted stack by ID: %s", s)
	}
	_, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("Karpless-demo")})
	wantCode(t, err, "ValidationError")
	all, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{})
	if err != nil || len(all.Stacks) != 1 || aws.ToString(all.Stacks[0].StackId) != other {
		t.Errorf("every live stack: %+v %v", all, err)
	}
}
