package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/awsconfig"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/controlplane/kubechaos"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// clusterName is every seed's EKS cluster.
const clusterName = "karpless-soak"

// world is one seed's cluster, account and clock, and what the invariants
// need to remember.
type world struct {
	seed    uint64
	dir     string
	clk     *controlplane.VirtualClock
	begin   time.Time
	ctl     *controlplane.Cluster
	admin   *kube.Clients
	emu     *emulator.Emulator
	kchaos  *kubechaos.Chaos
	log     *slog.Logger
	logFile *os.File

	// rngMu guards rng: the chaos schedule and the world-moves hook (which
	// runs on the functions' goroutines) draw from it.
	rngMu sync.Mutex
	rng   *rand.Rand

	// inflight counts the functions' external calls being answered (not
	// watches): virtual time only moves on between calls, so a call's own
	// real-time latency (retries in the SDK, a slow answer) is not
	// multiplied by the speed of the virtual clock.
	inflight atomic.Int64

	inv *invariants
	// cov counts the paths the scenarios and the chaos drove.
	cov coverage
	// afterMoves says whether the world may move between a function's read
	// and its action (not while settling).
	afterMoves func() bool

	// idle are each function's warm Lambda containers between
	// invocations: an invocation takes one (or starts cold) and gives it
	// back unless it was killed; invocations at once never share one.
	idleMu sync.Mutex
	idle   map[string][]*app.Warm
}

// container is a warm container of the function, or a cold one.
func (w *world) container(identity string) *app.Warm {
	w.idleMu.Lock()
	defer w.idleMu.Unlock()
	if n := len(w.idle[identity]); n > 0 {
		c := w.idle[identity][n-1]
		w.idle[identity] = w.idle[identity][:n-1]
		return c
	}
	return &app.Warm{}
}

// release keeps the container of an invocation that ended for the next.
func (w *world) release(identity string, c *app.Warm) {
	w.idleMu.Lock()
	defer w.idleMu.Unlock()
	if w.idle == nil {
		w.idle = map[string][]*app.Warm{}
	}
	w.idle[identity] = append(w.idle[identity], c)
}

func (w *world) now() time.Time       { return w.clk.Now() }
func (w *world) since() time.Duration { return w.clk.Now().Sub(w.begin) }

func (w *world) intn(n int) int {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.IntN(n)
}

func (w *world) chance(p float64) bool {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.Float64() < p
}

// newWorld starts the control plane on a virtual clock, the emulator, and
// installs what `cdk deploy`'s bootstrap installs.
func newWorld(ctx context.Context, o Options, seed uint64, dir string) (*world, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &world{seed: seed, dir: dir, rng: rand.New(rand.NewPCG(seed, 0x50a4))}
	// The virtual clock starts at the real time, so that certificates made
	// now are valid, and runs ahead from there.
	begin := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	clk, err := controlplane.NewVirtualClock(dir, begin)
	if err != nil {
		return nil, err
	}
	w.clk, w.begin = clk, begin
	if o.Log != nil {
		w.log = o.Log
	} else {
		f, err := os.Create(filepath.Join(dir, "functions.log"))
		if err != nil {
			return nil, err
		}
		w.logFile = f
		// Log lines carry the virtual time, the clock everything runs on.
		w.log = slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				a.Value = slog.TimeValue(w.clk.Now())
			}
			return a
		}}))
	}
	w.ctl, err = controlplane.Start(ctx, controlplane.Config{
		BinDir: o.KubeBin, Dir: filepath.Join(dir, "kube"), Scheduler: true, ControllerManager: true, VirtualClock: clk.Path(),
	})
	if err != nil {
		w.close()
		return nil, err
	}
	if w.admin, err = kube.NewClients(w.ctl.RESTConfig); err != nil {
		w.close()
		return nil, err
	}
	all, err := crds.All()
	if err != nil {
		w.close()
		return nil, err
	}
	if _, err := bootstrap.Install(ctx, w.admin, bootstrap.Options{ClusterName: clusterName, NodeRoleName: emulator.NodeRoleName(clusterName), CRDs: all, Log: w.log}); err != nil {
		w.close()
		return nil, fmt.Errorf("installing CRDs and RBAC: %w", err)
	}
	// Realistic delays and the emulator's default hostility, on the clock.
	w.emu, err = emulator.New(emulator.Config{ClusterName: clusterName, Clock: clk, Seed: seed, StateChangeEvents: true, Logger: w.log.With("component", "emulator")})
	if err != nil {
		w.close()
		return nil, err
	}
	if err := w.emu.ConnectCluster(w.admin, "", nil); err != nil {
		w.close()
		return nil, err
	}
	kc := kubechaos.Defaults(seed)
	kc.After = w.afterKubeCall
	w.kchaos = kubechaos.New(kc)
	w.inv = newInvariants(w)
	return w, nil
}

func (w *world) close() {
	if w.emu != nil {
		w.emu.Close()
	}
	if w.ctl != nil {
		w.ctl.Stop()
	}
	if w.clk != nil {
		_ = w.clk.Close()
	}
	if w.logFile != nil {
		_ = w.logFile.Close()
	}
}

// env builds one invocation's engines, as a Lambda container would, with
// the Kubernetes API's hostility, the invocation's kill switch and the
// invariant recorders in front of both edges.
func (w *world) env(identity, holder string, ks *deploy.KillSwitch, warm *app.Warm) (*app.Env, error) {
	cfg := rest.CopyConfig(w.ctl.RESTConfig)
	cfg.Wrap(w.kchaos.Wrap)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &kubeEdge{next: rt, w: w, ks: ks, who: identity} })
	kc, err := kube.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	a, err := deploy.NewEnv(w.emu, kc, deploy.Options{
		Identity: identity, Clock: w.clk, Log: w.log.With("function", identity, "invocation", holder), Warm: warm,
		Configure: func(c *config.Config) {
			c.WatchWindow = timing.DefaultWatchWindow
			// Karpenter's feature gate; off, spot nodes are only ever
			// deleted, never replaced by cheaper spot ones, and the cluster
			// could not come near a fresh simulation's cost.
			c.SpotToSpotConsolidation = true
		},
	})
	if err != nil {
		return nil, err
	}
	awsCfg := a.AWS.Config.Copy()
	awsCfg.HTTPClient = &awsEdge{next: awsCfg.HTTPClient, w: w, ks: ks, who: identity}
	awsCfg.Retryer = func() aws.Retryer { return w.retryer() }
	a.AWS = awsconfig.NewClients(awsCfg)
	return a, nil
}

// retryer is the functions' production retryer (awsconfig.NewRetryer)
// whose backoff waits on the virtual clock: a real-time sleep would last
// minutes of virtual time.
func (w *world) retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = awsconfig.MaxAttempts
		o.MaxBackoff = awsconfig.MaxBackoff
		o.RateLimiter = ratelimit.None
		o.Backoff = virtualBackoff{w: w, next: retry.NewExponentialJitterBackoff(awsconfig.MaxBackoff)}
	})
}

type virtualBackoff struct {
	w    *world
	next retry.BackoffDelayer
}

func (b virtualBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	d, e := b.next.BackoffDelay(attempt, err)
	if e != nil || d <= 0 {
		return 0, e
	}
	t := b.w.clk.NewTimer(d)
	<-t.C()
	return 0, nil
}

// kubeEdge is the functions' Kubernetes edge: the kill switch, the
// in-flight count, the 429 wait on the virtual clock, and the recorders of
// evictions and pod deletions.
type kubeEdge struct {
	next http.RoundTripper
	w    *world
	ks   *deploy.KillSwitch
	who  string
}

func (e *kubeEdge) RoundTrip(req *http.Request) (*http.Response, error) {
	r := kubechaos.Parse(req)
	if r.Watch {
		if e.ks.Dead() {
			return nil, deploy.ErrKilled
		}
		return e.next.RoundTrip(req)
	}
	if r.Verb == "delete" && r.Resource == "pods" && r.Subresource == "" {
		e.w.inv.podDeleted(e.who, r.Namespace, r.Name)
	}
	send := func() (*http.Response, error) {
		e.w.inflight.Add(1)
		return e.w.held(e.sendWaitingOutThrottles(req))
	}
	var resp *http.Response
	var err error
	if req.Method == http.MethodGet {
		// Reads change nothing: a kill before one is a kill before the
		// next write.
		if e.ks.Dead() {
			return nil, deploy.ErrKilled
		}
		resp, err = send()
	} else {
		resp, err = e.ks.Do("kube "+req.Method+" "+req.URL.Path, send)
	}
	if err == nil && resp != nil && resp.StatusCode < 300 && r.Resource == "pods" && r.Subresource == "eviction" {
		e.w.inv.evicted(e.who, r.Namespace, r.Name)
	}
	return resp, err
}

// sendWaitingOutThrottles sends req, and when the API answers 429 with
// Retry-After, waits that long on the virtual clock and sends it again, up
// to client-go's ten times. client-go does the same, but in real time,
// which the virtual clock would turn into minutes.
func (e *kubeEdge) sendWaitingOutThrottles(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		resp, err := e.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || attempt == 10 || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.HasSuffix(req.URL.Path, "/eviction") && bytes.Contains(body, []byte("disruption budget")) {
			e.w.cov.pdbRefusals.Add(1) // the API server refusing for a PDB
		}
		if secs <= 0 {
			secs = 1
		}
		e.w.inflight.Add(-1)
		t := e.w.clk.NewTimer(time.Duration(secs) * time.Second)
		<-t.C()
		e.w.inflight.Add(1)
	}
}

// awsEdge is the functions' AWS edge: the kill switch, the in-flight count
// and, before every TerminateInstances, the drain invariant.
type awsEdge struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	w   *world
	ks  *deploy.KillSwitch
	who string
}

func (e *awsEdge) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	action := req.Header.Get("X-Amz-Target")
	form, _ := url.ParseQuery(string(body))
	if a := form.Get("Action"); a != "" {
		action = a
	}
	return e.ks.Do("aws "+action, func() (*http.Response, error) {
		if action == "TerminateInstances" {
			for k, v := range form {
				if strings.HasPrefix(k, "InstanceId.") {
					e.w.inv.terminating(e.who, v[0])
				}
			}
		}
		e.w.inflight.Add(1)
		return e.w.held(e.next.Do(req))
	})
}

// held keeps a call counted in flight (counted by the caller) until its
// answer's body is closed: the SDK and client-go decode an answer while
// they read it, and a large one (DescribeInstanceTypes' pages, a list of
// thousands of pods) takes real CPU time that the virtual clock must not
// turn into minutes between the function's calls.
func (w *world) held(resp *http.Response, err error) (*http.Response, error) {
	if err != nil || resp == nil || resp.Body == nil {
		w.inflight.Add(-1)
		return resp, err
	}
	resp.Body = &heldBody{ReadCloser: resp.Body, done: func() { w.inflight.Add(-1) }}
	return resp, nil
}

// heldBody calls done once, when the body is closed.
type heldBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// afterKubeCall moves the world between a function's read and what it
// does next, as kube-scheduler and users do in a live cluster: after a
// function lists pods, sometimes a workload changes size or a pod goes.
func (w *world) afterKubeCall(req *http.Request, status int) {
	r := kubechaos.Parse(req)
	if r.Verb != "list" || r.Resource != "pods" || status >= 300 || w.afterMoves == nil || !w.afterMoves() || !w.chance(0.15) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.inv.worldMoves.Add(1)
	if w.chance(0.5) {
		w.deleteRandomPod(ctx, "world moves")
		return
	}
	w.nudgeRandomDeployment(ctx, "world moves")
}

// pods lists the workload's pods.
func (w *world) pods(ctx context.Context) []corev1.Pod {
	l, err := w.admin.Core.CoreV1().Pods(workloadNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return l.Items
}
