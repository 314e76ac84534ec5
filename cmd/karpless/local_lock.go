//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the file in a local environment's directory that `local up`
// holds locked for as long as it runs.
const lockName = "lock"

// lockDir takes the directory's lock before local up writes anything in
// it, or refuses at once naming the process that holds it, whatever stage
// that one is at. The kernel releases the lock when the process ends, so
// a crashed run leaves nothing to clean up. The returned release closes it.
func lockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another karpless local up (process %s) is using %s; stop it first, or use another --dir", lockHolder(path), dir)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// lockHolder reads the process id the lock's holder wrote.
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	if pid := strings.TrimSpace(string(b)); pid != "" {
		return pid
	}
	return "unknown: it is starting"
}
