package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/kube"
)

// Engine is what the handler drives; Install and Uninstall of this
// package unless a test substitutes it.
type Engine interface {
	Install(ctx context.Context, c *kube.Clients, o Options) (Result, error)
	Uninstall(ctx context.Context, c *kube.Clients, o Options) (Result, error)
}

type kubeEngine struct{}

func (kubeEngine) Install(ctx context.Context, c *kube.Clients, o Options) (Result, error) {
	return Install(ctx, c, o)
}

func (kubeEngine) Uninstall(ctx context.Context, c *kube.Clients, o Options) (Result, error) {
	return Uninstall(ctx, c, o)
}

// maxReason keeps the answer under CloudFormation's 4 KiB response limit.
const maxReason = 1500

// StackReader is the CloudFormation call the handler makes: the status of
// its own stack.
type StackReader interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// Doer sends the answer to CloudFormation's presigned URL.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// HandlerConfig wires the custom resource handler.
type HandlerConfig struct {
	// Options are what to install and remove: the function's own
	// settings (OptionsFrom), never the event's.
	Options Options
	// StackID is the ARN of the function's own stack (STACK_ID): only
	// its requests are answered.
	StackID string
	// Region is the stack's: answers go only to CloudFormation's
	// response bucket of this region.
	Region string
	// Stacks reads the stack's status: a Delete is acted on only while
	// CloudFormation shows the stack being deleted, a Create or Update
	// only while it shows it being created or updated.
	Stacks StackReader
	// HTTP sends the answer; http.DefaultClient when nil.
	HTTP Doer
	// Connect builds the clients of the cluster. It is called per request,
	// inside the time budget, so that a cluster that is gone only fails
	// that request (and a Delete still succeeds).
	Connect func(ctx context.Context) (*kube.Clients, error)
	// Engine: Install/Uninstall of this package when nil.
	Engine Engine
	Log    *slog.Logger

	// Zero values take the defaults above.
	Margin        time.Duration
	RetryWindow   time.Duration
	DeleteTimeout time.Duration
	// RetryDelay is the first pause between retries (doubling, at most
	// 10 s); 1 s when zero.
	RetryDelay time.Duration
	// LogStream is named in failure reasons (lambdacontext.LogStreamName).
	LogStream string
}

// PhysicalID is the custom resource's physical ID: one per cluster, stable
// across updates, so CloudFormation never replaces (and so deletes) it
// because of an Update.
func PhysicalID(cluster string) string { return "karpless-bootstrap-" + cluster }

// Handler returns the bootstrap Lambda's handler. It first makes sure the
// request is CloudFormation's, for this function's stack: the stack ID
// is the configured one and the answer would go to CloudFormation's
// response bucket of the stack's region. Anything else is refused with an
// error, nothing done and nothing sent. Then Create and Update run
// Install, Delete runs Uninstall, each only while CloudFormation shows the
// stack doing that, and the answer is sent. The function never panics (a
// panic becomes an error), returns before ctx's deadline minus the margin,
// and answers SUCCESS to every Delete it cannot carry out, after logging
// why: a stack whose cluster is gone must still be deletable.
func Handler(cfg HandlerConfig) cfn.CustomResourceLambdaFunction {
	if cfg.Engine == nil {
		cfg.Engine = kubeEngine{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Margin == 0 {
		cfg.Margin = timing.BootstrapMargin
	}
	if cfg.RetryWindow == 0 {
		cfg.RetryWindow = timing.BootstrapRetryWindow
	}
	if cfg.DeleteTimeout == 0 {
		cfg.DeleteTimeout = timing.BootstrapDeleteTimeout
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Second
	}
	h := &handler{cfg: cfg}
	return h.serve
}

type handler struct{ cfg HandlerConfig }

func (h *handler) serve(ctx context.Context, ev cfn.Event) (string, error) {
	log := h.cfg.Log.With("requestType", string(ev.RequestType), "requestId", ev.RequestID,
		"stackId", ev.StackID, "logicalResourceId", ev.LogicalResourceID, "physicalResourceId", ev.PhysicalResourceID)
	if err := h.authentic(ev); err != nil {
		log.Error("refused a request that is not CloudFormation's for this function's stack: nothing done, no answer sent", "error", err.Error())
		return "", fmt.Errorf("refused: %w", err)
	}
	r := cfn.NewResponse(&ev)
	var err error
	r.PhysicalResourceID, r.Data, err = h.handle(ctx, ev, log)
	if r.PhysicalResourceID == "" {
		r.PhysicalResourceID = h.fallbackID(ev)
	}
	r.Status = cfn.StatusSuccess
	if err != nil {
		r.Status, r.Reason = cfn.StatusFailed, err.Error()
	}
	if err := h.send(ctx, r, ev.ResponseURL); err != nil {
		// Not an error to Lambda, which would run the request again:
		// CloudFormation times out on it and the deploy says so.
		log.Error("answering CloudFormation", "status", string(r.Status), "error", err.Error())
		return err.Error(), nil
	}
	log.Info("answered CloudFormation", "status", string(r.Status), "physicalResourceId", r.PhysicalResourceID)
	return "", nil
}

// authentic says why ev is not CloudFormation's request for this stack
// (nil when it is): its stack ID is the configured one, and its answer
// would go to CloudFormation's response bucket of the stack's region.
func (h *handler) authentic(ev cfn.Event) error {
	switch {
	case h.cfg.StackID == "":
		return errors.New("the function knows no stack ID (STACK_ID): it answers no request")
	case ev.StackID != h.cfg.StackID:
		return fmt.Errorf("the request is of stack %q, the function belongs to %q", ev.StackID, h.cfg.StackID)
	case ev.RequestID == "" || ev.LogicalResourceID == "":
		return errors.New("the request has no RequestId or LogicalResourceId")
	}
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate, cfn.RequestDelete:
	default:
		return fmt.Errorf("unknown request type %q", ev.RequestType)
	}
	return CheckResponseURL(ev.ResponseURL, h.cfg.Region)
}

// send PUTs the answer to the presigned URL, without a content type (S3
// checks the signature, which covers none).
func (h *handler) send(ctx context.Context, r *cfn.Response, url string) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	res, err := h.cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the response URL answered %d: %s", res.StatusCode, msg)
	}
	return nil
}

func (h *handler) handle(ctx context.Context, ev cfn.Event, log *slog.Logger) (id string, data map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("bootstrap panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if id == "" {
				id = h.fallbackID(ev)
			}
			data = nil
			err = fmt.Errorf("bootstrap panicked: %v", p)
			if ev.RequestType == cfn.RequestDelete {
				log.Error("answering SUCCESS to the Delete anyway, so the stack deletion is not blocked; remove leftovers by hand (docs/deploy.md)")
				err = nil
			}
		}
		if err != nil {
			err = h.reason(err)
		}
	}()
	if len(ev.ResourceProperties) > 0 {
		log.Debug("custom resource properties (only SettingsHash is read)", "properties", ev.ResourceProperties)
	}
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		return h.install(ctx, ev, log)
	case cfn.RequestDelete:
		return h.uninstall(ctx, ev, log), nil, nil
	}
	return h.fallbackID(ev), nil, fmt.Errorf("unknown request type %q", ev.RequestType)
}

// fallbackID is the physical ID to answer with when the settings cannot
// be used: the configured cluster's, or the one CloudFormation already has.
func (h *handler) fallbackID(ev cfn.Event) string {
	if h.cfg.Options.ClusterName != "" {
		return PhysicalID(h.cfg.Options.ClusterName)
	}
	if ev.PhysicalResourceID != "" {
		return ev.PhysicalResourceID
	}
	return ev.RequestID
}

// Stack statuses in which a request of that type is CloudFormation's own.
var (
	// A Create comes while the stack is created (or, for a resource an
	// update adds, updated).
	createStatuses = []cfntypes.StackStatus{cfntypes.StackStatusCreateInProgress, cfntypes.StackStatusUpdateInProgress}
	// An Update comes while the stack is updated or an update is rolled
	// back.
	updateStatuses = []cfntypes.StackStatus{cfntypes.StackStatusUpdateInProgress, cfntypes.StackStatusUpdateRollbackInProgress}
)

func (h *handler) install(ctx context.Context, ev cfn.Event, log *slog.Logger) (string, map[string]any, error) {
	o := h.cfg.Options
	id := PhysicalID(o.ClusterName)
	if err := o.Validate(); err != nil {
		return h.fallbackID(ev), nil, fmt.Errorf("invalid settings of the bootstrap function: %w", err)
	}
	if ev.RequestType == cfn.RequestUpdate && ev.PhysicalResourceID != id {
		// CloudFormation will send a Delete for the old ID after this
		// Update succeeds; uninstall() recognises and ignores it.
		log.Warn("physical resource ID changes; the Delete CloudFormation sends for the old one will remove nothing", "old", ev.PhysicalResourceID, "new", id)
	}
	data := map[string]any{
		"ClusterRole":      ClusterRoleName,
		"Namespace":        o.withDefaults().Namespace,
		"ControllersGroup": o.withDefaults().ControllersGroup,
	}

	ctx, cancel := h.budget(ctx, 0)
	defer cancel()
	status, err := h.stackStatus(ctx, log)
	if err != nil {
		return id, nil, err
	}
	want := createStatuses
	if ev.RequestType == cfn.RequestUpdate {
		want = updateStatuses
	}
	if !slices.Contains(want, status) {
		return id, nil, fmt.Errorf("CloudFormation shows stack %s %s: a %s of its bootstrap is not CloudFormation's now; nothing installed", h.cfg.StackID, status, ev.RequestType)
	}
	if got, mine := fmt.Sprint(ev.ResourceProperties[SettingsHashProperty]), o.SettingsHash(); got != mine {
		if status == cfntypes.StackStatusUpdateRollbackInProgress {
			// CloudFormation rolls the custom resource back before the
			// function's environment: these settings are the failed
			// update's, and the next deploy applies the stack's.
			log.Warn("rolling back: the function's settings are still the failed update's; nothing re-applied", "requestSettings", got, "functionSettings", mine)
			return id, data, nil
		}
		return id, nil, fmt.Errorf("the request's settings (hash %s) are not the function's (hash %s): CloudFormation updates the function before its custom resource, so this request is not the stack's; nothing installed", got, mine)
	}

	o.Log = log
	start := time.Now()
	res, err := h.retry(ctx, log, func(ctx context.Context) (Result, error) {
		c, err := h.cfg.Connect(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("connecting to cluster %s: %w", o.ClusterName, err)
		}
		return h.cfg.Engine.Install(ctx, c, o)
	})
	logResult(log, "install", res, time.Since(start))
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w; stopped before the function's deadline so that CloudFormation gets an answer now (the install is idempotent: retry the deployment)", err)
		}
		return id, nil, fmt.Errorf("installing into cluster %s: %w", o.ClusterName, err)
	}
	return id, data, nil
}

// uninstall answers every Delete with SUCCESS (returning the ID to keep);
// what it could not remove, or would not, is logged. It removes anything
// only while CloudFormation shows the stack being deleted, or its first
// creation rolled back (then only what the bootstrap installed: the
// user's objects stay, whatever the settings say).
func (h *handler) uninstall(ctx context.Context, ev cfn.Event, log *slog.Logger) string {
	id := ev.PhysicalResourceID
	o := h.cfg.Options
	if o.ClusterName == "" || id != PhysicalID(o.ClusterName) {
		// A replaced resource (an Update answered with a new ID), a
		// resource of another cluster, or a Create that never answered:
		// nothing of this cluster's installation belongs to it.
		log.Info("Delete of a physical ID that is not this cluster's installation: nothing to remove", "expected", PhysicalID(o.ClusterName))
		return id
	}
	ctx, cancel := h.budget(ctx, h.cfg.DeleteTimeout)
	defer cancel()
	status, err := h.stackStatus(ctx, log)
	if err != nil {
		log.Error("cannot confirm that the stack is being deleted: removing nothing, answering SUCCESS so the stack deletion goes on. "+leftovers, "error", err.Error())
		return id
	}
	switch status {
	case cfntypes.StackStatusDeleteInProgress:
	case cfntypes.StackStatusRollbackInProgress:
		o.RemoveUserObjects = false
		log.Info("the stack's creation is rolled back: removing what the bootstrap installed, none of the user's objects")
	default:
		log.Warn("CloudFormation does not show the stack being deleted: removing nothing", "stackStatus", string(status))
		return id
	}
	// Only the options Uninstall uses need to be valid.
	o.DefaultNodePool = false
	if err := o.Validate(); err != nil {
		log.Error("invalid settings; removing with the default namespace and group, and none of the user's objects", "error", err)
		o.Namespace, o.ControllersGroup, o.RemoveUserObjects = DefaultNamespace, "", false
	}
	o.Log = log

	start := time.Now()
	res, err := h.retry(ctx, log, func(ctx context.Context) (Result, error) {
		c, err := h.cfg.Connect(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("connecting to cluster %s: %w", o.ClusterName, err)
		}
		return h.cfg.Engine.Uninstall(ctx, c, o)
	})
	logResult(log, "uninstall", res, time.Since(start))
	if err != nil {
		log.Error("could not remove Karpless from the cluster; answering SUCCESS so the stack deletion goes on. "+leftovers,
			"cluster", o.ClusterName, "error", err.Error(), "elapsed", time.Since(start).String())
	}
	return id
}

// leftovers says what to remove by hand from a cluster that still exists.
var leftovers = "If the cluster still exists, remove the leftovers by hand: the ClusterRole and ClusterRoleBinding " + ClusterRoleName +
	", the Role and RoleBinding " + RoleName + ", the FlowSchemas " + strings.Join(FlowSchemas(), ", ") +
	", the ConfigMaps " + strings.Join(append(StateConfigMaps(), PauseConfigMap), ", ") +
	", and the default NodePool and EC2NodeClass, all labelled " + ManagedByLabel + "=" + ManagedByValue

// stackStatus reads CloudFormation's status of the function's stack,
// asking again after any error (throttling, a grant still propagating)
// for the retry window; a stack CloudFormation does not know is an
// answer, not a reason to ask again.
func (h *handler) stackStatus(ctx context.Context, log *slog.Logger) (cfntypes.StackStatus, error) {
	if h.cfg.Stacks == nil {
		return "", errors.New("no CloudFormation client to read the stack's status")
	}
	start := time.Now()
	delay := h.cfg.RetryDelay
	for attempt := 1; ; attempt++ {
		out, err := h.cfg.Stacks.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(h.cfg.StackID)})
		if err == nil {
			for _, s := range out.Stacks {
				if aws.ToString(s.StackId) == h.cfg.StackID {
					return s.StackStatus, nil
				}
			}
			return "", fmt.Errorf("CloudFormation did not describe stack %s", h.cfg.StackID)
		}
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "ValidationError" {
			return "", fmt.Errorf("reading the status of stack %s: %w", h.cfg.StackID, err)
		}
		if ctx.Err() != nil || time.Since(start)+delay > h.cfg.RetryWindow {
			return "", fmt.Errorf("reading the status of stack %s: %w", h.cfg.StackID, err)
		}
		log.Warn("retrying DescribeStacks", "attempt", attempt, "error", err.Error(), "in", delay.String())
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("reading the status of stack %s: %w", h.cfg.StackID, err)
		case <-t.C:
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// budget derives the context a request runs in: it ends the margin before
// the Lambda deadline, and after limit when limit is set.
func (h *handler) budget(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	var end time.Time
	if limit > 0 {
		end = time.Now().Add(limit)
	}
	if dl, ok := ctx.Deadline(); ok {
		if d := dl.Add(-h.cfg.Margin); end.IsZero() || d.Before(end) {
			end = d
		}
	}
	if end.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, end)
}

// retry runs op again after authorization and transient errors, for at
// most RetryWindow from the first attempt. op must be idempotent.
func (h *handler) retry(ctx context.Context, log *slog.Logger, op func(context.Context) (Result, error)) (Result, error) {
	start := time.Now()
	delay := h.cfg.RetryDelay
	for attempt := 1; ; attempt++ {
		res, err := op(ctx)
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		kind := retryable(err)
		if kind == "" || time.Since(start)+delay > h.cfg.RetryWindow {
			return res, err
		}
		log.Warn("retrying", "attempt", attempt, "why", kind, "error", err.Error(), "in", delay.String())
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// retryable says why err is worth another attempt, or "" if it is not.
func retryable(err error) string {
	switch {
	case apierrors.IsUnauthorized(err):
		return "unauthorized: the access entry may still be propagating"
	case apierrors.IsForbidden(err) && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return "forbidden: the access policy may still be propagating"
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsConflict(err):
		return "transient API error"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection error"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded) {
		return "network timeout"
	}
	return ""
}

// reason shortens an error for CloudFormation's answer and points at the log.
func (h *handler) reason(err error) error {
	msg := err.Error()
	if len(msg) > maxReason {
		msg = msg[:maxReason] + "..."
	}
	if h.cfg.LogStream != "" {
		msg += " (details in log stream " + h.cfg.LogStream + ")"
	}
	return errors.New(msg)
}

func logResult(log *slog.Logger, op string, r Result, d time.Duration) {
	log.Info("bootstrap "+op, "applied", r.Applied, "created", r.Created, "kept", r.Kept,
		"deleted", r.Deleted, "left", r.Left, "duration", d.String())
}
