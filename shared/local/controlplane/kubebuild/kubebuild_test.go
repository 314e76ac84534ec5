package kubebuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fakeGo is a go command that builds in no time: each build writes an
// executable at its -o and logs its arguments, so Ensure's phases, order,
// overlay and stamps are checked without compiling Kubernetes.
const fakeGo = `#!/bin/sh
case "$1" in
env) echo "$FAKE_GOROOT" ;;
list) echo "$*" >> "$FAKE_LOG" ;;
build)
  echo "$*" >> "$FAKE_LOG"
  printf '#!/bin/sh\n' > "$4"; chmod +x "$4" ;;
*) echo "unexpected: $*" >&2; exit 3 ;;
esac
`

// fakeToolchain installs fakeGo and a GOROOT whose time.go has the line
// the hook follows (or not), and returns the go command and its log.
func fakeToolchain(t *testing.T, withHookLine bool) (goCmd, log string) {
	t.Helper()
	dir := t.TempDir()
	goCmd = filepath.Join(dir, "go")
	if err := os.WriteFile(goCmd, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	goroot := filepath.Join(dir, "goroot")
	if err := os.MkdirAll(filepath.Join(goroot, "src", "time"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "package time\n\nfunc Now() Time {\n\tsec, nsec, mono := runtimeNow()\n\treturn x(sec, nsec, mono)\n}\n"
	if !withHookLine {
		body = strings.Replace(body, "runtimeNow()", "now()", 1)
	}
	if err := os.WriteFile(filepath.Join(goroot, "src", "time", "time.go"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "log")
	t.Setenv("FAKE_GOROOT", goroot)
	t.Setenv("FAKE_LOG", log)
	return goCmd, log
}

func readLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestVersionAndDir(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(KubernetesVersion()) {
		t.Errorf("KubernetesVersion() = %q", KubernetesVersion())
	}
	if want := KubernetesVersion() + "+vclock1"; Version() != want {
		t.Errorf("Version() = %q, want %q", Version(), want)
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir()) // macOS's cache is under HOME
	d, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(d) != "bin" || filepath.Base(filepath.Dir(d)) != Version() || !strings.HasSuffix(filepath.Dir(filepath.Dir(d)), filepath.Join("karpless", "kube")) {
		t.Errorf("BinDir() = %s, want <cache>/karpless/kube/%s/bin", d, Version())
	}
	// Every binary is a tool of the build module, so go.mod.in pins what
	// Ensure builds.
	for _, c := range components {
		if !bytes.Contains(goMod, []byte("\tk8s.io/kubernetes/cmd/"+c.name+"\n")) {
			t.Errorf("module/go.mod.in's tool block lacks %s", c.name)
		}
	}
	if !bytes.Contains(goMod, []byte("\t"+etcdPackage+"\n")) {
		t.Errorf("module/go.mod.in's tool block lacks %s", etcdPackage)
	}
}

func TestEnsureBuildsOnceInPhases(t *testing.T) {
	goCmd, log := fakeToolchain(t, true)
	bin := filepath.Join(t.TempDir(), "kube", Version(), "bin")
	var out bytes.Buffer
	got, err := Ensure(context.Background(), Options{BinDir: bin, Out: &out, Go: goCmd})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got != bin || len(Missing(bin)) != 0 || !Stamped(bin) {
		t.Fatalf("Ensure = %s; missing %v, stamped %v", got, Missing(bin), Stamped(bin))
	}
	text := out.String()
	for _, want := range []string{
		"is built from source once, into " + bin,
		"6 steps, about ",
		"[1/6] Fetching the sources of Kubernetes v" + KubernetesVersion() + " and etcd through the Go module proxy (about ",
		"[2/6] Building kube-apiserver (about ",
		"[3/6] Building kube-scheduler",
		"[4/6] Building kube-controller-manager",
		"[5/6] Building kubectl",
		"[6/6] Building etcd (about 1 min)",
		" left\n",
		"The local control plane is ready in " + bin,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the progress lacks %q:\n%s", want, text)
		}
	}
	lines := readLog(t, log)
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "list -deps") {
		t.Fatalf("go was run as:\n%s", strings.Join(lines, "\n"))
	}
	for i, c := range []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"} {
		l := lines[i+1]
		if !strings.Contains(l, "-o "+filepath.Join(bin, c)+".tmp") || !strings.Contains(l, "-overlay ") || !strings.HasSuffix(l, " k8s.io/kubernetes/cmd/"+c) ||
			!strings.Contains(l, "version.gitVersion=v"+KubernetesVersion()) {
			t.Errorf("build of %s: %s", c, l)
		}
	}
	if !strings.HasSuffix(lines[5], " "+etcdPackage) || strings.Contains(lines[5], "-overlay") {
		t.Errorf("build of etcd: %s", lines[5])
	}
	src := filepath.Join(filepath.Dir(bin), "src")
	if b, err := os.ReadFile(filepath.Join(src, "go.mod")); err != nil || !bytes.Equal(b, goMod) {
		t.Errorf("the build module's go.mod was not written out: %v", err)
	}
	patched, err := os.ReadFile(filepath.Join(src, "overlay", "time.go"))
	if err != nil || !strings.Contains(string(patched), "runtimeNow()\n\tsec, nsec = virtualWall(sec, nsec)\n") {
		t.Errorf("the overlay's time.go has no hook: %v\n%s", err, patched)
	}

	// Complete: nothing to say, nothing run.
	out.Reset()
	if _, err := Ensure(context.Background(), Options{BinDir: bin, Out: &out, Go: goCmd}); err != nil || out.Len() != 0 || len(readLog(t, log)) != 6 {
		t.Errorf("a complete build was touched: %v\n%s", err, out.String())
	}
	// One binary gone: fetch, then that one.
	if err := os.Remove(filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := Ensure(context.Background(), Options{BinDir: bin, Out: &out, Go: goCmd}); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "[2/2] Building kubectl") || strings.Contains(text, "etcd (about") {
		t.Errorf("rebuilding kubectl alone:\n%s", text)
	}
	if n := len(readLog(t, log)); n != 8 {
		t.Errorf("%d go runs after rebuilding kubectl, want 8", n)
	}
}

func TestEnsureAdoptsAnEarlierBuild(t *testing.T) {
	old := t.TempDir()
	for _, b := range Binaries {
		if err := os.WriteFile(filepath.Join(old, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "bin")
	noGo := filepath.Join(t.TempDir(), "no-go-here")

	// Stamped as another version: not taken, and without Go nothing builds.
	if err := os.WriteFile(filepath.Join(old, stampName), []byte("1.0.0+vclock1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Ensure(context.Background(), Options{BinDir: bin, Adopt: []string{old}, Go: noGo})
	if err == nil || !strings.Contains(err.Error(), "needs the Go toolchain") || !strings.Contains(err.Error(), "KARPLESS_KUBE_BIN") {
		t.Fatalf("Ensure without Go: %v", err)
	}
	if err := os.WriteFile(filepath.Join(old, stampName), []byte(Version()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Ensure(context.Background(), Options{BinDir: bin, Adopt: []string{old}, Go: noGo, Out: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !Stamped(bin) || !strings.Contains(out.String(), "so they are not built again") {
		t.Errorf("stamped %v:\n%s", Stamped(bin), out.String())
	}
	for _, b := range Binaries {
		a, errA := os.Stat(filepath.Join(old, b))
		c, errC := os.Stat(filepath.Join(bin, b))
		if errA != nil || errC != nil || !os.SameFile(a, c) {
			t.Errorf("%s was not linked: %v %v", b, errA, errC)
		}
	}

	// The old folder becomes a link to the shared one.
	if err := Link(old, bin); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(old); err != nil || target != bin {
		t.Errorf("%s links to %q (%v), want %s", old, target, err, bin)
	}
	if len(Missing(old)) != 0 {
		t.Errorf("through the link, missing %v", Missing(old))
	}
	if err := Link(old, bin); err != nil {
		t.Errorf("linking again: %v", err)
	}
}

// TestLinkInAFreshCheckout: a clean checkout (CI's) has no .cache at all;
// make kube's link is made with its parents, and made again is unchanged.
func TestLinkInAFreshCheckout(t *testing.T) {
	bin := t.TempDir()
	path := filepath.Join(t.TempDir(), "checkout", ".cache", "kube", "bin")
	for i := 0; i < 2; i++ {
		if err := Link(path, bin); err != nil {
			t.Fatalf("link %d: %v", i+1, err)
		}
		if target, err := os.Readlink(path); err != nil || target != bin {
			t.Errorf("link %d: %s links to %q (%v), want %s", i+1, path, target, err, bin)
		}
	}
}

func TestEnsureRefusesAGoWithoutTheHookLine(t *testing.T) {
	goCmd, _ := fakeToolchain(t, false)
	_, err := Ensure(context.Background(), Options{BinDir: filepath.Join(t.TempDir(), "bin"), Go: goCmd})
	if err == nil || !strings.Contains(err.Error(), "cannot place the virtual clock hook") || !strings.Contains(err.Error(), "fetching the sources") {
		t.Errorf("Ensure with a time.go it cannot patch: %v", err)
	}
}

// TestDuringTicks: a long phase says it is still going. The phase ends
// only once a tick has been seen, so the test waits on that, not on time.
func TestDuringTicks(t *testing.T) {
	ticked := make(chan time.Duration, 100)
	err := during(context.Background(), time.Millisecond, func(d time.Duration) { ticked <- d }, func(ctx context.Context) error {
		select {
		case <-ticked:
			return nil
		case <-time.After(time.Minute):
			return errors.New("no tick in a minute")
		}
	})
	if err != nil {
		t.Error(err)
	}
}

func TestEstimates(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "1 min"}, {20 * time.Second, "1 min"}, {90 * time.Second, "2 min"}, {16 * time.Minute, "16 min"}} {
		if got := minutes(tc.d); got != tc.want {
			t.Errorf("minutes(%s) = %s, want %s", tc.d, got, tc.want)
		}
	}
	if s := scaled(8 * time.Minute); s > 8*time.Minute || s < 2*time.Minute {
		t.Errorf("scaled(8m) = %s: want between a quarter and all of it", s)
	}
}
