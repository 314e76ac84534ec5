package disrupt_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/pricing"
	"github.com/karpless/karpless/shared/cloud"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/emulator"
)

// TestConsolidationUsesTheRegionsPrices: in eu-central-1 a c6a.large costs
// more than a c7i-flex.large, in us-east-1 (the build's prices) less. While
// the Price List API cannot be read, the build's prices stand in (an Event
// says so) and the cheaper replacement is not seen; once the region's
// prices are read, single-node consolidation replaces the node and the
// bill goes down.
func TestConsolidationUsesTheRegionsPrices(t *testing.T) {
	const dear, cheap = "c6a.large", "c7i-flex.large"
	w := newWorld(t, func(c *emulator.Config) { c.Region = "eu-central-1" })
	ctx := context.Background()
	pDear, _ := w.emu.OnDemandPrice(dear)
	pCheap, _ := w.emu.OnDemandPrice(cheap)
	if pCheap >= pDear {
		t.Fatalf("the world is not as this test needs: %s $%.4f, %s $%.4f in eu-central-1", dear, pDear, cheap, pCheap)
	}
	noPriceList := w.emu.Inject(emulator.APIError("GetProducts", "AccessDeniedException", 400, 0))
	types := func(names ...string) func(*karpv1.NodePool) {
		return func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = slices.DeleteFunc(np.Spec.Template.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
				return r.Key == wellknown.InstanceFamilyLabel || r.Key == wellknown.InstanceTypeLabel
			})
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
				Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: names,
			})
		}
	}
	w.apply(types(dear))
	w.deployment("app", 1, "500m", nil)
	w.converge(1, 2*time.Minute)
	if got := typesOf(w); !slices.Equal(got, []string{dear}) {
		t.Fatalf("launched %v, want [%s]", got, dear)
	}
	events, err := w.e.Clients.Core.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fallback := ""
	for _, e := range events.Items {
		if e.Reason == cloud.CatalogFallback && e.InvolvedObject.Kind == "EC2NodeClass" {
			fallback = e.Message
		}
	}
	if !strings.Contains(fallback, "on-demand prices from the build (us-east-1)") {
		t.Fatalf("no %s Event naming the prices while the price list is unreadable (got %q)", cloud.CatalogFallback, fallback)
	}
	t.Logf("event: %s", fallback)

	// The pool may now use either type. At the build's prices the other
	// one looks dearer: no consolidation.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := w.e.Clients.NodePools.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return err
		}
		types(dear, cheap)(np)
		_, err = w.e.Clients.NodePools.Update(ctx, np, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		w.clk.Advance(30 * time.Second)
		w.step(time.Second)
		if s := w.disrupt(); len(s.Commands) > 0 {
			t.Fatalf("consolidated at the build's prices: %+v", s.Commands)
		}
	}

	// The price list is readable again. The book is a cache: without it
	// the next tick reads AWS afresh (a failed read is otherwise tried
	// again after a backoff that has grown to minutes by now).
	w.emu.RemoveFault(noPriceList)
	if err := w.e.Clients.Core.CoreV1().ConfigMaps(w.env(nil).Config.Namespace).Delete(ctx, pricing.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := w.cost()
	w.settle(20*time.Second, 3*time.Minute, func() bool {
		w.launchBeforeDelete()
		return slices.Equal(typesOf(w), []string{cheap}) && w.noneDeleting() && w.running(1)
	})
	if after := w.cost(); after >= before {
		t.Fatalf("cost $%.4f/h -> $%.4f/h", before, after)
	} else {
		t.Logf("eu-central-1 prices: %s $%.4f/h replaced by %s $%.4f/h", dear, before, cheap, after)
	}
	w.assertInvariants()
}
