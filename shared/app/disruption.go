package app

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/karpless/karpless/functions"
	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/ticks/disrupt"
	"github.com/karpless/karpless/shared/ticks/provision"
)

// Disrupter is a disruption engine for one invocation.
func (e *Env) Disrupter() *disrupt.Disrupter {
	// One reader for the tick and the provisioning it borrows: a pass's
	// two reads are one call.
	shifts := e.zonalShifts()
	p := e.Provisioner()
	p.ZonalShifts = shifts
	return &disrupt.Disrupter{
		Config:       e.Config,
		Kube:         e.Kube,
		Provisioning: Lend(p),
		ZonalShifts:  shifts,
		Instances:    instance.NewProvider(e.AWS.EC2, e.Config.ClusterName),
		EC2:          e.AWS.EC2,
		Templates:    &launchtemplate.Provider{EC2: e.AWS.EC2, Now: e.Clock.Now, Region: e.Config.Region},
		Clock:        e.Clock,
		Log:          e.Log,
		MetricsOut:   e.Out,
		Decisions:    e.Decisions(functions.Disruption),
	}
}

// DisruptionHandler is the disruption Lambda's handler (EventBridge schedule).
func (e *Env) DisruptionHandler() func(context.Context, lambdaevents.CloudWatchEvent) (disrupt.Summary, error) {
	return func(ctx context.Context, _ lambdaevents.CloudWatchEvent) (disrupt.Summary, error) {
		return e.Disrupter().Run(ctx, invocationID(ctx, "disruption"))
	}
}

// Lend adapts the provisioner to what the disruption tick borrows from it.
func Lend(p *provision.Provisioner) disrupt.Provisioning { return lender{p} }

type lender struct{ p *provision.Provisioner }

func (l lender) NewSession(ctx context.Context, ncs []*awsv1.EC2NodeClass, metrics *record.Metrics, events *record.Recorder) (disrupt.Session, error) {
	l.p.Metrics, l.p.Events = metrics, events
	s, err := l.p.NewSession(ctx, ncs)
	if err != nil {
		return nil, err
	}
	return s, nil
}
