// Package interruption acts on EC2 interruption events from the SQS queue:
// it retires the affected NodeClaims and launches their replacements at once.
//
// A batch is handled as one unit of work: every message is parsed (malformed
// and unknown ones are dropped with a log line), the instances named are
// mapped to NodeClaims with one list, the actions are taken (each idempotent:
// a duplicate delivery finds the claim already deleting), then a provisioning
// pass launches capacity for the displaced pods and the drain starts. Only
// messages whose action failed are reported back to SQS for redelivery.
package interruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/events"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/ice"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/record"
	"github.com/karpless/karpless/shared/wellknown"
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

// Handler handles batches of interruption messages.
type Handler struct {
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
	Dropped   int      // malformed or unknown messages
	Replaced  bool     // a provisioning pass ran
	TaintedAt time.Time
}

type parsed struct {
	id  string
	msg events.Message
}

// Handle processes one SQS batch. holder identifies the invocation.
func (h *Handler) Handle(ctx context.Context, batch lambdaevents.SQSEvent, holder string) (Result, error) {
	var res Result
	var work []parsed
	for _, rec := range batch.Records {
		msg, err := events.Parse([]byte(rec.Body))
		if err != nil {
			// Retrying cannot fix a malformed body: drop it, loudly.
			h.Log.Warn("dropping malformed interruption message", "message_id", rec.MessageId, "error", err)
			h.Metrics.Count("karpenter_interruption_received_messages_total", 1, map[string]string{"message_type": "malformed"})
			res.Dropped++
			continue
		}
		h.Metrics.Count("karpenter_interruption_received_messages_total", 1, map[string]string{"message_type": msg.MessageType()})
		if !msg.Time.IsZero() {
			h.Metrics.Observe("karpenter_interruption_message_queue_duration_seconds", "Seconds", h.Clock.Since(msg.Time).Seconds(), nil)
		}
		if msg.Action() == events.Ignore {
			h.Log.Info("ignoring interruption message", "message_id", rec.MessageId, "kind", msg.Kind, "detail_type", msg.DetailType)
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
		return res, err
	}
	offerings, err := ice.Load(ctx, h.Kube.Core.CoreV1(), h.Namespace, h.UnavailableTTL, h.Clock)
	if err != nil {
		offerings = nil
		h.Log.Warn("reading unavailable offerings", "error", err)
	}
	var errs []error
	for _, w := range work {
		acted, err := h.act(ctx, w.msg, claims, offerings)
		res.Acted = append(res.Acted, acted...)
		if err != nil {
			errs = append(errs, fmt.Errorf("message %s: %w", w.id, err))
			res.Response.BatchItemFailures = append(res.Response.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: w.id})
		}
	}
	if len(res.Acted) > 0 {
		res.TaintedAt = h.Clock.Now()
	}
	if offerings != nil {
		if err := offerings.Save(ctx); err != nil {
			h.Log.Warn("saving unavailable offerings", "error", err)
		}
	}
	if len(res.Acted) > 0 {
		// Capacity for the displaced pods now, not at the next tick. The
		// deletions above are durable, so a failure here is only logged:
		// the provisioner's next pass launches what is missing.
		if h.Provisioner != nil {
			ok, err := h.Provisioner.PassWithLease(ctx, holder, h.LeaseWait)
			res.Replaced = ok
			if err != nil {
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

// claimsByInstance lists NodeClaims once for the whole batch.
func (h *Handler) claimsByInstance(ctx context.Context) (map[string]*karpv1.NodeClaim, error) {
	list, err := h.Kube.NodeClaims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	out := map[string]*karpv1.NodeClaim{}
	for i := range list.Items {
		if id := wellknown.InstanceIDFromProviderID(list.Items[i].Status.ProviderID); id != "" {
			out[id] = &list.Items[i]
		}
	}
	return out, nil
}

// act takes the message's action on each instance it names.
func (h *Handler) act(ctx context.Context, msg events.Message, claims map[string]*karpv1.NodeClaim, offerings *ice.Cache) ([]string, error) {
	var acted []string
	var errs []error
	for _, id := range msg.InstanceIDs {
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
		if err := h.cordon(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		if nc.DeletionTimestamp != nil {
			continue // a duplicate: already retiring
		}
		if !msg.Deadline.IsZero() {
			// The instance is gone at the deadline: pods must be off it by then.
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				wellknown.NodeClaimTerminationTimestampAnnotation: msg.Deadline.UTC().Format(time.RFC3339),
			}}})
			if _, err := h.Kube.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("recording deadline on nodeclaim %s: %w", nc.Name, err))
				continue
			}
		}
		err := h.Kube.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &nc.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err))
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
	return acted, errors.Join(errs...)
}

// cordon taints the claim's node karpenter.sh/disrupted:NoSchedule at once,
// so nothing new lands there while the replacement comes up.
func (h *Handler) cordon(ctx context.Context, nc *karpv1.NodeClaim) error {
	if nc.Status.NodeName == "" {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := h.Kube.Core.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wellknown.DisruptedNoScheduleTaint) }) {
			return nil
		}
		taint := wellknown.DisruptedNoScheduleTaint
		taint.TimeAdded = new(metav1.NewTime(h.Clock.Now()))
		node.Spec.Taints = append(node.Spec.Taints, taint)
		if _, err := h.Kube.Core.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
		h.Events.Normal(record.ObjectOf(nodeGVK, node), "TerminatingOnInterruption", "Interruption triggered termination for the Node")
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cordoning node %s: %w", nc.Status.NodeName, err)
	}
	return nil
}
