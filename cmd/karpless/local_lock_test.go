//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalUpLocksItsDirectory: while one local up holds a directory, at
// whatever stage (here, before it has written anything else), a second is
// refused at once with the first one's process id and writes nothing;
// once the first lets go, the lock can be taken again.
func TestLocalUpLocksItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "env")
	release, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(context.Background(), "local", "up", "--dir", dir)
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("(process %d)", os.Getpid())) {
		t.Fatalf("second up: exit %d, stderr %q; want 1 naming process %d", code, errs, os.Getpid())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != lockName {
		t.Errorf("the refused up wrote into the directory: %v", entries)
	}
	if _, err := lockDir(dir); err == nil {
		t.Error("a second lock was granted while the first is held")
	}
	release()
	again, err := lockDir(dir)
	if err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	again()
}
