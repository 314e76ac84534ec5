package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/karpless/karpless/events"
	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/eventsource"
)

// scheduleEntry is one EventBridge schedule rule of the deployed stack: the
// function it invokes, how often, and the function's Lambda timeout, which
// is each invocation's deadline.
type scheduleEntry struct {
	name    string
	rate    time.Duration
	timeout time.Duration
	// continuous: deployed only with responsiveness continuous (the
	// watcher), which runs to its deadline, so a test's faster rate
	// shortens its timeout with it.
	continuous bool
}

// schedules are the rules infra/stack creates (rate(1 minute) each, no
// retries), with the timeouts it gives the functions (tickTimeout). One
// line schedules another function; its handler goes in handlers
// (functions.go).
var schedules = []scheduleEntry{
	{functions.Provisioner, time.Minute, 70 * time.Second, false},
	{functions.Disruption, time.Minute, 70 * time.Second, false},
	{functions.Watcher, time.Minute, 75 * time.Second, true},
}

// activeSchedules are the schedules deployed with a responsiveness.
func activeSchedules(responsiveness string) []scheduleEntry {
	var out []scheduleEntry
	for _, e := range schedules {
		if !e.continuous || responsiveness == config.ResponsivenessContinuous {
			out = append(out, e)
		}
	}
	return out
}

// The interruption function's event source mapping, as infra/stack
// configures it: batches of up to 10 gathered for up to a second, the
// function's 60 s timeout, and the queue's visibility timeout of six
// times that.
const (
	interruptionTimeout    = 60 * time.Second
	interruptionBatchSize  = 10
	interruptionBatchWait  = time.Second
	interruptionVisibility = 6 * interruptionTimeout
)

// ScheduleRateEnv overrides the rate of every schedule of `local up` (a Go
// duration). It is for tests, which cannot wait a minute between ticks;
// the default is EventBridge's one minute.
const ScheduleRateEnv = "KARPLESS_LOCAL_SCHEDULE_RATE"

// scheduleRate is the rate override, or 0 for each schedule's own.
func scheduleRate() (time.Duration, error) {
	v := os.Getenv(ScheduleRateEnv)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive duration", ScheduleRateEnv, v)
	}
	return d, nil
}

// functionLookup is the environment a function's invocation reads: its own
// (the emulator, its identity, the cluster), then the process's. Nothing of
// the user's own AWS setup (a profile, a role) may leak into it.
func functionLookup(st localState, name string, extra map[string]string) func(string) (string, bool) {
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		_ = os.Unsetenv(k)
	}
	env := st.awsEnv(name)
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
}

// invocationContext is what Lambda gives an invocation: a deadline of the
// function's timeout and a fresh request id in the Lambda context.
func invocationContext(ctx context.Context, st localState, name string, timeout time.Duration) (context.Context, context.CancelFunc, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	id := newRequestID()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       id,
		InvokedFunctionArn: fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s-%s", st.Region, emulator.DefaultAccountID, st.ClusterName, name),
	})
	return ctx, cancel, id
}

// lambdaRuntime runs the functions of a `local up` as Lambda does: each
// invocation in a container of its own (a warm one when one is idle, else a
// new one, loaded as the function's main loads it), so invocations that
// overlap share nothing but the cluster and AWS.
type lambdaRuntime struct {
	st       localState
	logLevel string
	logs     io.Writer // the functions' logs
	metrics  io.Writer // the functions' metrics (CloudWatch embedded metric format)
	log      *slog.Logger

	mu   sync.Mutex
	idle map[string][]*app.Env
	// stopped refuses new invocations; stop is closed with it. wg counts
	// the invocations in flight (added under mu, so never after stopped).
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newLambdaRuntime(st localState, logLevel string, logs, metrics io.Writer, log *slog.Logger) *lambdaRuntime {
	return &lambdaRuntime{st: st, logLevel: logLevel, logs: logs, metrics: metrics, log: log, idle: map[string][]*app.Env{}, stop: make(chan struct{})}
}

// begin counts an invocation in, unless the runtime has stopped.
func (rt *lambdaRuntime) begin() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.stopped {
		return false
	}
	rt.wg.Add(1)
	return true
}

// errStopped is an invocation's error once `local up` is stopping.
var errStopped = errors.New("the local functions are stopping")

// container takes an idle container of the function, or starts one.
func (rt *lambdaRuntime) container(ctx context.Context, name string) (*app.Env, error) {
	rt.mu.Lock()
	if l := rt.idle[name]; len(l) > 0 {
		env := l[len(l)-1]
		rt.idle[name] = l[:len(l)-1]
		rt.mu.Unlock()
		return env, nil
	}
	rt.mu.Unlock()
	env, err := app.Load(ctx, functionLookup(rt.st, name, map[string]string{"LOG_LEVEL": rt.logLevel}))
	if err != nil {
		return nil, fmt.Errorf("loading the %s function: %w", name, err)
	}
	// CloudWatch would get what the function writes: here its log goes
	// beside the log of `local up`, its metrics (dozens of lines a tick)
	// to their own file.
	env.Log = record.NewLogger(rt.logs, rt.logLevel).With("function", name)
	env.Out = rt.metrics
	return env, nil
}

func (rt *lambdaRuntime) release(name string, env *app.Env) {
	rt.mu.Lock()
	rt.idle[name] = append(rt.idle[name], env)
	rt.mu.Unlock()
}

// warm starts one container of each function, so a configuration error
// stops `local up` at once rather than at the first invocation.
func (rt *lambdaRuntime) warm(ctx context.Context, names ...string) error {
	for _, name := range names {
		env, err := rt.container(ctx, name)
		if err != nil {
			return err
		}
		rt.release(name, env)
	}
	return nil
}

// invoke runs one invocation of the function's handler with payload, under
// the function's timeout. The payload may be built from the request id.
// Stopping the runtime cancels it, whoever started it (a schedule, the
// queue's mapping, or an Invoke through the emulator).
func (rt *lambdaRuntime) invoke(ctx context.Context, name string, timeout time.Duration, payload func(id string) ([]byte, error)) ([]byte, error) {
	fn, ok := handlers[name]
	if !ok {
		return nil, fmt.Errorf("no handler for function %q", name)
	}
	if !rt.begin() {
		return nil, errStopped
	}
	defer rt.wg.Done()
	ctx, cancel, id := invocationContext(ctx, rt.st, name, timeout)
	defer cancel()
	// Stopping cancels every invocation, whoever started it.
	go func() {
		select {
		case <-rt.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	env, err := rt.container(ctx, name)
	if err != nil {
		return nil, err
	}
	defer rt.release(name, env)
	in, err := payload(id)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rt.log.Debug("invoking", "function", name, "requestId", id)
	out, err := fn.handler(env).Invoke(ctx, in)
	if err != nil {
		rt.log.Warn("invocation failed", "function", name, "requestId", id, "after", time.Since(start).Round(time.Millisecond), "error", err)
		return nil, err
	}
	rt.log.Debug("invocation done", "function", name, "requestId", id, "took", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// serveInvoke makes the emulator's Lambda Invoke of the provisioner (the
// watcher's) an invocation of this runtime, under the provisioner's
// timeout, as Lambda runs an asynchronous invocation.
func (rt *lambdaRuntime) serveInvoke(emu *emulator.Emulator) {
	for _, e := range schedules {
		if e.name != functions.Provisioner {
			continue
		}
		emu.RegisterFunction(e.name, func(ctx context.Context, payload []byte) ([]byte, error) {
			return rt.invoke(ctx, e.name, e.timeout, func(string) ([]byte, error) { return payload, nil })
		})
	}
}

// schedule fires e every rate until ctx ends, the first time at once, as
// EventBridge fires a rule: without waiting for the previous invocation,
// which may still run (the functions' leases keep overlapping ticks apart).
func (rt *lambdaRuntime) schedule(ctx context.Context, e scheduleEntry) {
	t := time.NewTicker(e.rate)
	defer t.Stop()
	for {
		if !rt.begin() {
			return
		}
		go func() {
			defer rt.wg.Done()
			_, _ = rt.invoke(ctx, e.name, e.timeout, func(id string) ([]byte, error) {
				return events.NewScheduledTick(id, time.Now()), nil
			})
		}()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// drain is the interruption function's event source mapping: it polls the
// queue with the function's credentials and invokes it with each batch.
func (rt *lambdaRuntime) drain(ctx context.Context) error {
	env, err := rt.container(ctx, functions.Interruption)
	if err != nil {
		return err
	}
	client := env.AWS.SQS
	rt.release(functions.Interruption, env)
	m := eventsource.Mapping{
		SQS: client, QueueURL: rt.st.InterruptionQueueURL, Region: rt.st.Region,
		QueueARN:  fmt.Sprintf("arn:aws:sqs:%s:%s:%s", rt.st.Region, emulator.DefaultAccountID, rt.st.ClusterName),
		BatchSize: interruptionBatchSize, Wait: interruptionBatchWait, VisibilityTimeout: interruptionVisibility,
	}
	err = m.Run(ctx, func(ctx context.Context, batch lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		var resp lambdaevents.SQSEventResponse
		out, err := rt.invoke(ctx, functions.Interruption, interruptionTimeout, func(string) ([]byte, error) { return json.Marshal(batch) })
		if err != nil {
			return resp, err
		}
		return resp, json.Unmarshal(out, &resp)
	}, func(o eventsource.Outcome, err error) {
		switch {
		case ctx.Err() != nil:
			// Stopping: a receive or a batch cut short says nothing.
		case err != nil:
			rt.log.Warn("interruption queue", "error", err)
		case o.HandlerErr != nil:
			rt.log.Warn("interruption batch failed; it stays in the queue", "messages", o.Received, "error", o.HandlerErr)
		default:
			// The function logs what it did; every launch sends state
			// changes, so a line of this per batch is only for -v.
			rt.log.Debug("interruption batch", "messages", o.Received, "deleted", o.Deleted, "leftForRetry", o.Failed)
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// runLambdas starts the schedules and the interruption mapping (each if
// asked) and returns a stop function that cancels them, the invocations in
// flight included, and waits for those to return (their leases released).
func (rt *lambdaRuntime) runLambdas(ctx context.Context, schedules []scheduleEntry, interruption bool, rate time.Duration) (stop func(), err error) {
	scheduled := len(schedules) > 0
	var names []string
	for _, e := range schedules {
		names = append(names, e.name)
	}
	if interruption {
		names = append(names, functions.Interruption)
	}
	if err := rt.warm(ctx, names...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var loops sync.WaitGroup
	if scheduled {
		for _, e := range schedules {
			if rate > 0 {
				e.rate = rate
				if e.continuous {
					// It watches until its deadline less the margin:
					// a period and a second, as at the minute.
					e.timeout = rate + timing.DefaultDeadlineMargin + time.Second
				}
			}
			rt.log.Info("scheduled", "function", e.name, "rate", e.rate, "timeout", e.timeout)
			loops.Add(1)
			go func() {
				defer loops.Done()
				rt.schedule(ctx, e)
			}()
		}
	}
	if interruption {
		rt.log.Info("draining the interruption queue", "function", functions.Interruption, "queue", rt.st.InterruptionQueueURL)
		loops.Add(1)
		go func() {
			defer loops.Done()
			if err := rt.drain(ctx); err != nil {
				rt.log.Error("the interruption queue's mapping stopped", "error", err)
			}
		}()
	}
	return func() {
		rt.mu.Lock()
		if !rt.stopped {
			rt.stopped = true
			close(rt.stop)
		}
		rt.mu.Unlock()
		cancel()
		loops.Wait()
		done := make(chan struct{})
		go func() { rt.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			rt.log.Warn("invocations still running 30 s after their context was cancelled")
		}
	}, nil
}

// syncWriter serialises writes from the loggers of `local up` (its own,
// the emulator's, each function container's) to one stream.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// scheduledNames lists the scheduled functions, for usage and messages.
func scheduledNames() string {
	names := make([]string, len(schedules))
	for i, e := range schedules {
		names[i] = e.name
	}
	return strings.Join(names, ", ")
}
