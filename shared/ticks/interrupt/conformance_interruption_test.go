package interrupt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/karpless/karpless/events"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/aws/unavailable"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/local/kubetest"
	"github.com/karpless/karpless/shared/ticks/interrupt"
)

// Karpenter v1.14.1's interruption suite (aws/karpenter-provider-aws
// pkg/controllers/interruption/suite_test.go), its messages from the
// queue: one Handle of a batch is Karpenter's reconcile of one
// ReceiveMessage; a message not reported failed is the one SQS deletes
// (Lambda's event source mapping deletes it as Karpenter does). The
// instance status cases are shared/core/repair's conformance.

// approving proves every record came from the queue.
type approving struct{}

func (approving) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (approving) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

const confQueueARN = "arn:aws:sqs:us-west-2:123456789012:conformance"

type confWorld struct {
	t       *testing.T
	e       *kubetest.Env
	h       *interrupt.Handler
	metrics *record.Metrics
	flushed bytes.Buffer // the metrics flushed so far
	ns      string
	seq     atomic.Int64
}

func newConfWorld(t *testing.T) *confWorld {
	e := kubetest.Need(t, env)
	clk := testingclock.NewFakeClock(time.Now())
	log := slog.New(slog.DiscardHandler)
	ns := strings.ToLower(kubetest.Name(t))
	if len(ns) > 60 {
		ns = ns[len(ns)-60:]
	}
	ns = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, ns), "-")
	if _, err := e.Clients.Core.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The package's tests share one API server: the claims and nodes made
	// here must not outlive the case (a later scenario's passes would
	// count a claim of NodePool default without an instance).
	t.Cleanup(func() { removeClaimsAndNodes(e, ns+"-") })
	m := record.NewMetrics("Test")
	return &confWorld{t: t, e: e, metrics: m, ns: ns, h: &interrupt.Handler{
		Queue: approving{}, QueueURL: "https://sqs.us-west-2.amazonaws.com/123456789012/conformance", QueueARN: confQueueARN,
		Account: events.SampleAccount, Region: events.SampleRegion,
		Kube: e.Clients, Clock: clk, Log: log, Events: record.NewRecorder(e.Clients.Core.CoreV1(), clk, log), Metrics: m,
		Namespace: ns, UnavailableTTL: 3 * time.Minute,
	}}
}

// claim makes a NodeClaim of NodePool default for a new instance, with a
// node, and returns it with its instance id.
func (w *confWorld) claim(labels map[string]string) (*karpv1.NodeClaim, string) {
	w.t.Helper()
	ctx := context.Background()
	n := w.seq.Add(1)
	id := fmt.Sprintf("i-%017x", time.Now().UnixNano()&0xffffffffffff<<8|n&0xff)
	name := fmt.Sprintf("%s-%d", w.ns, n)
	l := map[string]string{wellknown.NodePoolLabel: "default"}
	for k, v := range labels {
		l[k] = v
	}
	nc, err := w.e.Clients.NodeClaims.Create(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: wellknown.NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	node, err := w.e.Clients.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: wellknown.ProviderID("us-west-2a", id)}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = node.Spec.ProviderID, node.Name
	if nc, err = w.e.Clients.NodeClaims.UpdateStatus(ctx, nc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return nc, id
}

func (w *confWorld) handle(bodies ...[]byte) (interrupt.Result, error) {
	var batch lambdaevents.SQSEvent
	for i, b := range bodies {
		batch.Records = append(batch.Records, lambdaevents.SQSMessage{
			MessageId: fmt.Sprintf("m-%d", i), ReceiptHandle: fmt.Sprintf("rh-%d", i), Body: string(b),
			EventSource: "aws:sqs", EventSourceARN: confQueueARN, AWSRegion: events.SampleRegion,
		})
	}
	return w.h.Handle(context.Background(), batch, "conformance")
}

// gone reports a claim deleted (or being deleted: the termination
// finalizer is the termination flow's).
func (w *confWorld) gone(name string) bool {
	nc, err := w.e.Clients.NodeClaims.Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && nc.DeletionTimestamp != nil)
}

// counted sums the counter name's values whose dimensions include dims.
func (w *confWorld) counted(name string, dims map[string]string) float64 {
	if err := w.metrics.Flush(&w.flushed, 0); err != nil {
		w.t.Fatal(err)
	}
	var sum float64
	for _, line := range bytes.Split(w.flushed.Bytes(), []byte("\n")) {
		var doc map[string]any
		if json.Unmarshal(line, &doc) != nil || doc["metric"] != name {
			continue
		}
		match := true
		for k, v := range dims {
			if doc[k] != v {
				match = false
			}
		}
		if v, ok := doc[name].(float64); ok && match {
			sum += v
		}
	}
	return sum
}

func interruptionCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/controllers/interruption", File: "pkg/controllers/interruption/suite_test.go", Spec: spec}
}

func TestConformanceInterruption(t *testing.T) {
	kubetest.Need(t, env)
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, interruptionCase("InterruptionHandling > Processing Messages > "+spec), body)
	}
	now := time.Now()
	expectDeleted := func(t *testing.T, w *confWorld, res interrupt.Result, err error, messages int, names ...string) {
		t.Helper()
		if err != nil || len(res.Response.BatchItemFailures) != 0 {
			t.Fatalf("handle: %v, failures %v; want every one of the %d messages deleted", err, res.Response.BatchItemFailures, messages)
		}
		for _, n := range names {
			if !w.gone(n) {
				t.Errorf("NodeClaim %s not deleted", n)
			}
		}
	}
	for _, c := range []struct {
		spec   string
		labels map[string]string
		body   func(id string) []byte
		reason string
	}{
		{"should delete the NodeClaim when receiving a spot interruption warning", nil,
			func(id string) []byte { return events.NewSpotInterruption("e1", id, now) }, "spot_interrupted"},
		{"should delete the NodeClaim when receiving a capacity reservation interruption warning",
			map[string]string{wellknown.CapacityReservationIDLabel: "cr-56fac701cc1951b03", wellknown.CapacityReservationTypeLabel: "default"},
			func(id string) []byte { return events.NewCapacityReservationInterruption("e1", id, now) }, "capacity_reservation_interrupted"},
		{"should delete the NodeClaim when receiving a scheduled change message", nil,
			func(id string) []byte {
				return events.NewScheduledChange("e1", "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED", []string{id}, now)
			}, "scheduled_change"},
	} {
		run(c.spec, func(t *testing.T) {
			w := newConfWorld(t)
			nc, id := w.claim(c.labels)
			res, err := w.handle(c.body(id))
			expectDeleted(t, w, res, err, 1, nc.Name)
			if got := w.counted("karpenter_nodeclaims_disrupted_total", map[string]string{"reason": c.reason, "nodepool": "default"}); got != 1 {
				t.Errorf("karpenter_nodeclaims_disrupted_total{reason=%s} = %v, want 1", c.reason, got)
			}
		})
	}
	run("should delete the NodeClaim when receiving a state change message", func(t *testing.T) {
		w := newConfWorld(t)
		var names []string
		var bodies [][]byte
		for i, state := range []string{"terminated", "stopped", "stopping", "shutting-down"} {
			nc, id := w.claim(nil)
			names = append(names, nc.Name)
			bodies = append(bodies, events.NewStateChange(fmt.Sprintf("e%d", i), id, state, now))
		}
		res, err := w.handle(bodies...)
		expectDeleted(t, w, res, err, 4, names...)
		for _, reason := range []string{"instance_terminated", "instance_stopped"} {
			if got := w.counted("karpenter_nodeclaims_disrupted_total", map[string]string{"reason": reason, "nodepool": "default"}); got != 2 {
				t.Errorf("karpenter_nodeclaims_disrupted_total{reason=%s} = %v, want 2", reason, got)
			}
		}
	})
	for _, e := range []struct {
		entry string
		body  func(id string) []byte
	}{
		{"with spot interruption messages", func(id string) []byte { return events.NewSpotInterruption("e-"+id, id, now) }},
		{"with capacity reservation interruption messages", func(id string) []byte { return events.NewCapacityReservationInterruption("e-"+id, id, now) }},
	} {
		run("should handle multiple messages that cause nodeClaim deletion > "+e.entry, func(t *testing.T) {
			w := newConfWorld(t)
			var names []string
			var bodies [][]byte
			for range 100 {
				nc, id := w.claim(nil)
				names = append(names, nc.Name)
				bodies = append(bodies, e.body(id))
			}
			res, err := w.handle(bodies...)
			expectDeleted(t, w, res, err, 100, names...)
		})
	}
	run("should delete a message when the message can't be parsed", func(t *testing.T) {
		w := newConfWorld(t)
		res, err := w.handle([]byte(`{"field1":"value1","field2":"value2"}`))
		if err != nil || len(res.Response.BatchItemFailures) != 0 || res.Dropped != 1 {
			t.Errorf("handle: %v, failures %v, dropped %d; want the message dropped and deleted", err, res.Response.BatchItemFailures, res.Dropped)
		}
	})
	run("should delete a state change message when the state isn't in accepted states", func(t *testing.T) {
		w := newConfWorld(t)
		nc, id := w.claim(nil)
		res, err := w.handle(events.NewStateChange("e1", id, "creating", now))
		if err != nil || len(res.Response.BatchItemFailures) != 0 {
			t.Fatalf("handle: %v, failures %v", err, res.Response.BatchItemFailures)
		}
		if w.gone(nc.Name) {
			t.Errorf("NodeClaim %s deleted on a state change to creating", nc.Name)
		}
	})
	run("should mark the ICE cache for the offering when getting a spot interruption warning", func(t *testing.T) {
		w := newConfWorld(t)
		nc, id := w.claim(map[string]string{wellknown.ZoneLabel: "coretest-zone-1a", wellknown.InstanceTypeLabel: "t3.large", wellknown.CapacityTypeLabel: wellknown.CapacityTypeSpot})
		res, err := w.handle(events.NewSpotInterruption("e1", id, now))
		expectDeleted(t, w, res, err, 1, nc.Name)
		c, err := unavailable.Load(context.Background(), w.e.Clients.Core.CoreV1(), w.ns, 3*time.Minute, w.h.Clock)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Unavailable(wellknown.CapacityTypeSpot, "t3.large", "coretest-zone-1a") {
			t.Error("spot t3.large in coretest-zone-1a is not marked unavailable")
		}
	})
	// Karpenter sets the reservation's available count to 0; Karpless marks
	// the reserved offering of the claim's type and zone unavailable: the
	// replacement is not sent back into the reservation going away.
	run("should mark the capacity reservation as unavailable when getting an interruption warning", func(t *testing.T) {
		w := newConfWorld(t)
		nc, id := w.claim(map[string]string{wellknown.CapacityReservationIDLabel: "cr-56fac701cc1951b03", wellknown.CapacityReservationTypeLabel: "default",
			wellknown.ZoneLabel: "us-west-2a", wellknown.InstanceTypeLabel: "m5.large", wellknown.CapacityTypeLabel: wellknown.CapacityTypeReserved})
		res, err := w.handle(events.NewCapacityReservationInterruption("e1", id, now))
		expectDeleted(t, w, res, err, 1, nc.Name)
		c, err := unavailable.Load(context.Background(), w.e.Clients.Core.CoreV1(), w.ns, 3*time.Minute, w.h.Clock)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Unavailable(wellknown.CapacityTypeReserved, "m5.large", "us-west-2a") {
			t.Error("the reservation's offering is not marked unavailable")
		}
	})

	for _, e := range []struct {
		entry string
		body  func(id string) []byte
	}{
		{"with spot interruption messages", func(id string) []byte { return events.NewSpotInterruption("e1", id, now) }},
		{"with capacity reservation interruption messages", func(id string) []byte { return events.NewCapacityReservationInterruption("e1", id, now) }},
	} {
		conformance.Run(t, interruptionCase("Error Handling > should not return an error when deleting a nodeClaim that is already deleted > "+e.entry), func(t *testing.T) {
			w := newConfWorld(t)
			res, err := w.handle(e.body("i-0123456789abcdef0"))
			if err != nil || len(res.Response.BatchItemFailures) != 0 {
				t.Errorf("handle: %v, failures %v; want no error and the message deleted", err, res.Response.BatchItemFailures)
			}
		})
	}
	for _, spec := range []string{"should send an error on polling when QueueNotExists", "should send an error on polling when AccessDenied"} {
		c := interruptionCase("Error Handling > " + spec)
		c.Differs = "Lambda's SQS event source mapping polls the queue, not Karpless: a queue that does not exist or may not be read " +
			"disables the mapping (its state and LastProcessingResult say why) instead of failing a reconcile"
		conformance.Run(t, c, func(t *testing.T) {})
	}
}

// removeClaimsAndNodes deletes the NodeClaims (their finalizers dropped)
// and Nodes whose names start with prefix.
func removeClaimsAndNodes(e *kubetest.Env, prefix string) {
	ctx := context.Background()
	if l, err := e.Clients.NodeClaims.List(ctx, metav1.ListOptions{}); err == nil {
		for _, nc := range l.Items {
			if !strings.HasPrefix(nc.Name, prefix) {
				continue
			}
			_, _ = e.Clients.NodeClaims.Patch(ctx, nc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = e.Clients.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
		}
	}
	if l, err := e.Clients.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			if strings.HasPrefix(n.Name, prefix) {
				_ = e.Clients.Core.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
	}
}
