package app

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/karpless/karpless/shared/aws/instance"
	awszonalshift "github.com/karpless/karpless/shared/aws/zonalshift"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/function/tick"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/ticks/interrupt"
	"github.com/karpless/karpless/shared/ticks/provision"
	"github.com/karpless/karpless/shared/ticks/termination"
	"github.com/karpless/karpless/shared/ticks/watch"
)

// ProvisionerHandler is the provisioner's Lambda handler (EventBridge schedule).
func (e *Env) ProvisionerHandler() func(context.Context, lambdaevents.CloudWatchEvent) (provision.Summary, error) {
	return func(ctx context.Context, ev lambdaevents.CloudWatchEvent) (provision.Summary, error) {
		p := e.Provisioner()
		p.OffSchedule = ev.Source == watch.PayloadSource
		return p.Run(ctx, invocationID(ctx, "provisioner"))
	}
}

// Interruption is an interruption engine for one invocation.
func (e *Env) Interruption() *interrupt.Handler {
	metrics := record.NewMetricsAt("Karpless", record.Level(e.Config.MetricsLevel))
	events := record.NewRecorder(e.Kube.Core.CoreV1(), e.Clock, e.Log)
	p := e.Provisioner()
	p.Metrics, p.Events = metrics, events
	account, queueARN := e.Config.InterruptionQueue()
	return &interrupt.Handler{
		Kube: e.Kube, Provisioner: p, Clock: e.Clock, Log: e.Log, Events: events, Metrics: metrics,
		Drainer: drainer{e: e, shifts: p.ZonalShifts, t: &termination.Terminator{
			Kube: e.Kube, Instances: instance.NewProvider(e.AWS.EC2, e.Config.ClusterName),
			Clock: e.Clock, Log: e.Log, Events: events, Metrics: metrics,
		}},
		Namespace: e.Config.Namespace, UnavailableTTL: e.Config.UnavailableOfferingsTTL, LeaseWait: timing.LeaseWait(e.Config.LeaseDuration),
		Queue: e.AWS.SQS, QueueURL: e.Config.InterruptionQueueURL, QueueARN: queueARN, Account: account, Region: e.Config.Region,
	}
}

// InterruptionHandler is the interruption Lambda's handler (SQS event
// source mapping with ReportBatchItemFailures). Per-message failures are
// reported in the response, never as a function error, which would return
// the whole batch to the queue.
func (e *Env) InterruptionHandler() func(context.Context, lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	return func(ctx context.Context, batch lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		if e.Config.Shadow() {
			return e.leaveToTheQueue(batch), nil
		}
		h := e.Interruption()
		res, err := h.Handle(ctx, batch, invocationID(ctx, "interruption"))
		if err != nil {
			e.Log.Warn("interruption batch had failures", "failed", len(res.Response.BatchItemFailures), "error", err)
		}
		tick.Flush(ctx, h.Events, h.Metrics, e.Out, e.Clock, e.Log)
		e.Log.Info("interruption batch done", "messages", len(batch.Records), "acted", res.Acted, "dropped", res.Dropped, "refused", res.Refused, "replaced", res.Replaced, "failed", len(res.Response.BatchItemFailures))
		return res.Response, nil
	}
}

// drainer starts the drain of deleted NodeClaims from a fresh snapshot.
type drainer struct {
	e *Env
	t *termination.Terminator
	// shifts reads the zones ARC shifts the cluster away from (nil: none):
	// no instance of theirs is terminated.
	shifts awszonalshift.Source
}

func (d drainer) Drain(ctx context.Context) error {
	snap, err := snapshot.Take(ctx, d.e.Kube, d.e.Clock)
	if err != nil {
		return err
	}
	shifted, err := awszonalshift.Read(ctx, d.shifts)
	if err != nil {
		return err
	}
	t := *d.t
	if p, ok := t.Instances.(instance.ZonalShifter); ok {
		t.Instances = p.WithZonalShift(shifted, cloud.KnownInstances(snap.NodeClaims, snap.NodeClasses))
	}
	_, err = t.Reconcile(ctx, snap)
	return err
}

// leaveToTheQueue answers a batch in shadow mode: a shadow stack wires no
// queue to the interruption function, and one that reaches it anyway is
// neither acted on nor consumed: every message is reported failed, so it
// stays in its queue for whoever acts on it.
func (e *Env) leaveToTheQueue(batch lambdaevents.SQSEvent) lambdaevents.SQSEventResponse {
	var res lambdaevents.SQSEventResponse
	for _, m := range batch.Records {
		res.BatchItemFailures = append(res.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
	}
	e.Log.Warn("shadow mode: the interruption function acts on no message; the batch is left to its queue", "messages", len(batch.Records))
	return res
}
