package pace

import (
	"testing"
	"time"
)

func TestParseCPUStall(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"some avg10=3.21 avg60=3.72 avg300=24.58 total=24333691714\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 24333691714 * time.Microsecond, true},
		{"full avg10=0.00 total=5\nsome avg10=1.00 total=7\n", 7 * time.Microsecond, true},
		{"some avg10=3.21 total=-1\n", 0, false},
		{"some avg10=3.21 total=x\n", 0, false},
		{"full avg10=0.00 total=5\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parseCPUStall([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseCPUStall(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseSteal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		cpus int
		want time.Duration
		ok   bool
	}{
		{"cpu  1257167 113606 447165 512754 2908 0 20303 400 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n", 2, 2 * time.Second, true},
		{"cpu  1 2 3 4 5 6 7 0 0 0\n", 2, 0, true},
		{"cpu  1 2 3 4 5 6 7\n", 2, 0, false},
		{"cpu0 1 2 3 4 5 6 7 8 0 0\n", 2, 0, false},
		{"cpu  1 2 3 4 5 6 7 -8 0 0\n", 2, 0, false},
		{"", 2, 0, false},
	} {
		got, ok := parseSteal([]byte(tc.in), tc.cpus)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseSteal(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseThrottled(t *testing.T) {
	v2 := "usage_usec 100\nnr_periods 10\nnr_throttled 2\nthrottled_usec 3500\n"
	if d, ok := parseThrottled([]byte(v2), "throttled_usec", time.Microsecond); !ok || d != 3500*time.Microsecond {
		t.Errorf("cgroup v2: %v, %v", d, ok)
	}
	v1 := "nr_periods 10\nnr_throttled 2\nthrottled_time 7000000\n"
	if d, ok := parseThrottled([]byte(v1), "throttled_time", time.Nanosecond); !ok || d != 7*time.Millisecond {
		t.Errorf("cgroup v1: %v, %v", d, ok)
	}
	if _, ok := parseThrottled([]byte("throttled_usec x\n"), "throttled_usec", time.Microsecond); ok {
		t.Error("a bad number was read")
	}
	if _, ok := parseThrottled([]byte(v1), "throttled_usec", time.Microsecond); ok {
		t.Error("a missing key was read")
	}
}

func TestPacerShare(t *testing.T) {
	now := time.Unix(0, 0)
	cur := stalls{srcPressure: 0, srcSteal: 0}
	p := &Pacer{read: func() stalls { return cur }, now: func() time.Time { return now }, share: 1}
	step := func(wall time.Duration, add stalls) float64 {
		now = now.Add(wall)
		next := stalls{}
		for k, v := range cur {
			next[k] = v + add[k]
		}
		cur = next
		return p.Share()
	}
	if s := p.Share(); s != 1 {
		t.Errorf("first share = %v, want 1", s)
	}
	if s := step(200*time.Millisecond, stalls{srcPressure: 50 * time.Millisecond}); s != 0.75 {
		t.Errorf("a quarter of the window stalled: share %v, want 0.75", s)
	}
	if s := step(50*time.Millisecond, stalls{srcPressure: 50 * time.Millisecond}); s != 0.75 {
		t.Errorf("within the window the last share holds: %v", s)
	}
	// Steal that no task saw as waiting: the worst source sets the share.
	if s := step(200*time.Millisecond, stalls{srcPressure: 10 * time.Millisecond, srcSteal: 125 * time.Millisecond}); s != 0.5 {
		t.Errorf("half the window (250 ms since the last reading) stolen: share %v, want 0.5", s)
	}
	if s := step(100*time.Millisecond, stalls{srcPressure: 10 * time.Second}); s != MinShare {
		t.Errorf("a saturated machine: share %v, want %v", s, MinShare)
	}
	// A source that appears later is only compared once it has a reading.
	cur[srcThrottled] = time.Hour
	if s := step(200*time.Millisecond, nil); s != 1 {
		t.Errorf("a new source's first reading: share %v, want 1", s)
	}
	if s := step(200*time.Millisecond, stalls{srcThrottled: 150 * time.Millisecond}); s != 0.25 {
		t.Errorf("throttled three quarters of the window: share %v, want 0.25", s)
	}
	cur = stalls{}
	if s := step(time.Second, nil); s != 1 {
		t.Errorf("no source: share %v, want 1", s)
	}
}
