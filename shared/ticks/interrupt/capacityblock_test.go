package interrupt_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	v1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// TestCapacityBlockExpiryDrainsAndReplaces, on the API server and
// emulator: a pod runs on a Capacity Block (launched with the
// capacity-block market into the block, labelled capacity-reservation-type
// capacity-block); 40 minutes before the block ends EC2's "Capacity Block
// Reservation Expiration Warning" reaches the interruption queue, the
// interruption function retires the block's NodeClaim (deadline: 30
// minutes before the end, when EC2 starts terminating) and provisions the
// replacement at once, off the block (the reservation is expiring and
// marked unavailable): the pod runs on on-demand capacity.
func TestCapacityBlockExpiryDrainsAndReplaces(t *testing.T) {
	w := testworld.New(t, env, "interruption")
	ctx := context.Background()
	zone := w.Emu.Config().Zones[0].Name
	cb, err := w.Emu.AddCapacityReservation(emulator.CapacityReservation{
		InstanceType: "m5.xlarge", Zone: zone, Total: 1, MatchCriteria: emulator.MatchTargeted,
		ReservationType: emulator.ReservationTypeCapacityBlock, End: w.Clock.Now().Add(41 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A new reservation reaches DescribeCapacityReservations a moment later.
	w.Skip(w.Emu.Config().Hostility.CapacityReservationLagMax + time.Second)
	class := deploy.DefaultNodeClass(testworld.Cluster, "")
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: cb.ID}}
	pool := deploy.DefaultNodePool("default",
		v1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge", "c5.xlarge"}},
		v1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved", "on-demand"}})
	if err := deploy.Apply(ctx, w.E.Clients, class, pool); err != nil {
		t.Fatal(err)
	}
	w.Deployment("train", 1, "3", nil)
	w.Converge(2*time.Minute, nil)
	block, id := claimWithNode(t, w)
	for k, v := range map[string]string{
		wellknown.CapacityTypeLabel: "reserved", wellknown.CapacityReservationIDLabel: cb.ID, wellknown.CapacityReservationTypeLabel: "capacity-block",
	} {
		if block.Labels[k] != v {
			t.Fatalf("claim %s: %s=%q, want %q (labels %v)", block.Name, k, block.Labels[k], v, block.Labels)
		}
	}
	if inst := w.Instance(id); inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeCapacityBlock || aws.ToString(inst.CapacityReservationId) != cb.ID {
		t.Fatalf("instance %s: lifecycle %q reservation %q", id, inst.InstanceLifecycle, aws.ToString(inst.CapacityReservationId))
	}

	// 40 minutes before the end: EC2's warning.
	w.Skip(cb.End.Sub(w.Clock.Now()) - 40*time.Minute + time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for len(w.Emu.Messages(w.Emu.InterruptionQueueURL())) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no expiration warning on the interruption queue")
		}
		time.Sleep(200 * time.Millisecond)
	}
	start := time.Now()
	o := deliver(t, w, mapping(t, w), w.App.InterruptionHandler())
	if o.HandlerErr != nil || o.Failed != 0 {
		t.Fatalf("delivery: %+v", o)
	}
	nc := getClaim(t, w, block.Name)
	if nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("the Capacity Block's NodeClaim was not retired")
	}
	if nc != nil {
		want := cb.End.Add(-30 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
		if got := nc.Annotations[wellknown.NodeClaimTerminationTimestampAnnotation]; got != want {
			t.Errorf("termination deadline %q, want %q", got, want)
		}
	}
	w.Converge(2*time.Minute, drain(w))
	waitGone(t, w, block.Name)
	for _, p := range w.ListPods() {
		node, err := w.E.Clients.Core.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ct := node.Labels[wellknown.CapacityTypeLabel]; ct != "on-demand" || node.Labels[wellknown.CapacityReservationIDLabel] != "" {
			t.Errorf("pod %s runs on %s (%s, reservation %q), want on-demand off the block", p.Name, node.Name, ct, node.Labels[wellknown.CapacityReservationIDLabel])
		}
	}
	t.Logf("capacity block %s: warning handled, pod on on-demand capacity %s later", cb.ID, time.Since(start).Round(time.Millisecond))
	w.AssertNoLeaks()
}
