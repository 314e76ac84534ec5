package emulator

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/karpless/karpless/events"
)

// sqsClient is a careful client (see ec2Client).
func sqsClient(t testing.TB, e *Emulator) *sqs.Client {
	return sqs.NewFromConfig(sdkConfig(t, e, carefulAttempts))
}

// receive is Karpenter's ReceiveMessage (without the 20s long poll).
func receive(t testing.TB, c *sqs.Client, url string, wait int32) []sqstypes.Message {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 20, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"SentTimestamp", "ApproximateReceiveCount"},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func TestSQS(t *testing.T) {
	h := DefaultHostility()
	// The test counts messages exactly; a SendMessage whose answer is lost
	// is retried and sends a duplicate (SQS is at-least-once), which
	// TestLostAnswers covers.
	h.LostAnswerRate = 0
	e, clk := newTestEmulator(t, calm(h))
	c := sqsClient(t, e)
	ctx := context.Background()
	url := e.InterruptionQueueURL()

	got, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(e.ClusterName())})
	if err != nil || aws.ToString(got.QueueUrl) != url || url != e.URL()+"/123456789012/"+e.ClusterName() {
		t.Fatalf("GetQueueUrl: %v %v (want %s)", got, err, url)
	}
	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	// The awsQuery-compatible header replaces the code callers see.
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")
	var qdne *sqstypes.QueueDoesNotExist
	if !errors.As(err, &qdne) {
		t.Errorf("GetQueueUrl of a missing queue: %T, want *types.QueueDoesNotExist", err)
	}

	if msgs := receive(t, c, url, 0); len(msgs) != 0 {
		t.Fatalf("fresh queue has %d messages", len(msgs))
	}
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"hello":"world"}`)})
	if err != nil || aws.ToString(sent.MessageId) == "" || aws.ToString(sent.MD5OfMessageBody) != "fbc24bcc7a1794758fc1327fcfebdaf6" {
		t.Fatalf("SendMessage: %+v %v", sent, err)
	}
	ids, err := e.InjectEvent(Event{Kind: EventSpotInterruption, InstanceIDs: []string{"i-0123456789abcdef0"}})
	if err != nil || len(ids) != 1 {
		t.Fatal(err)
	}
	msgs := receive(t, c, url, 0)
	if len(msgs) != 2 {
		t.Fatalf("received %d, want 2", len(msgs))
	}
	m := msgs[1]
	if aws.ToString(m.MessageId) != ids[0] || aws.ToString(m.ReceiptHandle) == "" || aws.ToString(m.MD5OfBody) == "" ||
		m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] != strconv.FormatInt(t0.UnixMilli(), 10) {
		t.Errorf("message decoded wrong: %+v", m)
	}
	parsed, err := events.Parse([]byte(aws.ToString(m.Body)))
	if err != nil || parsed.Kind != events.KindSpotInterruption || parsed.InstanceIDs[0] != "i-0123456789abcdef0" {
		t.Errorf("injected event parses as %+v, %v", parsed, err)
	}
	// In flight: invisible until the visibility timeout passes on the clock.
	if again := receive(t, c, url, 0); len(again) != 0 {
		t.Fatalf("in-flight messages delivered again: %d", len(again))
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "2" || attrs.Attributes["MessageRetentionPeriod"] != "300" || attrs.Attributes["QueueArn"] == "" {
		t.Errorf("attributes: %v %v", attrs.Attributes, err)
	}
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msgs[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	// Deleting twice is fine: the message is gone.
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msgs[0].ReceiptHandle}); err != nil {
		t.Errorf("second delete: %v", err)
	}
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("not-a-handle")})
	wantCode(t, err, "ReceiptHandleIsInvalid")

	clk.Step(20 * time.Second)
	redelivered := receive(t, c, url, 0)
	if len(redelivered) != 1 || redelivered[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("redelivery: %+v", redelivered)
	}
	// The first receipt handle is stale now.
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: redelivered[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	back := receive(t, c, url, 0)
	if len(back) != 1 {
		t.Fatalf("visibility 0 did not release the message")
	}
	// The batch form: the live handle is changed, a stale one, a made-up
	// one and one of a deleted message fail each on its own entry.
	vis, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("live"), ReceiptHandle: back[0].ReceiptHandle, VisibilityTimeout: 360},
		{Id: aws.String("stale"), ReceiptHandle: redelivered[0].ReceiptHandle, VisibilityTimeout: 360},
		{Id: aws.String("made-up"), ReceiptHandle: aws.String("AQEBx"), VisibilityTimeout: 360},
	}})
	if err != nil || len(vis.Successful) != 1 || aws.ToString(vis.Successful[0].Id) != "live" || len(vis.Failed) != 2 {
		t.Fatalf("ChangeMessageVisibilityBatch: %+v %v", vis, err)
	}
	for _, f := range vis.Failed {
		if aws.ToString(f.Code) != "ReceiptHandleIsInvalid" || !f.SenderFault {
			t.Errorf("ChangeMessageVisibilityBatch entry %s: %s (sender fault %v)", aws.ToString(f.Id), aws.ToString(f.Code), f.SenderFault)
		}
	}
	clk.Step(60 * time.Second)
	if again := receive(t, c, url, 0); len(again) != 0 {
		t.Fatalf("a message made invisible for 360 s was received after 60 s")
	}
	_, err = c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{}})
	if err == nil {
		t.Error("ChangeMessageVisibilityBatch without entries succeeded")
	}
	del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: back[0].ReceiptHandle}, {Id: aws.String("b"), ReceiptHandle: aws.String("bad")},
	}})
	if err != nil || len(del.Successful) != 1 || len(del.Failed) != 1 || aws.ToString(del.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Errorf("DeleteMessageBatch: %+v %v", del, err)
	}
	if n := len(e.Messages(url)); n != 0 {
		t.Errorf("%d messages left", n)
	}

	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 11})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.URL() + "/123456789012/missing"), MessageBody: aws.String("x")})
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")

	// Retention: the interruption queue keeps messages five minutes.
	if _, err := e.SendEvent(e.ClusterName(), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	clk.Step(301 * time.Second)
	if err := e.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Messages(url)); n != 0 {
		t.Errorf("%d messages outlived the retention period", n)
	}
}

func TestSQSRedriveAndLongPoll(t *testing.T) {
	e, clk := newTestEmulator(t)
	c := sqsClient(t, e)
	url := e.InterruptionQueueURL()
	if _, err := e.SendEvent(url, []byte("poison")); err != nil {
		t.Fatal(err)
	}
	// The interruption queue's redrive policy moves a message received
	// five times without a delete to the dead-letter queue.
	for k := 1; k <= 5; k++ {
		msgs := receive(t, c, url, 0)
		if len(msgs) != 1 || msgs[0].Attributes["ApproximateReceiveCount"] != strconv.Itoa(k) {
			t.Fatalf("receive %d: %+v", k, msgs)
		}
		clk.Step(21 * time.Second)
	}
	if msgs := receive(t, c, url, 0); len(msgs) != 0 {
		t.Fatalf("poison delivered a sixth time")
	}
	dlq := e.QueueURL(e.ClusterName() + "-dlq")
	if got := e.Messages(dlq); len(got) != 1 || got[0].Body != "poison" {
		t.Errorf("dead-letter queue: %+v", got)
	}

	// Long polling returns as soon as a message arrives.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = e.SendEvent(url, []byte("late"))
	}()
	start := time.Now()
	msgs := receive(t, c, url, 20)
	if len(msgs) != 1 || time.Since(start) > 900*time.Millisecond {
		t.Errorf("long poll: %d messages after %s", len(msgs), time.Since(start))
	}
	// And gives up after LongPollCap of real time.
	start = time.Now()
	if msgs := receive(t, c, url, 20); len(msgs) != 0 || time.Since(start) < e.cfg.LongPollCap {
		t.Errorf("empty long poll: %d messages after %s", len(msgs), time.Since(start))
	}

	for _, kind := range EventKinds {
		ev := Event{Kind: kind, InstanceIDs: []string{"i-0123456789abcdef0", "i-0123456789abcdef1"}, State: "stopping"}
		ids, err := e.InjectEvent(ev)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for _, m := range e.Messages(url) {
			if m.ID != ids[0] {
				continue
			}
			if _, err := events.Parse([]byte(m.Body)); err != nil {
				t.Errorf("%s event does not parse: %v\n%s", kind, err, m.Body)
			}
		}
	}
	if _, err := e.InjectEvent(Event{Kind: "volcano", InstanceIDs: []string{"i-0123456789abcdef0"}}); err == nil {
		t.Error("unknown event kind accepted")
	}
}

func TestStateChangeEvents(t *testing.T) {
	e, clk := newTestEmulator(t, func(c *Config) { c.StateChangeEvents = true })
	c := ec2Client(t, e)
	ctx := context.Background()
	lt := createLT(t, c, e, "karpenter.k8s.aws/sc")
	id := launchN(t, e, c, lt, 1, "on-demand")[0]
	clk.Step(e.cfg.PendingDelay)
	_ = e.Step(ctx)
	if err := e.TerminateInstance(id, ""); err != nil {
		t.Fatal(err)
	}
	clk.Step(e.cfg.TerminateDelay)
	_ = e.Step(ctx)
	var states []string
	for _, m := range e.Messages(e.ClusterName()) {
		p, err := events.Parse([]byte(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, p.State)
	}
	if len(states) != 4 || states[0] != "pending" || states[3] != "terminated" {
		t.Errorf("state-change events %v", states)
	}
}

// TestChangeVisibilityOfGoneAndExpiredMessages: as SQS answers, a handle
// whose message was deleted gets InvalidParameterValue, and a handle whose
// visibility ran out (no one received the message since) gets OK and
// changes nothing.
func TestChangeVisibilityOfGoneAndExpiredMessages(t *testing.T) {
	h := DefaultHostility()
	h.ThrottleRate = 0
	e, clk := newTestEmulator(t, calm(h))
	c := sqsClient(t, e)
	ctx := context.Background()
	url := e.InterruptionQueueURL()
	if _, err := e.SendEvent(url, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	var msgs []sqstypes.Message
	for range 10 { // the emulator's eventual consistency
		if msgs = receive(t, c, url, 0); len(msgs) == 1 {
			break
		}
		clk.Step(time.Second)
	}
	if len(msgs) != 1 {
		t.Fatalf("received %d messages", len(msgs))
	}
	clk.Step(60 * time.Second) // past the queue's 30 s visibility
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 300}); err != nil {
		t.Fatalf("an expired handle: %v, want OK", err)
	}
	if again := receive(t, c, url, 0); len(again) != 1 {
		t.Fatalf("the expired handle's change took effect: %d messages received, want the message visible", len(again))
	} else {
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: again[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: again[0].ReceiptHandle, VisibilityTimeout: 300})
		wantCode(t, err, "InvalidParameterValue")
	}
}
