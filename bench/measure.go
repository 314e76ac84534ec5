package main

import (
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time (all threads).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sample is what one run of one scheduler cost.
type sample struct {
	wall, cpu time.Duration
	// heap is the peak of live and not yet collected heap objects above
	// what the heap held (inputs included) when the run started.
	heap uint64
}

// measure runs f after a GC, sampling the heap every millisecond.
func measure(f func()) sample {
	runtime.GC()
	read := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	base := read()
	peak := base
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	})
	w0, c0 := time.Now(), cpuTime()
	f()
	s := sample{wall: time.Since(w0), cpu: cpuTime() - c0}
	close(done)
	wg.Wait()
	peak = max(peak, read())
	s.heap = peak - base
	return s
}

// median of the samples, each field on its own.
func median(xs []sample) sample {
	if len(xs) == 0 {
		return sample{}
	}
	walls, cpus, heaps := make([]time.Duration, len(xs)), make([]time.Duration, len(xs)), make([]uint64, len(xs))
	for i, x := range xs {
		walls[i], cpus[i], heaps[i] = x.wall, x.cpu, x.heap
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	slices.Sort(heaps)
	m := len(xs) / 2
	return sample{wall: walls[m], cpu: cpus[m], heap: heaps[m]}
}

func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
