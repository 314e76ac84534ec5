package cloud

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{NoCRDs: true})) }

// TestCloseSavesMarksAfterTheDeadline: the capacity errors a pass met matter
// most when the pass ran out of time working through them; Close must save
// them even when the invocation's context is done, or the next tick asks
// EC2 for the same offerings again.
func TestCloseSavesMarksAfterTheDeadline(t *testing.T) {
	e := kubetest.Need(t, env)
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Open(ctx, Deps{Namespace: ns, UnavailableOfferingsTTL: 3 * time.Minute, Kube: e.Clients, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.ice.Mark("spot", "m5.large", "us-west-2a", "InsufficientInstanceCapacity")
	cancel() // the deadline passed
	c.Close(ctx)
	next, err := unavailable.Load(context.Background(), e.Clients.Core.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Unavailable("spot", "m5.large", "us-west-2a") {
		t.Fatalf("the mark was lost with the invocation's context (entries %v)", next.Entries())
	}
}
