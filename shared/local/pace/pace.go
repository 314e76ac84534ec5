// Package pace measures how much of the machine's CPU the local world's
// processes could have had, so virtual clocks can slow on a starved machine.
package pace

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"time"
)

// Pacer measures how much of the machine's CPU time the local world
// could have had. A virtual clock that follows real time moves on by that
// share of it, so a function starved by other processes (CI runs the
// integration packages side by side on two cores, a laptop is rarely
// idle) is not also made to look many times slower on the clock than it
// is: a Lambda has its vCPU to itself.
//
// Starvation is read from three counters, each cumulative, and the share
// is what the worst of them leaves over a window:
//   - Linux's pressure stall information, the time some task waited for a
//     CPU (/proc/pressure/cpu);
//   - the hypervisor's steal time, the time the VM's vCPUs were ready but
//     not run (/proc/stat), which no task inside the VM sees as waiting;
//   - the cgroup's throttled time (cpu.stat), the time a CPU quota held
//     every task of the container off the CPU, which the pressure file
//     does not count on a kernel whose pressure is the host's.
//
// Without any of them every share is 1.
type Pacer struct {
	read func() stalls
	now  func() time.Time

	at    time.Time
	last  stalls
	share float64
}

// stalls holds each source's cumulative starved time; a source the machine
// does not have is absent.
type stalls map[string]time.Duration

// paceWindow is the real time a share is measured over: the kernel keeps
// the stall totals in microseconds (steal in clock ticks of 10 ms), updated
// as tasks change state.
const paceWindow = 100 * time.Millisecond

// MinShare keeps the clock moving on a saturated machine (at most ten
// times the real time per virtual step). The CI seeds' wall time under
// make test's load was the same at a floor of 0.1 as at 0.5 (514-588 s
// against 528 s): their turns, not the pacing, set it; at 0.5 a machine
// loaded further starved the first ticks past their deadline again.
const MinShare = 0.1

func New() *Pacer {
	return &Pacer{read: readStalls, now: time.Now, share: 1}
}

// Share is the CPU share of the last measured window.
func (p *Pacer) Share() float64 {
	now := p.now()
	if !p.at.IsZero() && now.Sub(p.at) < paceWindow {
		return p.share
	}
	cur := p.read()
	if len(cur) == 0 {
		p.share = 1
		p.at, p.last = time.Time{}, nil
		return 1
	}
	if !p.at.IsZero() {
		wall := now.Sub(p.at)
		var worst time.Duration
		for k, v := range cur {
			if prev, ok := p.last[k]; ok && v-prev > worst {
				worst = v - prev
			}
		}
		p.share = min(1, max(MinShare, 1-float64(worst)/float64(wall)))
	}
	p.at, p.last = now, cur
	return p.share
}

// The sources' names.
const (
	srcPressure  = "pressure"
	srcSteal     = "steal"
	srcThrottled = "throttled"
)

// readStalls reads every source the machine has.
func readStalls() stalls {
	out := stalls{}
	if data, err := os.ReadFile("/proc/pressure/cpu"); err == nil {
		if d, ok := parseCPUStall(data); ok {
			out[srcPressure] = d
		}
	}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		if d, ok := parseSteal(data, runtime.NumCPU()); ok {
			out[srcSteal] = d
		}
	}
	// cgroup v2, then v1.
	if data, err := os.ReadFile("/sys/fs/cgroup/cpu.stat"); err == nil {
		if d, ok := parseThrottled(data, "throttled_usec", time.Microsecond); ok {
			out[srcThrottled] = d
		}
	} else if data, err := os.ReadFile("/sys/fs/cgroup/cpu/cpu.stat"); err == nil {
		if d, ok := parseThrottled(data, "throttled_time", time.Nanosecond); ok {
			out[srcThrottled] = d
		}
	}
	return out
}

// parseCPUStall takes the "some" line's total (microseconds).
func parseCPUStall(data []byte) (time.Duration, bool) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("some ")) {
			continue
		}
		for field := range bytes.FieldsSeq(line) {
			if v, ok := bytes.CutPrefix(field, []byte("total=")); ok {
				us, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil || us < 0 {
					return 0, false
				}
				return time.Duration(us) * time.Microsecond, true
			}
		}
	}
	return 0, false
}

// userHz is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHz = 100

// parseSteal takes the steal time of /proc/stat's all-CPU line (its eighth
// column) per CPU: the wall time in which each vCPU, on average, was not
// run.
func parseSteal(data []byte, cpus int) (time.Duration, bool) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" || cpus < 1 {
		return 0, false
	}
	ticks, err := strconv.ParseInt(string(f[8]), 10, 64)
	if err != nil || ticks < 0 {
		return 0, false
	}
	return time.Duration(ticks) * time.Second / userHz / time.Duration(cpus), true
}

// parseThrottled takes cpu.stat's throttled total, in unit.
func parseThrottled(data []byte, key string, unit time.Duration) (time.Duration, bool) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) != 2 || string(f[0]) != key {
			continue
		}
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || v < 0 {
			return 0, false
		}
		return time.Duration(v) * unit, true
	}
	return 0, false
}
