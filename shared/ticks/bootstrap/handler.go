package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
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

// HandlerConfig wires the custom resource handler.
type HandlerConfig struct {
	// ClusterName is the cluster the function is configured for
	// (CLUSTER_NAME); the custom resource must name the same one.
	ClusterName string
	// Namespace is used when the properties name none (KARPLESS_NAMESPACE).
	Namespace string
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

// Handler returns the CloudFormation custom resource function: Create and
// Update run Install, Delete runs Uninstall. Wrap it with cfn.LambdaWrap,
// which sends the answer. The function never panics (a panic becomes an
// error), returns before ctx's deadline minus the margin, and answers
// SUCCESS to every Delete it cannot carry out, after logging why: a stack
// whose cluster is gone must still be deletable.
func Handler(cfg HandlerConfig) cfn.CustomResourceFunction {
	if cfg.Engine == nil {
		cfg.Engine = kubeEngine{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
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
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	h := &handler{cfg: cfg}
	return h.handle
}

type handler struct{ cfg HandlerConfig }

func (h *handler) handle(ctx context.Context, ev cfn.Event) (id string, data map[string]any, err error) {
	log := h.cfg.Log.With("requestType", string(ev.RequestType), "requestId", ev.RequestID,
		"stackId", ev.StackID, "logicalResourceId", ev.LogicalResourceID, "physicalResourceId", ev.PhysicalResourceID)
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
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		return h.install(ctx, ev, log)
	case cfn.RequestDelete:
		return h.uninstall(ctx, ev, log), nil, nil
	}
	return h.fallbackID(ev), nil, fmt.Errorf("unknown request type %q", ev.RequestType)
}

// fallbackID is the physical ID to answer with when the properties cannot
// be read: the configured cluster's, or the one CloudFormation already has.
func (h *handler) fallbackID(ev cfn.Event) string {
	if h.cfg.ClusterName != "" {
		return PhysicalID(h.cfg.ClusterName)
	}
	if ev.PhysicalResourceID != "" {
		return ev.PhysicalResourceID
	}
	return PhysicalID("unconfigured")
}

func (h *handler) install(ctx context.Context, ev cfn.Event, log *slog.Logger) (string, map[string]any, error) {
	props, unknown, err := ParseProperties(ev.ResourceProperties)
	if len(unknown) > 0 {
		log.Warn("ignoring unknown custom resource properties", "properties", unknown)
	}
	if err != nil {
		return h.fallbackID(ev), nil, fmt.Errorf("invalid custom resource properties: %w", err)
	}
	if h.cfg.ClusterName != "" && props.ClusterName != h.cfg.ClusterName {
		return h.fallbackID(ev), nil, fmt.Errorf("the custom resource names cluster %q but the function is configured for %q (CLUSTER_NAME)", props.ClusterName, h.cfg.ClusterName)
	}
	id := PhysicalID(props.ClusterName)
	if ev.RequestType == cfn.RequestUpdate && ev.PhysicalResourceID != id {
		// CloudFormation will send a Delete for the old ID after this
		// Update succeeds; uninstall() recognises and ignores it.
		log.Warn("physical resource ID changes; the Delete CloudFormation sends for the old one will remove nothing", "old", ev.PhysicalResourceID, "new", id)
	}
	opts := props.Options(h.cfg.Namespace)
	opts.Log = log
	if err := opts.Validate(); err != nil {
		return id, nil, fmt.Errorf("invalid custom resource properties: %w", err)
	}

	ctx, cancel := h.budget(ctx, 0)
	defer cancel()
	start := time.Now()
	res, err := h.retry(ctx, log, func(ctx context.Context) (Result, error) {
		c, err := h.cfg.Connect(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("connecting to cluster %s: %w", props.ClusterName, err)
		}
		return h.cfg.Engine.Install(ctx, c, opts)
	})
	logResult(log, "install", res, time.Since(start))
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w; stopped before the function's deadline so that CloudFormation gets an answer now (the install is idempotent: retry the deployment)", err)
		}
		return id, nil, fmt.Errorf("installing into cluster %s: %w", props.ClusterName, err)
	}
	return id, map[string]any{
		"ClusterRole":      ClusterRoleName,
		"Namespace":        opts.withDefaults().Namespace,
		"ControllersGroup": opts.withDefaults().ControllersGroup,
	}, nil
}

// uninstall answers every Delete with SUCCESS (returning the ID to keep);
// what it could not remove is logged.
func (h *handler) uninstall(ctx context.Context, ev cfn.Event, log *slog.Logger) string {
	id := ev.PhysicalResourceID
	props, unknown, perr := ParseProperties(ev.ResourceProperties)
	if len(unknown) > 0 {
		log.Warn("ignoring unknown custom resource properties", "properties", unknown)
	}
	cluster := h.cfg.ClusterName
	if cluster == "" {
		cluster = props.ClusterName
	}
	if cluster == "" || id != PhysicalID(cluster) {
		// A replaced resource (an Update answered with a new ID), a
		// resource of another cluster, or a Create that never answered:
		// nothing of this cluster's installation belongs to it.
		log.Info("Delete of a physical ID that is not this cluster's installation: nothing to remove", "expected", PhysicalID(cluster))
		return id
	}
	opts := props.Options(h.cfg.Namespace)
	opts.ClusterName = cluster
	if perr != nil {
		// Removing less is the safe reading of unreadable properties.
		log.Error("invalid custom resource properties; removing only what the bootstrap installed (no user objects)", "error", perr)
		opts.RemoveUserObjects = false
	}
	// Only the options Uninstall uses need to be valid.
	opts.DefaultNodePool = false
	if err := opts.Validate(); err != nil {
		log.Error("invalid custom resource properties; using the default namespace and group", "error", err)
		opts.Namespace, opts.ControllersGroup = h.cfg.Namespace, ""
	}
	opts.Log = log

	ctx, cancel := h.budget(ctx, h.cfg.DeleteTimeout)
	defer cancel()
	start := time.Now()
	res, err := h.retry(ctx, log, func(ctx context.Context) (Result, error) {
		c, err := h.cfg.Connect(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("connecting to cluster %s: %w", cluster, err)
		}
		return h.cfg.Engine.Uninstall(ctx, c, opts)
	})
	logResult(log, "uninstall", res, time.Since(start))
	if err != nil {
		log.Error("could not remove Karpless from the cluster; answering SUCCESS so the stack deletion goes on. "+
			"If the cluster still exists, remove the leftovers by hand: the ClusterRole and ClusterRoleBinding "+ClusterRoleName+
			", the Role and RoleBinding "+RoleName+", the FlowSchemas "+strings.Join(FlowSchemas(), ", ")+", the ConfigMaps "+strings.Join(append(StateConfigMaps(), PauseConfigMap), ", ")+
			", and the default NodePool and EC2NodeClass, all labelled "+ManagedByLabel+"="+ManagedByValue,
			"cluster", cluster, "error", err.Error(), "elapsed", time.Since(start).String())
	}
	return id
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
