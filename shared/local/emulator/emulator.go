// Package emulator is an AWS emulator on loopback (EC2, SSM, SQS, EKS, IAM, STS, ARC zonal shift)
// that the real aws-sdk-go-v2 clients talk to, with fault injection and instances that join a local cluster.
// It is as hostile as real AWS by default (Hostility): eventually consistent,
// slow to propagate IAM, missing some spot markets, and throttling, failing
// and losing answers at random.
package emulator

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/kube"
)

// Defaults of Config.
const (
	DefaultRegion            = "us-west-2"
	DefaultAccountID         = "123456789012"
	DefaultClusterName       = "karpless-local"
	DefaultKubernetesVersion = "1.37"
	// DefaultServiceCIDR is what DescribeCluster reports as the service range.
	DefaultServiceCIDR = "10.100.0.0/16"
)

// Zone is an availability zone of the emulated region.
type Zone struct {
	Name string // us-west-2a
	ID   string // usw2-az1
}

// Config describes the emulated account. The zero value works: us-west-2,
// three zones, the compiled-in catalog, the real clock and no cluster.
type Config struct {
	Region            string
	AccountID         string
	ClusterName       string
	KubernetesVersion string
	// Clock drives instance state transitions, node readiness, spot prices,
	// message timestamps and token expiry. Tests pass a fake clock and call
	// Step; nil means the real clock.
	Clock clock.PassiveClock
	// TokenClock judges EKS tokens' age; nil means Clock. The SDK signs
	// tokens on the machine's clock, so a world whose Clock runs ahead of
	// real time (the demo) sets the real clock here.
	TokenClock clock.PassiveClock
	// Kube is the cluster instances join as Nodes; nil means none join.
	// ConnectCluster sets it later.
	Kube *kube.Clients
	// Catalog is the instance-type catalog at the region's on-demand
	// prices; nil means the compiled-in one and NewTypes, priced for the
	// region (RegionalPrice).
	Catalog *catalog.Catalog
	// Zones default to us-west-2a/b/c (usw2-az1/2/3) in the configured region.
	Zones []Zone
	// PendingDelay is how long an instance stays pending (default 5s).
	PendingDelay time.Duration
	// JoinDelay is how long after running its Node registers (default 10s).
	JoinDelay time.Duration
	// ReadyDelay is how long a registered Node stays NotReady (default 5s).
	ReadyDelay time.Duration
	// TerminateDelay is how long an instance stays shutting-down (default 20s).
	TerminateDelay time.Duration
	// TerminatedRetention is how long terminated instances stay visible to
	// DescribeInstances, as in EC2 (default 1h). Instances() keeps them.
	TerminatedRetention time.Duration
	// DescribeLag is the least time a new instance stays invisible to
	// DescribeInstances and DescribeInstanceStatus (InvalidInstanceID.NotFound
	// by id) after launch; Hostility.DescribeLagMax adds a random 0..max on
	// top (default 0: only the random part).
	DescribeLag time.Duration
	// Hostility is how far the emulator behaves like real AWS beyond its
	// contracts: eventual consistency, IAM propagation, missing spot
	// markets, random throttles, errors and lost answers. Nil means
	// DefaultHostility(). A test switches one behaviour off by copying
	// DefaultHostility(), zeroing a field, and saying why in a comment.
	Hostility *Hostility
	// PodGracePeriodCap caps the termination grace period the fake kubelet
	// honours before removing a deleted pod (default 5s on the clock).
	PodGracePeriodCap time.Duration
	// StartupTaints are registered on every Node in addition to the taints
	// its user data asks for.
	StartupTaints []Taint
	// Unoffered reports that an instance type is not offered in a zone. Nil
	// means a deterministic ~8% of types are missing from the third zone.
	Unoffered func(instanceType, zone string) bool
	// LongPollCap caps SQS long polling, in real time (default 1s).
	LongPollCap time.Duration
	// StateChangeEvents sends an "EC2 Instance State-change Notification" to
	// the interruption queue on every instance state change, as an
	// EventBridge rule would.
	StateChangeEvents bool
	// Seed makes generated ids, addresses and capacity choices reproducible;
	// 0 picks a random seed so that emulators sharing a cluster never reuse
	// node names.
	Seed uint64
	// Empty skips seeding the default world (VPC, subnets, security groups,
	// AMIs and SSM parameters, queues, the EKS cluster, IAM roles).
	Empty bool
	// AnswerDelay is the least time a call takes (default 2ms, negative
	// for none); see HTTPClient for why answering at once is a problem.
	AnswerDelay time.Duration
	// Addr is the listen address (default 127.0.0.1:0).
	Addr string
	// Logger receives one line per call and per world change; nil discards.
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.AccountID == "" {
		c.AccountID = DefaultAccountID
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	if c.KubernetesVersion == "" {
		c.KubernetesVersion = DefaultKubernetesVersion
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.TokenClock == nil {
		c.TokenClock = c.Clock
	}
	if c.Catalog == nil {
		build, err := catalog.Load()
		if err != nil {
			return err
		}
		if c.Catalog, err = worldCatalog(build, c.Region); err != nil {
			return err
		}
	}
	if len(c.Zones) == 0 {
		for i, s := range []string{"a", "b", "c"} {
			c.Zones = append(c.Zones, Zone{Name: c.Region + s, ID: fmt.Sprintf("%s-az%d", regionShort(c.Region), i+1)})
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.PendingDelay, 5*time.Second)
	def(&c.JoinDelay, 10*time.Second)
	def(&c.ReadyDelay, 5*time.Second)
	def(&c.TerminateDelay, 20*time.Second)
	def(&c.TerminatedRetention, time.Hour)
	def(&c.PodGracePeriodCap, 5*time.Second)
	def(&c.LongPollCap, time.Second)
	def(&c.AnswerDelay, 2*time.Millisecond)
	if c.Seed == 0 {
		c.Seed = rand.Uint64() | 1
	}
	// A copy, so that the caller's value cannot change under the emulator.
	h := DefaultHostility()
	if c.Hostility != nil {
		h = *c.Hostility
	}
	c.Hostility = &h
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// regionShort is the zone-id prefix of a region: us-west-2 -> usw2.
func regionShort(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) != 3 {
		return region
	}
	return parts[0] + parts[1][:1] + parts[2]
}

// Emulator is a running emulated AWS account. All methods are safe for
// concurrent use.
type Emulator struct {
	cfg   Config
	log   *slog.Logger
	clock clock.PassiveClock
	// priceList is the Price List's products of the region, made once:
	// the catalog and the region never change.
	priceList func() []priceProduct

	ln     net.Listener
	srv    *http.Server
	url    string
	closed chan struct{}
	// loop is Start's goroutine; Close waits for it, so nothing the world
	// does (a node re-registered, a pod started) happens after Close.
	loop     sync.WaitGroup
	stopLoop chan struct{}
	// async are the asynchronous Lambda invocations under way; Close
	// cancels and waits for them.
	async sync.WaitGroup

	mu     sync.Mutex
	seq    map[string]uint64
	kube   *kube.Clients
	world  world
	faults []*faultState
	calls  []Call
	// hostile is Config.Hostility at work: its random source and counters.
	hostile *hostility
	// wake is closed and replaced whenever a message is sent, to end long polls.
	wake chan struct{}

	// typeCache is DescribeInstanceTypes' rendering of the catalog.
	typeCache []xmlInstanceType

	stepMu sync.Mutex // one Step at a time
	// podDeleting remembers when the fake kubelet first saw a pod being
	// deleted; guarded by stepMu.
	podDeleting map[types.UID]time.Time
	started     bool
	// podWatch is the fake kubelet's watch of bound pods (WatchPods).
	podWatch *podWatch
}

// New starts the emulator's HTTP server on loopback and seeds the default
// world (unless cfg.Empty). Stop it with Close.
func New(cfg Config) (*Emulator, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("emulator: listening: %w", err)
	}
	e := &Emulator{
		cfg:    cfg,
		log:    cfg.Logger,
		clock:  cfg.Clock,
		ln:     ln,
		url:    "http://" + ln.Addr().String(),
		closed: make(chan struct{}),
		seq:    map[string]uint64{},
		kube:   cfg.Kube,
		wake:   make(chan struct{}),
	}
	e.hostile = newHostility(*cfg.Hostility, cfg.Seed)
	e.priceList = sync.OnceValue(e.allProducts)
	e.world.init()
	if !cfg.Empty {
		e.seed()
	}
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
	e.log.Info("emulator listening", "url", e.url, "region", cfg.Region, "cluster", cfg.ClusterName)
	return e, nil
}

// URL is the endpoint of every emulated service (AWS_ENDPOINT_URL).
func (e *Emulator) URL() string { return e.url }

// Config returns the effective configuration (defaults applied).
func (e *Emulator) Config() Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cfg
	h := *c.Hostility
	c.Hostility = &h
	return c
}

// Region of the emulated account.
func (e *Emulator) Region() string { return e.cfg.Region }

// ClusterName is the emulated EKS cluster's name.
func (e *Emulator) ClusterName() string { return e.cfg.ClusterName }

// Close stops the HTTP server and the world loop. Long polls in progress
// end at once.
func (e *Emulator) Close() error {
	select {
	case <-e.closed:
		return nil
	default:
	}
	close(e.closed)
	e.loop.Wait()
	e.async.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = e.srv.Close()
	}
	return err
}

// ConnectCluster makes instances join the cluster behind clients from now
// on, and sets what DescribeCluster reports (endpoint and CA PEM); empty
// values are taken from clients.Config.
func (e *Emulator) ConnectCluster(clients *kube.Clients, endpoint string, caPEM []byte) error {
	if endpoint == "" && clients != nil {
		endpoint = clients.Config.Host
	}
	if len(caPEM) == 0 && clients != nil {
		caPEM = clients.Config.TLSClientConfig.CAData
		if len(caPEM) == 0 && clients.Config.TLSClientConfig.CAFile != "" {
			b, err := readFile(clients.Config.TLSClientConfig.CAFile)
			if err != nil {
				return fmt.Errorf("emulator: reading cluster CA: %w", err)
			}
			caPEM = b
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kube = clients
	if c := e.world.clusters[e.cfg.ClusterName]; c != nil {
		c.Endpoint, c.CA = endpoint, caPEM
	}
	return nil
}

// Start runs the world loop (instance state machine, node registration,
// fake kubelet) every 200ms of real time until ctx ends or Close. With a
// fake clock nothing happens until the clock moves; tests usually call Step.
func (e *Emulator) Start(ctx context.Context) {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return
	}
	e.started = true
	stop := make(chan struct{})
	e.stopLoop = stop
	e.mu.Unlock()
	e.loop.Add(1)
	go func() {
		defer e.loop.Done()
		defer e.WatchPods(ctx)()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.closed:
				return
			case <-stop:
				return
			case <-t.C:
				if err := e.StepWatched(ctx); err != nil && ctx.Err() == nil {
					e.log.Warn("world step", "err", err)
				}
			}
		}
	}()
}

// Stop ends Start's loop and waits for it; the server keeps answering.
// Benchmarks use it to measure the functions without the world's own work
// (the emulated kubelets' pod watch and steps five times a second).
func (e *Emulator) Stop() {
	e.mu.Lock()
	stop := e.stopLoop
	e.stopLoop = nil
	e.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	e.loop.Wait()
}

// now is the emulated time, truncated to milliseconds as AWS reports it.
func (e *Emulator) now() time.Time { return e.clock.Now().UTC().Truncate(time.Millisecond) }

// newID returns prefix-<17 hex digits>, reproducible for a given Seed.
// Callers hold e.mu.
func (e *Emulator) newID(prefix string) string {
	return prefix + "-" + e.hexID(prefix, 17)
}

func (e *Emulator) hexID(kind string, n int) string {
	e.seq[kind]++
	sum := e.hash(kind, fmt.Sprint(e.seq[kind]))
	s := hex.EncodeToString(sum[:])
	return s[:n]
}

// hash mixes the seed with parts; used for every deterministic choice.
func (e *Emulator) hash(parts ...string) [32]byte {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], e.cfg.Seed)
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// unitHash maps parts to [0,1) independently of the seed, for facts that
// should not change between runs (prices, offerings).
func unitHash(parts ...string) float64 {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return float64(binary.LittleEndian.Uint64(h[:8])>>11) / float64(1<<53)
}

// requestID is a UUID-shaped id, unique per emulator.
func (e *Emulator) requestID() string {
	s := e.hexID("request", 32)
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// Call is one recorded API call.
type Call struct {
	Service string // ec2, sqs, ssm, eks, iam, sts
	Action  string
	// Params are the request parameters: the form values of query
	// protocols (without Action and Version), the top-level members of
	// JSON bodies, the path of REST calls.
	Params url.Values
	// Code is the error code returned ("" on success); for CreateFleet the
	// per-override errors are in FleetErrors.
	Code        string
	Status      int
	FleetErrors []string
	// Dropped means the connection was closed after the request was applied.
	Dropped bool
	At      time.Time
}

// Calls returns the recorded calls, oldest first.
func (e *Emulator) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}

// CallCount counts recorded calls of an action (any service when the
// action name is unique, e.g. "CreateFleet").
func (e *Emulator) CallCount(action string) int {
	n := 0
	for _, c := range e.Calls() {
		if c.Action == action {
			n++
		}
	}
	return n
}

// ResetCalls forgets the recorded calls.
func (e *Emulator) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = nil
}

// ServeHTTP routes a request to its service by protocol: X-Amz-Target for
// the JSON services, the REST path for EKS, Lambda and ARC zonal shift, the form's Version for the
// query services.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(target, "AmazonSQS."):
		e.serveJSON(w, r, "sqs", strings.TrimPrefix(target, "AmazonSQS."), body)
	case strings.HasPrefix(target, "AmazonSSM."):
		e.serveJSON(w, r, "ssm", strings.TrimPrefix(target, "AmazonSSM."), body)
	case strings.HasPrefix(target, "AWSPriceListService."):
		e.serveJSON(w, r, "pricing", strings.TrimPrefix(target, "AWSPriceListService."), body)
	case strings.HasPrefix(target, "AWSEvents."):
		e.serveJSON(w, r, "events", strings.TrimPrefix(target, "AWSEvents."), body)
	case r.URL.Path == authenticatePath:
		e.serveTokenReview(w, r, body)
	case strings.HasPrefix(r.URL.Path, AdminPrefix):
		e.serveAdmin(w, r, body)
	case strings.HasPrefix(r.URL.Path, "/clusters"):
		e.serveEKS(w, r, body)
	case strings.HasPrefix(r.URL.Path, lambdaInvokePrefix):
		e.serveLambda(w, r, body)
	case strings.HasPrefix(r.URL.Path, arcManagedPrefix+"/"), r.URL.Path == arcShiftsPrefix, strings.HasPrefix(r.URL.Path, arcShiftsPrefix+"/"):
		e.serveARC(w, r, body)
	default:
		e.serveQuery(w, r, body)
	}
}

// record appends a call to the log; callers hold e.mu.
func (e *Emulator) record(c Call) {
	c.At = e.now()
	e.calls = append(e.calls, c)
	attrs := []any{"service", c.Service, "action", c.Action}
	if c.Code != "" {
		attrs = append(attrs, "code", c.Code)
	}
	if len(c.FleetErrors) > 0 {
		attrs = append(attrs, "fleetErrors", strings.Join(c.FleetErrors, ","))
	}
	if c.Dropped {
		attrs = append(attrs, "dropped", true)
	}
	e.log.Debug("call", attrs...)
}

// dropConnection closes the client's connection without a response, after
// the request was applied: the SDK sees a transport error.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset, not a clean close
	}
	_ = conn.Close()
}
