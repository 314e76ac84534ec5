package cloud

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/function/record"
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

// TestFallbackMetric: when the build stands in for part of the region's
// catalog, every tick says so in a metric, with the number of parts; a
// tick on the live catalog emits no series at all (CloudWatch bills each).
func TestFallbackMetric(t *testing.T) {
	for name, tc := range map[string]struct {
		fallback []string
		want     string
	}{
		"live":         {nil, ""},
		"prices":       {[]string{"on-demand prices from the build (us-east-1): throttled"}, `"karpless_catalog_fallback":1`},
		"types+prices": {[]string{"instance types from the build: denied", "on-demand prices from the build (us-east-1): denied"}, `"karpless_catalog_fallback":2`},
	} {
		t.Run(name, func(t *testing.T) {
			m := record.NewMetrics("Karpless")
			c := &Cloud{Deps: Deps{Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, book: &pricing.Book{}}
			c.reportFallback(nil, tc.fallback)
			var out strings.Builder
			if err := m.Flush(&out, 0); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && out.Len() > 0 || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("metrics %q, want %q", out.String(), tc.want)
			}
		})
	}
}
