package scale_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/events"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube/snapshot"
	"github.com/karpless/karpless/shared/local/eventsource"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/scale"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

var env *kubetest.Env

// No scheduler and no controller manager: the nodes have no kubelet, and
// the node lifecycle controller would mark them unreachable and evict
// their pods; nothing here needs either.
//
// The package has benchmarks only: without -bench (make test) no control
// plane is started.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	os.Exit(kubetest.Run(m, &env, kubetest.Options{}))
}

// What the stack deploys (infra/stack): each invocation runs under the
// function's timeout and GOMEMLIMIT (80% of 512 MiB).
const (
	tickTimeout         = 70 * time.Second
	interruptionTimeout = 60 * time.Second
	deployedMemLimit    = 409 << 20
	// backlog is the pending pods the provisioner faces at once.
	backlog = 15000
)

// BenchmarkScale measures each function's invocation on a cluster of
// 2,000 or 5,000 nodes and 50,000 pods, built once per size (scale.Build:
// one node provisioned for real, cloned; pods bound and Running). Run one
// size at a time (each builds its own world on the package's API server):
//
//	KARPLESS_REQUIRE_KUBE=1 go test ./shared/local/scale -run '^$' -bench 'Scale/nodes=2000/' -benchtime 1x -timeout 60m
//
// Reported per invocation: wall time (ns/op), the process's CPU time
// (getrusage: the function's work plus the in-process EC2 emulator's
// answers to it), the peak heap growth over the level before it (sampled
// every 2 ms), the bytes read from the API server, each once without a
// memory limit and once under the deployed GOMEMLIMIT. The invocations run
// under the deployed timeout.
func BenchmarkScale(b *testing.B) {
	// nodes=100 (2,500 pods) is a quick check of the benchmark itself.
	for _, size := range []struct{ nodes, pods int }{{100, 2500}, {2000, 50000}, {5000, 50000}} {
		nodes, pods := size.nodes, size.pods
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			kubetest.Need(b, env)
			ctx := context.Background()
			start := time.Now()
			w, err := scale.Build(ctx, env.Cluster.RESTConfig, scale.Options{
				Nodes: nodes, Pods: pods, Namespace: fmt.Sprintf("scale-%d", nodes),
				Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(w.Close)
			if err := w.Settle(ctx); err != nil {
				b.Fatal(err)
			}
			b.Logf("built %d nodes and %d pods (%s each) in %s", nodes, pods, w.PodCPU.String(), time.Since(start).Round(time.Second))
			// The functions' own log, at info level, goes to
			// KARPLESS_SCALE_LOG when it names a file; warnings only to
			// stderr otherwise.
			w.App.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if name := os.Getenv("KARPLESS_SCALE_LOG"); name != "" {
				f, err := os.Create(name)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { f.Close() })
				w.App.Log = slog.New(slog.NewJSONHandler(f, nil))
			}
			read := func() int64 { return w.App.Kube.Read.Total() }

			// The read every tick starts with, alone; retained is what the
			// snapshot holds once read (the rest of its peak is garbage).
			each(b, "snapshot", read, func(b *testing.B) {
				b.StopTimer()
				runtime.GC()
				before := testworld.HeapObjects()
				b.StartTimer()
				snap, err := snapshot.Take(ctx, w.App.Kube, clock.RealClock{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				b.ReportMetric(float64(testworld.HeapObjects()-before)/(1<<20), "MiB-retained")
				runtime.KeepAlive(snap)
				b.StartTimer()
			})
			each(b, "provisioner", read, func(b *testing.B) {
				tctx, cancel := context.WithTimeout(ctx, tickTimeout)
				defer cancel()
				s, err := w.App.Provisioner().Run(tctx, "bench")
				if s.NodeClaimsCreated > 0 || s.PendingPods > 0 {
					b.Fatalf("a steady tick acted: %+v %v", s, err)
				}
				if err != nil {
					b.Fatalf("steady provisioner tick: %v", err)
				}
			})
			for _, steady := range []bool{false, true} {
				name := "disruption-full"
				if steady {
					name = "disruption-steady"
				}
				each(b, name, read, func(b *testing.B) {
					if !steady {
						forgetConsolidation(b, w)
					}
					tctx, cancel := context.WithTimeout(ctx, tickTimeout)
					defer cancel()
					s, err := w.App.Disrupter().Run(tctx, "bench")
					if err != nil {
						b.Logf("disruption tick: %.300s", err)
					}
					if len(s.Commands) > 0 {
						b.Fatalf("a settled cluster was disrupted: %+v", s.Commands)
					}
					b.ReportMetric(float64(s.Simulations), "simulations/op")
					b.ReportMetric(float64(s.StatusUpdates), "status-writes/op")
				})
			}
			next := 1 // the template's instance is left alone
			each(b, "interruption", read, func(b *testing.B) {
				b.StopTimer()
				// The batch comes through the queue, as Lambda's mapping
				// hands it over: the handler proves each record there.
				q := w.App.AWS.SQS
				for range 10 {
					id := w.Instances[next].ID
					next++
					if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.Emu.InterruptionQueueURL()), MessageBody: aws.String(string(events.NewSpotInterruption("e-"+id, id, time.Now())))}); err != nil {
						b.Fatal(err)
					}
				}
				out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.Emu.InterruptionQueueURL()), MaxNumberOfMessages: 10, VisibilityTimeout: 360})
				if err != nil || len(out.Messages) != 10 {
					b.Fatalf("receiving the batch: %d messages, %v", len(out.Messages), err)
				}
				batch := lambdaevents.SQSEvent{Records: eventsource.Records(out.Messages, w.Emu.InterruptionQueueARN(), w.Emu.Region())}
				b.StartTimer()
				tctx, cancel := context.WithTimeout(ctx, interruptionTimeout)
				defer cancel()
				res, err := w.App.InterruptionHandler()(tctx, batch)
				if err != nil || len(res.BatchItemFailures) > 0 {
					b.Logf("interruption batch: %d failed, %.300v", len(res.BatchItemFailures), err)
				}
			})
			// Last: it leaves the cluster with new claims and pods.
			b.Run("provisioner-backlog", func(b *testing.B) {
				if err := w.AddPending(ctx, "backlog", min(backlog, pods*3/10), w.PodCPU); err != nil {
					b.Fatal(err)
				}
				for _, limit := range []bool{false, true} {
					b.Run(limitName(limit), func(b *testing.B) {
						measure(b, limit, read, func(b *testing.B) {
							tctx, cancel := context.WithTimeout(ctx, tickTimeout)
							defer cancel()
							t0 := time.Now()
							s, err := w.App.Provisioner().Run(tctx, "bench")
							b.Logf("backlog tick: %s, %d pending, %d claims created, %d launched, errors %v", time.Since(t0).Round(time.Millisecond), s.PendingPods, s.NodeClaimsCreated, s.Launched, s.Errors)
							if err != nil {
								b.Logf("backlog tick: %.300s", err)
							}
							b.ReportMetric(float64(s.NodeClaimsCreated), "claims-created/op")
						})
					})
				}
			})
		})
	}
}

func limitName(limit bool) string {
	if limit {
		return "gomemlimit=409MiB"
	}
	return "gomemlimit=off"
}

// each runs tick as a sub-benchmark, without a memory limit and under the
// deployed one.
func each(b *testing.B, name string, read func() int64, tick func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		for _, limit := range []bool{false, true} {
			b.Run(limitName(limit), func(b *testing.B) { measure(b, limit, read, tick) })
		}
	})
}

// measure runs f b.N times and reports the CPU time, the bytes read and
// the largest peak heap growth of one run.
func measure(b *testing.B, limit bool, read func() int64, f func(b *testing.B)) {
	if limit {
		old := debug.SetMemoryLimit(deployedMemLimit)
		defer debug.SetMemoryLimit(old)
	}
	var worst uint64
	var cpu time.Duration
	var bytes int64
	for b.Loop() {
		b.StopTimer()
		heap := testworld.StartHeapSampler()
		profile(b, "before")
		cpu0, read0 := cpuTime(), read()
		b.StartTimer()
		f(b)
		b.StopTimer()
		profile(b, "after")
		cpu += cpuTime() - cpu0
		bytes += read() - read0
		worst = max(worst, heap.Stop())
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(bytes)/float64(b.N)/(1<<20), "MiB-read/op")
	b.ReportMetric(float64(worst)/(1<<20), "MiB-peak-heap")
}

// profile writes a heap profile into KARPLESS_SCALE_PROFILE (a folder),
// when set: `go tool pprof -sample_index=alloc_space -base before after`
// shows what one invocation allocated, by site.
func profile(b *testing.B, when string) {
	dir := os.Getenv("KARPLESS_SCALE_PROFILE")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+"."+when+".heap"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// forgetConsolidation deletes the disruption state, so the next tick
// evaluates every node again.
func forgetConsolidation(b *testing.B, w *scale.World) {
	b.StopTimer()
	defer b.StartTimer()
	err := w.Setup.Core.CoreV1().ConfigMaps(config.DefaultNamespace).Delete(context.Background(), disrupt.StateConfigMap, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
