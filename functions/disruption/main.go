// Command disruption is the disruption Lambda: once a minute it drains and
// terminates what is being deleted, collects garbage, expires old nodes and
// carries out Karpenter's voluntary disruption (emptiness, drift,
// consolidation) under NodePool budgets (see shared/ticks/disrupt).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/karpless/karpless/shared/app"
)

func main() {
	env, err := app.Load(context.Background(), os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "disruption: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(env.DisruptionHandler())
}
