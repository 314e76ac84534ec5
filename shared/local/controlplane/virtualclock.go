package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	clocktesting "k8s.io/utils/clock/testing"
)

// VirtualClock is a fake clock whose time the control plane reads too
// (Config.VirtualClock): the soak's functions, emulator and Kubernetes
// components then agree on every timestamp while virtual hours pass in real
// minutes. Timers and tickers made from it fire when it is stepped.
type VirtualClock struct {
	*clocktesting.FakeClock
	path string
	mem  []byte
}

// NewVirtualClock creates the shared clock file in dir, set to start.
func NewVirtualClock(dir string, start time.Time) (*VirtualClock, error) {
	path := filepath.Join(dir, "virtual-clock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the virtual clock: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(8); err != nil {
		return nil, fmt.Errorf("sizing the virtual clock: %w", err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the virtual clock: %w", err)
	}
	c := &VirtualClock{FakeClock: clocktesting.NewFakeClock(start), path: path, mem: mem}
	c.publish(start)
	return c, nil
}

// Path is the file to hand to Config.VirtualClock.
func (c *VirtualClock) Path() string { return c.path }

// Step moves the clock on by d. The control plane sees the new time before
// any timer fires, so nothing it stamps afterwards is older than what the
// functions see.
func (c *VirtualClock) Step(d time.Duration) {
	c.publish(c.Now().Add(d))
	c.FakeClock.Step(d)
}

// SetTime moves the clock to t.
func (c *VirtualClock) SetTime(t time.Time) {
	c.publish(t)
	c.FakeClock.SetTime(t)
}

// Close unmaps the file; the control plane must be stopped first.
func (c *VirtualClock) Close() error { return syscall.Munmap(c.mem) }

func (c *VirtualClock) publish(t time.Time) {
	atomic.StoreInt64((*int64)(unsafe.Pointer(&c.mem[0])), t.UnixNano())
}
