package disrupt_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/emulator"
)

// TestConsolidationIntoReservedCapacity, on the API server and emulator,
// Karpenter v1.14.1's "can consolidate into reserved capacity for the same
// instance pool": an on-demand m5.large runs a pod; a targeted reservation
// for m5.large appears and the class selects it; single-node consolidation
// replaces the on-demand node by one launched into the reservation (priced
// on-demand/10,000,000, so it is cheaper), and then leaves it alone:
// nothing is cheaper than reserved capacity.
func TestConsolidationIntoReservedCapacity(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeReserved, wellknown.CapacityTypeOnDemand}},
			{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
		}
		// Consolidate as soon as the reservation is there: the scenario is
		// about what consolidation decides, not when.
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	})
	w.deployment("app", 1, "1500m", nil)
	w.converge(1, 2*time.Minute)
	live := w.live()
	if len(live) != 1 || live[0].CapacityType != wellknown.CapacityTypeOnDemand {
		t.Fatalf("launched %+v, want one on-demand m5.large", live)
	}
	before := w.cost()
	cr, err := w.emu.AddCapacityReservation(emulator.CapacityReservation{InstanceType: "m5.large", Zone: live[0].Zone, Total: 1, MatchCriteria: emulator.MatchTargeted})
	if err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(w.emu.Config().Hostility.CapacityReservationLagMax + time.Second)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc, err := w.e.Clients.EC2NodeClasses.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return err
		}
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: cr.ID}}
		_, err = w.e.Clients.EC2NodeClasses.Update(ctx, nc, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	inReservation := func() bool {
		l := w.live()
		return len(l) == 1 && w.emu.ReservationOf(l[0].ID) == cr.ID
	}
	w.settle(20*time.Second, 3*time.Minute, func() bool {
		w.launchBeforeDelete()
		return inReservation() && w.noneDeleting() && w.running(1)
	})
	claims := w.claims()
	if len(claims) != 1 || claims[0].Labels[wellknown.CapacityTypeLabel] != wellknown.CapacityTypeReserved || claims[0].Labels[wellknown.CapacityReservationIDLabel] != cr.ID {
		t.Fatalf("claims after consolidation: %v", claimLabels(claims))
	}
	// Reserved capacity is the cheapest there is: nothing more to do.
	for range 3 {
		w.clk.Advance(30 * time.Second)
		w.step(time.Second)
		if s := w.disrupt(); len(s.Commands) > 0 {
			t.Fatalf("consolidated reserved capacity: %+v", s.Commands)
		}
	}
	od, _ := w.emu.OnDemandPrice("m5.large")
	t.Logf("on-demand m5.large $%.4f/h -> reserved %s: Karpenter's price $%.8f/h; the bill is the reservation's $%.4f/h, paid whether used or not (it was $%.4f/h + the idle reservation before)",
		od, cr.ID, instancetype.ReservedPrice(od), od, before)
	w.assertInvariants()
}

func claimLabels(claims []karpv1.NodeClaim) []map[string]string {
	var out []map[string]string
	for _, c := range claims {
		out = append(out, c.Labels)
	}
	return slices.Clip(out)
}
