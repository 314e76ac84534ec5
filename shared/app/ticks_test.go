package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/local/testworld"
	"github.com/karpless/karpless/shared/ticks/disrupt"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, &env, kubetest.Options{Scheduler: true, ControllerManager: true}))
}

// BenchmarkSteadyTicks measures what the two scheduled functions cost every
// minute on a settled cluster: the provisioner finding nothing pending and
// the disruption function evaluating every node, each as one invocation
// with its handler's configuration (no watch window when idle). The cluster
// is built by the provisioner itself through the emulator: a Deployment of
// `pods` replicas, ten to an m5.xlarge, so that pods/10 Karpenter nodes with
// their NodeClaims run when the timer starts. Reported per tick: wall time,
// bytes read from the API server, the peak heap growth during the tick and
// the bytes it writes to its log at the default level (JSON logs and EMF
// metrics: what CloudWatch Logs ingests).
//
//	go test ./shared/app -run '^$' -bench SteadyTicks -benchtime 5x -timeout 30m
func BenchmarkSteadyTicks(b *testing.B) {
	for _, pods := range []int{100, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", pods/10), func(b *testing.B) {
			w := settledCluster(b, pods)
			ctx := context.Background()
			logged := &byteCount{}
			w.App.Log = slog.New(slog.NewJSONHandler(logged, nil))
			w.App.Out = logged
			b.Run("provisioner", func(b *testing.B) {
				var bytes int64
				peak := heapPeak(b, func() {
					s, err := w.App.Provisioner().Run(ctx, "bench")
					if s.NodeClaimsCreated > 0 || s.PendingPods > 0 {
						b.Fatalf("a steady tick acted: %+v %v", s, err)
					}
					if err != nil {
						// The emulator is as hostile as AWS: a throttle
						// outlasting the retries fails a tick now and then.
						b.Logf("steady provisioner tick: %v", err)
					}
					bytes = s.SnapshotBytes
				})
				b.ReportMetric(float64(bytes)/(1<<20), "MiB-read/op")
				b.ReportMetric(float64(logged.take())/float64(b.N), "log-bytes/op")
				b.ReportMetric(peak, "MiB-peak-heap")
			})
			// A full evaluation: the first tick, and one every five minutes
			// (timing.ConsolidatedTTL) on a cluster that does not change.
			// The other ticks find the cluster as consolidation left it and
			// skip the simulations, as Karpenter does.
			for _, steady := range []bool{false, true} {
				name := "disruption-full"
				if steady {
					name = "disruption-steady"
				}
				b.Run(name, func(b *testing.B) {
					var sims int
					peak := heapPeak(b, func() {
						if !steady {
							forgetConsolidation(b, w)
						}
						s, err := w.App.Disrupter().Run(ctx, "bench")
						if err != nil {
							b.Logf("disruption tick (a hostile answer): %v", err)
						}
						if len(s.Commands) > 0 {
							b.Fatalf("a settled cluster was disrupted: %+v", s.Commands)
						}
						sims = s.Simulations
					})
					b.ReportMetric(float64(sims), "simulations/op")
					b.ReportMetric(float64(logged.take())/float64(b.N), "log-bytes/op")
					b.ReportMetric(peak, "MiB-peak-heap")
				})
			}
		})
	}
}

// settledCluster provisions a Deployment of n pods (350m each, on
// m5.xlarge only) and waits until every pod runs.
func settledCluster(b *testing.B, n int) *testworld.World {
	start := time.Now()
	w := testworld.New(b, env, "provisioner")
	pool := deploy.DefaultNodePool("default", karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"},
	})
	// Consolidation is on (every tick evaluates every node) but nothing
	// would pay: every node is as full as the simulator packed it.
	pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	w.Apply(pool)
	w.Deployment("web", int32(n), "350m", nil)
	w.Converge(15*time.Minute, nil)
	b.Logf("%d pods running on %d nodes after %s", n, len(w.Claims()), time.Since(start).Round(time.Second))
	w.Emu.Stop()
	return w
}

// forgetConsolidation deletes the disruption state, so the next tick
// evaluates every node again.
func forgetConsolidation(b *testing.B, w *testworld.World) {
	b.StopTimer()
	defer b.StartTimer()
	err := w.E.Clients.Core.CoreV1().ConfigMaps(config.DefaultNamespace).Delete(context.Background(), disrupt.StateConfigMap, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
}

// heapPeak runs f b.N times and returns the largest growth of the heap
// objects over their level before f, sampled every 2ms (runtime/metrics
// reads without stopping the world), in MiB.
func heapPeak(b *testing.B, f func()) float64 {
	var worst uint64
	for b.Loop() {
		b.StopTimer()
		heap := testworld.StartHeapSampler()
		b.StartTimer()
		f()
		b.StopTimer()
		worst = max(worst, heap.Stop())
		b.StartTimer()
	}
	return float64(worst) / (1 << 20)
}

// byteCount is an io.Writer that counts.
type byteCount struct{ n atomic.Int64 }

func (c *byteCount) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }
func (c *byteCount) take() int64                 { return c.n.Swap(0) }
