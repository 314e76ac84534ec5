package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
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

// c1 is the test stack's settings.
func c1() Options {
	return Options{ClusterName: "c1", NodeRoleName: "KarpenterNodeRole-c1"}
}

// rig is a handler of the test stack with fakes around it.
type rig struct {
	h       cfn.CustomResourceLambdaFunction
	stacks  *fakeStacks
	answers *answers
	opts    Options
}

func newRig(f *fakeEngine, mod ...func(*HandlerConfig)) *rig {
	r := &rig{stacks: &fakeStacks{}, answers: &answers{}}
	cfg := HandlerConfig{
		Options: c1(), StackID: testStackID, Region: testRegion, Stacks: r.stacks, HTTP: r.answers,
		Connect: connected, Engine: f, RetryDelay: 5 * time.Millisecond,
	}
	for _, m := range mod {
		m(&cfg)
	}
	r.opts = cfg.Options
	r.h = Handler(cfg)
	return r
}

// run sends CloudFormation's request of type typ, the stack showing the
// status CloudFormation shows meanwhile, and returns its one answer.
func (r *rig) run(t *testing.T, ctx context.Context, typ cfn.RequestType, physical string, kv ...string) answer {
	t.Helper()
	r.stacks.set(inProgress(typ))
	return r.send(t, ctx, cfnEvent(typ, physical, r.opts, kv...))
}

// send sends ev as it is and returns its one answer.
func (r *rig) send(t *testing.T, ctx context.Context, ev cfn.Event) answer {
	t.Helper()
	reason, err := r.h(ctx, ev)
	if err != nil || reason != "" {
		t.Fatalf("%s: handler = %q, %v", ev.RequestType, reason, err)
	}
	got := r.answers.take()
	if len(got) != 1 {
		t.Fatalf("%s: %d answers, want 1: %+v", ev.RequestType, len(got), got)
	}
	if got[0].URL != ev.ResponseURL || got[0].StackId != testStackID || got[0].RequestId != ev.RequestID || got[0].LogicalResourceId != ev.LogicalResourceID {
		t.Fatalf("%s: answer %+v", ev.RequestType, got[0])
	}
	return got[0]
}

func TestHandlerMapsRequestTypes(t *testing.T) {
	f := &fakeEngine{}
	r := newRig(f, func(c *HandlerConfig) {
		c.Options.DefaultNodePool, c.Options.RemoveUserObjects = true, true
		c.Options.ControllersGroup, c.Options.Namespace = "team:karpless", "karpless"
	})
	ctx := context.Background()

	a := r.run(t, ctx, cfn.RequestCreate, "")
	if a.Status != "SUCCESS" || a.PhysicalResourceId != "karpless-bootstrap-c1" {
		t.Fatalf("Create = %+v", a)
	}
	if a.Data["ClusterRole"] != ClusterRoleName || a.Data["Namespace"] != "karpless" || a.Data["ControllersGroup"] != "team:karpless" {
		t.Errorf("data = %v", a.Data)
	}
	if len(f.installs) != 1 || !f.installs[0].DefaultNodePool || f.installs[0].NodeRoleName != "KarpenterNodeRole-c1" || f.installs[0].ClusterName != "c1" {
		t.Fatalf("installs = %+v", f.installs)
	}

	// Update: same ID, even if CloudFormation had another one.
	for _, old := range []string{"karpless-bootstrap-c1", "some-request-id"} {
		if a := r.run(t, ctx, cfn.RequestUpdate, old); a.Status != "SUCCESS" || a.PhysicalResourceId != "karpless-bootstrap-c1" {
			t.Fatalf("Update from %s = %+v", old, a)
		}
	}
	if len(f.installs) != 3 {
		t.Errorf("installs = %d, want 3", len(f.installs))
	}

	if a := r.run(t, ctx, cfn.RequestDelete, "karpless-bootstrap-c1"); a.Status != "SUCCESS" || a.PhysicalResourceId != "karpless-bootstrap-c1" || a.Data != nil {
		t.Fatalf("Delete = %+v", a)
	}
	if len(f.uninstall) != 1 || !f.uninstall[0].RemoveUserObjects || f.uninstall[0].Namespace != "karpless" {
		t.Fatalf("uninstalls = %+v", f.uninstall)
	}
}

// The request's properties choose nothing: whatever they say of the mode,
// the controllers' group, the namespace or user objects, the function's
// own settings are what is installed and removed.
func TestHandlerReadsNoOptionFromTheEvent(t *testing.T) {
	f := &fakeEngine{}
	r := newRig(f, func(c *HandlerConfig) { c.Options.Shadow = true })
	ctx := context.Background()
	hostile := []string{"Mode", "active", "RemoveUserObjectsOnDelete", "true", "ControllersGroup", "attackers",
		"Namespace", "default", "InstallDefaultNodePool", "true", "Paused", "true", "ClusterName", "other"}
	r.run(t, ctx, cfn.RequestCreate, "", hostile...)
	r.run(t, ctx, cfn.RequestUpdate, PhysicalID("c1"), hostile...)
	r.run(t, ctx, cfn.RequestDelete, PhysicalID("c1"), hostile...)
	want := r.opts
	for _, got := range append(f.installs, f.uninstall...) {
		got.Log = nil
		if got.Shadow != want.Shadow || got.RemoveUserObjects || got.ControllersGroup != want.ControllersGroup || got.Namespace != want.Namespace ||
			got.DefaultNodePool || got.Pause || got.ClusterName != "c1" {
			t.Errorf("the event chose an option: %+v", got)
		}
	}
	if len(f.installs) != 2 || len(f.uninstall) != 1 {
		t.Errorf("installs %d, uninstalls %d", len(f.installs), len(f.uninstall))
	}
}

// A request that is not CloudFormation's for this stack is refused: no
// engine call, no CloudFormation read, no answer anywhere.
func TestHandlerRefusesRequestsOfOthers(t *testing.T) {
	genuine := cfnEvent(cfn.RequestDelete, PhysicalID("c1"), c1())
	for _, tc := range []struct {
		name string
		mod  func(*cfn.Event)
	}{
		{"another stack", func(e *cfn.Event) {
			e.StackID = strings.Replace(testStackID, "Karpless-c1", "attacker", 1)
		}},
		{"no stack", func(e *cfn.Event) { e.StackID = "" }},
		{"answer to an attacker", func(e *cfn.Event) { e.ResponseURL = "https://attacker.example.com/collect" }},
		{"answer over http", func(e *cfn.Event) { e.ResponseURL = strings.Replace(testResponseURL, "https:", "http:", 1) }},
		{"answer to another region's bucket", func(e *cfn.Event) {
			e.ResponseURL = "https://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/x"
		}},
		{"a lookalike host", func(e *cfn.Event) {
			e.ResponseURL = "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com.attacker.example/x"
		}},
		{"credentials in the URL", func(e *cfn.Event) {
			e.ResponseURL = "https://user:pw@cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/x"
		}},
		{"another port", func(e *cfn.Event) {
			e.ResponseURL = "https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com:8443/x"
		}},
		{"no request id", func(e *cfn.Event) { e.RequestID = "" }},
		{"an unknown type", func(e *cfn.Event) { e.RequestType = "Purge" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeEngine{}
			r := newRig(f)
			r.stacks.set(cfntypes.StackStatusDeleteInProgress)
			ev := genuine
			tc.mod(&ev)
			if _, err := r.h(context.Background(), ev); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("err = %v, want refused", err)
			}
			if got := r.answers.take(); len(got) > 0 {
				t.Errorf("answered %+v", got)
			}
			if len(f.installs)+len(f.uninstall) > 0 || r.stacks.calls > 0 {
				t.Errorf("acted: installs %d, uninstalls %d, DescribeStacks %d", len(f.installs), len(f.uninstall), r.stacks.calls)
			}
		})
	}
	// A function that knows no stack answers nothing at all.
	f := &fakeEngine{}
	r := newRig(f, func(c *HandlerConfig) { c.StackID = "" })
	if _, err := r.h(context.Background(), genuine); err == nil || len(r.answers.take()) > 0 || len(f.uninstall) > 0 {
		t.Errorf("without a stack ID: %v", err)
	}
}

// Each request is acted on only while CloudFormation shows the stack in
// the operation that sends it; a Delete otherwise removes nothing and
// still answers SUCCESS. A rolled-back creation removes what the
// bootstrap installed and none of the user's objects.
func TestHandlerActsOnlyWhileCloudFormationDoes(t *testing.T) {
	for _, tc := range []struct {
		typ    cfn.RequestType
		status cfntypes.StackStatus
		acts   bool
		answer string
	}{
		{cfn.RequestCreate, cfntypes.StackStatusCreateInProgress, true, "SUCCESS"},
		{cfn.RequestCreate, cfntypes.StackStatusUpdateInProgress, true, "SUCCESS"},
		{cfn.RequestCreate, cfntypes.StackStatusCreateComplete, false, "FAILED"},
		{cfn.RequestCreate, cfntypes.StackStatusDeleteInProgress, false, "FAILED"},
		{cfn.RequestUpdate, cfntypes.StackStatusUpdateInProgress, true, "SUCCESS"},
		{cfn.RequestUpdate, cfntypes.StackStatusUpdateRollbackInProgress, true, "SUCCESS"},
		{cfn.RequestUpdate, cfntypes.StackStatusUpdateComplete, false, "FAILED"},
		{cfn.RequestUpdate, cfntypes.StackStatusCreateComplete, false, "FAILED"},
		{cfn.RequestDelete, cfntypes.StackStatusDeleteInProgress, true, "SUCCESS"},
		{cfn.RequestDelete, cfntypes.StackStatusRollbackInProgress, true, "SUCCESS"},
		{cfn.RequestDelete, cfntypes.StackStatusCreateComplete, false, "SUCCESS"},
		{cfn.RequestDelete, cfntypes.StackStatusUpdateComplete, false, "SUCCESS"},
		{cfn.RequestDelete, cfntypes.StackStatusUpdateCompleteCleanupInProgress, false, "SUCCESS"},
		{cfn.RequestDelete, cfntypes.StackStatusUpdateRollbackInProgress, false, "SUCCESS"},
	} {
		t.Run(string(tc.typ)+" "+string(tc.status), func(t *testing.T) {
			f := &fakeEngine{}
			r := newRig(f, func(c *HandlerConfig) { c.Options.RemoveUserObjects = true })
			r.stacks.set(tc.status)
			a := r.send(t, context.Background(), cfnEvent(tc.typ, PhysicalID("c1"), r.opts))
			if a.Status != tc.answer || a.PhysicalResourceId != PhysicalID("c1") {
				t.Errorf("answer %+v, want %s", a, tc.answer)
			}
			if acted := len(f.installs)+len(f.uninstall) > 0; acted != tc.acts {
				t.Errorf("acted %v, want %v", acted, tc.acts)
			}
			if tc.status == cfntypes.StackStatusRollbackInProgress && (len(f.uninstall) != 1 || f.uninstall[0].RemoveUserObjects) {
				t.Errorf("a rolled-back creation removed user objects: %+v", f.uninstall)
			}
			if tc.typ == cfn.RequestDelete && tc.status == cfntypes.StackStatusDeleteInProgress && (len(f.uninstall) != 1 || !f.uninstall[0].RemoveUserObjects) {
				t.Errorf("the stack's deletion did not remove user objects as configured: %+v", f.uninstall)
			}
		})
	}
	// CloudFormation cannot be read: a Create fails, a Delete removes
	// nothing and answers SUCCESS.
	f := &fakeEngine{}
	r := newRig(f, func(c *HandlerConfig) { c.RetryWindow = 50 * time.Millisecond })
	r.stacks.err = errors.New("AccessDenied: not authorized to perform cloudformation:DescribeStacks")
	if a := r.send(t, context.Background(), cfnEvent(cfn.RequestCreate, "", r.opts)); a.Status != "FAILED" || !strings.Contains(a.Reason, "DescribeStacks") {
		t.Errorf("Create without the stack's status: %+v", a)
	}
	if a := r.send(t, context.Background(), cfnEvent(cfn.RequestDelete, PhysicalID("c1"), r.opts)); a.Status != "SUCCESS" {
		t.Errorf("Delete without the stack's status: %+v", a)
	}
	if len(f.installs)+len(f.uninstall) > 0 {
		t.Errorf("acted without the stack's status")
	}
	if r.stacks.calls < 2 {
		t.Errorf("DescribeStacks asked %d times: errors are retried within the window", r.stacks.calls)
	}
}

// A Create or Update carries the hash of the settings the stack wrote
// into the function; one that does not match is not CloudFormation's
// (which updates the function first), except in a rollback, where
// CloudFormation reaches the custom resource first and the settings are
// the failed update's: nothing is re-applied then, and SUCCESS lets the
// rollback finish.
func TestHandlerSettingsHash(t *testing.T) {
	f := &fakeEngine{}
	r := newRig(f)
	other := r.opts
	other.ControllersGroup = "attackers"
	for _, typ := range []cfn.RequestType{cfn.RequestCreate, cfn.RequestUpdate} {
		r.stacks.set(inProgress(typ))
		if a := r.send(t, context.Background(), cfnEvent(typ, PhysicalID("c1"), other)); a.Status != "FAILED" || !strings.Contains(a.Reason, "not the function's") {
			t.Errorf("%s with other settings: %+v", typ, a)
		}
	}
	r.stacks.set(cfntypes.StackStatusUpdateRollbackInProgress)
	if a := r.send(t, context.Background(), cfnEvent(cfn.RequestUpdate, PhysicalID("c1"), other)); a.Status != "SUCCESS" {
		t.Errorf("rollback with the failed update's settings: %+v", a)
	}
	if len(f.installs) != 0 {
		t.Errorf("installed with settings that are not the function's: %+v", f.installs)
	}
	// Every option is in the hash.
	base := c1()
	seen := map[string]string{base.SettingsHash(): "base"}
	for name, mod := range map[string]func(*Options){
		"cluster": func(o *Options) { o.ClusterName = "c2" }, "namespace": func(o *Options) { o.Namespace = "karpless" },
		"group": func(o *Options) { o.ControllersGroup = "g" }, "role": func(o *Options) { o.NodeRoleName = "r" },
		"default pool": func(o *Options) { o.DefaultNodePool = true }, "remove": func(o *Options) { o.RemoveUserObjects = true },
		"pause": func(o *Options) { o.Pause = true }, "shadow": func(o *Options) { o.Shadow = true },
	} {
		o := base
		mod(&o)
		if prev, dup := seen[o.SettingsHash()]; dup {
			t.Errorf("%s hashes as %s", name, prev)
		}
		seen[o.SettingsHash()] = name
	}
	if defaulted := (Options{ClusterName: "c1", NodeRoleName: "KarpenterNodeRole-c1", Namespace: DefaultNamespace, ControllersGroup: DefaultControllersGroup}); defaulted.SettingsHash() != base.SettingsHash() {
		t.Error("the defaults change the hash")
	}
}

func TestCheckResponseURL(t *testing.T) {
	for _, tc := range []struct {
		url, region string
		ok          bool
	}{
		{testResponseURL, "us-west-2", true},
		{"https://cloudformation-custom-resource-response-uswest2.s3-us-west-2.amazonaws.com/arn%3Aaws/x?sig=1", "us-west-2", true},
		{"https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x", "us-east-1", true},
		{"https://s3.us-west-2.amazonaws.com/cloudformation-custom-resource-response-uswest2/x", "us-west-2", true},
		{"https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/x", "cn-north-1", true},
		{"https://CloudFormation-Custom-Resource-Response-USWest2.S3.us-west-2.amazonaws.com:443/x", "us-west-2", true},
		{"https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/x", "eu-west-1", false},
		{"https://cloudformation-custom-resource-response-cnnorth1.s3.amazonaws.com/x", "cn-north-1", false},
		{"https://s3.us-west-2.amazonaws.com/attacker-bucket/cloudformation-custom-resource-response-uswest2/x", "us-west-2", false},
		{"https://s3.us-west-2.amazonaws.com/cloudformation-custom-resource-response-uswest2", "us-west-2", false},
		{"https://attacker.example/cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/", "us-west-2", false},
		{"http://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com/x", "us-west-2", false},
		{"https://cloudformation-custom-resource-response-uswest2.s3.us-west-2.amazonaws.com:80/x", "us-west-2", false},
		{"https://127.0.0.1/x", "us-west-2", false},
		{"", "us-west-2", false},
		{"://", "us-west-2", false},
	} {
		if err := CheckResponseURL(tc.url, tc.region); (err == nil) != tc.ok {
			t.Errorf("%q in %s: %v, want ok=%v", tc.url, tc.region, err, tc.ok)
		}
	}
}

// A Delete for a physical ID that is not this cluster's (the old ID of a
// replaced resource, or another cluster's) must not uninstall anything.
func TestHandlerDeleteOfAnotherPhysicalIDRemovesNothing(t *testing.T) {
	f := &fakeEngine{}
	r := newRig(f)
	for _, id := range []string{"some-request-id", "karpless-bootstrap-other", ""} {
		if a := r.run(t, context.Background(), cfn.RequestDelete, id); a.Status != "SUCCESS" || (id != "" && a.PhysicalResourceId != id) {
			t.Errorf("Delete(%q) = %+v", id, a)
		}
	}
	if len(f.uninstall) != 0 {
		t.Errorf("uninstalled for a foreign ID: %+v", f.uninstall)
	}
}

// Settings the function cannot use fail a Create or Update with the
// reason; a Delete still removes what the bootstrap installed, with the
// default namespace and group, and none of the user's objects.
func TestHandlerValidatesSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"system group", func(o *Options) { o.ControllersGroup = "system:masters" }, "reserved"},
		{"default pool without role", func(o *Options) { o.DefaultNodePool, o.NodeRoleName = true, "" }, "needs the node role name"},
		{"role ARN", func(o *Options) { o.DefaultNodePool, o.NodeRoleName = true, "arn:aws:iam::123456789012:role/n" }, "not an IAM role name"},
		{"bad namespace", func(o *Options) { o.Namespace = "Karpless" }, `namespace "Karpless"`},
		{"shadow removing user objects", func(o *Options) { o.Shadow, o.RemoveUserObjects = true, true }, "shadow mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeEngine{}
			r := newRig(f, func(c *HandlerConfig) { tc.mod(&c.Options); c.Options.RemoveUserObjects = true })
			for _, typ := range []cfn.RequestType{cfn.RequestCreate, cfn.RequestUpdate} {
				a := r.run(t, context.Background(), typ, PhysicalID("c1"))
				if a.Status != "FAILED" || !strings.Contains(a.Reason, tc.want) || a.PhysicalResourceId != PhysicalID("c1") {
					t.Errorf("%s: %+v, want FAILED with %q", typ, a, tc.want)
				}
			}
			if len(f.installs) != 0 {
				t.Errorf("installed with invalid settings")
			}
			if a := r.run(t, context.Background(), cfn.RequestDelete, PhysicalID("c1")); a.Status != "SUCCESS" {
				t.Errorf("Delete: %+v", a)
			}
			if tc.name != "default pool without role" && tc.name != "role ARN" {
				if len(f.uninstall) != 1 || f.uninstall[0].RemoveUserObjects {
					t.Errorf("Delete with invalid settings: %+v", f.uninstall)
				}
			}
		})
	}
}

// The handler returns before the Lambda deadline minus the margin, with an
// error that says why, even if the engine does not return on its own.
func TestHandlerFinishesBeforeTheDeadline(t *testing.T) {
	f := &fakeEngine{block: func(ctx context.Context) { <-ctx.Done() }, errs: []error{context.DeadlineExceeded}}
	r := newRig(f, func(c *HandlerConfig) { c.Margin = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	a := r.run(t, ctx, cfn.RequestCreate, "")
	if time.Now().After(deadline) {
		t.Errorf("answered after the Lambda deadline")
	}
	if a.Status != "FAILED" || !strings.Contains(a.Reason, "before the function's deadline") || a.PhysicalResourceId != "karpless-bootstrap-c1" {
		t.Errorf("= %+v", a)
	}

	// A deadline already inside the margin fails at once.
	f = &fakeEngine{block: func(ctx context.Context) { <-ctx.Done() }, errs: []error{context.DeadlineExceeded}}
	r = newRig(f, func(c *HandlerConfig) { c.Margin = time.Minute })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if a := r.run(t, ctx2, cfn.RequestUpdate, "karpless-bootstrap-c1"); a.Status != "FAILED" {
		t.Errorf("inside the margin: %+v", a)
	}
}

var (
	forbidden    = apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "x", errors.New("no access policy yet"))
	unauthorized = apierrors.NewUnauthorized("token not recognised")
)

func TestHandlerRetriesAuthErrorsWithinTheWindow(t *testing.T) {
	f := &fakeEngine{errs: []error{unauthorized, forbidden, forbidden}}
	if a := newRig(f).run(t, context.Background(), cfn.RequestCreate, ""); a.Status != "SUCCESS" {
		t.Fatal(a)
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
	a := newRig(f, func(c *HandlerConfig) { c.RetryWindow = 100 * time.Millisecond; c.RetryDelay = 20 * time.Millisecond }).run(t, context.Background(), cfn.RequestCreate, "")
	if a.Status != "FAILED" || !strings.Contains(a.Reason, "forbidden") {
		t.Errorf("answer = %+v", a)
	}
	if n := len(f.installs); n < 2 || n > 5 {
		t.Errorf("attempts = %d", n)
	}

	// Other errors are not retried.
	f = &fakeEngine{errs: []error{apierrors.NewBadRequest("bad")}}
	if a := newRig(f).run(t, context.Background(), cfn.RequestCreate, ""); a.Status != "FAILED" || len(f.installs) != 1 {
		t.Errorf("bad request: %+v after %d attempts", a, len(f.installs))
	}
}

func TestHandlerDeleteAlwaysSucceedsInBoundedTime(t *testing.T) {
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
			r := newRig(tc.engine, func(c *HandlerConfig) {
				c.Connect = tc.connect
				c.DeleteTimeout = 300 * time.Millisecond
				c.RetryDelay = 50 * time.Millisecond
			})
			// The request ends within its delete timeout (well before
			// this test's own deadline), whatever the cluster does.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if a := r.run(t, ctx, cfn.RequestDelete, "karpless-bootstrap-c1"); a.Status != "SUCCESS" || a.PhysicalResourceId != "karpless-bootstrap-c1" {
				t.Errorf("= %+v", a)
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
	r := newRig(nil, func(c *HandlerConfig) {
		c.Engine = nil // the real one
		c.Connect = func(context.Context) (*kube.Clients, error) {
			return kube.NewClients(&rest.Config{Host: url, Timeout: 100 * time.Millisecond})
		}
		c.DeleteTimeout, c.RetryWindow, c.RetryDelay = 500*time.Millisecond, 300*time.Millisecond, 50*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if a := r.run(t, ctx, cfn.RequestDelete, "karpless-bootstrap-c1"); a.Status != "SUCCESS" {
		t.Fatal(a)
	}
	// Create against the same cluster retries the connection for the
	// retry window, then fails with the connection error.
	if a := r.run(t, ctx, cfn.RequestCreate, ""); a.Status != "FAILED" || !strings.Contains(a.Reason, "connection refused") {
		t.Errorf("Create: %+v", a)
	}
}

// TestAnswersOnce drives the handler through a real HTTPS server standing
// in for S3 (every host dials it): one PUT per request with the status
// and ID and no content type, and no error back to Lambda (which would
// run the request again).
func TestAnswersOnce(t *testing.T) {
	var mu sync.Mutex
	var got []answer
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var a answer
		if err := json.Unmarshal(b, &a); err != nil || r.Method != http.MethodPut || r.Header.Get("Content-Type") != "" {
			t.Errorf("%s %q %s", r.Method, r.Header.Get("Content-Type"), b)
		}
		a.URL = r.Host
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}))
	defer srv.Close()
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	tr.TLSClientConfig.InsecureSkipVerify = true // the test server's certificate names no S3 host
	s3 := &http.Client{Transport: tr}

	for _, tc := range []struct {
		name   string
		engine *fakeEngine
		typ    cfn.RequestType
		status string
	}{
		{"create", &fakeEngine{}, cfn.RequestCreate, "SUCCESS"},
		{"create fails", &fakeEngine{errs: []error{errors.New("boom")}}, cfn.RequestCreate, "FAILED"},
		{"create panics", &fakeEngine{panicMsg: "bug"}, cfn.RequestCreate, "FAILED"},
		{"delete panics", &fakeEngine{panicMsg: "bug"}, cfn.RequestDelete, "SUCCESS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			r := newRig(tc.engine, func(c *HandlerConfig) { c.LogStream = "2026/01/01/[$LATEST]abc"; c.HTTP = s3 })
			r.stacks.set(inProgress(tc.typ))
			reason, err := r.h(context.Background(), cfnEvent(tc.typ, PhysicalID("c1"), r.opts))
			if err != nil || reason != "" {
				t.Errorf("handler = %q, %v", reason, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("%d answers", len(got))
			}
			a := got[0]
			if a.Status != tc.status || a.PhysicalResourceId != "karpless-bootstrap-c1" || a.URL != responseHost(testResponseURL) {
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
