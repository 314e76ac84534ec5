package unavailable

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{NoCRDs: true})) }

// The marks are tested against a real API server: it validates ConfigMap
// keys, which a fake client does not.
func TestMarksSurviveInvocationsAndExpire(t *testing.T) {
	ctx := context.Background()
	e := kubetest.Need(t, env)
	client, ns := e.Clients.Core, e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	first, err := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	first.Mark("spot", "m5.large", "us-west-2a", "InsufficientInstanceCapacity")
	if !first.Unavailable("spot", "m5.large", "us-west-2a") || first.Unavailable("on-demand", "m5.large", "us-west-2a") {
		t.Fatal("mark not visible in the same invocation")
	}
	if err := first.Save(ctx); err != nil {
		t.Fatal(err)
	}

	// A second invocation, concurrently, marks something else from its own
	// (older) view: both marks must survive.
	second, _ := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	other, _ := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	second.Mark("spot", "c5.large", "us-west-2b", "InsufficientInstanceCapacity")
	other.Mark("on-demand", "p5.48xlarge", "us-west-2c", "InsufficientInstanceCapacity")
	if err := second.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Save(ctx); err != nil {
		t.Fatal(err)
	}
	third, _ := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if got := third.Entries(); len(got) != 3 {
		t.Fatalf("entries after concurrent saves = %v, want 3", got)
	}

	clk.Step(3*time.Minute + time.Second)
	later, _ := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if later.Unavailable("spot", "m5.large", "us-west-2a") || len(later.Entries()) != 0 {
		t.Fatal("marks did not expire after the TTL")
	}
	later.Mark("spot", "r5.large", "us-west-2a", "x")
	if err := later.Save(ctx); err != nil {
		t.Fatal(err)
	}
	cm, _ := client.CoreV1().ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if len(cm.Data) != 1 {
		t.Fatalf("expired marks were not pruned on save: %v", cm.Data)
	}
}

// TestCapacityTypeMark: a capacity-type-wide mark (spot service-linked role
// missing) survives a save and a load and takes out every offering of that
// capacity type, and only those.
func TestCapacityTypeMark(t *testing.T) {
	ctx := context.Background()
	e := kubetest.Need(t, env)
	client, ns := e.Clients.Core, e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	c, err := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	c.MarkCapacityType("spot", "AuthFailure.ServiceLinkedRoleCreationNotPermitted")
	if err := c.Save(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ct, it, zone string
		want         bool
	}{
		{"spot", "m5.large", "us-west-2a", true},
		{"spot", "c7g.xlarge", "us-west-2c", true},
		{"on-demand", "m5.large", "us-west-2a", false},
	} {
		if got := next.Unavailable(tc.ct, tc.it, tc.zone); got != tc.want {
			t.Errorf("Unavailable(%s, %s, %s) = %v, want %v", tc.ct, tc.it, tc.zone, got, tc.want)
		}
	}
	clk.Step(3*time.Minute + time.Second)
	if next.Unavailable("spot", "m5.large", "us-west-2a") {
		t.Error("the capacity-type mark did not expire")
	}
}

// TestSubnetMark: a subnet out of addresses is marked as Karpenter's
// MarkSubnetUnavailable marks it; the marks survive a save and a load
// beside offering marks, and expire after the TTL.
func TestSubnetMark(t *testing.T) {
	ctx := context.Background()
	e := kubetest.Need(t, env)
	client, ns := e.Clients.Core, e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	c, err := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	c.MarkSubnet("subnet-0a1", "InsufficientFreeAddressesInSubnet")
	if !c.SubnetUnavailable("subnet-0a1") || c.SubnetUnavailable("subnet-0a2") {
		t.Fatal("subnet mark not visible in the same invocation")
	}
	c.MarkSubnet("subnet-0a2", "InsufficientFreeAddressesInSubnet")
	c.Mark("spot", "m5.large", "us-west-2b", "InsufficientInstanceCapacity")
	if err := c.Save(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := Load(ctx, client.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	if !next.SubnetUnavailable("subnet-0a1") || !next.SubnetUnavailable("subnet-0a2") || next.SubnetUnavailable("subnet-0b1") {
		t.Fatal("subnet marks after a load: want subnet-0a1 and subnet-0a2 only")
	}
	if !next.Unavailable("spot", "m5.large", "us-west-2b") || next.Unavailable("spot", "m5.large", "us-west-2a") {
		t.Fatal("offering marks lost or widened beside subnet marks")
	}
	if got := next.Entries(); len(got) != 3 {
		t.Fatalf("entries = %v, want 3", got)
	}
	clk.Step(3*time.Minute + time.Second)
	if next.SubnetUnavailable("subnet-0a1") || next.SubnetUnavailable("subnet-0a2") {
		t.Error("subnet marks did not expire")
	}
}
