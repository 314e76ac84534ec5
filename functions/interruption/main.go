// Command interruption is the interruption Lambda: it handles batches of
// EC2 interruption events from SQS (see shared/ticks/interrupt).
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
		fmt.Fprintf(os.Stderr, "interruption: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(env.InterruptionHandler())
}
