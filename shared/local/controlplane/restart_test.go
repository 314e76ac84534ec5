package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCrashedControllerIsRestarted: a component a real control plane runs
// as a static pod comes back after a crash (kube-controller-manager v1.37.1
// panics on a virtual clock that has not moved); without that, every
// controller of a soak seed stops for good and Job pods keep their
// finalizers forever. etcd and kube-apiserver are not restarted: a test
// that loses one should fail loudly.
func TestCrashedControllerIsRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c, err := Start(context.Background(), Config{ControllerManager: true})
	if errors.Is(err, ErrNotBuilt) && os.Getenv("KARPLESS_REQUIRE_KUBE") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	var kcm *process
	for _, p := range c.procs {
		if p.name == "kube-controller-manager" {
			kcm = p
		}
	}
	first, _ := kcm.current()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur, _ := kcm.current()
		if cur != first && cur.Process != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-controller-manager not restarted 20 s after it was killed: %v", c.exited("kube-controller-manager"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.exited("kube-controller-manager"); err != nil {
		t.Fatalf("the restarted component counts as exited: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(c.Dir, "logs", "kube-controller-manager.log"))
	if !strings.Contains(string(log), "restarted by the local control plane") {
		t.Error("the component's log does not say it was restarted")
	}
	// Stop ends the restarted run and does not start another.
	c.Stop()
	select {
	case <-kcm.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end the restarted component")
	}
}
