package app

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/launchtemplate"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

// Disrupter is a disruption engine for one invocation.
func (e *Env) Disrupter() *disrupt.Disrupter {
	return &disrupt.Disrupter{
		Config:      e.Config,
		Kube:        e.Kube,
		Provisioner: e.Provisioner(),
		Instances:   instance.NewProvider(e.AWS.EC2, e.Config.ClusterName),
		EC2:         e.AWS.EC2,
		Templates:   &launchtemplate.Provider{EC2: e.AWS.EC2, Now: e.Clock.Now},
		Clock:       e.Clock,
		Log:         e.Log,
		MetricsOut:  e.Out,
	}
}

// DisruptionHandler is the disruption Lambda's handler (EventBridge schedule).
func (e *Env) DisruptionHandler() func(context.Context, lambdaevents.CloudWatchEvent) (disrupt.Summary, error) {
	return func(ctx context.Context, _ lambdaevents.CloudWatchEvent) (disrupt.Summary, error) {
		return e.Disrupter().Run(ctx, invocationID(ctx, "disruption"))
	}
}
