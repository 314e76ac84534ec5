package app

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/karpless/karpless/shared/disruption/orchestrate"
	"github.com/karpless/karpless/shared/instance"
	"github.com/karpless/karpless/shared/launchtemplate"
)

// Disrupter is a disruption engine for one invocation.
func (e *Env) Disrupter() *orchestrate.Disrupter {
	return &orchestrate.Disrupter{
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
func (e *Env) DisruptionHandler() func(context.Context, lambdaevents.CloudWatchEvent) (orchestrate.Summary, error) {
	return func(ctx context.Context, _ lambdaevents.CloudWatchEvent) (orchestrate.Summary, error) {
		return e.Disrupter().Run(ctx, invocationID(ctx, "disruption"))
	}
}
