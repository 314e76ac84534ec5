// Package clockctx gives a context a deadline on an injected clock, so that
// an invocation's deadline and watch windows follow the clock the engine
// runs on: the real one in Lambda, a virtual one in the soak.
package clockctx

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// WithDeadline is context.WithDeadline measured on clk: the context ends
// (Err is context.DeadlineExceeded) once clk reaches d, or when parent ends.
// With the real clock it is context.WithDeadline itself.
func WithDeadline(parent context.Context, clk clock.WithTicker, d time.Time) (context.Context, context.CancelFunc) {
	if _, real := clk.(clock.RealClock); real {
		return context.WithDeadline(parent, d)
	}
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	c := &deadlineCtx{Context: parent, deadline: d, done: make(chan struct{})}
	wait := d.Sub(clk.Now())
	if wait <= 0 {
		c.end(context.DeadlineExceeded)
		return c, func() {}
	}
	t := clk.NewTimer(wait)
	go func() {
		defer t.Stop()
		select {
		case <-parent.Done():
			c.end(parent.Err())
		case <-t.C():
			c.end(context.DeadlineExceeded)
		case <-c.done:
		}
	}()
	return c, func() { c.end(context.Canceled) }
}

// WithTimeout is WithDeadline(parent, clk, clk.Now().Add(d)).
func WithTimeout(parent context.Context, clk clock.WithTicker, d time.Duration) (context.Context, context.CancelFunc) {
	return WithDeadline(parent, clk, clk.Now().Add(d))
}

// deadlineCtx is a context whose deadline is on another clock than the
// runtime's; the context package's own deadlines use real timers.
type deadlineCtx struct {
	context.Context
	deadline time.Time
	done     chan struct{}

	mu  sync.Mutex
	err error
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }

func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *deadlineCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}
