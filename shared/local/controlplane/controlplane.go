// Package controlplane runs a real Kubernetes control plane (etcd, kube-apiserver
// and optionally kube-scheduler and kube-controller-manager) on loopback, from
// binaries built from source by kubebuild, for tests, the demo and karpless local up.
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/karpless/karpless/shared/local/controlplane/kubebuild"
)

// ErrNotBuilt means the control-plane binaries are missing; the message says
// how to build them.
var ErrNotBuilt = errors.New("local control plane not built")

// Config says where the binaries are, where state goes and what to run.
type Config struct {
	// BinDir holds etcd, kube-apiserver, kube-scheduler and
	// kube-controller-manager. Empty means FindBinDir().
	BinDir string
	// Dir receives certificates, etcd data, logs and the kubeconfig. Empty
	// means a new temporary directory, removed on Stop.
	Dir string
	// Scheduler runs kube-scheduler, which binds pending pods and marks the
	// ones that fit nowhere Unschedulable, as in a real cluster.
	Scheduler bool
	// ControllerManager runs kube-controller-manager (Deployments,
	// ReplicaSets, PDB status, garbage collection), without the node
	// lifecycle controller: fake nodes send no heartbeats.
	ControllerManager bool
	// TokenWebhookURL, when set, makes kube-apiserver authenticate bearer
	// tokens by POSTing TokenReviews to this URL (authentication.k8s.io/v1),
	// as EKS does with IAM tokens; see emulator.Emulator.TokenWebhookURL.
	TokenWebhookURL string
	// TokenWebhookCacheTTL is how long kube-apiserver caches the webhook's
	// answers (default 10s).
	TokenWebhookCacheTTL time.Duration
	// VirtualClock, when set, names the file whose 8 bytes hold the wall
	// time kube-apiserver, kube-scheduler and kube-controller-manager read
	// (kubebuild/module/zz_virtual_clock.go.in): the soak runs the control plane on its
	// virtual clock, so that creation and deletion timestamps agree with the
	// clock the functions run on. etcd keeps the real time.
	VirtualClock string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Cluster is a running control plane.
type Cluster struct {
	// RESTConfig authenticates as cluster-admin.
	RESTConfig *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// Dir is the state directory.
	Dir string

	procs   []*process
	tempDir bool
	log     *slog.Logger
	// extraArgs are appended to a process's command line, by name.
	extraArgs map[string][]string
	// env is added to the environment of every Kubernetes component.
	env []string
	// etcdURL and etcdMember are this start's etcd and its member name.
	etcdURL, etcdMember string
}

type process struct {
	name string
	done chan struct{} // closed once the process has ended for good
	err  error

	mu       sync.Mutex
	cmd      *exec.Cmd // the current run
	stopping bool
}

// current is the process's running command, and whether Stop began.
func (p *process) current() (*exec.Cmd, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.stopping
}

// controllers are the kube-controller-manager controllers a local
// control plane runs (see Start).
const controllers = "deployment-controller,replicaset-controller,daemonset-controller,statefulset-controller," +
	"job-controller,disruption-controller,garbage-collector-controller,namespace-controller," +
	"pod-garbage-collector-controller,serviceaccount-controller,ttl-after-finished-controller"

// componentGOGC and componentMemLimit are the components' collector
// settings (see spawn): GOGC=300 makes the collector run about a third as
// often as the default; 3 GiB is above what a 5,000-node benchmark cluster's
// API server holds live, so only a larger one makes it collect sooner.
const (
	componentGOGC     = "300"
	componentMemLimit = "3GiB"
)

// ProcsEnv, when set, is the GOMAXPROCS of every component. make test runs
// about nine control planes at once on two cores: each API server's idle
// threads spinning for work (the Go scheduler's) cost more than one thread
// would, so it sets 1; a benchmark's single large cluster leaves it unset.
const ProcsEnv = "KARPLESS_KUBE_GOMAXPROCS"

// restartable are the components a crash does not end: a real control
// plane runs them as static pods the kubelet restarts (kube-controller-
// manager v1.37.1 panics, for one, dividing by a pod age of zero when the
// virtual clock has not moved since the youngest pod was created).
var restartable = map[string]bool{"kube-scheduler": true, "kube-controller-manager": true}

// BinEnv names a folder of control-plane binaries to use instead of the
// shared build (kubebuild.BinDir).
const BinEnv = "KARPLESS_KUBE_BIN"

// FindBinDir locates the control-plane binaries: $KARPLESS_KUBE_BIN, else
// the build in the user's cache that every checkout and the installed CLI
// share (kubebuild.BinDir), else a checkout's own .cache/kube/bin built as
// the same version before the cache was shared. It builds nothing:
// kubebuild.Ensure does (`make kube`, or `karpless local up`).
func FindBinDir() (string, error) {
	if d := os.Getenv(BinEnv); d != "" {
		return d, checkBinaries(d)
	}
	shared, err := kubebuild.BinDir()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotBuilt, err)
	}
	if checkBinaries(shared) == nil {
		return shared, nil
	}
	if root, err := RepoRoot(); err == nil {
		own := filepath.Join(root, ".cache", "kube", "bin")
		if kubebuild.Stamped(own) && checkBinaries(own) == nil {
			return own, nil
		}
	}
	return shared, checkBinaries(shared)
}

// RepoRoot walks up from the working directory to the Karpless go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/karpless/karpless\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the Karpless repository")
		}
		dir = parent
	}
}

func checkBinaries(dir string) error {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("%w: %s missing in %s; run `make kube` in a checkout, or `karpless local up`, which builds it once (~15 min on 2 cores)", ErrNotBuilt, b, dir)
		}
	}
	return nil
}

// Start launches the control plane and waits for /readyz. Stop it with Stop.
// The ports are found free and then given to etcd and kube-apiserver,
// which bind them a moment later; on a busy machine another process (an
// outgoing connection's ephemeral port) can take one in between, so a
// start whose component could not bind its port is tried again on new
// ports, up to startTries times.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	var err error
	for range startTries {
		var c *Cluster
		if c, err = start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			return c, err
		}
	}
	return nil, fmt.Errorf("starting the control plane %d times, each time a port was taken before it was bound: %w", startTries, err)
}

// startTries is how many times Start tries new ports.
const startTries = 3

func start(ctx context.Context, cfg Config) (*Cluster, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.BinDir == "" {
		d, err := FindBinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = d
	} else if err := checkBinaries(cfg.BinDir); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: cfg.Dir, log: log}
	if cfg.VirtualClock != "" {
		c.env = []string{"KARPLESS_VIRTUAL_CLOCK=" + cfg.VirtualClock}
	}
	if c.Dir == "" {
		d, err := os.MkdirTemp("", "karpless-kube-")
		if err != nil {
			return nil, err
		}
		c.Dir, c.tempDir = d, true
	}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	certs := pki{dir: filepath.Join(c.Dir, "pki")}
	if err := certs.ensure(); err != nil {
		return nil, fmt.Errorf("creating certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	apiPort := ports[2]
	logs := filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}

	if cfg.TokenWebhookURL != "" {
		path := filepath.Join(c.Dir, "token-webhook.kubeconfig")
		if err := writeWebhookKubeconfig(path, cfg.TokenWebhookURL); err != nil {
			return nil, err
		}
		ttl := cfg.TokenWebhookCacheTTL
		if ttl <= 0 {
			ttl = 10 * time.Second
		}
		c.extraArgs = map[string][]string{"kube-apiserver": {
			"--authentication-token-webhook-config-file=" + path,
			"--authentication-token-webhook-version=v1",
			"--authentication-token-webhook-cache-ttl=" + ttl.String(),
		}}
	}

	t0 := time.Now()
	// A name of this start's own: the check below tells this etcd from
	// another control plane's that got the same port (see ownEtcd).
	member := "karpless-" + rand.Text()
	if err := c.spawn(cfg.BinDir, logs, "etcd",
		"--name="+member, "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster="+member+"="+peerURL,
		"--unsafe-no-fsync", "--quota-backend-bytes=2147483648", "--log-level=warn",
		// One member has no peers to heartbeat: a slower raft tick cuts an
		// idle etcd's CPU by a fifth (1.50 to 1.16 CPU-s a minute,
		// measured 2026-11-26); the suite runs several control planes.
		"--heartbeat-interval=500", "--election-timeout=5000",
	); err != nil {
		return nil, err
	}
	c.etcdURL, c.etcdMember = etcdURL, member
	if err := c.wait(ctx, "etcd", etcdURL, 30*time.Second, func() bool { return ownEtcd(etcdURL, member) }); err != nil {
		return nil, err
	}
	if err := c.spawn(cfg.BinDir, logs, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		// The endpoint reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file="+certs.path("apiserver.crt"), "--tls-private-key-file="+certs.path("apiserver.key"),
		"--client-ca-file="+certs.path("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+certs.path("sa.pub"),
		"--service-account-signing-key-file="+certs.path("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// No ServiceAccount controller without the controller manager, and
		// TaintNodesByCondition would leave not-ready taints nobody removes
		// (no node lifecycle controller): nodes here are fake.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--allow-privileged=true", "--profiling=false",
		// Clients share the machine with the server: gzip of large lists
		// (every pod, every node) is CPU spent twice to save no network.
		"--feature-gates=APIResponseCompression=false",
		"--cert-dir="+filepath.Join(c.Dir, "apiserver-certs"),
	); err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.RESTConfig = &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   certs.path("ca.crt"),
			CertFile: certs.path("admin.crt"),
			KeyFile:  certs.path("admin.key"),
		},
		QPS:   1000,
		Burst: 2000,
	}
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	log.Info("kube-apiserver ready", "seconds", time.Since(t0).Seconds(), "server", server)
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, server, certs); err != nil {
		return nil, err
	}
	if cfg.Scheduler {
		if err := c.spawn(cfg.BinDir, logs, "kube-scheduler",
			"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		); err != nil {
			return nil, err
		}
	}
	if cfg.ControllerManager {
		if err := c.spawn(cfg.BinDir, logs, "kube-controller-manager",
			"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
			// Only the controllers whose objects the tests and the soak
			// create run: workloads (Deployments, ReplicaSets, DaemonSets,
			// StatefulSets, Jobs and the soak's finished Jobs' expiry),
			// PodDisruptionBudget status for eviction, owner-reference and
			// namespace cleanup, and pod GC of deleted nodes. The rest
			// (resource quota and endpoint slices watch every object they
			// may count) cost CPU for nothing. The node
			// lifecycle controller stays off above all: fake nodes send no
			// heartbeats, so it would mark them unknown and evict their pods.
			"--controllers="+controllers,
			"--service-account-private-key-file="+certs.path("sa.key"), "--root-ca-file="+certs.path("ca.crt"),
			"--cluster-signing-cert-file="+certs.path("ca.crt"), "--cluster-signing-key-file="+certs.path("ca.key"),
		); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

func (c *Cluster) spawn(binDir, logDir, name string, args ...string) error {
	bin := filepath.Join(binDir, name)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: %s missing in %s; run `make kube`", ErrNotBuilt, name, binDir)
	}
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return err
	}
	args = append(args, c.extraArgs[name]...)
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = f, f
		// The components' collectors run less often than Go's default:
		// a test machine has memory to spare and no CPU (GOGC=100 spent a
		// fifth of the API server's CPU in a soak). The soft limit keeps a
		// large cluster's API server from growing without bound; the
		// caller's own GOGC or GOMEMLIMIT wins.
		cmd.Env = append([]string{"GOGC=" + componentGOGC, "GOMEMLIMIT=" + componentMemLimit}, os.Environ()...)
		if n := os.Getenv(ProcsEnv); n != "" {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+n)
		}
		if name != "etcd" {
			cmd.Env = append(cmd.Env, c.env...)
		}
		// Own process group, and killed with the test binary if it dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd, cmd.Start()
	}
	cmd, err := start()
	if err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer f.Close()
		for {
			cmd, _ := p.current()
			p.err = cmd.Wait()
			p.mu.Lock()
			again := restartable[name] && !p.stopping
			p.mu.Unlock()
			if !again {
				return
			}
			c.log.Warn("control-plane component exited; restarting it", "process", name, "error", p.err)
			fmt.Fprintf(f, "\n--- %s exited (%v); restarted by the local control plane ---\n", name, p.err)
			time.Sleep(time.Second)
			p.mu.Lock()
			if p.stopping {
				p.mu.Unlock()
				return
			}
			next, err := start()
			if err != nil {
				p.mu.Unlock()
				p.err = err
				return
			}
			p.cmd = next
			p.mu.Unlock()
		}
	}()
	c.procs = append(c.procs, p)
	c.log.Debug("started", "process", name, "pid", cmd.Process.Pid)
	return nil
}

func (c *Cluster) exited(name string) error {
	for _, p := range c.procs {
		if p.name != name {
			continue
		}
		select {
		case <-p.done:
			tail, _ := os.ReadFile(filepath.Join(c.Dir, "logs", name+".log"))
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			return fmt.Errorf("%s exited (%v); end of its log:\n%s", name, p.err, tail)
		default:
		}
	}
	return nil
}

// ownEtcd reports whether the etcd answering at url is the member named
// member. Two test binaries start control planes at once: the free ports
// one found may be given to the other's etcd a moment later, and this
// etcd, failing to bind, takes a while to exit. A bare health check would
// pass on the other's etcd, and two API servers would then share one store
// (CI, 2026-11-29: one test's nodes seen by another). etcd's JSON gateway
// lists members by name; a start's name is its own.
func ownEtcd(url, member string) bool {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Post(url+"/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return false
	}
	for _, m := range list.Members {
		if m.Name == member {
			return true
		}
	}
	return false
}

func (c *Cluster) waitHTTP(ctx context.Context, name, url string, client *http.Client, timeout time.Duration) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	return c.wait(ctx, name, url, timeout, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// wait polls ready until it holds, the component exits (its log's end is
// the error, so Start can see a port taken) or the timeout passes.
func (c *Cluster) wait(ctx context.Context, name, url string, timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ready() {
			return nil
		}
		if err := c.exited(name); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy at %s after %s", name, url, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	transport, err := rest.TransportFor(c.RESTConfig)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	return c.waitHTTP(ctx, "kube-apiserver", c.RESTConfig.Host+"/readyz", client, timeout)
}

// Stop terminates the processes (API server first, so it does not hang on a
// vanished etcd) and removes a temporary state directory.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.mu.Lock()
		p.stopping = true
		cmd := p.cmd
		p.mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	c.procs = nil
	if c.tempDir {
		_ = os.RemoveAll(c.Dir)
	}
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// writeWebhookKubeconfig writes the kubeconfig-format file that points
// kube-apiserver's token authentication webhook at url.
func writeWebhookKubeconfig(path, url string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["webhook"] = &clientcmdapi.Cluster{Server: url}
	cfg.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "webhook", AuthInfo: "apiserver"}
	cfg.CurrentContext = "webhook"
	return clientcmd.WriteToFile(*cfg, path)
}

func writeKubeconfig(path, server string, certs pki) error {
	read := func(n string) ([]byte, error) { return os.ReadFile(certs.path(n)) }
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	crt, err := read("admin.crt")
	if err != nil {
		return err
	}
	key, err := read("admin.key")
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}
