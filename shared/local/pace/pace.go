// Package pace measures how much of the machine's CPU the local world's
// processes could have had, so virtual clocks can slow on a starved machine.
package pace

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// Pacer measures how much of the machine's CPU time the local world
// could have had: the share of real time in which no task waited for a
// CPU (Linux's pressure stall information). A virtual clock that follows
// real time moves on by that share of it, so a function starved by other
// processes (CI runs the integration packages side by side on two cores,
// a laptop is rarely idle) is not also made to look many times slower on
// the clock than it is: a Lambda has its vCPU to itself. Without the
// pressure file every share is 1.
type Pacer struct {
	read func() (stall time.Duration, ok bool)
	now  func() time.Time

	at    time.Time
	stall time.Duration
	share float64
}

// paceWindow is the real time a share is measured over: the kernel keeps
// the stall total in microseconds, updated as tasks change state.
const paceWindow = 100 * time.Millisecond

// MinShare keeps the clock moving on a saturated machine (at most ten
// times the real time per virtual step). The CI seeds' wall time under
// make test's load was the same at a floor of 0.1 as at 0.5 (514-588 s
// against 528 s): their turns, not the pacing, set it; at 0.5 a machine
// loaded further starved the first ticks past their deadline again.
const MinShare = 0.1

func New() *Pacer {
	return &Pacer{read: readCPUStall, now: time.Now, share: 1}
}

// Share is the CPU share of the last measured window.
func (p *Pacer) Share() float64 {
	now := p.now()
	if !p.at.IsZero() && now.Sub(p.at) < paceWindow {
		return p.share
	}
	stall, ok := p.read()
	if !ok {
		p.share = 1
		return 1
	}
	if !p.at.IsZero() {
		wall := now.Sub(p.at)
		p.share = min(1, max(MinShare, 1-float64(stall-p.stall)/float64(wall)))
	}
	p.at, p.stall = now, stall
	return p.share
}

// readCPUStall reads the total time some task waited for a CPU.
func readCPUStall() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	return parseCPUStall(data)
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
