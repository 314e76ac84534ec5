// Package eventsource stands in, locally, for Lambda's SQS event source mapping: it
// polls a queue, invokes a handler with a batch, and deletes what succeeded.
//
// Semantics follow Lambda's with ReportBatchItemFailures: messages the
// handler lists as failed stay in the queue (visible again after the
// visibility timeout), the rest are deleted; a handler error fails the whole
// batch.
package eventsource

import (
	"context"
	"fmt"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS is the part of the SQS API the mapping uses.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Handler is the function the mapping invokes.
type Handler func(ctx context.Context, batch lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error)

// Mapping is one queue feeding one handler.
type Mapping struct {
	SQS      SQS
	QueueURL string
	QueueARN string
	Region   string
	// BatchSize and Wait mirror the mapping's BatchSize and MaximumBatchingWindow.
	BatchSize         int32
	Wait              time.Duration
	VisibilityTimeout time.Duration
}

// Outcome is what one poll did.
type Outcome struct {
	Received, Deleted, Failed int
	HandlerErr                error
}

// PollOnce receives up to one batch and, if any, invokes the handler.
func (m *Mapping) PollOnce(ctx context.Context, h Handler) (Outcome, error) {
	batch := m.BatchSize
	if batch <= 0 || batch > 10 {
		batch = 10
	}
	out, err := m.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(m.QueueURL),
		MaxNumberOfMessages:         batch,
		WaitTimeSeconds:             int32(m.Wait / time.Second),
		VisibilityTimeout:           int32(m.VisibilityTimeout / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("receiving from %s: %w", m.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return Outcome{}, nil
	}
	ev := lambdaevents.SQSEvent{Records: Records(out.Messages, m.QueueARN, m.Region)}
	handles := map[string]string{}
	for _, msg := range out.Messages {
		handles[aws.ToString(msg.MessageId)] = aws.ToString(msg.ReceiptHandle)
	}
	res := Outcome{Received: len(out.Messages)}
	resp, herr := h(ctx, ev)
	if herr != nil {
		// The whole batch returns to the queue.
		res.HandlerErr, res.Failed = herr, len(out.Messages)
		return res, nil
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, msg := range out.Messages {
		id := aws.ToString(msg.MessageId)
		if failed[id] {
			res.Failed++
			continue
		}
		if _, err := m.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(m.QueueURL), ReceiptHandle: aws.String(handles[id])}); err != nil {
			return res, fmt.Errorf("deleting handled message %s: %w", id, err)
		}
		res.Deleted++
	}
	return res, nil
}

// Records are received messages as the mapping hands them to a function:
// each names its queue (queueARN) and region, and keeps its receipt handle.
func Records(msgs []sqstypes.Message, queueARN, region string) []lambdaevents.SQSMessage {
	var out []lambdaevents.SQSMessage
	for _, msg := range msgs {
		attrs := map[string]string{}
		for k, v := range msg.Attributes {
			attrs[k] = v
		}
		out = append(out, lambdaevents.SQSMessage{
			MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle), Body: aws.ToString(msg.Body),
			Md5OfBody: aws.ToString(msg.MD5OfBody), Attributes: attrs,
			EventSource: "aws:sqs", EventSourceARN: queueARN, AWSRegion: region,
		})
	}
	return out
}

// Run polls until ctx ends, invoking h for each batch.
func (m *Mapping) Run(ctx context.Context, h Handler, onBatch func(Outcome, error)) error {
	for {
		o, err := m.PollOnce(ctx, h)
		if onBatch != nil && (o.Received > 0 || err != nil) {
			onBatch(o, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || o.Received == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}
