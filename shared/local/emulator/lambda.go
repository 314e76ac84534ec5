package emulator

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// lambdaInvokePrefix is the path of Lambda's Invoke (REST-JSON):
// POST /2015-03-31/functions/{FunctionName}/invocations.
const lambdaInvokePrefix = "/2015-03-31/functions/"

// asyncDelayMin is the least time between an asynchronous Invoke's 202 and
// its function's start: Lambda queues the event first.
const asyncDelayMin = 10 * time.Millisecond

// FunctionHandler runs a function registered with RegisterFunction on an
// invocation's payload, as the local runtime would.
type FunctionHandler func(ctx context.Context, payload []byte) ([]byte, error)

// RegisterFunction makes Invoke of name run h: synchronously
// (RequestResponse, the answer's payload is h's) or after a delay, maybe
// twice (Event; see Hostility.AsyncDelayMax and AsyncDuplicateRate). An
// asynchronous run's context ends when the emulator closes.
func (e *Emulator) RegisterFunction(name string, h FunctionHandler) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.functions == nil {
		e.world.functions = map[string]FunctionHandler{}
	}
	e.world.functions[name] = h
}

// FunctionARN is the ARN of a function of the emulated account.
func (e *Emulator) FunctionARN(name string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", e.cfg.Region, e.cfg.AccountID, name)
}

// serveLambda answers Invoke; every other Lambda action is not emulated.
func (e *Emulator) serveLambda(w http.ResponseWriter, hr *http.Request, body []byte) {
	rest := strings.TrimPrefix(hr.URL.Path, lambdaInvokePrefix)
	fn, tail, _ := strings.Cut(rest, "/")
	if unescaped, err := url.PathUnescape(fn); err == nil {
		fn = unescaped
	}
	// A function is named by name, ARN or partial ARN; a qualifier (":1",
	// ":$LATEST") is accepted and ignored.
	if i := strings.LastIndex(fn, ":function:"); i >= 0 {
		fn = fn[i+len(":function:"):]
	}
	fn, _, _ = strings.Cut(fn, ":")
	kind := hr.Header.Get("X-Amz-Invocation-Type")
	if kind == "" {
		kind = "RequestResponse"
	}
	r := &request{service: "lambda", action: "Invoke", params: url.Values{"FunctionName": {fn}, "InvocationType": {kind}}, body: body, http: hr}
	var h handlerFunc = func(e *Emulator, r *request) (any, *apiError) {
		if hr.Method != http.MethodPost || tail != "invocations" {
			return nil, errorf(404, "UnknownOperationException", "%s %s is not emulated", hr.Method, hr.URL.Path)
		}
		run, ok := e.world.functions[fn]
		if !ok {
			return nil, errorf(404, "ResourceNotFoundException", "Function not found: %s", e.FunctionARN(fn))
		}
		switch kind {
		case "DryRun":
			return lambdaAnswer{status: http.StatusNoContent}, nil
		case "Event":
			times := 1
			if e.hostile.chance(e.hostile.AsyncDuplicateRate) {
				times = 2
				e.hostile.note(EventAsyncDuplicate)
			}
			for range times {
				e.runAsync(run, asyncDelayMin+e.hostile.upTo(e.hostile.AsyncDelayMax), body)
			}
			return lambdaAnswer{status: http.StatusAccepted}, nil
		case "RequestResponse":
			// The function runs outside the lock, on the request's context.
			return lambdaAnswer{status: http.StatusOK, sync: func() ([]byte, error) { return run(hr.Context(), body) }}, nil
		}
		return nil, errorf(400, "InvalidParameterValueException", "1 validation error detected: Value '%s' at 'invocationType' failed to satisfy constraint: Member must satisfy enum value set: [Event, RequestResponse, DryRun]", kind)
	}
	e.dispatch(w, r, h, lambdaWriter{})
}

// runAsync runs an Event invocation after delay, on a context that ends
// when the emulator closes; callers hold e.mu.
func (e *Emulator) runAsync(run FunctionHandler, delay time.Duration, payload []byte) {
	e.async.Add(1)
	go func() {
		defer e.async.Done()
		select {
		case <-time.After(delay):
		case <-e.closed:
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-e.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := run(ctx, payload); err != nil {
			e.log.Info("asynchronous invocation failed", "error", err)
		}
	}()
}

// lambdaAnswer is Invoke's answer: a status, and for RequestResponse the
// function run whose result is the payload.
type lambdaAnswer struct {
	status int
	sync   func() ([]byte, error)
}

type lambdaWriter struct{}

func (lambdaWriter) ok(w http.ResponseWriter, _, requestID string, body any) {
	a := body.(lambdaAnswer)
	w.Header().Set("X-Amzn-RequestId", requestID)
	if a.sync == nil {
		writeBody(w, a.status, nil)
		return
	}
	out, err := a.sync()
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		// A function error is a 200 with X-Amz-Function-Error and the
		// error document as the payload.
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		out = fmt.Appendf(nil, `{"errorMessage":%q,"errorType":"Error"}`, err.Error())
	}
	writeBody(w, a.status, out)
}

func (lambdaWriter) fail(w http.ResponseWriter, requestID string, err *apiError) {
	restJSONWriter{}.fail(w, requestID, err)
}
