package provision_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/instancetype"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// TestReservedLaunchFillsTheReservation, on the API server and emulator:
// an EC2NodeClass selecting the account's targeted reservation (m5.large,
// 2 instances) by tags resolves it into status.capacityReservations; three
// pods that each need a node get two m5.large launched into the
// reservation (EC2 says so) and labelled as Karpenter labels them
// (capacity-type reserved, capacity-reservation-id, -type, -interruptible,
// on the NodeClaim and the Node), and the third falls back to on-demand or
// spot, as Karpenter's next scheduling loop does once the reservation is
// used up. It logs the $/h: what Karpenter prices reserved capacity at and
// what the bill is.
func TestReservedLaunchFillsTheReservation(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	var targeted emulator.CapacityReservation
	for _, r := range w.Emu.CapacityReservations() {
		if r.Tags["Name"] == emulator.SeededCapacityReservationName(testworld.Cluster, "targeted") {
			targeted = r
		}
	}
	class := deploy.DefaultNodeClass(testworld.Cluster, "")
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{
		{Tags: map[string]string{"Name": targeted.Tags["Name"]}, InstanceMatchCriteria: "targeted"},
	}
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large"), capacityReq("reserved", "on-demand", "spot"))
	if err := deploy.Apply(ctx, w.E.Clients, class, pool); err != nil {
		t.Fatal(err)
	}
	// 1500m each: one pod per 2-vCPU node.
	w.Pods("app", 3, "1500m", nil)
	w.WaitUnschedulable(3)
	w.Converge(2*time.Minute, nil)

	nc, err := w.E.Clients.EC2NodeClasses.Get(ctx, class.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nc.Status.CapacityReservations; len(got) != 1 || got[0].ID != targeted.ID || got[0].InstanceType != "m5.large" ||
		got[0].InstanceMatchCriteria != "targeted" || got[0].ReservationType != "default" || got[0].State != "active" {
		t.Errorf("status.capacityReservations = %+v, want %s", got, targeted.ID)
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("CapacityReservationsReady = %+v", c)
	}
	cfg, err := w.Emu.AWSConfig("operator", 10)
	if err != nil {
		t.Fatal(err)
	}
	api := ec2.NewFromConfig(cfg)
	var reserved, other []karpv1.NodeClaim
	for _, cl := range w.Claims() {
		if cl.DeletionTimestamp != nil || cl.Status.NodeName == "" {
			continue
		}
		if cl.Labels[wellknown.CapacityTypeLabel] == wellknown.CapacityTypeReserved {
			reserved = append(reserved, cl)
		} else {
			other = append(other, cl)
		}
	}
	if len(reserved) != targeted.Total || len(other) != 1 {
		t.Fatalf("%d reserved and %d other claims with nodes, want %d and 1: %v", len(reserved), len(other), targeted.Total, launchedTypes(w))
	}
	want := map[string]string{
		wellknown.CapacityTypeLabel: wellknown.CapacityTypeReserved, wellknown.InstanceTypeLabel: "m5.large",
		wellknown.ZoneLabel: targeted.Zone, wellknown.CapacityReservationIDLabel: targeted.ID,
		wellknown.CapacityReservationTypeLabel: "default", wellknown.CapacityReservationInterruptibleLabel: "false",
	}
	for _, cl := range reserved {
		node, err := w.E.Clients.Core.CoreV1().Nodes().Get(ctx, cl.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if cl.Labels[k] != v || node.Labels[k] != v {
				t.Errorf("%s: nodeclaim %s=%q, node %q, want %q", cl.Name, k, cl.Labels[k], node.Labels[k], v)
			}
		}
		// EC2's own word: the instance runs in the reservation, on purpose.
		id := wellknown.InstanceIDFromProviderID(cl.Status.ProviderID)
		inst := w.Instance(id)
		if aws.ToString(inst.CapacityReservationId) != targeted.ID ||
			inst.CapacityReservationSpecification.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly {
			t.Errorf("instance %s: reservation %q preference %q", id, aws.ToString(inst.CapacityReservationId), inst.CapacityReservationSpecification.CapacityReservationPreference)
		}
	}
	fb := other[0]
	if _, ok := fb.Labels[wellknown.CapacityReservationIDLabel]; ok || fb.Labels[wellknown.CapacityTypeLabel] == wellknown.CapacityTypeReserved {
		t.Errorf("the fallback claim %s is labelled %v", fb.Name, fb.Labels)
	}
	if n := w.Emu.ReservationInstances(targeted.ID); n != targeted.Total {
		t.Errorf("%d instances in the reservation, want %d (no more than it holds)", n, targeted.Total)
	}

	// $/h, from the emulator's prices. Karpenter prices reserved capacity
	// at on-demand/10,000,000 (all but free: it is paid for already); the
	// bill pays the whole reservation at the on-demand rate, used or not.
	cat := w.Emu.Config().Catalog
	m5, _ := cat.Get("m5.large")
	fbType, _ := cat.Get(fb.Labels[wellknown.InstanceTypeLabel])
	fbPrice := fbType.OnDemandPrice
	if fb.Labels[wellknown.CapacityTypeLabel] == wellknown.CapacityTypeSpot {
		sp, err := api.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
			InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(fbType.Name)}, AvailabilityZone: aws.String(fb.Labels[wellknown.ZoneLabel]),
			ProductDescriptions: []string{"Linux/UNIX"},
		})
		if err != nil || len(sp.SpotPriceHistory) == 0 {
			t.Fatalf("spot price of %s: %v", fbType.Name, err)
		}
		fbPrice = parsePrice(t, aws.ToString(sp.SpotPriceHistory[0].SpotPrice))
	}
	reservation := float64(targeted.Total) * m5.OnDemandPrice
	karpenterAfter := float64(targeted.Total)*instancetype.ReservedPrice(m5.OnDemandPrice) + fbPrice
	billAfter := reservation + fbPrice
	// Before: the same pods on a class without the reservation: three of
	// what the fallback got, and the reservation billed all the same.
	karpenterBefore, billBefore := 3*fbPrice, reservation+3*fbPrice
	t.Logf("reservation %s: %d x m5.large at $%.4f/h on-demand = $%.4f/h prepaid", targeted.ID, targeted.Total, m5.OnDemandPrice, reservation)
	t.Logf("fallback: %s/%s at $%.4f/h", fbType.Name, fb.Labels[wellknown.CapacityTypeLabel], fbPrice)
	t.Logf("before (class without capacityReservationSelectorTerms): Karpenter's $/h %.4f, bill $/h %.4f", karpenterBefore, billBefore)
	t.Logf("after (reservation used): Karpenter's $/h %.6f, bill $/h %.4f", karpenterAfter, billAfter)
	w.AssertNoLeaks()
}

func parsePrice(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatalf("price %q: %v", s, err)
	}
	return f
}

// TestKilledReservedTick is TestKilledTickThenFreshTick for launches into
// a capacity reservation: two pods that need a node each, a class that
// selects the account's targeted reservation of two m5.large. The tick is
// killed before and after each call from the first CreateFleet on, the
// world changes, and fresh ticks must finish with one instance per claim,
// nothing leaked, no claim made twice, and never more instances in the
// reservation than it holds.
func TestKilledReservedTick(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	// The reservation takes a launch again once the instance of the case
	// before is terminated (EC2 counts shutting-down ones): terminations
	// end fast here, and each case starts a moment later (below).
	c := newCrashWorld(t, w, func(cfg *emulator.Config) { cfg.TerminateDelay = 100 * time.Millisecond })
	var targeted emulator.CapacityReservation
	for _, r := range c.emu.CapacityReservations() {
		if r.Tags["Name"] == emulator.SeededCapacityReservationName(testworld.Cluster, "targeted") {
			targeted = r
		}
	}
	class := deploy.DefaultNodeClass(testworld.Cluster, "")
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: targeted.ID}}
	pool := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large"), capacityReq("reserved", "spot", "on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, class, pool); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-0", "web-1"} {
		if _, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(ctx, webPod(w.NS, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.WaitUnschedulable(2)
	if n := freshTicks(t, w, c, "warm-up", 2, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	reserved := 0
	for _, cl := range w.Claims() {
		if cl.Labels[wellknown.CapacityReservationIDLabel] == targeted.ID {
			reserved++
		}
	}
	if reserved != 2 {
		t.Fatalf("%d of the warm-up's claims are in the reservation, want 2: %v", reserved, launchedTypes(w))
	}
	most := 0
	settle := func() {
		c.clk.Advance(time.Second)
		if err := c.emu.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := killEachCall(t, w, c, settle, "aws CreateFleet")
	if n := c.emu.ReservationInstances(targeted.ID); n > targeted.Total {
		t.Errorf("%d instances in a reservation of %d", n, targeted.Total)
	}
	most = max(most, c.emu.ReservationInstances(targeted.ID))
	t.Logf("%d killed ticks (%d ended before their kill point); kills landed at %v; reservation holds %d of %d", r.cases, r.unreached, r.landed, most, targeted.Total)
}
