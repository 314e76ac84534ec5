// Package localawstest holds test helpers around the AWS emulator: a fresh
// emulator joined to a kubetest cluster, and the leak check every scenario should end with.
package localawstest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/localaws"
)

// New starts an emulator for one test, joined to clients' cluster when
// clients is not nil, and closes it when the test ends. With a fake clock
// (clk not nil) the test drives time with clk.Step and e.Step.
func New(t testing.TB, clients *kube.Clients, clk clock.PassiveClock, mutate ...func(*localaws.Config)) *localaws.Emulator {
	t.Helper()
	cfg := localaws.Config{Clock: clk, Kube: clients}
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := localaws.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if clients != nil {
		if err := e.ConnectCluster(clients, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// FakeClock is a fake clock at the current wall time (whole seconds), the
// start that keeps presigned EKS tokens valid.
func FakeClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Second))
}

// AWSConfig is an SDK configuration for the emulator as a named identity
// (operator if empty), with one attempt unless attempts says otherwise.
func AWSConfig(t testing.TB, e *localaws.Emulator, identity string, attempts int) aws.Config {
	t.Helper()
	if identity == "" {
		identity = "operator"
	}
	if attempts <= 0 {
		attempts = 1
	}
	cfg, err := e.AWSConfig(identity, attempts)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// AssertNoLeaks fails the test if an instance that is neither terminated
// nor shutting down is referenced by no NodeClaim, listing each with its tags.
func AssertNoLeaks(t testing.TB, e *localaws.Emulator, clients *kube.Clients) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaks, err := e.Leaks(ctx, clients)
	if err != nil {
		t.Fatalf("checking for leaked instances: %v", err)
	}
	if len(leaks) == 0 {
		return
	}
	var b strings.Builder
	for _, i := range leaks {
		fmt.Fprintf(&b, "\n  %s %s %s %s %s tags=%v", i.ID, i.InstanceType, i.Zone, i.CapacityType, i.State, i.Tags)
	}
	t.Errorf("%d leaked instance(s), referenced by no NodeClaim:%s", len(leaks), b.String())
}

// Step moves a fake clock by d and runs the emulator's world step.
func Step(t testing.TB, e *localaws.Emulator, clk *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	clk.Step(d)
	if err := e.Step(context.Background()); err != nil {
		t.Fatalf("emulator step: %v", err)
	}
}
