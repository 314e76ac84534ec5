package scheduling_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/local/workload"
)

var (
	typesOnce    sync.Once
	catalogTypes []*scheduling.InstanceType
)

func benchTypes(tb testing.TB) []*scheduling.InstanceType {
	typesOnce.Do(func() {
		var err error
		catalogTypes, err = workload.InstanceTypes()
		if err != nil {
			tb.Fatal(err)
		}
	})
	return catalogTypes
}

// benchSnapshot is the target workload: Karpenter's benchmark mix plus pods
// with required arm64 affinity and GPU pods, the whole catalog in six zones,
// spot and on-demand, and 200 existing nodes with pods on them.
func benchSnapshot(tb testing.TB, pods int) *scheduling.Snapshot {
	return workload.Snapshot(workload.Spec{Pods: pods, Seed: int64(pods), ARM64: true, GPU: true}, benchTypes(tb), 200)
}

// BenchmarkSolve measures a whole solve, from snapshot to results. Run it on
// one core: go test ./shared/core/scheduling -run '^$' -bench Solve -benchmem -cpu 1
// The 50,000-pod solve has targets of 3 s of CPU and 1 GiB of peak heap
// (the heap is reported by bench/, which samples it).
func BenchmarkSolve(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000, 50000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			benchSolve(b, benchSnapshot(b, n))
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
		})
	}
}

// benchSolve times b.N solves of snap and reports their CPU time and what
// the last one made.
func benchSolve(b *testing.B, snap *scheduling.Snapshot) {
	b.Helper()
	var r *scheduling.Results
	// The garbage of the previous round (its cost loop below) is
	// collected before the clock starts, not during the solves.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		r = scheduling.Solve(snap, scheduling.Provisioning())
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	// CPU time of the process (GC included) per solve: steadier than
	// wall time on a shared machine.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	cost := 0.0
	for _, c := range r.NewNodeClaims {
		_, o := c.CheapestOffering()
		cost += o.Price
	}
	b.ReportMetric(float64(len(r.NewNodeClaims)), "nodeclaims")
	b.ReportMetric(cost, "$/h")
	b.ReportMetric(float64(len(r.Unschedulable)), "unschedulable")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestPeakHeap solves 5,000 pods while sampling the live heap, and fails
// above 256 MiB. The snapshot itself is built before sampling starts.
func TestPeakHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := benchSnapshot(t, 5000)
	// The functions run Go's default collector; make test runs with
	// GOGC=200, which would let dead objects pile higher than they do.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	start := time.Now()
	r := scheduling.Solve(s, scheduling.Provisioning())
	elapsed := time.Since(start)
	close(done)
	wg.Wait()
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := peak.Load() - min(base, peak.Load())
	t.Logf("5,000 pods: %v, peak heap above the snapshot %.1f MiB (snapshot and catalog %.1f MiB), %d NodeClaims", elapsed, float64(heap)/(1<<20), float64(base)/(1<<20), len(r.NewNodeClaims))
	if heap > 256<<20 {
		t.Fatalf("peak heap %d MiB over 256 MiB", heap>>20)
	}
}

var (
	mixTypesOnce sync.Once
	mixTypes     []*scheduling.InstanceType
)

// BenchmarkSolveMix solves the bench/ mixes at 5,000 pods, as bench/ runs
// Karpless (its NodePools, DaemonSets and catalog, no existing nodes), so
// their solves can be profiled without the Karpenter module:
// go test ./shared/core/scheduling -run '^$' -bench SolveMix -cpuprofile mix.prof
func BenchmarkSolveMix(b *testing.B) {
	mixTypesOnce.Do(func() {
		var err error
		mixTypes, err = workload.CatalogTypes()
		if err != nil {
			b.Fatal(err)
		}
	})
	for _, c := range []workload.Case{workload.GettingStarted, workload.Burstable} {
		for _, mix := range []workload.Mix{workload.BatchMix, workload.MicroservicesMix, workload.NoAntiMix} {
			b.Run(fmt.Sprintf("case=%s/mix=%s", c, mix), func(b *testing.B) {
				const n = 5000
				// The seed bench/ uses for this batch.
				w, err := workload.Build(mix, n, int64(n)+int64(len(mix)))
				if err != nil {
					b.Fatal(err)
				}
				snap := &scheduling.Snapshot{
					Pods:        w.Pods,
					NodePools:   workload.NodePools(c, w.ExtraNodePools),
					NodeClasses: map[string]*scheduling.NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: mixTypes}},
					DaemonSets:  workload.DaemonSets(),
				}
				benchSolve(b, snap)
			})
		}
	}
}
