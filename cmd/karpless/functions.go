package main

import (
	"sort"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/shared/app"
)

// trigger is how AWS invokes a function, which decides the payload
// `karpless local tick` builds.
type trigger int

const (
	// schedule: an EventBridge scheduled event.
	schedule trigger = iota
	// queue: a batch from the interruption queue, as Lambda's SQS event
	// source mapping delivers it (with ReportBatchItemFailures).
	queue
)

// function is a Lambda function `karpless local tick` can run: its real
// handler, built from the environment exactly as its Lambda main builds it.
type function struct {
	trigger trigger
	// handler wraps the function's typed handler in lambda.NewHandler:
	// bytes in, bytes out, with Lambda's JSON decoding.
	handler func(env *app.Env) lambda.Handler
}

// handlers are what `karpless local tick` runs, one per Lambda
// function the CDK app deploys (bootstrap runs at deploy time, through
// `karpless local up`).
var handlers = map[string]function{
	functions.Provisioner: {trigger: schedule, handler: func(env *app.Env) lambda.Handler {
		return lambda.NewHandler(env.ProvisionerHandler())
	}},
	functions.Interruption: {trigger: queue, handler: func(env *app.Env) lambda.Handler {
		return lambda.NewHandler(env.InterruptionHandler())
	}},
	functions.Disruption: {trigger: schedule, handler: func(env *app.Env) lambda.Handler {
		return lambda.NewHandler(env.DisruptionHandler())
	}},
	// The watcher starts the provisioner through the emulator's Lambda
	// Invoke, which `local up` serves with this runtime.
	functions.Watcher: {trigger: schedule, handler: func(env *app.Env) lambda.Handler {
		return lambda.NewHandler(env.WatcherHandler(functions.Provisioner))
	}},
}

func functionNames() []string {
	var out []string
	for n := range handlers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
