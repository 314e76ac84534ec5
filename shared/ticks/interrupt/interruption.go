// Package interrupt acts on EC2 interruption events from the SQS queue:
// it retires the affected NodeClaims and launches their replacements at once.
//
// A batch is handled as one unit of work: every message is parsed (malformed
// and unknown ones are dropped with a log line), the instances named are
// mapped to NodeClaims with one list, the actions are taken (each idempotent:
// a duplicate delivery finds the claim already deleting), then a provisioning
// pass launches capacity for the displaced pods and the drain starts. Only
// messages whose action failed are reported back to SQS for redelivery.
package interrupt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/events"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/tick"
	"github.com/karpless/karpless/shared/kube"
)

// Provisioner runs a provisioning pass (under the provisioning lease).
type Provisioner interface {
	PassWithLease(ctx context.Context, holder string, wait time.Duration) (bool, error)
}

// Drainer starts draining deleted NodeClaims now rather than at the next
// disruption tick (the spot warning gives two minutes).
type Drainer interface {
	Drain(ctx context.Context) error
}

// Queue is the SQS calls the handler makes itself (the event source
// mapping receives and deletes messages): proving records came from the
// queue, and making failed ones visible early.
type Queue interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Handler handles batches of interruption messages.
type Handler struct {
	// Queue is the stack's interruption queue: QueueURL and QueueARN, in
	// Account and Region. Only records of that queue are acted on, each
	// proven by SQS (a direct invoke of the function with a made-up batch
	// changes nothing), and only events of that account and region. A
	// failed message comes back after RetryAfter
	// (timing.InterruptionRetryAfter when 0) instead of the visibility
	// timeout.
	Queue      Queue
	QueueURL   string
	QueueARN   string
	Account    string
	Region     string
	RetryAfter time.Duration

	Kube        *kube.Clients
	Provisioner Provisioner
	Drainer     Drainer
	Clock       clock.PassiveClock
	Log         *slog.Logger
	Events      *record.Recorder
	Metrics     *record.Metrics
	// Namespace and UnavailableTTL locate and size the offerings cache.
	Namespace      string
	UnavailableTTL time.Duration
	// DrainOnRebalance cordons and drains on rebalance recommendations too
	// (NTH's queue-mode behaviour); Karpenter only records an Event.
	DrainOnRebalance bool
	// LeaseWait bounds how long the batch waits for the provisioning lease.
	LeaseWait time.Duration
}

var (
	nodeGVK      = corev1.SchemeGroupVersion.WithKind("Node")
	nodeClaimGVK = karpv1.SchemeGroupVersion.WithKind("NodeClaim")
)

// Result is what a batch did, for tests and logs.
type Result struct {
	Response  lambdaevents.SQSEventResponse
	Acted     []string // NodeClaims deleted
	Dropped   int      // malformed or unknown messages, events of another account or region
	Refused   int      // records not proven to come from the queue: nobody deletes them
	Replaced  bool     // a provisioning pass ran
	Paused    bool     // no replacement: Karpless is paused
	TaintedAt time.Time
}

type parsed struct {
	id  string
	msg events.Message
}

// Handle processes one SQS batch. holder identifies the invocation.
func (h *Handler) Handle(ctx context.Context, batch lambdaevents.SQSEvent, holder string) (Result, error) {
	var res Result
	// Every message not reported failed is deleted by the event source
	// mapping once the handler returns (the Lambda handler never fails the
	// batch as a whole), as Karpenter deletes each message it parsed and
	// handled and each it could not parse.
	defer func() { h.countDeleted(len(batch.Records) - res.Refused - len(res.Response.BatchItemFailures)) }()
	var work []parsed
	records, unproven := h.fromTheQueue(ctx, batch.Records)
	res.Refused += len(batch.Records) - len(records) - len(unproven)
	res.Response.BatchItemFailures = append(res.Response.BatchItemFailures, unproven...)
	for _, rec := range records {
		msg, err := events.Parse([]byte(rec.Body))
		if err != nil {
			// Retrying cannot fix a malformed body: drop it, loudly. Like
			// Karpenter, it is not counted as received (it has no type),
			// only as deleted.
			h.Log.Warn("dropping malformed interruption message", "message_id", rec.MessageId, "error", err)
			res.Dropped++
			continue
		}
		if msg.Account != h.Account || msg.Region != h.Region {
			// The queue's policy lets only this stack's rules send; a
			// message of another account or region was not sent by them.
			h.Log.Warn("dropping an interruption message of another account or region", "message_id", rec.MessageId,
				"account", msg.Account, "region", msg.Region, "want_account", h.Account, "want_region", h.Region)
			res.Dropped++
			continue
		}
		h.Metrics.Count(receivedMessagesMetric, 1, map[string]string{"message_type": msg.MessageType()})
		if msg.Action() == events.Ignore {
			h.Log.Info("ignoring interruption message", "message_id", rec.MessageId, "kind", msg.Kind, "detail_type", msg.DetailType)
			h.observeQueueTime(msg)
			res.Dropped++
			continue
		}
		work = append(work, parsed{id: rec.MessageId, msg: msg})
	}
	if len(work) == 0 {
		return res, nil
	}
	claims, err := h.claimsByInstance(ctx)
	if err != nil {
		// Nothing was done: the whole batch comes back.
		for _, w := range work {
			res.Response.BatchItemFailures = append(res.Response.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: w.id})
		}
		h.retrySoon(ctx, batch, res.Response.BatchItemFailures)
		return res, err
	}
	offerings, err := unavailable.Load(ctx, h.Kube.Core.CoreV1(), h.Namespace, h.UnavailableTTL, h.Clock)
	if err != nil {
		offerings = nil
		h.Log.Warn("reading unavailable offerings", "error", err)
	}
	var errs []error
	retiring := 0
	for _, w := range work {
		acted, already, err := h.act(ctx, w.msg, claims, offerings)
		res.Acted = append(res.Acted, acted...)
		retiring += already
		if err != nil {
			errs = append(errs, fmt.Errorf("message %s: %w", w.id, err))
			res.Response.BatchItemFailures = append(res.Response.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: w.id})
			continue
		}
		h.observeQueueTime(w.msg)
	}
	if len(res.Acted) > 0 {
		res.TaintedAt = h.Clock.Now()
	}
	h.retrySoon(ctx, batch, res.Response.BatchItemFailures)
	if offerings != nil {
		if err := offerings.Save(ctx); err != nil {
			h.Log.Warn("saving unavailable offerings", "error", err)
		}
	}
	if len(res.Acted) > 0 || retiring > 0 {
		// Capacity for the displaced pods now, not at the next tick. The
		// deletions above are durable, so a failure here is only logged:
		// the provisioner's next pass launches what is missing. A claim
		// already retiring (a message delivered again after an invocation
		// died between the deletion and this point) gets the same: the
		// pass and the drain are idempotent, and the two-minute warning
		// cannot wait for the next tick.
		//
		// While Karpless is paused (karpless pause), the batch still
		// protects the workloads from what EC2 is taking away (the
		// claims above are tainted and deleted, the drain below evicts
		// their pods and terminates what is drained), but it launches no
		// replacement: a pause stops Karpless from adding capacity, and
		// the displaced pods wait, pending, for the resume's first tick.
		if h.Provisioner != nil {
			ok, err := h.Provisioner.PassWithLease(ctx, holder, h.LeaseWait)
			res.Replaced = ok
			switch {
			case errors.Is(err, tick.ErrPaused):
				res.Paused = true
				h.Log.Info("paused: no replacement launched; the interrupted nodes are drained and terminated", "paused", true, "nodeclaims", res.Acted)
			case err != nil:
				h.Log.Warn("provisioning replacements", "error", err)
			}
		}
		if h.Drainer != nil {
			if err := h.Drainer.Drain(ctx); err != nil {
				h.Log.Warn("starting drains", "error", err)
			}
		}
	}
	return res, errors.Join(errs...)
}

// The interruption metrics, Karpenter's (aws pkg/controllers/interruption/metrics.go).
const (
	// receivedMessagesMetric counts each message parsed, by its
	// message_type (events.Message.MessageType).
	receivedMessagesMetric = "karpenter_interruption_received_messages_total"
	// deletedMessagesMetric counts the messages deleted from the queue.
	deletedMessagesMetric = "karpenter_interruption_deleted_messages_total"
	// queueDurationMetric is the time from the event to the end of its
	// handling, for each message handled without failure.
	queueDurationMetric = "karpenter_interruption_message_queue_duration_seconds"
)

// observeQueueTime records how long a handled message waited since its
// event, as Karpenter does once it has handled a message, before deleting
// it (a message that failed is observed when it is handled again).
func (h *Handler) observeQueueTime(msg events.Message) {
	if !msg.Time.IsZero() {
		h.Metrics.Observe(queueDurationMetric, "Seconds", h.Clock.Since(msg.Time).Seconds(), nil)
	}
}

// countDeleted counts the messages the batch leaves to be deleted; none,
// no line (a counter of zero would only cost a series).
func (h *Handler) countDeleted(n int) {
	if n > 0 {
		h.Metrics.Count(deletedMessagesMetric, float64(n), nil)
	}
}

// retrySoon makes failed messages visible again after RetryAfter. A failure
// here only delays the retry to the visibility timeout, so it is logged.
func (h *Handler) retrySoon(ctx context.Context, batch lambdaevents.SQSEvent, failed []lambdaevents.SQSBatchItemFailure) {
	if h.Queue == nil || h.QueueURL == "" || len(failed) == 0 {
		return
	}
	after := h.RetryAfter
	if after <= 0 {
		after = timing.InterruptionRetryAfter
	}
	handles := map[string]string{}
	for _, r := range batch.Records {
		handles[r.MessageId] = r.ReceiptHandle
	}
	for _, f := range failed {
		rh := handles[f.ItemIdentifier]
		if rh == "" {
			continue
		}
		_, err := h.Queue.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(h.QueueURL), ReceiptHandle: aws.String(rh), VisibilityTimeout: int32(after / time.Second),
		})
		if err != nil {
			h.Log.Warn("making a failed message visible early; it comes back after the visibility timeout", "message_id", f.ItemIdentifier, "error", err)
		}
	}
}

// fromTheQueue keeps the records that came from the stack's queue, as
// Lambda's event source mapping delivers them: the mapping's fields name
// the queue and its region, and SQS proves each receipt handle
// (ChangeMessageVisibilityBatch answers ReceiptHandleIsInvalid to a handle
// it never gave out). Anyone who may invoke the function can write the
// fields; only the queue's consumer holds a handle. Records SQS could not
// judge (throttled, unreachable) are returned as failures, for
// redelivery, so a genuine warning is not lost; so are records SQS says
// are not in flight (MessageNotInflight, which SQS documents for a
// message whose visibility ran out; it answers OK to that today):
// dropping one would have the mapping delete a warning no invocation
// acted on. The others (an invalid handle, a message deleted) are
// dropped, loudly.
func (h *Handler) fromTheQueue(ctx context.Context, records []lambdaevents.SQSMessage) (proven []lambdaevents.SQSMessage, unproven []lambdaevents.SQSBatchItemFailure) {
	var candidates []lambdaevents.SQSMessage
	for _, rec := range records {
		switch {
		case h.Queue == nil || h.QueueURL == "" || h.QueueARN == "":
			h.Log.Error("dropping an interruption record: the function has no queue to prove it against (INTERRUPTION_QUEUE_URL)", "message_id", rec.MessageId)
		case rec.EventSource != "aws:sqs" || rec.EventSourceARN != h.QueueARN || rec.AWSRegion != h.Region:
			h.Log.Warn("dropping a record that is not from the interruption queue", "message_id", rec.MessageId,
				"event_source", rec.EventSource, "event_source_arn", rec.EventSourceARN, "aws_region", rec.AWSRegion, "want_arn", h.QueueARN)
		case rec.MessageId == "" || rec.ReceiptHandle == "":
			h.Log.Warn("dropping a record without a message id or receipt handle", "message_id", rec.MessageId)
		default:
			candidates = append(candidates, rec)
		}
	}
	// The proof sets each message's visibility: until the invocation's
	// deadline and InterruptionRetryAfter more, so that a batch whose
	// invocation dies comes back then, not after the queue's six-minute
	// visibility (a spot warning gives two).
	visible := timing.InterruptionRetryAfter
	if dl, ok := ctx.Deadline(); ok {
		visible = max(visible, dl.Sub(h.Clock.Now())+timing.InterruptionRetryAfter)
	}
	visible = min(visible, 12*time.Hour)                   // SQS's largest
	for start := 0; start < len(candidates); start += 10 { // SQS's batch limit
		chunk := candidates[start:min(start+10, len(candidates))]
		in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(h.QueueURL)}
		for i, rec := range chunk {
			in.Entries = append(in.Entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(fmt.Sprint(i)), ReceiptHandle: aws.String(rec.ReceiptHandle),
				VisibilityTimeout: int32((visible + time.Second - 1) / time.Second),
			})
		}
		out, err := h.Queue.ChangeMessageVisibilityBatch(ctx, in)
		if err != nil {
			h.Log.Warn("cannot prove interruption records came from the queue; they come back later", "messages", len(chunk), "error", err)
			for _, rec := range chunk {
				unproven = append(unproven, lambdaevents.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
			continue
		}
		ok := map[string]bool{}
		for _, s := range out.Successful {
			ok[aws.ToString(s.Id)] = true
		}
		failed := map[string]sqstypes.BatchResultErrorEntry{}
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = f
		}
		for i, rec := range chunk {
			id := fmt.Sprint(i)
			f, bad := failed[id]
			switch {
			case ok[id]:
				proven = append(proven, rec)
			case bad && f.SenderFault && !strings.HasSuffix(aws.ToString(f.Code), sqsMessageNotInflight):
				h.Log.Warn("dropping a record SQS does not know as in flight from the interruption queue", "message_id", rec.MessageId, "code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
			default:
				unproven = append(unproven, lambdaevents.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
		}
	}
	return proven, unproven
}

// sqsMessageNotInflight ends the code SQS gives a genuine receipt handle
// whose message is no longer in flight.
const sqsMessageNotInflight = "MessageNotInflight"

// claimsByInstance lists NodeClaims once for the whole batch.
func (h *Handler) claimsByInstance(ctx context.Context) (map[string]*karpv1.NodeClaim, error) {
	claims, err := kube.AllNodeClaims(ctx, h.Kube)
	if err != nil {
		return nil, err
	}
	out := map[string]*karpv1.NodeClaim{}
	for _, nc := range claims {
		if id := wellknown.InstanceIDFromProviderID(nc.Status.ProviderID); id != "" {
			out[id] = nc
		}
	}
	return out, nil
}

// act takes the message's action on each instance it names. It returns the
// claims it deleted and how many it found retiring already.
func (h *Handler) act(ctx context.Context, msg events.Message, claims map[string]*karpv1.NodeClaim, offerings *unavailable.Cache) ([]string, int, error) {
	var acted []string
	var errs []error
	retiring := 0
	ids := msg.InstanceIDs
	if msg.Kind == events.KindCapacityBlockExpiration {
		ids = reservationInstances(claims, msg.CapacityReservationID)
	}
	for _, id := range ids {
		nc := claims[id]
		if nc == nil {
			// Not ours (another node group, or already gone): nothing to do.
			h.Log.Info("interruption for an instance with no NodeClaim", "instance", id, "kind", msg.Kind)
			continue
		}
		obj := record.ObjectOf(nodeClaimGVK, nc)
		if reason := msg.Reason(); reason != "" {
			h.Events.Warning(obj, reason, "%s for instance %s", msg.DetailType, id)
		}
		drain := msg.Action() == events.CordonAndDrain || (msg.Kind == events.KindRebalanceRecommendation && h.DrainOnRebalance)
		if !drain {
			continue
		}
		if msg.Kind == events.KindSpotInterruption && offerings != nil {
			offerings.Mark(wellknown.CapacityTypeSpot, nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.ZoneLabel], "SpotInterruption")
		}
		if (msg.Kind == events.KindCapacityReservationInterruption || msg.Kind == events.KindCapacityBlockExpiration) && offerings != nil &&
			nc.Labels[wellknown.CapacityReservationIDLabel] != "" {
			// As Karpenter's MarkUnavailable: the replacement must not be
			// sent back into the reservation that is going away.
			offerings.Mark(wellknown.CapacityTypeReserved, nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.ZoneLabel], string(msg.Kind))
		}
		if err := h.cordon(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		if nc.DeletionTimestamp != nil {
			retiring++ // delivered again: already retiring
			continue
		}
		if !msg.Deadline.IsZero() {
			// The instance is gone at the deadline: pods must be off it by then.
			deadline := msg.Deadline.UTC().Format(time.RFC3339)
			if err := h.Kube.AnnotateNodeClaim(ctx, nc, map[string]*string{wellknown.NodeClaimTerminationTimestampAnnotation: &deadline}); err != nil && !kube.IsGone(err) {
				errs = append(errs, fmt.Errorf("recording the interruption deadline: %w", err))
				continue
			}
		}
		if err := h.Kube.DeleteNodeClaim(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		now := metav1.NewTime(h.Clock.Now())
		nc.DeletionTimestamp = &now
		acted = append(acted, nc.Name)
		h.Events.Normal(obj, "TerminatingOnInterruption", "Interruption triggered termination for the NodeClaim")
		h.Metrics.Count("karpenter_nodeclaims_disrupted_total", 1, map[string]string{
			"reason": msg.MessageType(), "nodepool": nc.Labels[wellknown.NodePoolLabel], "capacity_type": nc.Labels[wellknown.CapacityTypeLabel],
		})
		h.Log.Info("retiring interrupted nodeclaim", "nodeclaim", nc.Name, "instance", id, "kind", msg.Kind, "deadline", msg.Deadline)
	}
	return acted, retiring, errors.Join(errs...)
}

// reservationInstances are the instances of the claims launched into a
// capacity reservation (by their karpenter.k8s.aws/capacity-reservation-id
// label), sorted: a Capacity Block's expiration warning names the block,
// not its instances.
func reservationInstances(claims map[string]*karpv1.NodeClaim, reservationID string) []string {
	var ids []string
	for id, nc := range claims {
		if reservationID != "" && nc.Labels[wellknown.CapacityReservationIDLabel] == reservationID {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// cordon taints the claim's node karpenter.sh/disrupted:NoSchedule at once,
// so nothing new lands there while the replacement comes up.
func (h *Handler) cordon(ctx context.Context, nc *karpv1.NodeClaim) error {
	if nc.Status.NodeName == "" {
		return nil
	}
	node, added, err := h.Kube.TaintDisrupted(ctx, nc.Status.NodeName, h.Clock.Now())
	if kube.IsGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cordoning: %w", err)
	}
	if added {
		h.Events.Normal(record.ObjectOf(nodeGVK, node), "TerminatingOnInterruption", "Interruption triggered termination for the Node")
	}
	return nil
}
