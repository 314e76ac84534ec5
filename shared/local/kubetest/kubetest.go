// Package kubetest gives a test package one real control plane (etcd and
// kube-apiserver from shared/local/controlplane) with the Karpenter CRDs installed.
//
//	var env *kubetest.Env
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }
//	func TestX(t *testing.T) { e := kubetest.Need(t, env); ns := e.Namespace(t) ... }
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/controlplane"
)

// RequireEnv makes a missing control plane a failure instead of a skip; `make
// test` and CI set it so integration tests can never silently vanish.
const RequireEnv = "KARPLESS_REQUIRE_KUBE"

// Options choose the extra control-plane parts a package needs.
type Options struct {
	Scheduler         bool
	ControllerManager bool
	// NoCRDs skips installing the Karpenter CRDs (for tests of the install itself).
	NoCRDs bool
}

// Env is the running control plane of a test package.
type Env struct {
	Cluster *controlplane.Cluster
	Clients *kube.Clients
	skip    string
}

// Run starts the control plane, stores it in *env, runs the tests and stops
// it. When the binaries are missing (or -short), tests that call Need skip
// with the reason, unless KARPLESS_REQUIRE_KUBE=1, which fails the package.
func Run(m *testing.M, env **Env, opts Options) int {
	flag.Parse()
	e, err := start(opts)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" || !errors.Is(err, controlplane.ErrNotBuilt) {
			fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
			return 1
		}
		*env = &Env{skip: err.Error()}
		return m.Run()
	}
	*env = e
	defer e.Cluster.Stop()
	return m.Run()
}

func start(opts Options) (*Env, error) {
	if testing.Short() {
		return nil, fmt.Errorf("%w: -short skips tests that need a kube-apiserver", controlplane.ErrNotBuilt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	c, err := controlplane.Start(ctx, controlplane.Config{
		Scheduler:         opts.Scheduler,
		ControllerManager: opts.ControllerManager,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		return nil, err
	}
	clients, err := kube.NewClients(c.RESTConfig)
	if err != nil {
		c.Stop()
		return nil, err
	}
	if !opts.NoCRDs {
		all, err := crds.All()
		if err == nil {
			err = kube.ApplyCRDs(ctx, clients.APIExtensions, all)
		}
		if err != nil {
			c.Stop()
			return nil, err
		}
		// The API server delays creates for 2 s after a CRD becomes
		// Established (an HA safeguard); wait once here rather than in
		// every test.
		time.Sleep(2 * time.Second)
	}
	return &Env{Cluster: c, Clients: clients}, nil
}

// Need returns the environment or skips the test, saying why.
func Need(t testing.TB, env *Env) *Env {
	t.Helper()
	if env == nil {
		t.Fatal("kubetest: TestMain did not call kubetest.Run")
	}
	if env.skip != "" {
		t.Skipf("needs a local kube-apiserver: %s", env.skip)
	}
	return env
}

// Namespace creates a namespace unique to the test and deletes it after.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := Name(t)
	ctx := context.Background()
	if _, err := e.Clients.Core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = e.Clients.Core.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Name is a DNS-1123 name unique to the test, for cluster-scoped objects.
func Name(t testing.TB) string {
	base := strings.ToLower(t.Name())
	var b strings.Builder
	for _, r := range base {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = s[:40]
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return strings.Trim(s, "-") + "-" + hex.EncodeToString(suffix)
}
