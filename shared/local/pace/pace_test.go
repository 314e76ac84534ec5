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

func TestPacerShare(t *testing.T) {
	now := time.Unix(0, 0)
	var stall time.Duration
	ok := true
	p := &Pacer{read: func() (time.Duration, bool) { return stall, ok }, now: func() time.Time { return now }, share: 1}
	step := func(wall, stalled time.Duration) float64 {
		now = now.Add(wall)
		stall += stalled
		return p.Share()
	}
	if s := p.Share(); s != 1 {
		t.Errorf("first share = %v, want 1", s)
	}
	if s := step(200*time.Millisecond, 50*time.Millisecond); s != 0.75 {
		t.Errorf("a quarter of the window stalled: share %v, want 0.75", s)
	}
	if s := step(50*time.Millisecond, 50*time.Millisecond); s != 0.75 {
		t.Errorf("within the window the last share holds: %v", s)
	}
	if s := step(100*time.Millisecond, 10*time.Second); s != MinShare {
		t.Errorf("a saturated machine: share %v, want %v", s, MinShare)
	}
	ok = false
	if s := step(time.Second, 0); s != 1 {
		t.Errorf("no pressure file: share %v, want 1", s)
	}
}
