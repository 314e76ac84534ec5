package cloud

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestSubnetsOutOfAddresses: a launch that meets
// InsufficientFreeAddressesInSubnet marks the subnet, as Karpenter's
// MarkSubnetUnavailable: the next launch uses the zone's other subnets,
// and once every subnet of a zone is marked its spot and on-demand
// offerings are no longer asked for (nor built as available), until the
// marks expire; the marks outlive the invocation.
func TestSubnetsOutOfAddresses(t *testing.T) {
	e := kubetest.Need(t, env)
	ns := e.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	const a, b = "us-west-2a", "us-west-2b"
	c, err := Open(ctx, Deps{Namespace: ns, UnavailableOfferingsTTL: 3 * time.Minute, Kube: e.Clients, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	nc.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a1", Zone: a}, {ID: "subnet-a2", Zone: a}, {ID: "subnet-b1", Zone: b}}
	it := &scheduling.InstanceType{Name: "m5.large", Labels: map[string]string{wellknown.InstanceTypeLabel: "m5.large"}}
	for _, z := range []string{a, b} {
		it.Offerings = append(it.Offerings, scheduling.Offering{Zone: z, CapacityType: wellknown.CapacityTypeOnDemand, Price: 0.096, Available: true})
	}
	view := &classView{nc: nc, types: []*scheduling.InstanceType{it}}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: karpv1.NodeClaimSpec{
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand}}},
	}}
	zonesAsked := func() []string {
		_, offs, _, _ := c.offerings(claim, view, false)
		var zones []string
		for _, o := range offs {
			zones = append(zones, o.Zone)
		}
		return zones
	}
	outOfAddresses := func(subnet, zone string) instance.FleetError {
		return instance.FleetError{Code: awserr.SubnetOutOfAddresses, InstanceType: "m5.large", Zone: zone, Subnet: subnet}
	}

	// Another code names a subnet too: it is no mark on the subnet.
	c.markSubnets([]instance.FleetError{outOfAddresses("subnet-a1", a), {Code: "InsufficientInstanceCapacity", InstanceType: "m5.large", Zone: b, Subnet: "subnet-b1"}})
	if !c.ice.SubnetUnavailable("subnet-a1") || c.ice.SubnetUnavailable("subnet-a2") || c.ice.SubnetUnavailable("subnet-b1") {
		t.Fatalf("marks %v, want subnet-a1 only", c.ice.Entries())
	}
	if got := launchSubnets(c.ice, nc); !reflect.DeepEqual(got, map[string][]string{a: {"subnet-a2"}, b: {"subnet-b1"}}) {
		t.Errorf("launch subnets %v: want zone a's unmarked subnet only", got)
	}
	if unavailableIn(c.ice, nc)(wellknown.CapacityTypeOnDemand, "m5.large", a) || !reflect.DeepEqual(zonesAsked(), []string{a, b}) {
		t.Errorf("a zone with a subnet left was taken out (asked %v)", zonesAsked())
	}

	c.markSubnets([]instance.FleetError{outOfAddresses("subnet-a2", a)})
	for _, ct := range []string{wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeSpot} {
		if !unavailableIn(c.ice, nc)(ct, "c5.large", a) || unavailableIn(c.ice, nc)(ct, "c5.large", b) {
			t.Errorf("%s: zone a should be out, zone b not", ct)
		}
	}
	if got := zonesAsked(); !reflect.DeepEqual(got, []string{b}) {
		t.Errorf("zones asked %v, want %s only", got, b)
	}
	// A zone with every subnet marked keeps them for what still launches
	// there (reserved offerings): Karpenter sorts them last.
	if got := launchSubnets(c.ice, nc)[a]; len(got) != 2 {
		t.Errorf("zone a's launch subnets %v, want both", got)
	}

	c.Close(ctx)
	next, err := unavailable.Load(ctx, e.Clients.Core.CoreV1(), ns, 3*time.Minute, clk)
	if err != nil {
		t.Fatal(err)
	}
	if !unavailableIn(next, nc)(wellknown.CapacityTypeOnDemand, "m5.large", a) {
		t.Errorf("the next invocation tries zone a again (marks %v)", next.Entries())
	}
	clk.Step(3*time.Minute + time.Second)
	if unavailableIn(next, nc)(wellknown.CapacityTypeOnDemand, "m5.large", a) {
		t.Error("zone a is still out after the TTL")
	}
}
