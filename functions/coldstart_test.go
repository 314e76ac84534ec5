package functions_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/shared/local/emulator"
)

// BenchmarkColdStart measures each function's init: from the process start
// to its first GET of the Lambda runtime API's next invocation, which is
// the moment Lambda would hand it an event. The binary is built as the
// Makefile builds it (for this machine's architecture, so it can run; the
// arm64 size is reported beside it), and the init includes what the main
// does before lambda.Start: configuration, AWS clients, EKS DescribeCluster
// through the emulator, the catalog. It also reports the peak RSS at that
// moment, which is the floor of the memory the function needs.
//
//	go test ./functions -run '^$' -bench ColdStart -benchtime 20x
func BenchmarkColdStart(b *testing.B) {
	dir := b.TempDir()
	emu, env := world(b)
	defer emu.Close()
	for _, fn := range functions.Names() {
		host := build(b, fn, runtime.GOOS, runtime.GOARCH, dir)
		arm := build(b, fn, "linux", "arm64", dir)
		st, err := os.Stat(arm)
		if err != nil {
			b.Fatal(err)
		}
		id, ok := emu.Identity(fn)
		if !ok {
			b.Fatalf("emulator has no identity %s", fn)
		}
		fnEnv := append(env, "AWS_ACCESS_KEY_ID="+id.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+id.SecretAccessKey)
		b.Run(fn, func(b *testing.B) {
			var peak float64
			for b.Loop() {
				peak = max(peak, initOnce(b, host, fnEnv))
			}
			b.ReportMetric(float64(st.Size())/(1<<20), "MiB-arm64-binary")
			b.ReportMetric(peak, "MiB-peak-rss")
		})
	}
}

// TestColdStartBinariesReachTheRuntimeAPI is the benchmark's check in
// `make test`: every function builds with the release flags, initializes
// against the emulator and asks for its first event.
func TestColdStartBinariesReachTheRuntimeAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds every function")
	}
	dir := t.TempDir()
	emu, env := world(t)
	defer emu.Close()
	for _, fn := range functions.Names() {
		t.Run(fn, func(t *testing.T) {
			id, _ := emu.Identity(fn)
			bin := build(t, fn, runtime.GOOS, runtime.GOARCH, dir)
			rss := initOnce(t, bin, append(env, "AWS_ACCESS_KEY_ID="+id.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+id.SecretAccessKey))
			// The watcher runs in 128 MiB and must leave its watches room;
			// the others in 512 MiB.
			limit := 256.0
			if fn == functions.Watcher {
				limit = 64
			}
			if (runtime.GOOS == "linux" && rss <= 0) || rss > limit {
				t.Errorf("peak RSS at init %.1f MiB, limit %.0f", rss, limit)
			}
			t.Logf("%s: peak RSS at init %.1f MiB", fn, rss)
		})
	}
}

// world is an emulator whose EKS cluster points at a TLS endpoint (never
// contacted during init) and the environment every function shares.
func world(tb testing.TB) (*emulator.Emulator, []string) {
	tb.Helper()
	api := httptest.NewTLSServer(http.NotFoundHandler())
	tb.Cleanup(api.Close)
	emu, err := emulator.New(emulator.Config{ClusterName: "karpless-coldstart"})
	if err != nil {
		tb.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	if err := emu.ConnectCluster(nil, api.URL, ca); err != nil {
		tb.Fatal(err)
	}
	return emu, []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_ENDPOINT_URL=" + emu.URL(),
		"AWS_REGION=" + emu.Region(),
		"AWS_EC2_METADATA_DISABLED=true",
		"CLUSTER_NAME=" + emu.ClusterName(),
		"INTERRUPTION_QUEUE_URL=" + emu.InterruptionQueueURL(),
		"PROVISIONER_FUNCTION_NAME=" + functions.Provisioner,
		"LOG_LEVEL=warn",
	}
}

// build compiles a function with the Makefile's release flags.
func build(tb testing.TB, fn, goos, goarch, dir string) string {
	tb.Helper()
	out := filepath.Join(dir, fn+"-"+goos+"-"+goarch)
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, "./"+fn)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building %s for %s/%s: %v\n%s", fn, goos, goarch, err, b)
	}
	return out
}

// initOnce starts bin with a stand-in runtime API and waits for its first
// poll; it returns the process's peak RSS (MiB) at that moment. The
// benchmark timer covers only the start and the init.
func initOnce(tb testing.TB, bin string, env []string) float64 {
	tb.Helper()
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	ready := make(chan struct{}, 1)
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			select {
			case ready <- struct{}{}:
			default:
			}
		}
		<-r.Context().Done() // hold the poll until the process is killed
	}))
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(env, "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(rt.URL, "http://"))
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	exited := make(chan error, 1)
	if b, ok := tb.(*testing.B); ok {
		b.StartTimer()
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case err := <-exited:
		tb.Fatalf("%s exited before asking for an event: %v\n%s", filepath.Base(bin), err, stderr.String())
	case <-ctx.Done():
		tb.Fatalf("%s did not ask for an event within 30s\n%s", filepath.Base(bin), stderr.String())
	}
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	rss := peakRSS(tb, cmd.Process.Pid)
	_ = cmd.Process.Kill()
	<-exited
	if b, ok := tb.(*testing.B); ok {
		b.StartTimer()
	}
	return rss
}

// peakRSS reads VmHWM from /proc (Linux), in MiB.
func peakRSS(tb testing.TB, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Logf("no /proc: peak RSS not measured: %v", err)
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				tb.Fatalf("parsing VmHWM %q: %v", rest, err)
			}
			return kb / 1024
		}
	}
	return 0
}
