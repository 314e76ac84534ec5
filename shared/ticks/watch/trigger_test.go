package watch

import (
	"testing"
	"time"
)

func TestTrigger(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms     int
		work   bool
		holder *string // the lease as seen (nil: no change)
		want   bool    // due at ms
	}
	held := func(h string) *string { return &h }
	free := held("")
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"nothing to do", []step{{ms: 0}, {ms: 5000}}},
		{"one pod: sent after a second without another", []step{
			{ms: 0, work: true}, {ms: 500}, {ms: 999}, {ms: 1000, want: true}, {ms: 1100},
		}},
		{"a stream of pods: sent at the batch's maximum", []step{
			{ms: 0, work: true}, {ms: 900, work: true}, {ms: 1800, work: true}, {ms: 2700, work: true},
			{ms: 3600, work: true}, {ms: 4500, work: true}, {ms: 5000, want: true},
		}},
		{"lease held: wait for its release", []step{
			{ms: 0, holder: held("tick-1")}, {ms: 10, work: true}, {ms: 1500}, {ms: 3000},
			{ms: 3100, holder: free, want: true},
		}},
		{"after sending, nothing more until a holder appears", []step{
			{ms: 0, work: true}, {ms: 1000, want: true}, {ms: 1200, work: true}, {ms: 2500},
			{ms: 2600, holder: held("invoked")}, {ms: 4000},
			// Work seen after the invocation: sent when the lease is free again.
			{ms: 4100, holder: free, want: true},
		}},
		{"the invocation was lost: sent again", []step{
			{ms: 0, work: true}, {ms: 1000, want: true}, {ms: 5999}, {ms: 6000, want: true}, {ms: 6100},
		}},
		{"lost while a scheduled tick holds the lease: its snapshot has the work", []step{
			{ms: 0, work: true}, {ms: 1000, want: true}, {ms: 1050, holder: held("tick-2")}, {ms: 7000},
			{ms: 8000, holder: free}, {ms: 9000},
		}},
		{"a holder that was there before the invocation does not end the wait", []step{
			{ms: 0, holder: held("old")}, {ms: 10, holder: free}, {ms: 20, work: true}, {ms: 1020, want: true},
			{ms: 1100, holder: free}, {ms: 6020, want: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &trigger{batchIdle: time.Second, batchMax: 5 * time.Second, awaitAcquire: 5 * time.Second}
			for _, s := range tc.steps {
				if s.holder != nil {
					tr.lease(*s.holder)
				}
				if s.work {
					tr.work(at(s.ms))
				}
				if got := tr.due(at(s.ms)); got != s.want {
					t.Fatalf("at %d ms: due %v, want %v (%+v)", s.ms, got, s.want, tr)
				}
			}
		})
	}
}

func TestTriggerFailedInvocationIsRetried(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tr := &trigger{batchIdle: time.Second, batchMax: 5 * time.Second, awaitAcquire: 5 * time.Second}
	tr.work(t0)
	if !tr.due(t0.Add(time.Second)) {
		t.Fatal("not due")
	}
	tr.failed(t0.Add(time.Second))
	if tr.due(t0.Add(1500 * time.Millisecond)) {
		t.Error("retried before a batch's wait")
	}
	if !tr.due(t0.Add(2 * time.Second)) {
		t.Error("not retried")
	}
}
