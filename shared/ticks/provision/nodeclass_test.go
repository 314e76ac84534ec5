package provision_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/eventsource"
	"github.com/karpless/karpless/shared/local/testworld"
)

// TestNodeClassFailureDoesNotStopThePass: with two EC2NodeClasses, one
// whose resolution fails (IAM errors on its instance profile), the pods of
// the other still get their claims launched in the same tick, and an
// interruption's replacement is launched in the same invocation too.
func TestNodeClassFailureDoesNotStopThePass(t *testing.T) {
	w := testworld.New(t, env, "provisioner")
	ctx := context.Background()
	good := deploy.DefaultNodePool("default", typesReq("m5.large", "c5.large", "m6i.large", "c6i.large", "r5.large"), capacityReq("spot", "on-demand"))
	if err := deploy.Apply(ctx, w.E.Clients, deploy.DefaultNodeClass(testworld.Cluster, ""), good); err != nil {
		t.Fatal(err)
	}
	c := newCrashWorld(t, w)
	setWebPods(t, w, 1)
	// The good class's instance profile propagates, its templates are made.
	if n := freshTicks(t, w, c, "warm-up", 1, 12, 5*time.Second); n > 12 {
		t.Fatalf("the account does not converge: %+v", inspect(w, c.emu))
	}
	c.reset(t, w)

	// The broken class names an instance profile IAM fails to read; its
	// pool is heavier, so that the simulation would prefer it.
	broken := deploy.DefaultNodeClass(testworld.Cluster, "")
	broken.Name, broken.Spec.Role, broken.Spec.InstanceProfile = "broken", "", new("broken-profile")
	bad := deploy.DefaultNodePool("bad", typesReq("m5.large", "c5.large"))
	bad.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "broken"}
	bad.Spec.Weight = new(int32(100))
	if err := deploy.Apply(ctx, w.E.Clients, broken, bad); err != nil {
		t.Fatal(err)
	}
	c.emu.Inject(emulator.APIError("GetInstanceProfile", "ServiceFailure", 500, 0))
	setWebPods(t, w, 2)
	if _, err := w.E.Clients.Core.CoreV1().Pods(w.NS).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-0", Namespace: w.NS, Labels: map[string]string{"app": "bad"}},
		Spec:       corev1.PodSpec{NodeSelector: map[string]string{wellknown.NodePoolLabel: "bad"}, Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(w, "web-0", "web-1", "bad-0")

	env := hookedEnv(t, w, c.emu, c.clk, nil, nil)
	sum, err := env.Provisioner().Run(ctx, "tick")
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("the tick did not meet the broken class's failure (%v): the test no longer reaches its state", err)
	}
	o := inspect(w, c.emu)
	t.Logf("tick: %d claims created, %d launched; %v", sum.NodeClaimsCreated, sum.Launched, err)
	if sum.NodeClaimsCreated != 2 || o.live != 2 {
		t.Fatalf("the tick created %d claims (%d live) for the good class's 2 pods; want 2", sum.NodeClaimsCreated, o.live)
	}
	if o.launched != 2 {
		// A throttle outlasting the retries may leave a launch to the next
		// tick; the pass itself went on.
		t.Logf("%d of 2 claims launched in the same tick", o.launched)
		if n := freshTicks(t, w, c, "next", 2, 2, 2*time.Second); n > 2 {
			t.Errorf("the good class's claims did not launch: %+v", inspect(w, c.emu))
		}
	}
	for _, nc := range w.Claims() {
		if nc.Spec.NodeClassRef.Name != "default" {
			t.Errorf("claim %s of class %s", nc.Name, nc.Spec.NodeClassRef.Name)
		}
	}

	// The interruption function's pass: a spot interruption of one of the
	// good nodes; its replacement is launched in the same invocation while
	// the broken class still fails.
	before := claimNames(w)
	victim := w.Claims()[0]
	id := wellknown.InstanceIDFromProviderID(victim.Status.ProviderID)
	if _, err := c.emu.InjectEvent(emulator.Event{Kind: emulator.EventSpotInterruption, InstanceIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	m := &eventsource.Mapping{SQS: env.AWS.SQS, QueueURL: c.emu.InterruptionQueueURL(), QueueARN: c.emu.InterruptionQueueARN(), Region: c.emu.Region(), BatchSize: 10, VisibilityTimeout: 30 * time.Second} // long enough for a busy machine's invocation to prove the record in flight
	var out eventsource.Outcome
	for range 5 {
		if out, err = m.PollOnce(ctx, env.InterruptionHandler()); err != nil {
			t.Logf("poll: %v", err)
		}
		if out.Received > 0 {
			break
		}
	}
	if out.Received != 1 || out.Failed != 0 {
		t.Fatalf("interruption: %+v", out)
	}
	replaced := newClaims(w, before)
	if nc := getClaim(w, victim.Name); nc == nil || nc.DeletionTimestamp == nil {
		t.Error("the interrupted claim was not retired")
	}
	if len(replaced) != 1 || !replaced[0].IsTrue(karpv1.ConditionTypeLaunched) {
		t.Errorf("replacements %v after the interruption invocation; want one, launched in it", claimNames(w))
	}
	if o := inspect(w, c.emu); len(o.problems) > 0 {
		t.Error(o.problems)
	}
}

func getClaim(w *testworld.World, name string) *karpv1.NodeClaim {
	nc, err := w.E.Clients.NodeClaims.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return nc
}
