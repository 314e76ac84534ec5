// Command watcher is the watcher Lambda (continuous responsiveness): every
// minute it watches for pending pods and joining nodes and starts the
// provisioner at once when they appear (see shared/ticks/watch).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/karpless/karpless/shared/app"
)

func main() {
	env, provisioner, err := app.LoadWatcher(context.Background(), os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "watcher: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(env.WatcherHandler(provisioner))
}
