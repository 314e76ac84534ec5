package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/karpless/karpless/shared/local/controlplane"
	"github.com/karpless/karpless/shared/local/controlplane/kubebuild"
)

// TestInstalledCLIOutsideACheckout installs the CLI with go install, as a
// user does, and runs `local up` from a folder that is in no checkout,
// with a user cache of its own that holds the shared control-plane build
// (linked to the one already built: building it takes 6-15 minutes). The
// same CLI with an empty cache and no Go on PATH gets as far as building
// it and says what it needs.
func TestInstalledCLIOutsideACheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: installs the CLI and starts a control plane")
	}
	built, err := controlplane.FindBinDir()
	if err != nil {
		if os.Getenv("KARPLESS_REQUIRE_KUBE") == "1" || !errors.Is(err, controlplane.ErrNotBuilt) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	gobin := t.TempDir()
	install := exec.Command(goCmd, "install", ".")
	install.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	karpless := filepath.Join(gobin, "karpless")

	work := t.TempDir()
	if _, err := os.Stat(filepath.Join(work, "go.mod")); err == nil {
		t.Fatal("the temporary folder is a module")
	}
	for d := work; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/karpless/karpless\n") {
			t.Skipf("the temporary folder %s is inside a checkout (%s)", work, d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	cache := t.TempDir()
	shared := filepath.Join(cache, "karpless", "kube", kubebuild.Version(), "bin")
	if err := os.MkdirAll(filepath.Dir(shared), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, shared); err != nil {
		t.Fatal(err)
	}
	env := func(cache, path string) []string {
		var out []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			switch k {
			case controlplane.BinEnv, "XDG_CACHE_HOME", "PATH", ScheduleRateEnv:
				continue
			}
			out = append(out, kv)
		}
		return append(out, "XDG_CACHE_HOME="+cache, "PATH="+path)
	}
	path := os.Getenv("PATH")

	var upOut, upErr bytes.Buffer
	up := exec.Command(karpless, "local", "up", "--dir", "env", "--controller-manager=false", "--schedules=false", "--interruption=false")
	up.Dir, up.Env, up.Stdout, up.Stderr = work, env(cache, path), &upOut, &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = up.Process.Kill()
			<-exited
		}
	}()
	state := filepath.Join(work, "env", "state.json")
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(state); err == nil {
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("local up ended early: %v\n%s\n%s", err, upOut.String(), upErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("local up did not come up in 3 minutes")
		}
	}
	// A reading command, from the same folder, in JSON.
	list := exec.Command(karpless, "local", "instances", "--dir", "env", "-o", "json")
	list.Dir, list.Env = work, env(cache, path)
	out, err := list.Output()
	var got instanceList
	if err != nil || json.Unmarshal(out, &got) != nil || got.Instances == nil {
		t.Errorf("local instances -o json: %v\n%s", err, out)
	}
	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("local up exited with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("local up did not stop in a minute after SIGINT")
	}
	text := upOut.String()
	for _, want := range []string{"Karpless local environment is up", "export KUBECONFIG=" + filepath.Join(work, "env", "kubeconfig"), "stopping"} {
		if !strings.Contains(text, want) {
			t.Errorf("local up's output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(upErr.String(), "built from source once") {
		t.Errorf("local up rebuilt the control plane the cache holds:\n%s", upErr.String())
	}
	if target, err := os.Readlink(filepath.Join(work, "env", "bin", "kubectl")); err != nil || target != filepath.Join(shared, "kubectl") {
		t.Errorf("kubectl links to %q (%v), want the shared build's", target, err)
	}

	// An empty cache: local up goes to build it, and without Go says so.
	noGo := t.TempDir()
	up = exec.Command(karpless, "local", "up", "--dir", "env2")
	up.Dir, up.Env = work, env(t.TempDir(), noGo)
	out, err = up.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "building the local control plane needs the Go toolchain") {
		t.Errorf("local up with an empty cache and no Go: %v\n%s", err, out)
	}
}
