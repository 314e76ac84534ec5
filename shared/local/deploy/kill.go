package deploy

import (
	"errors"
	"net/http"
	"sync"
)

// ErrKilled is what every call returns once a KillSwitch has fired.
var ErrKilled = errors.New("killed: the Lambda was stopped here")

// KillSwitch stands for the Lambda runtime stopping an invocation at one
// external call: before it is sent, or after it was applied but before its
// answer is seen. Every call after that fails, as in a dead process. A nil
// KillSwitch sends every call; one with At 0 only records them.
type KillSwitch struct {
	// At is the call, counted from 1, at which the invocation dies.
	At int
	// After makes it die once that call was applied, not before it is sent.
	After bool

	mu    sync.Mutex
	dead  bool
	calls []string
}

// Do passes send through the switch; desc names the call in Calls.
func (k *KillSwitch) Do(desc string, send func() (*http.Response, error)) (*http.Response, error) {
	if k == nil {
		return send()
	}
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return nil, ErrKilled
	}
	k.calls = append(k.calls, desc)
	n := len(k.calls)
	if n == k.At && !k.After {
		k.dead = true
		k.mu.Unlock()
		return nil, ErrKilled
	}
	k.mu.Unlock()
	resp, err := send()
	if n == k.At && k.After {
		k.mu.Lock()
		k.dead = true
		k.mu.Unlock()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, ErrKilled
	}
	return resp, err
}

// Kill fires the switch now, between calls: the Lambda runtime ending an
// invocation at its timeout.
func (k *KillSwitch) Kill() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
}

// Dead says whether the switch fired.
func (k *KillSwitch) Dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// Calls are the calls that went through the switch, in order, the fatal one
// included.
func (k *KillSwitch) Calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// Gap is one point between the calls of an invocation that makes its
// calls one at a time: before call At, or, with After, after it.
type Gap struct {
	At    int
	After bool
}

// Gaps are the distinct points at which an invocation of n sequential
// calls can die: before each call, and after the last. Dying after call
// i and dying before call i+1 leave the same world (the calls made are the
// same, and the process's memory is lost either way), so a kill-point
// enumeration that takes each gap once kills at every call, before and
// after, at half the cost of taking both sides of each.
func Gaps(n int) []Gap {
	if n <= 0 {
		return nil
	}
	gaps := make([]Gap, 0, n+1)
	for at := 1; at <= n; at++ {
		gaps = append(gaps, Gap{At: at})
	}
	return append(gaps, Gap{At: n, After: true})
}

// Switch is a KillSwitch that fires at the gap.
func (g Gap) Switch() *KillSwitch { return &KillSwitch{At: g.At, After: g.After} }

// Side is "before" or "after".
func (g Gap) Side() string {
	if g.After {
		return "after"
	}
	return "before"
}
