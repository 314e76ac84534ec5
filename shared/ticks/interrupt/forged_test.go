package interrupt_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/events"
	"github.com/karpless/karpless/shared/local/eventsource"
)

// TestForgedDirectInvokeChangesNothing invokes the interruption handler as
// someone with invoke rights could, around the queue's send policy: spot
// warnings for a live node in batches shaped like the event source
// mapping's, but not from the stack's queue (no source, another queue,
// another region, the queue's ARN with a receipt handle SQS never gave
// out), and one that did come through the queue but names another
// account. None may retire the node: no NodeClaim deleted, no taint, no
// launch, nothing terminated.
func TestForgedDirectInvokeChangesNothing(t *testing.T) {
	w := setup(t, 1)
	ctx := context.Background()
	victim, id := claimWithNode(t, w)
	body := string(events.NewSpotInterruption("forged-1", id, time.Now()))
	arn, region := w.Emu.InterruptionQueueARN(), w.Emu.Region()
	// A receipt handle shaped like the queue's own, for a message id
	// that exists nowhere.
	madeUp := base64.RawURLEncoding.EncodeToString([]byte(w.Emu.ClusterName() + "|00000000-0000-0000-0000-000000000000|1|0"))
	record := func(id, arn, region, handle string) lambdaevents.SQSMessage {
		return lambdaevents.SQSMessage{MessageId: id, ReceiptHandle: handle, Body: body, EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: region}
	}
	batches := map[string][]lambdaevents.SQSMessage{
		"a bare record":      {{MessageId: "f1", Body: body}},
		"another queue":      {record("f2", "arn:aws:sqs:"+region+":123456789012:someone-elses", region, madeUp)},
		"another region":     {record("f3", arn, "eu-west-1", madeUp)},
		"a made-up handle":   {record("f4", arn, region, madeUp), record("f5", arn, region, "AQEB"+strings.Repeat("x", 40))},
		"a handle and no id": {record("", arn, region, madeUp)},
	}

	// Through the queue, but an event of another account: the queue's
	// policy lets only this stack's rules send, so it was not theirs.
	q := w.App.AWS.SQS
	other := strings.Replace(body, `"account":"123456789012"`, `"account":"210987654321"`, 1)
	if other == body {
		t.Fatal("the sample event names no account to change")
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.Emu.InterruptionQueueURL()), MessageBody: aws.String(other)}); err != nil {
		t.Fatal(err)
	}
	var got *sqs.ReceiveMessageOutput
	for range 10 { // a throttled receive is asked again
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.Emu.InterruptionQueueURL()), MaxNumberOfMessages: 10, VisibilityTimeout: 360})
		if err == nil && len(out.Messages) > 0 {
			got = out
			break
		}
	}
	if got == nil {
		t.Fatal("the message of another account never arrived")
	}
	batches["another account, through the queue"] = eventsource.Records(got.Messages, arn, region)

	fleets, terminations := w.Emu.CallCount("CreateFleet"), w.Emu.CallCount("TerminateInstances")
	for name, records := range batches {
		resp, err := w.App.InterruptionHandler()(ctx, lambdaevents.SQSEvent{Records: records})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(resp.BatchItemFailures) > 0 {
			t.Errorf("%s: reported %d failures: a refused record must not come back", name, len(resp.BatchItemFailures))
		}
	}
	nc, err := w.E.Clients.NodeClaims.Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil || nc.DeletionTimestamp != nil {
		t.Fatalf("the node's claim was retired by a forged invoke: %v", err)
	}
	node, err := w.E.Clients.Core.CoreV1().Nodes().Get(ctx, victim.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		if strings.HasPrefix(taint.Key, "karpenter.sh/") {
			t.Errorf("the node was tainted %s by a forged invoke", taint.Key)
		}
	}
	if f, tm := w.Emu.CallCount("CreateFleet"), w.Emu.CallCount("TerminateInstances"); f != fleets || tm != terminations {
		t.Errorf("forged invokes launched (%d CreateFleet) or terminated (%d TerminateInstances)", f-fleets, tm-terminations)
	}

	// The mapping deletes what the handler did not report failed: the
	// message of another account, dropped.
	for _, m := range got.Messages {
		if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(w.Emu.InterruptionQueueURL()), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Logf("deleting the dropped message (lost answers are retried by the mapping): %v", err)
		}
	}

	// The same warning through the queue is acted on: the refusals above
	// are of the forgery, not of the warning.
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.Emu.InterruptionQueueURL()), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	deliver(t, w, mapping(t, w), w.App.InterruptionHandler())
	if nc := getClaim(t, w, victim.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Error("the genuine warning through the queue did not retire the claim")
	}
}

// TestProofAfterVisibilityRanOutKeepsTheWarning: a genuine warning whose
// visibility ran out before the invocation proved it (a slow start on a
// busy machine) is acted on, not dropped: SQS answers OK to a handle whose
// visibility ended while no one received the message again.
func TestProofAfterVisibilityRanOutKeepsTheWarning(t *testing.T) {
	w := setup(t, 1)
	ctx := context.Background()
	victim, id := claimWithNode(t, w)
	q := w.App.AWS.SQS
	url := aws.String(w.Emu.InterruptionQueueURL())
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(string(events.NewSpotInterruption("slow-1", id, time.Now())))}); err != nil {
		t.Fatal(err)
	}
	var got *sqs.ReceiveMessageOutput
	for range 10 { // a throttled receive is asked again
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 1})
		if err == nil && len(out.Messages) > 0 {
			got = out
			break
		}
	}
	if got == nil {
		t.Fatal("the warning never arrived")
	}
	w.Skip(2 * time.Second) // its visibility ends before the invocation starts
	records := eventsource.Records(got.Messages, w.Emu.InterruptionQueueARN(), w.Emu.Region())
	// The proof may meet a throttle: the record then comes back, and is
	// proven on its next delivery.
	for try := 0; ; try++ {
		resp, err := w.App.InterruptionHandler()(ctx, lambdaevents.SQSEvent{Records: records})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) == 0 {
			break
		}
		if try == 5 {
			t.Fatalf("the warning was failed %d times: %+v", try+1, resp.BatchItemFailures)
		}
	}
	if nc := getClaim(t, w, victim.Name); nc != nil && nc.DeletionTimestamp == nil {
		t.Error("a warning whose visibility ran out before its proof was dropped: the claim was not retired")
	}
	deliver(t, w, mapping(t, w), w.App.InterruptionHandler()) // the queue's copy, handled again harmlessly
}
