package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/kube"
)

// fakeEngine records calls and answers with err, after block (if set)
// returns.
type fakeEngine struct {
	mu        sync.Mutex
	installs  []Options
	uninstall []Options
	errs      []error // consumed one per call; nil when empty
	block     func(ctx context.Context)
	panicMsg  string
}

func (f *fakeEngine) next(ctx context.Context) error {
	if f.panicMsg != "" {
		panic(f.panicMsg)
	}
	if f.block != nil {
		f.block(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *fakeEngine) Install(ctx context.Context, _ *kube.Clients, o Options) (Result, error) {
	f.mu.Lock()
	f.installs = append(f.installs, o)
	f.mu.Unlock()
	return Result{Created: []string{"x"}}, f.next(ctx)
}

func (f *fakeEngine) Uninstall(ctx context.Context, _ *kube.Clients, o Options) (Result, error) {
	f.mu.Lock()
	f.uninstall = append(f.uninstall, o)
	f.mu.Unlock()
	return Result{}, f.next(ctx)
}

func connected(context.Context) (*kube.Clients, error) { return &kube.Clients{}, nil }

func props(kv ...string) map[string]any {
	m := map[string]any{
		"ServiceToken":              "arn:aws:lambda:us-east-1:123456789012:function:bootstrap",
		"ClusterName":               "c1",
		"NodeRoleName":              "KarpenterNodeRole-c1",
		"InstallDefaultNodePool":    "false",
		"RemoveUserObjectsOnDelete": "false",
		"CRDHash":                   "dev",
		"BootstrapSHA256":           "abc",
		"ControllersGroup":          "karpless:controllers",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<delete>" {
			delete(m, kv[i])
			continue
		}
		m[kv[i]] = kv[i+1]
	}
	return m
}

func event(typ cfn.RequestType, physical string, p map[string]any) cfn.Event {
	return cfn.Event{
		RequestType: typ, RequestID: "req-1", StackID: "arn:aws:cloudformation:us-east-1:123456789012:stack/s/1",
		LogicalResourceID: "Bootstrap", PhysicalResourceID: physical, ResourceProperties: p,
	}
}

func newHandler(f *fakeEngine, mod ...func(*HandlerConfig)) cfn.CustomResourceFunction {
	cfg := HandlerConfig{ClusterName: "c1", Connect: connected, Engine: f, RetryDelay: 5 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	return Handler(cfg)
}

func TestHandlerMapsRequestTypes(t *testing.T) {
	f := &fakeEngine{}
	h := newHandler(f)
	ctx := context.Background()

	id, data, err := h(ctx, event(cfn.RequestCreate, "", props("InstallDefaultNodePool", "true")))
	if err != nil || id != "karpless-bootstrap-c1" {
		t.Fatalf("Create = %q, %v", id, err)
	}
	if data["ClusterRole"] != ClusterRoleName || data["Namespace"] != "kube-system" || data["ControllersGroup"] != "karpless:controllers" {
		t.Errorf("data = %v", data)
	}
	if len(f.installs) != 1 || !f.installs[0].DefaultNodePool || f.installs[0].NodeRoleName != "KarpenterNodeRole-c1" || f.installs[0].ClusterName != "c1" {
		t.Fatalf("installs = %+v", f.installs)
	}

	// Update: same ID, even if CloudFormation had another one.
	for _, old := range []string{"karpless-bootstrap-c1", "some-request-id"} {
		id, _, err = h(ctx, event(cfn.RequestUpdate, old, props("ControllersGroup", "team:karpless", "Namespace", "karpless")))
		if err != nil || id != "karpless-bootstrap-c1" {
			t.Fatalf("Update from %s = %q, %v", old, id, err)
		}
	}
	if last := f.installs[len(f.installs)-1]; last.ControllersGroup != "team:karpless" || last.Namespace != "karpless" {
		t.Errorf("update options = %+v", last)
	}

	id, data, err = h(ctx, event(cfn.RequestDelete, "karpless-bootstrap-c1", props("RemoveUserObjectsOnDelete", "true")))
	if err != nil || id != "karpless-bootstrap-c1" || data != nil {
		t.Fatalf("Delete = %q, %v, %v", id, data, err)
	}
	if len(f.uninstall) != 1 || !f.uninstall[0].RemoveUserObjects {
		t.Fatalf("uninstalls = %+v", f.uninstall)
	}
}

// A Delete for a physical ID that is not this cluster's (the old ID of a
// replaced resource, or another cluster's) must not uninstall anything.
func TestHandlerDeleteOfAnotherPhysicalIDRemovesNothing(t *testing.T) {
	f := &fakeEngine{}
	h := newHandler(f)
	for _, id := range []string{"some-request-id", "karpless-bootstrap-other", ""} {
		got, _, err := h(context.Background(), event(cfn.RequestDelete, id, props()))
		if err != nil || got != id {
			t.Errorf("Delete(%q) = %q, %v", id, got, err)
		}
	}
	if len(f.uninstall) != 0 {
		t.Errorf("uninstalled for a foreign ID: %+v", f.uninstall)
	}
}

func TestHandlerValidatesProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    map[string]any
		want string
	}{
		{"missing cluster", props("ClusterName", "<delete>"), "property ClusterName is required"},
		{"empty cluster", props("ClusterName", " "), "property ClusterName is empty"},
		{"other cluster", props("ClusterName", "c2"), `names cluster "c2" but the function is configured for "c1"`},
		{"bad bool", props("InstallDefaultNodePool", "yes"), `InstallDefaultNodePool="yes" is not true or false`},
		{"number", func() map[string]any { p := props(); p["NodeRoleName"] = 7.0; return p }(), "NodeRoleName must be a string"},
		{"system group", props("ControllersGroup", "system:masters"), "reserved"},
		{"default pool without role", props("InstallDefaultNodePool", "true", "NodeRoleName", "<delete>"), "needs the node role name"},
		{"role ARN", props("InstallDefaultNodePool", "true", "NodeRoleName", "arn:aws:iam::123456789012:role/n"), "not an IAM role name"},
		{"bad namespace", props("Namespace", "Karpless"), `namespace "Karpless"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeEngine{}
			for _, typ := range []cfn.RequestType{cfn.RequestCreate, cfn.RequestUpdate} {
				id, _, err := newHandler(f)(context.Background(), event(typ, "karpless-bootstrap-c1", tc.p))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: err = %v, want %q", typ, err, tc.want)
				}
				if id != "karpless-bootstrap-c1" {
					t.Errorf("%s: id = %q", typ, id)
				}
			}
			if len(f.installs) != 0 {
				t.Errorf("installed with invalid properties")
			}
			// Delete never fails on properties; it removes no user
			// objects when it cannot read them.
			if _, _, err := newHandler(f)(context.Background(), event(cfn.RequestDelete, "karpless-bootstrap-c1", tc.p)); err != nil {
				t.Errorf("Delete: %v", err)
			}
		})
	}

	f := &fakeEngine{}
	_, _, err := newHandler(f)(context.Background(), event(cfn.RequestDelete, "karpless-bootstrap-c1", props("RemoveUserObjectsOnDelete", "maybe")))
	if err != nil || len(f.uninstall) != 1 || f.uninstall[0].RemoveUserObjects {
		t.Errorf("Delete with unreadable RemoveUserObjectsOnDelete: err=%v uninstalls=%+v", err, f.uninstall)
	}

	// Unknown properties are tolerated (and logged).
	f = &fakeEngine{}
	if _, _, err := newHandler(f)(context.Background(), event(cfn.RequestCreate, "", props("Future", "x"))); err != nil || len(f.installs) != 1 {
		t.Errorf("unknown property: %v", err)
	}
}

func TestParsePropertiesAcceptsBooleans(t *testing.T) {
	p := props()
	p["InstallDefaultNodePool"], p["RemoveUserObjectsOnDelete"] = true, "TRUE"
	got, unknown, err := ParseProperties(p)
	if err != nil || !got.InstallDefaultNodePool || !got.RemoveUserObjectsOnDelete || len(unknown) != 0 {
		t.Errorf("ParseProperties = %+v, %v, %v", got, unknown, err)
	}
}

// The handler returns before the Lambda deadline minus the margin, with an
// error that says why, even if the engine does not return on its own.
func TestHandlerFinishesBeforeTheDeadline(t *testing.T) {
	f := &fakeEngine{block: func(ctx context.Context) { <-ctx.Done() }, errs: []error{context.DeadlineExceeded}}
	h := newHandler(f, func(c *HandlerConfig) { c.Margin = 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	id, _, err := h(ctx, event(cfn.RequestCreate, "", props()))
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("returned after %s, deadline minus margin was 300ms", took)
	}
	if err == nil || !strings.Contains(err.Error(), "before the function's deadline") || id != "karpless-bootstrap-c1" {
		t.Errorf("= %q, %v", id, err)
	}

	// A deadline already inside the margin fails at once.
	f = &fakeEngine{block: func(ctx context.Context) { <-ctx.Done() }, errs: []error{context.DeadlineExceeded}}
	h = newHandler(f, func(c *HandlerConfig) { c.Margin = time.Minute })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	start = time.Now()
	if _, _, err := h(ctx2, event(cfn.RequestUpdate, "karpless-bootstrap-c1", props())); err == nil || time.Since(start) > time.Second {
		t.Errorf("inside the margin: %v after %s", err, time.Since(start))
	}
}

var (
	forbidden    = apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "x", errors.New("no access policy yet"))
	unauthorized = apierrors.NewUnauthorized("token not recognised")
)

func TestHandlerRetriesAuthErrorsWithinTheWindow(t *testing.T) {
	f := &fakeEngine{errs: []error{unauthorized, forbidden, forbidden}}
	h := newHandler(f)
	if _, _, err := h(context.Background(), event(cfn.RequestCreate, "", props())); err != nil {
		t.Fatal(err)
	}
	if len(f.installs) != 4 {
		t.Errorf("attempts = %d, want 4", len(f.installs))
	}

	// Past the window the error is the answer.
	errs := make([]error, 100)
	for i := range errs {
		errs[i] = forbidden
	}
	f = &fakeEngine{errs: errs}
	h = newHandler(f, func(c *HandlerConfig) { c.RetryWindow = 100 * time.Millisecond; c.RetryDelay = 20 * time.Millisecond })
	start := time.Now()
	_, _, err := h(context.Background(), event(cfn.RequestCreate, "", props()))
	if err == nil || !strings.Contains(err.Error(), "forbidden") || time.Since(start) > time.Second {
		t.Errorf("err = %v after %s", err, time.Since(start))
	}
	if n := len(f.installs); n < 2 || n > 5 {
		t.Errorf("attempts = %d", n)
	}

	// Other errors are not retried.
	f = &fakeEngine{errs: []error{apierrors.NewBadRequest("bad")}}
	if _, _, err := newHandler(f)(context.Background(), event(cfn.RequestCreate, "", props())); err == nil || len(f.installs) != 1 {
		t.Errorf("bad request: %v after %d attempts", err, len(f.installs))
	}
}

func TestHandlerDeleteAlwaysSucceedsInBoundedTime(t *testing.T) {
	ev := event(cfn.RequestDelete, "karpless-bootstrap-c1", props())
	for _, tc := range []struct {
		name    string
		connect func(context.Context) (*kube.Clients, error)
		engine  *fakeEngine
	}{
		{"cluster gone", func(context.Context) (*kube.Clients, error) {
			return nil, errors.New("describing EKS cluster c1: ResourceNotFoundException: No cluster found for name: c1")
		}, &fakeEngine{}},
		{"connect hangs", func(ctx context.Context) (*kube.Clients, error) { <-ctx.Done(); return nil, ctx.Err() }, &fakeEngine{}},
		{"engine hangs", connected, &fakeEngine{block: func(ctx context.Context) { <-ctx.Done() }, errs: []error{context.DeadlineExceeded}}},
		{"engine fails", connected, &fakeEngine{errs: []error{errors.New("boom")}}},
		{"engine panics", connected, &fakeEngine{panicMsg: "bug"}},
		{"forbidden forever", connected, &fakeEngine{errs: []error{forbidden, forbidden, forbidden, forbidden, forbidden, forbidden, forbidden, forbidden}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(tc.engine, func(c *HandlerConfig) {
				c.Connect = tc.connect
				c.DeleteTimeout = 300 * time.Millisecond
				c.RetryDelay = 50 * time.Millisecond
			})
			start := time.Now()
			id, _, err := h(context.Background(), ev)
			if err != nil || id != "karpless-bootstrap-c1" {
				t.Errorf("= %q, %v", id, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

// With the real engine and clients pointing at a closed port, a Delete
// still answers SUCCESS once its time is up.
func TestHandlerDeleteWithUnreachableAPI(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	h := Handler(HandlerConfig{
		ClusterName: "c1",
		Connect: func(context.Context) (*kube.Clients, error) {
			return kube.NewClients(&rest.Config{Host: url, Timeout: 100 * time.Millisecond})
		},
		DeleteTimeout: 500 * time.Millisecond,
		RetryWindow:   300 * time.Millisecond,
		RetryDelay:    50 * time.Millisecond,
	})
	start := time.Now()
	if _, _, err := h(context.Background(), event(cfn.RequestDelete, "karpless-bootstrap-c1", props())); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s", took)
	}
	// Create against the same cluster retries the connection for the
	// retry window, then fails with the connection error.
	start = time.Now()
	_, _, err := h(context.Background(), event(cfn.RequestCreate, "", props()))
	if err == nil || !strings.Contains(err.Error(), "connection refused") || time.Since(start) > 2*time.Second {
		t.Errorf("Create: %v after %s", err, time.Since(start))
	}
}

// TestLambdaWrapAnswersOnce drives the handler through cfn.LambdaWrap with
// a fake CloudFormation response URL: one PUT per request, with the status
// and ID, and no error back to Lambda (which would retry the request).
func TestLambdaWrapAnswersOnce(t *testing.T) {
	type answer struct {
		Status, PhysicalResourceId, Reason string
		Data                               map[string]any
	}
	var mu sync.Mutex
	var answers []answer
	var puts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		b, _ := io.ReadAll(r.Body)
		var a answer
		if err := json.Unmarshal(b, &a); err != nil || r.Method != http.MethodPut {
			t.Errorf("%s %s", r.Method, b)
		}
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name   string
		engine *fakeEngine
		ev     cfn.Event
		status string
	}{
		{"create", &fakeEngine{}, event(cfn.RequestCreate, "", props()), "SUCCESS"},
		{"create fails", &fakeEngine{errs: []error{errors.New("boom")}}, event(cfn.RequestCreate, "", props()), "FAILED"},
		{"create panics", &fakeEngine{panicMsg: "bug"}, event(cfn.RequestCreate, "", props()), "FAILED"},
		{"invalid", &fakeEngine{}, event(cfn.RequestCreate, "", props("ClusterName", "<delete>")), "FAILED"},
		{"delete panics", &fakeEngine{panicMsg: "bug"}, event(cfn.RequestDelete, "karpless-bootstrap-c1", props()), "SUCCESS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			puts.Store(0)
			mu.Lock()
			answers = nil
			mu.Unlock()
			tc.ev.ResponseURL = srv.URL
			reason, err := cfn.LambdaWrap(newHandler(tc.engine, func(c *HandlerConfig) { c.LogStream = "2026/01/01/[$LATEST]abc" }))(context.Background(), tc.ev)
			if err != nil || reason != "" {
				t.Errorf("wrap = %q, %v", reason, err)
			}
			if puts.Load() != 1 {
				t.Fatalf("%d answers", puts.Load())
			}
			a := answers[0]
			if a.Status != tc.status || a.PhysicalResourceId != "karpless-bootstrap-c1" {
				t.Errorf("answer = %+v", a)
			}
			if a.Status == "FAILED" && !strings.Contains(a.Reason, "log stream 2026/01/01/[$LATEST]abc") {
				t.Errorf("reason = %q", a.Reason)
			}
		})
	}
}

func TestReasonIsShortened(t *testing.T) {
	h := &handler{cfg: HandlerConfig{LogStream: "s"}}
	got := h.reason(errors.New(strings.Repeat("x", 5000))).Error()
	if len(got) > maxReason+50 || !strings.HasSuffix(got, "(details in log stream s)") {
		t.Errorf("len %d: %q", len(got), got[len(got)-40:])
	}
}
