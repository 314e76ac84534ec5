package whatif

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpless/karpless/shared/apis/karpenter/v1alpha1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

func priceOverlay(name, price string, weight int32, types ...string) *v1alpha1.NodeOverlay {
	return &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOverlaySpec{
		Requirements: []v1alpha1.NodeSelectorRequirement{{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: types}},
		Price:        &price,
		Weight:       &weight,
	}}
}

// TestSimulateWithOverlays: simulate prices with the snapshot's
// NodeOverlays as the provisioner does, names the overlay where it set the
// price of a launch, and notes each overlay's fate; the snapshot file keeps
// the overlays.
func TestSimulateWithOverlays(t *testing.T) {
	f := newFixture(t)
	f.pod("web", "pending", "3", "2Gi", "")
	// Without overlays the 3-cpu pod gets an m5.xlarge spot in 1a ($0.08);
	// a savings plan makes m5.2xlarge cost $0.01.
	f.snap.NodeOverlays = []*v1alpha1.NodeOverlay{
		priceOverlay("savings-plan", "0.01", 10, "m5.2xlarge"),
		priceOverlay("conflict-a", "1", 1, "m5.large"),
		priceOverlay("conflict-b", "2", 1, "m5.large"),
	}
	r := f.world().Simulate()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, s := range []string{
		"m5.2xlarge spot in us-east-1a at $0.0100/h (price from NodeOverlay savings-plan)",
		"NodeOverlay savings-plan: applied to 1 instance types",
		"NodeOverlay conflict-a: not applied (Conflict: conflict with another overlay)",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}
	file := NewFile(f.snap, f.market, t0, "test", "kube-system")
	if got := file.Snapshot().NodeOverlays; len(got) != 3 || got[0].Name != "savings-plan" {
		t.Errorf("the snapshot file kept overlays %v", got)
	}
}

// TestExplainNodeClaimNamesThePriceOverlay: a running claim whose offering
// an overlay priced says so.
func TestExplainNodeClaimNamesThePriceOverlay(t *testing.T) {
	f := newFixture(t)
	f.node("n1", "default", "m5.large", zoneA, wellknown.CapacityTypeOnDemand, time.Hour)
	f.snap.NodeOverlays = []*v1alpha1.NodeOverlay{priceOverlay("licence", "0.5", 1, "m5.large")}
	r, err := f.world().ExplainNodeClaim("claim-n1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Offering.PriceOverlay != "licence" {
		t.Errorf("offering %+v, want priceOverlay licence", r.Offering)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(price from NodeOverlay licence)") {
		t.Errorf("text does not name the overlay:\n%s", b.String())
	}
}
