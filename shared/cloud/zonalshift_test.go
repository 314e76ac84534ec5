package cloud

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/core/zonalshift"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestZonalShiftOfferingsAndInstances: once told of a shift, the Cloud
// takes every offering of the shifted zone out (a capacity mark elsewhere
// still counts), a claim pinned to a reservation there included, and its
// launches use a provider that spares the claims' instances there; told
// the shift ended, all comes back.
func TestZonalShiftOfferingsAndInstances(t *testing.T) {
	e := kubetest.Need(t, env)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))
	base := instance.NewProvider(nil, "demo")
	c, err := Open(ctx, Deps{Namespace: e.Namespace(t), UnavailableOfferingsTTL: 3 * time.Minute, Kube: e.Clients, Clock: clk,
		Instances: base, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "us-west-2a", "us-west-2b"
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a", Zone: a, ZoneID: "usw2-az1"}, {ID: "subnet-b", Zone: b, ZoneID: "usw2-az2"}}
	nc.Status.CapacityReservations = []awsv1.CapacityReservation{{ID: "cr-a", InstanceType: "m5.large", AvailabilityZone: a, State: "active"}}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{corev1.LabelTopologyZone: a}},
		Status: karpv1.NodeClaimStatus{ProviderID: wellknown.ProviderID(a, "i-0123456789abcdef0")}}
	view := &classView{nc: nc}
	pinned := scheduling.NewRequirement(wellknown.CapacityReservationIDLabel, corev1.NodeSelectorOpIn, "cr-a")
	reserved := scheduling.Offering{Zone: a, CapacityType: wellknown.CapacityTypeReserved, ReservationID: "cr-a"}
	known := instance.Instance{ID: "i-0123456789abcdef0", ZoneID: "usw2-az1"}

	c.ZonalShift(zonalshift.Zones{"usw2-az1": true}, []*karpv1.NodeClaim{claim}, []*awsv1.EC2NodeClass{nc})
	un := c.withoutShifted(nc, unavailableIn(c.ice, nc))
	for _, ct := range []string{wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot, wellknown.CapacityTypeReserved} {
		if !un(ct, "m5.large", a) || un(ct, "m5.large", b) {
			t.Errorf("%s during the shift: zone a available %v, zone b %v; want a out, b in", ct, !un(ct, "m5.large", a), !un(ct, "m5.large", b))
		}
	}
	if c.pinnedReservation(view, reserved, pinned) {
		t.Error("a claim pinned to a reservation in the shifted zone may still launch there")
	}
	if c.Instances == base || !c.Instances.Shifted(known) {
		t.Error("the launches' instance provider does not know the shift")
	}

	c.ZonalShift(nil, nil, nil)
	if c.withoutShifted(nc, unavailableIn(c.ice, nc))(wellknown.CapacityTypeOnDemand, "m5.large", a) {
		t.Error("zone a still out after the shift")
	}
	if !c.pinnedReservation(view, reserved, pinned) {
		t.Error("the pinned reservation is still out after the shift")
	}
	if c.Instances != base {
		t.Error("the launches' provider is not the Cloud's own after the shift")
	}
}

func TestKnownInstances(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a", Zone: "us-west-2a", ZoneID: "usw2-az1"}}
	claim := func(name, providerID string, labels map[string]string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
	}
	got := KnownInstances([]*karpv1.NodeClaim{
		claim("labelled", wellknown.ProviderID("us-west-2b", "i-1"), map[string]string{corev1.LabelTopologyZone: "us-west-2b", wellknown.TopologyZoneIDLabel: "usw2-az2", wellknown.NodePoolLabel: "p"}),
		claim("from-provider-id", wellknown.ProviderID("us-west-2a", "i-2"), nil),
		claim("not-launched", "", nil),
	}, []*awsv1.EC2NodeClass{nc})
	want := []instance.Instance{
		{ID: "i-1", Zone: "us-west-2b", ZoneID: "usw2-az2", Tags: map[string]string{wellknown.NodeClaimTagKey: "labelled", wellknown.NodePoolTagKey: "p"}},
		{ID: "i-2", Zone: "us-west-2a", ZoneID: "usw2-az1", Tags: map[string]string{wellknown.NodeClaimTagKey: "from-provider-id", wellknown.NodePoolTagKey: ""}},
	}
	if len(got) != len(want) {
		t.Fatalf("known %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Zone != w.Zone || g.ZoneID != w.ZoneID || g.Tags[wellknown.NodeClaimTagKey] != w.Tags[wellknown.NodeClaimTagKey] || g.Tags[wellknown.NodePoolTagKey] != w.Tags[wellknown.NodePoolTagKey] {
			t.Errorf("known[%d] = %+v, want %+v", i, g, w)
		}
	}
}
