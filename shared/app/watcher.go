package app

import (
	"context"
	"errors"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/karpless/karpless/shared/aws/invoke"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/ticks/provision"
	"github.com/karpless/karpless/shared/ticks/watch"
)

// ProvisionerFunctionEnv names the provisioner function the watcher starts.
const ProvisionerFunctionEnv = "PROVISIONER_FUNCTION_NAME"

// LoadWatcher builds the watcher's environment: the clients, without the
// catalog (the watcher runs in 128 MiB), and the provisioner's name.
func LoadWatcher(ctx context.Context, lookup func(string) (string, bool)) (*Env, string, error) {
	name, _ := lookup(ProvisionerFunctionEnv)
	if name == "" {
		return nil, "", errors.New("configuration: " + ProvisionerFunctionEnv + " is required")
	}
	env, err := connect(ctx, lookup)
	if err != nil {
		return nil, "", err
	}
	return env, name, nil
}

// Watcher is a watcher for one invocation that starts provisioner, a
// function of this environment's account.
func (e *Env) Watcher(provisioner watch.Invoker) *watch.Watcher {
	return &watch.Watcher{
		Core: e.Kube.Core, NodePools: e.Kube.NodePools, CapacityBuffers: e.Kube.CapacityBuffers(""),
		Invoker: provisioner, Namespace: e.Config.Namespace, Lease: provision.LeaseName,
		Window: timing.WatcherWindow, BatchIdle: e.Config.BatchIdle, BatchMax: e.Config.BatchMax,
		Margin: e.Config.DeadlineMargin, Clock: e.Clock, Log: e.Log.With("function", "watcher"),
	}
}

// WatcherHandler is the watcher Lambda's handler (EventBridge schedule,
// every minute): it watches for a minute and starts the provisioner
// function named provisioner when work appears.
func (e *Env) WatcherHandler(provisioner string) func(context.Context, lambdaevents.CloudWatchEvent) (watch.Summary, error) {
	fn := invoke.Function{Lambda: e.AWS.Lambda, Name: provisioner}
	return func(ctx context.Context, _ lambdaevents.CloudWatchEvent) (watch.Summary, error) {
		return e.Watcher(fn).Run(ctx)
	}
}
