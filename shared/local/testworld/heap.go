package testworld

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// HeapSampler samples the heap's objects (live and not yet collected)
// every 2 ms between StartHeapSampler and Stop; runtime/metrics reads
// them without stopping the world. Benchmarks use it for a tick's peak.
type HeapSampler struct {
	base       uint64
	peak       atomic.Uint64
	stop, done chan struct{}
}

// StartHeapSampler collects garbage, takes the heap's level as the base
// and starts sampling.
func StartHeapSampler() *HeapSampler {
	runtime.GC()
	s := &HeapSampler{base: HeapObjects(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if h := HeapObjects(); h > s.peak.Load() {
					s.peak.Store(h)
				}
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the largest growth over the base,
// in bytes.
func (s *HeapSampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	if p := s.peak.Load(); p > s.base {
		return p - s.base
	}
	return 0
}

func HeapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
