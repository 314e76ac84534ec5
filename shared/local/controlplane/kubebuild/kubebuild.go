// Package kubebuild builds the local control plane (etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager, kubectl) from source, once, into the user's cache.
//
// The build module (module/go.mod.in and go.sum.in, written out as go.mod
// and go.sum) pins Kubernetes and every staging module it replaces; the
// sources come through the Go module proxy, so a CLI installed with go
// install builds it outside any checkout, and every checkout, `make kube`
// and the installed CLI share one build per Version. To move to another
// Kubernetes: copy the two files into an empty folder as go.mod and go.sum,
// go get k8s.io/kubernetes@vX and the staging pins, go mod tidy, copy them
// back.
package kubebuild

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

var (
	//go:embed module/go.mod.in
	goMod []byte
	//go:embed module/go.sum.in
	goSum []byte
	//go:embed module/zz_virtual_clock.go.in
	virtualClockHook []byte
)

// virtualClockVersion is the version of the hook in Go's time.Now
// (module/zz_virtual_clock.go.in); a build without it, or with an older
// one, is another Version.
const virtualClockVersion = 1

// Binaries are what a complete build holds.
var Binaries = []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"}

// stampName is the file in a bin folder that names the Version built there.
const stampName = ".version"

var kubeVersion = regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v(\d+\.\d+\.\d+)\b`)

// KubernetesVersion is the Kubernetes release the module pins (1.37.1).
func KubernetesVersion() string {
	m := kubeVersion.FindSubmatch(goMod)
	if m == nil {
		// The embedded go.mod is ours; TestVersion keeps it parseable.
		panic("kubebuild: module/go.mod.in pins no k8s.io/kubernetes")
	}
	return string(m[1])
}

// Version names a build: the Kubernetes release and the clock hook's
// version (1.37.1+vclock1), as hack/kube/build.sh stamped its builds.
func Version() string {
	return fmt.Sprintf("%s+vclock%d", KubernetesVersion(), virtualClockVersion)
}

// Dir is the build's folder in the user's cache:
// $XDG_CACHE_HOME/karpless/kube/<Version> on Linux (~/.cache when unset),
// ~/Library/Caches/... on macOS.
func Dir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user's cache folder for the local control plane: %w", err)
	}
	return filepath.Join(cache, "karpless", "kube", Version()), nil
}

// BinDir is Dir's bin folder, where the binaries go.
func BinDir() (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "bin"), nil
}

// Missing are the Binaries binDir lacks (not executable files).
func Missing(binDir string) []string {
	var out []string
	for _, b := range Binaries {
		if !executable(filepath.Join(binDir, b)) {
			out = append(out, b)
		}
	}
	return out
}

// Stamped reports whether binDir was built as this Version (its stamp
// says so), whatever it still holds.
func Stamped(binDir string) bool {
	b, err := os.ReadFile(filepath.Join(binDir, stampName))
	return err == nil && strings.TrimSpace(string(b)) == Version()
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Options say where to build and whom to tell.
type Options struct {
	// BinDir receives the binaries; empty means BinDir().
	BinDir string
	// Out receives the phases, their estimates and progress; nil discards.
	Out io.Writer
	// Go is the go command; empty means go from PATH.
	Go string
	// Adopt are bin folders of earlier builds (a checkout's .cache/kube/bin
	// from before the user's cache): binaries of a folder stamped with the
	// same Version are linked (or copied) instead of built.
	Adopt []string
	// Tick is how often a long phase says it is still going; 0 means a
	// minute.
	Tick time.Duration
}

// phase is one step of a build, with its estimate on two cores and a
// cold Go build cache (measured: 12-16 minutes in all).
type phase struct {
	title    string
	estimate time.Duration
	run      func(ctx context.Context) error
}

// Ensure makes binDir hold a complete build of this Version, building what
// is missing, and returns binDir. A complete build returns at once; a
// build another process is running is waited for.
func Ensure(ctx context.Context, o Options) (string, error) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	binDir := o.BinDir
	if binDir == "" {
		d, err := BinDir()
		if err != nil {
			return "", err
		}
		binDir = d
	}
	if len(Missing(binDir)) == 0 {
		return binDir, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", binDir, err)
	}
	unlock, err := lock(ctx, filepath.Join(binDir, ".lock"), out)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have finished it while this one waited.
	if len(Missing(binDir)) == 0 {
		return binDir, nil
	}
	if !Stamped(binDir) {
		// Binaries of another version (a bin folder named by the
		// caller) are not mixed with this one's.
		for _, b := range Binaries {
			_ = os.Remove(filepath.Join(binDir, b))
		}
	}
	for _, from := range o.Adopt {
		if err := adopt(from, binDir, out); err != nil {
			return "", err
		}
	}
	missing := Missing(binDir)
	if len(missing) == 0 {
		return binDir, stamp(binDir)
	}
	b, err := newBuilder(binDir, o.Go)
	if err != nil {
		return "", err
	}
	phases := b.phases(missing)
	var total time.Duration
	for _, p := range phases {
		total += scaled(p.estimate)
	}
	fmt.Fprintf(out, "The local control plane (Kubernetes v%s: %s) is built from source once, into %s;\n", KubernetesVersion(), strings.Join(missing, ", "), binDir)
	fmt.Fprintf(out, "every checkout, `make kube` and the installed CLI reuse it. %d steps, about %s on %d cores (less when Go's build cache is warm).\n",
		len(phases), minutes(total), runtime.NumCPU())
	start := time.Now()
	left := total
	for i, p := range phases {
		est := scaled(p.estimate)
		fmt.Fprintf(out, "[%d/%d] %s (about %s)\n", i+1, len(phases), p.title, minutes(est))
		t0 := time.Now()
		if err := during(ctx, o.Tick, func(elapsed time.Duration) {
			fmt.Fprintf(out, "      still %s (%s so far, estimated %s)\n", strings.ToLower(p.title[:1])+p.title[1:], elapsed.Round(time.Second), minutes(est))
		}, p.run); err != nil {
			return "", fmt.Errorf("building the local control plane, %s: %w", strings.ToLower(p.title[:1])+p.title[1:], err)
		}
		left -= est
		if i < len(phases)-1 {
			fmt.Fprintf(out, "      done in %s; about %s left\n", time.Since(t0).Round(time.Second), minutes(left))
		} else {
			fmt.Fprintf(out, "      done in %s\n", time.Since(t0).Round(time.Second))
		}
	}
	if m := Missing(binDir); len(m) > 0 {
		return "", fmt.Errorf("building the local control plane: %s still missing in %s", strings.Join(m, ", "), binDir)
	}
	if err := stamp(binDir); err != nil {
		return "", err
	}
	fmt.Fprintf(out, "The local control plane is ready in %s (built in %s).\n", binDir, time.Since(start).Round(time.Second))
	return binDir, nil
}

// scaled is an estimate for this machine: the compiles run on every core,
// so more cores than two take proportionally less, down to a quarter.
func scaled(d time.Duration) time.Duration {
	f := 2 / float64(max(runtime.NumCPU(), 2))
	return time.Duration(float64(d) * max(f, 0.25))
}

// minutes renders an estimate: "1 min" at least.
func minutes(d time.Duration) string {
	return fmt.Sprintf("%d min", max(1, int(math.Round(d.Minutes()))))
}

// during runs f, calling tick every period until it returns.
func during(ctx context.Context, period time.Duration, tick func(time.Duration), f func(context.Context) error) error {
	if period <= 0 {
		period = time.Minute
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f(ctx) }()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			tick(time.Since(start))
		}
	}
}

func stamp(binDir string) error {
	tmp := filepath.Join(binDir, stampName+".tmp")
	if err := os.WriteFile(tmp, []byte(Version()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(binDir, stampName))
}

// adopt links the binaries a folder stamped with this Version holds into
// binDir (copies them across file systems).
func adopt(from, binDir string, out io.Writer) error {
	if !Stamped(from) {
		return nil
	}
	same, err := sameDir(from, binDir)
	if err != nil || same {
		return err
	}
	var took []string
	for _, b := range Missing(binDir) {
		src := filepath.Join(from, b)
		if !executable(src) {
			continue
		}
		dst := filepath.Join(binDir, b)
		tmp := dst + ".tmp"
		_ = os.Remove(tmp)
		if err := os.Link(src, tmp); err != nil {
			if err := copyFile(src, tmp); err != nil {
				return fmt.Errorf("taking %s from %s: %w", b, from, err)
			}
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		took = append(took, b)
	}
	if len(took) > 0 {
		fmt.Fprintf(out, "took %s of Kubernetes v%s from %s (built there before), so they are not built again\n", strings.Join(took, ", "), KubernetesVersion(), from)
	}
	return nil
}

// sameDir reports whether a and b are one folder (b may be a link to a).
func sameDir(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		// A fresh checkout has no .cache/kube/bin yet: not the same.
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	w, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, in); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// Link makes path a symbolic link to binDir, so a checkout's
// .cache/kube/bin names the shared build. A folder there (an old build,
// adopted first by Ensure) is replaced.
func Link(path, binDir string) error {
	if same, err := sameDir(binDir, path); err != nil || same {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return err
		}
		if err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// The new link is put in place by a rename, so a process looking the
	// path up meanwhile finds the old folder or the new link.
	tmp := fmt.Sprintf("%s.link-%d", path, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(binDir, tmp); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.IsDir():
		old := fmt.Sprintf("%s.old-%d", path, os.Getpid())
		if err := os.Rename(path, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	return os.Rename(tmp, path)
}

// builder runs the go command in the build module's folder.
type builder struct {
	goCmd  string
	binDir string
	src    string // the build module, written out
	env    []string
}

func newBuilder(binDir, goCmd string) (*builder, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	path, err := exec.LookPath(goCmd)
	if err != nil {
		return nil, fmt.Errorf("building the local control plane needs the Go toolchain (%s not found: %w); install Go, or set KARPLESS_KUBE_BIN to a folder holding %s", goCmd, err, strings.Join(Binaries, ", "))
	}
	src := filepath.Join(filepath.Dir(binDir), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"go.mod": goMod, "go.sum": goSum} {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	// The user's own GOFLAGS (-mod=vendor, say) and go.work are not the
	// build module's; VCS stamping has nothing to stamp.
	env := append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	return &builder{goCmd: path, binDir: binDir, src: src, env: env}, nil
}

// go runs the go command in the module's folder; its output is kept for
// the error.
func (b *builder) goRun(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.goCmd, args...)
	cmd.Dir, cmd.Env = b.src, b.env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if err != nil {
		tail := buf.String()
		if len(tail) > 4000 {
			tail = "..." + tail[len(tail)-4000:]
		}
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail)
	}
	return buf.String(), nil
}

// components are the Kubernetes commands built with the clock hook, the
// longest first: it compiles most of what the others share.
var components = []struct {
	name     string
	estimate time.Duration
}{
	{"kube-apiserver", 8 * time.Minute},
	{"kube-scheduler", 2 * time.Minute},
	{"kube-controller-manager", 2 * time.Minute},
	{"kubectl", time.Minute},
}

const etcdPackage = "go.etcd.io/etcd/server/v3"

// phases are the steps that build the missing binaries.
func (b *builder) phases(missing []string) []phase {
	need := map[string]bool{}
	var pkgs []string
	for _, m := range missing {
		need[m] = true
		if m == "etcd" {
			pkgs = append(pkgs, etcdPackage)
		} else {
			pkgs = append(pkgs, "k8s.io/kubernetes/cmd/"+m)
		}
	}
	var overlay string
	ps := []phase{{
		title:    "Fetching the sources of Kubernetes v" + KubernetesVersion() + " and etcd through the Go module proxy",
		estimate: 2 * time.Minute,
		run: func(ctx context.Context) error {
			if _, err := b.goRun(ctx, append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...); err != nil {
				return err
			}
			var err error
			overlay, err = b.writeOverlay(ctx)
			return err
		},
	}}
	minor := strings.Split(KubernetesVersion(), ".")[1]
	ldflags := strings.Join([]string{"-s", "-w",
		"-X", "k8s.io/component-base/version.gitVersion=v" + KubernetesVersion(),
		"-X", "k8s.io/component-base/version.gitMajor=1",
		"-X", "k8s.io/component-base/version.gitMinor=" + minor,
		"-X", "k8s.io/component-base/version.gitTreeState=clean",
		"-X", "k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"}, " ")
	for _, c := range components {
		if !need[c.name] {
			continue
		}
		ps = append(ps, phase{
			title:    "Building " + c.name,
			estimate: c.estimate,
			run: func(ctx context.Context) error {
				return b.build(ctx, c.name, "-overlay", overlay, "-ldflags", ldflags, "k8s.io/kubernetes/cmd/"+c.name)
			},
		})
	}
	if need["etcd"] {
		ps = append(ps, phase{
			title:    "Building etcd",
			estimate: time.Minute,
			run: func(ctx context.Context) error {
				return b.build(ctx, "etcd", "-ldflags", "-s -w", etcdPackage)
			},
		})
	}
	return ps
}

// build compiles one binary next to its final name, then renames it, so a
// half-written binary is never found.
func (b *builder) build(ctx context.Context, name string, args ...string) error {
	dst := filepath.Join(b.binDir, name)
	tmp := dst + ".tmp"
	args = append([]string{"build", "-trimpath", "-o", tmp}, args...)
	if _, err := b.goRun(ctx, args...); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// hookLine is where the clock hook goes in Go's time.Now.
const hookLine = "\tsec, nsec, mono := runtimeNow()\n"

// writeOverlay writes the overlay that adds the virtual clock hook to the
// standard library's time package of the Go that builds (go build
// -overlay; the sources stay untouched) and returns its file.
func (b *builder) writeOverlay(ctx context.Context) (string, error) {
	goroot, err := b.goRun(ctx, "env", "GOROOT")
	if err != nil {
		return "", err
	}
	timeDir := filepath.Join(strings.TrimSpace(goroot), "src", "time")
	orig, err := os.ReadFile(filepath.Join(timeDir, "time.go"))
	if err != nil {
		return "", err
	}
	if n := bytes.Count(orig, []byte(hookLine)); n != 1 {
		return "", fmt.Errorf("cannot place the virtual clock hook in %s: the line %q appears %d times (did Go change time.Now?)", filepath.Join(timeDir, "time.go"), strings.TrimSpace(hookLine), n)
	}
	patched := bytes.Replace(orig, []byte(hookLine), []byte(hookLine+"\tsec, nsec = virtualWall(sec, nsec)\n"), 1)
	dir := filepath.Join(b.src, "overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{
		filepath.Join(timeDir, "time.go"):             filepath.Join(dir, "time.go"),
		filepath.Join(timeDir, "zz_virtual_clock.go"): filepath.Join(dir, "zz_virtual_clock.go"),
	}
	if err := os.WriteFile(files[filepath.Join(timeDir, "time.go")], patched, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(files[filepath.Join(timeDir, "zz_virtual_clock.go")], virtualClockHook, 0o644); err != nil {
		return "", err
	}
	j, err := json.Marshal(map[string]any{"Replace": files})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, j, 0o644)
}
