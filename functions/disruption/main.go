// Command disruption is the disruption Lambda: once a minute it drains and
// terminates what is being deleted, collects garbage, expires old nodes and
// carries out Karpenter's voluntary disruption (emptiness, drift,
// consolidation) under NodePool budgets (see shared/disruption/orchestrate).
package main

import (
	"context"
	"fmt"
	"os"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/disruption/orchestrate"
	"github.com/karpless/karpless/shared/instance"
	"github.com/karpless/karpless/shared/launchtemplate"
)

func main() {
	env, err := app.Load(context.Background(), os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "disruption: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context, _ lambdaevents.CloudWatchEvent) (orchestrate.Summary, error) {
		return disrupter(env).Run(ctx, holder(ctx))
	})
}

// disrupter is the disruption engine for one invocation, from the
// function's environment.
func disrupter(env *app.Env) *orchestrate.Disrupter {
	return &orchestrate.Disrupter{
		Config:      env.Config,
		Kube:        env.Kube,
		Provisioner: env.Provisioner(),
		Instances:   instance.NewProvider(env.AWS.EC2, env.Config.ClusterName),
		EC2:         env.AWS.EC2,
		Templates:   &launchtemplate.Provider{EC2: env.AWS.EC2, Now: env.Clock.Now},
		Clock:       env.Clock,
		Log:         env.Log,
		MetricsOut:  env.Out,
	}
}

// holder names the invocation in the lease: the Lambda request id.
func holder(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("disruption-%s-%d", h, os.Getpid())
}
