package controlplane

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestVirtualClock starts the control plane on a virtual clock three hours
// ahead and checks that the timestamps kube-apiserver stamps follow it, as
// they must for the soak: creation and deletion times are compared with
// the functions' clock.
func TestVirtualClock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	dir := t.TempDir()
	clk, err := NewVirtualClock(dir, time.Now().Add(3*time.Hour).Truncate(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer clk.Close()
	ctx := context.Background()
	c, err := Start(ctx, Config{Dir: dir + "/kube", VirtualClock: clk.Path()})
	if errors.Is(err, ErrNotBuilt) && os.Getenv("KARPLESS_REQUIRE_KUBE") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string) {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cm.CreationTimestamp.Sub(clk.Now()); d < -2*time.Second || d > 2*time.Second {
			t.Fatalf("%s created at %s, virtual now %s (off by %s)", name, cm.CreationTimestamp, clk.Now(), d)
		}
	}
	check("first")
	clk.Step(90 * time.Minute)
	check("after-a-step")
}
