package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

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
	// handler wraps the function's typed handler as Lambda's runtime
	// calls it: bytes in, bytes out, JSON both ways.
	handler func(env *app.Env) invoker
}

// handlers are what `karpless local tick` runs, one per Lambda
// function the CDK app deploys (bootstrap runs at deploy time, through
// `karpless local up`).
var handlers = map[string]function{
	functions.Provisioner: {trigger: schedule, handler: func(env *app.Env) invoker {
		return jsonHandler(env.ProvisionerHandler())
	}},
	functions.Interruption: {trigger: queue, handler: func(env *app.Env) invoker {
		return jsonHandler(env.InterruptionHandler())
	}},
	functions.Disruption: {trigger: schedule, handler: func(env *app.Env) invoker {
		return jsonHandler(env.DisruptionHandler())
	}},
	// The watcher starts the provisioner through the emulator's Lambda
	// Invoke, which `local up` serves with this runtime.
	functions.Watcher: {trigger: schedule, handler: func(env *app.Env) invoker {
		return jsonHandler(env.WatcherHandler(functions.Provisioner))
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

// invoker is a handler as Lambda's runtime calls it: the event's JSON in,
// the answer's JSON out. It is what lambda.NewHandler makes, without the
// lambda package: its RPC mode links net/rpc, whose debug page links
// html/template, which keeps every exported AWS SDK method in the binary.
type invoker func(ctx context.Context, payload []byte) ([]byte, error)

// Invoke runs the handler on payload.
func (f invoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) { return f(ctx, payload) }

// jsonHandler decodes the event into In, runs h and encodes its answer, as
// the Lambda runtime does for a typed handler.
func jsonHandler[In, Out any](h func(context.Context, In) (Out, error)) invoker {
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		var in In
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, fmt.Errorf("decoding the event: %w", err)
		}
		out, err := h(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}
