// Command provisioner is the provisioner Lambda: once a minute it turns
// pending pods into NodeClaims and EC2 instances (see shared/ticks/provision).
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
		fmt.Fprintf(os.Stderr, "provisioner: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(env.ProvisionerHandler())
}
