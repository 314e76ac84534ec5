package deploy

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/aws/nodeclass"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/kube/eksauth"
	"github.com/karpless/karpless/shared/local/emulator"
)

// TestWarmContainerRemembersSelectors resolves the default EC2NodeClass in
// successive invocations, each with the engines NewEnv builds: the
// invocations of one warm container describe its subnets, security groups
// and AMIs once per TTL, a cold container describes them again.
func TestWarmContainerRemembersSelectors(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	calm := emulator.NoHostility()
	emu, err := emulator.New(emulator.Config{Clock: clk, Hostility: &calm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	// The resolver never reaches the API server.
	kc, err := kube.NewClients(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	nc := DefaultNodeClass(emu.ClusterName(), "")
	nc.UID, nc.Generation = "default-uid", 1
	info := eksauth.ClusterInfo{Name: emu.ClusterName(), KubernetesVersion: emulator.DefaultKubernetesVersion}

	// invoke is one invocation resolving the class in a container (nil:
	// a cold one); it returns the Describe calls it made.
	invoke := func(warm *app.Warm) map[string]int {
		t.Helper()
		env, err := NewEnv(emu, kc, Options{Clock: clk, Warm: warm, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		r, ok := env.Provisioner().Resolver.(*nodeclass.Resolver)
		if !ok {
			t.Fatalf("provisioner resolver is %T", env.Provisioner().Resolver)
		}
		before := describeCalls(emu)
		st, _ := r.Resolve(ctx, nc, info)
		if len(st.Subnets) == 0 || len(st.SecurityGroups) == 0 || len(st.AMIs) == 0 {
			t.Fatalf("status %+v: the default class should resolve in the emulator", st)
		}
		after := describeCalls(emu)
		for k := range after {
			after[k] -= before[k]
		}
		return after
	}
	none := map[string]int{"DescribeSubnets": 0, "DescribeSecurityGroups": 0, "DescribeImages": 0}
	all := map[string]int{"DescribeSubnets": 1, "DescribeSecurityGroups": 1, "DescribeImages": 1}
	expect := func(what string, got, want map[string]int) {
		t.Helper()
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: %d %s, want %d (all calls %v)", what, got[k], k, n, got)
			}
		}
	}

	warm := &app.Warm{}
	expect("first invocation of a warm container", invoke(warm), all)
	clk.Step(timing.SelectorCacheTTL - time.Second)
	expect("second invocation of the same container, within the TTL", invoke(warm), none)
	expect("a cold container", invoke(nil), all)
	expect("another cold container", invoke(&app.Warm{}), all)
	clk.Step(time.Second)
	expect("the warm container once its entries expired", invoke(warm), all)
	expect("and again within the new TTL", invoke(warm), none)
}

func describeCalls(emu *emulator.Emulator) map[string]int {
	out := map[string]int{}
	for _, c := range emu.Calls() {
		switch c.Action {
		case "DescribeSubnets", "DescribeSecurityGroups", "DescribeImages":
			out[c.Action]++
		}
	}
	return out
}
