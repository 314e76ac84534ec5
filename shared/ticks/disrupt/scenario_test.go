package disrupt_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/disruption"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/testworld"
)

// disruptMetrics runs one disruption pass, as disrupt does, and returns
// the metric lines it wrote, every figure extracted (the full level).
func (w *world) disruptMetrics() *testworld.Metrics {
	w.t.Helper()
	d := w.disrupter(w.env(w.killer))
	d.Metrics = record.NewMetrics("Karpless")
	if _, _, err := d.Pass(context.Background()); err != nil && !errors.Is(err, testworld.ErrKilled) {
		w.t.Logf("disruption pass: %v", err)
	}
	var out testworld.Metrics
	if err := d.Metrics.Flush(&out, 0); err != nil {
		w.t.Fatal(err)
	}
	return &out
}

// spreadHard puts each pod of the deployment on its own node.
func spreadHard(spec *corev1.PodSpec, labels map[string]string) {
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: wellknown.HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": labels["app"]}},
	}}}}
}

func (w *world) noneDeleting() bool {
	for _, nc := range w.claims() {
		if nc.DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

func TestEmptinessDeletesTheEmptyNode(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("web", 2, "1", spreadHard)
	w.converge(2, 2*time.Minute)
	if n := len(w.live()); n != 2 {
		t.Fatalf("%d instances, want 2", n)
	}
	before := w.cost()
	w.scale("web", 1)
	w.settle(20*time.Second, 2*time.Minute, func() bool { return len(w.live()) == 1 && w.noneDeleting() && w.running(1) })
	after := w.cost()
	t.Logf("emptiness: $%.4f/h -> $%.4f/h (saving $%.4f/h)", before, after, before-after)
	if after >= before {
		t.Fatalf("cost did not fall: %.4f -> %.4f", before, after)
	}
	w.assertInvariants()
}

// launchBeforeDelete checks, whenever it is called, that no candidate of
// a command is being deleted while one of its replacements is not
// initialized.
func (w *world) launchBeforeDelete() {
	w.t.Helper()
	w.launchBeforeDeleteIn(w.claims())
}

func (w *world) launchBeforeDeleteIn(claims []karpv1.NodeClaim) {
	w.t.Helper()
	byName := map[string]karpv1.NodeClaim{}
	for _, nc := range claims {
		byName[nc.Name] = nc
	}
	for _, nc := range claims {
		rec, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation])
		if err != nil || nc.DeletionTimestamp == nil {
			continue
		}
		for _, r := range rec.Replacements {
			if rc, ok := byName[r]; ok && !rc.IsTrue(karpv1.ConditionTypeInitialized) {
				w.t.Errorf("candidate %s deleted while replacement %s is not initialized", nc.Name, r)
			}
		}
	}
}

func typesOf(w *world) []string {
	var out []string
	for _, i := range w.live() {
		out = append(out, i.InstanceType)
	}
	sort.Strings(out)
	return out
}

func TestSingleNodeConsolidationReplacesWithCheaperNode(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("big", 1, "3", nil)
	w.deployment("small", 1, "250m", nil)
	w.converge(2, 2*time.Minute)
	before, beforeTypes := w.cost(), typesOf(w)
	if err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Delete(context.Background(), "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle(20*time.Second, 3*time.Minute, func() bool {
		w.launchBeforeDelete()
		return w.cost() < before && len(w.live()) == 1 && w.noneDeleting() && w.running(1)
	})
	after := w.cost()
	t.Logf("single-node replace: %v $%.4f/h -> %v $%.4f/h (saving $%.4f/h)", beforeTypes, before, typesOf(w), after, before-after)
	w.assertInvariants()
}

func TestMultiNodeConsolidationSavesMoney(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	// Three big pods force three nodes; then three small pods, with no
	// constraint, which kube-scheduler spreads over them (least allocated).
	w.deployment("filler", 3, "3", spreadHard)
	w.converge(3, 2*time.Minute)
	w.deployment("app", 3, "300m", nil)
	w.converge(6, 2*time.Minute)
	before, beforeTypes := w.cost(), typesOf(w)
	if len(beforeTypes) < 3 {
		t.Fatalf("want 3 nodes, got %v", beforeTypes)
	}
	if err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Delete(context.Background(), "filler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var methods []string
	w.settle(20*time.Second, 4*time.Minute, func() bool {
		w.launchBeforeDelete()
		for _, nc := range w.claims() {
			if rec, err := disruption.DecodeRecord(nc.Annotations[disruption.CommandAnnotation]); err == nil && !slices.Contains(methods, string(rec.Method)) {
				methods = append(methods, string(rec.Method))
			}
		}
		return len(w.live()) == 1 && w.noneDeleting() && w.running(3)
	})
	after := w.cost()
	t.Logf("multi-node: %v $%.4f/h -> %v $%.4f/h (saving $%.4f/h), methods %v", beforeTypes, before, typesOf(w), after, before-after, methods)
	if !slices.Contains(methods, string(disruption.MultiNodeConsolidation)) {
		t.Errorf("multi-node consolidation did not act (methods %v)", methods)
	}
	w.assertInvariants()
}

func TestDriftAfterAMIAliasResolvesToNewImage(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("web", 2, "1", nil)
	w.converge(2, 2*time.Minute)
	old := map[string]string{}
	for _, i := range w.live() {
		old[i.ID] = i.ImageID
	}
	before := w.cost()
	w.emu.UpdateAMIs("v20991231")
	// The provisioner refreshes the EC2NodeClass status (stale after a minute).
	w.clk.Advance(2 * time.Minute)
	w.provision()
	var drifted string
	w.settle(20*time.Second, 4*time.Minute, func() bool {
		w.launchBeforeDelete()
		for _, nc := range w.claims() {
			for _, c := range nc.Status.Conditions {
				if c.Type == karpv1.ConditionTypeDrifted && c.Status == metav1.ConditionTrue {
					drifted = c.Reason
				}
			}
		}
		for _, i := range w.live() {
			if _, ok := old[i.ID]; ok {
				return false
			}
		}
		return w.noneDeleting() && w.running(2)
	})
	if drifted != "AMIDrift" {
		t.Errorf("drift reason %q, want AMIDrift", drifted)
	}
	for _, i := range w.live() {
		for _, img := range old {
			if i.ImageID == img {
				t.Errorf("instance %s still boots the old image %s", i.ID, img)
			}
		}
	}
	t.Logf("drift: $%.4f/h -> $%.4f/h; all nodes replaced with the new image", before, w.cost())
	w.assertInvariants()
}

// blockedScenario builds two nodes with one small "app" pod each, which
// consolidation would merge, applies block, checks that nothing is
// disrupted for several consolidation rounds, then lifts the block (if
// lift is set) and checks that consolidation proceeds.
func blockedScenario(t *testing.T, block, lift func(w *world), mutatePool func(*karpv1.NodePool)) {
	w := newWorld(t)
	w.apply(mutatePool)
	w.deployment("filler", 2, "3", spreadHard)
	w.converge(2, 2*time.Minute)
	w.deployment("app", 2, "300m", nil)
	w.converge(4, 2*time.Minute)
	if n := len(w.live()); n != 2 {
		t.Fatalf("%d instances, want 2", n)
	}
	block(w)
	if err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Delete(context.Background(), "filler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle(time.Second, time.Minute, func() bool { return w.running(2) })
	before := w.cost()
	for range 8 {
		w.clk.Advance(20 * time.Second)
		s := w.disrupt()
		for _, c := range s.Commands {
			if c.Action == "executed" {
				t.Fatalf("disrupted while blocked: %+v", c)
			}
		}
		w.provision()
	}
	if w.cost() != before || len(w.live()) != 2 {
		t.Fatalf("capacity changed while blocked")
	}
	t.Logf("blocked: $%.4f/h held through 160s of consolidation rounds", before)
	if lift == nil {
		return
	}
	lift(w)
	w.settle(20*time.Second, 3*time.Minute, func() bool {
		w.launchBeforeDelete()
		return len(w.live()) == 1 && w.noneDeleting() && w.running(2)
	})
	t.Logf("unblocked: $%.4f/h -> $%.4f/h", before, w.cost())
	w.assertInvariants()
}

func TestPDBThatAllowsNoDisruptionBlocks(t *testing.T) {
	blockedScenario(t, func(w *world) {
		two := intstr.FromInt(2)
		_, err := w.e.Clients.Core.PolicyV1().PodDisruptionBudgets(w.ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		// kube-controller-manager computes disruptionsAllowed: 0.
		waitFor(w.t, 30*time.Second, func() bool {
			p, err := w.e.Clients.Core.PolicyV1().PodDisruptionBudgets(w.ns).Get(context.Background(), "b", metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == 2 && p.Status.DisruptionsAllowed == 0
		})
	}, func(w *world) {
		if err := w.e.Clients.Core.PolicyV1().PodDisruptionBudgets(w.ns).Delete(context.Background(), "b", metav1.DeleteOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}, nil)
}

func TestDoNotDisruptPodBlocks(t *testing.T) {
	blockedScenario(t, func(w *world) {
		for _, p := range w.pods() {
			if p.Labels["app"] != "app" {
				continue
			}
			p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
			if _, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
				w.t.Fatal(err)
			}
		}
	}, func(w *world) {
		for _, p := range w.pods() {
			delete(p.Annotations, wellknown.DoNotDisruptAnnotation)
			if _, err := w.e.Clients.Core.CoreV1().Pods(w.ns).Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
				w.t.Fatal(err)
			}
		}
	}, nil)
}

func TestBudgetOfZeroInScheduleWindowBlocks(t *testing.T) {
	blockedScenario(t, func(*world) {}, nil, func(np *karpv1.NodePool) {
		// A window that is open now (every minute, lasting an hour).
		np.Spec.Disruption.Budgets = []karpv1.Budget{
			{Nodes: "100%"},
			{Nodes: "0", Schedule: new("* * * * *"), Duration: &metav1.Duration{Duration: time.Hour}},
		}
	})
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met in %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestExpirationReplacesOldNodes(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("5m")
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	w.deployment("web", 2, "1", spreadHard)
	w.converge(2, 2*time.Minute)
	old := map[string]bool{}
	for _, i := range w.live() {
		old[i.ID] = true
	}
	// Expiration is measured from the claims' creation timestamps, which
	// the API server sets on the real clock: the claims expire once the
	// clock runs five minutes ahead. The claims made after must not look
	// expired at birth, so the pool's expireAfter goes to an hour first
	// (the old claims then also drift; expiration, forceful, acts first).
	ctx := context.Background()
	patch := []byte(`{"spec":{"template":{"spec":{"expireAfter":"1h"}}}}`)
	if _, err := w.e.Clients.NodePools.Patch(ctx, "default", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(5 * time.Minute)
	var expired []string
	deadline := time.Now().Add(2 * time.Minute)
	rounds := testworld.RoundsBackoff(settleSleep)
	for {
		s := w.disrupt()
		expired = append(expired, s.Expired...)
		w.provision()
		replaced := len(w.live()) > 0
		for _, i := range w.live() {
			replaced = replaced && !old[i.ID]
		}
		if replaced && w.running(2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old nodes not replaced: %s", w.describe())
		}
		w.step(time.Second)
		time.Sleep(rounds.Step())
	}
	if len(expired) != 2 {
		t.Fatalf("expired %v, want the two old claims", expired)
	}
	t.Logf("expired %v; nodes now %v", expired, typesOf(w))
	w.assertInvariants()
}

func TestGarbageCollection(t *testing.T) {
	w := newWorld(t)
	w.apply(nil)
	w.deployment("web", 2, "1", spreadHard)
	w.converge(2, 2*time.Minute)
	ctx := context.Background()
	// An instance tagged for the cluster that no NodeClaim knows (a leak
	// from a lost launch): launched from a launch template Karpless made,
	// so its node registers with karpenter.sh/unregistered:NoExecute, which
	// only the registration of a NodeClaim would lift (no pod runs there).
	a := w.env(nil)
	out, err := a.AWS.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(w.live()[0].LaunchTemplateName), Version: aws.String("$Latest")},
		InstanceType:   ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(w.live()[0].SubnetID),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(wellknown.ClusterTagKey(clusterName)), Value: aws.String("owned")},
			{Key: aws.String(wellknown.NodePoolTagKey), Value: aws.String("default")},
			{Key: aws.String(wellknown.NodeClaimTagKey), Value: aws.String("default-gone1")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	leaked := aws.ToString(out.Instances[0].InstanceId)
	// A NodeClaim whose instance was terminated behind our back.
	victim := w.claims()[0]
	victimID := wellknown.InstanceIDFromProviderID(victim.Status.ProviderID)
	if err := w.emu.TerminateAfter([]string{victimID}, 0); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(time.Minute)
	w.settle(5*time.Second, 2*time.Minute, func() bool {
		i, _ := w.emu.Instance(leaked)
		if i.State != emulator.StateTerminated && i.State != emulator.StateShuttingDown {
			return false
		}
		for _, nc := range w.claims() {
			if nc.Name == victim.Name {
				return false
			}
		}
		return w.running(2)
	})
	t.Logf("collected leaked instance %s and nodeclaim %s of terminated %s", leaked, victim.Name, victimID)
	w.assertInvariants()
}

// TestBalancedConsolidationScoresTheMove is the single-node replacement
// under the Balanced policy: replacing the node alone in its NodePool by
// one at a quarter of its price saves three quarters of the pool's cost
// for all of its disruption (score 0.75, above 1/2), so the move is made, with
// Karpenter's ConsolidationApproved Event carrying the score.
// (shared/core/disruption TestBalancedPolicy has the moves it refuses.)
func TestBalancedConsolidationScoresTheMove(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced })
	w.deployment("big", 1, "6", nil) // an 8-vCPU node, replaced by a 2-vCPU one
	w.deployment("small", 1, "250m", nil)
	w.converge(2, 2*time.Minute)
	before := w.cost()
	if err := w.e.Clients.Core.AppsV1().Deployments(w.ns).Delete(context.Background(), "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle(20*time.Second, 3*time.Minute, func() bool {
		w.launchBeforeDelete()
		return w.cost() < before && len(w.live()) == 1 && w.noneDeleting() && w.running(1)
	})
	events, err := w.e.Clients.Core.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=ConsolidationApproved"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range events.Items {
		msgs = append(msgs, e.InvolvedObject.Kind+": "+e.Message)
	}
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, ">= threshold 0.50 (k: 2,") }) {
		t.Errorf("no ConsolidationApproved Event with the score; got %v", msgs)
	}
	t.Logf("Balanced: $%.4f/h -> $%.4f/h; %v", before, w.cost(), msgs)
	w.assertInvariants()
}

// TestNodePoolStatus: the disruption tick keeps each NodePool's status as
// Karpenter does (Ready, NodeClassReady, ValidationSucceeded, resources,
// nodes, and NodeRegistrationHealthy, which the provisioner sets); a NodePool that fails Karpenter's runtime validation (a
// capacity type no launch can have, which the CRD lets through) is not
// Ready and provisions nothing, though it outweighs the valid one. The pass publishes the status's resources and
// the NodePools' limits as Karpenter's usage and limit gauges.
func TestNodePoolStatus(t *testing.T) {
	w := newWorld(t)
	w.apply(func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
	})
	ctx := context.Background()
	bad := deploy.DefaultNodePool("invalid")
	bad.Spec.Weight = new(int32(100))
	// The CRD's schema checks label values; only the runtime validation
	// knows the values karpenter.sh/capacity-type can take.
	bad.Spec.Template.Spec.Requirements = append(bad.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"bogus"}})
	if _, err := w.e.Clients.NodePools.Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused the NodePool (the scenario needs one only runtime validation rejects): %v", err)
	}
	w.deployment("app", 2, "250m", nil)
	w.converge(2, 2*time.Minute)
	for _, nc := range w.claims() {
		if pool := nc.Labels[wellknown.NodePoolLabel]; pool != "default" {
			t.Errorf("claim %s provisioned by NodePool %s", nc.Name, pool)
		}
	}
	metrics := w.disruptMetrics()
	get := func(name string) *karpv1.NodePool {
		np, err := w.e.Clients.NodePools.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return np
	}
	cond := func(np *karpv1.NodePool, typ string) string {
		if c := meta.FindStatusCondition(np.Status.Conditions, typ); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return "missing"
	}
	good := get("default")
	if cond(good, karpv1.ConditionTypeReady) != "True/Ready" || cond(good, karpv1.ConditionTypeNodeClassReady) != "True/NodeClassReady" || cond(good, karpv1.ConditionTypeValidationSucceeded) != "True/ValidationSucceeded" {
		t.Errorf("default conditions %+v", good.Status.Conditions)
	}
	// Its nodes registered (the provisioner's lifecycle) and the
	// disruption pass's stamps did not reset that.
	if got := cond(good, karpv1.ConditionTypeNodeRegistrationHealthy); got != "True/NodeRegistrationHealthy" {
		t.Errorf("default NodeRegistrationHealthy %s (%+v)", got, good.Status.Conditions)
	}
	claims := int64(len(w.claims()))
	if good.Status.Nodes == nil || *good.Status.Nodes != claims || good.Status.Resources.Cpu().IsZero() {
		t.Errorf("default status nodes %v resources %v, want %d nodes and their capacity", good.Status.Nodes, good.Status.Resources, claims)
	}
	invalid := get("invalid")
	if cond(invalid, karpv1.ConditionTypeReady) != "False/UnhealthyDependents" || cond(invalid, karpv1.ConditionTypeValidationSucceeded) != "False/NodePoolValidationFailed" {
		t.Errorf("invalid conditions %+v", invalid.Status.Conditions)
	}
	if invalid.Status.Nodes == nil || *invalid.Status.Nodes != 0 {
		t.Errorf("invalid nodes %v, want 0", invalid.Status.Nodes)
	}
	// Karpenter's karpenter_nodepools_usage and karpenter_nodepools_limit,
	// from the same status, one series per NodePool and resource type.
	gauge := func(name, pool, resourceType string) (float64, bool) {
		for _, doc := range metrics.Lines(name) {
			if doc["nodepool"] == pool && doc["resource_type"] == resourceType && doc["_aws"] != nil {
				v, ok := doc[name].(float64)
				return v, ok
			}
		}
		return 0, false
	}
	if got, ok := gauge("karpenter_nodepools_usage", "default", "nodes"); !ok || got != float64(claims) {
		t.Errorf("usage of nodes %v (written %v), want %d", got, ok, claims)
	}
	if got, ok := gauge("karpenter_nodepools_usage", "default", "cpu"); !ok || got != float64(good.Status.Resources.Cpu().MilliValue())/1000 {
		t.Errorf("usage of cpu %v (written %v), want the status's %s", got, ok, good.Status.Resources.Cpu())
	}
	for _, rt := range []string{"memory", "pods", "ephemeral_storage"} {
		if got, ok := gauge("karpenter_nodepools_usage", "default", rt); !ok || got <= 0 {
			t.Errorf("usage of %s %v (written %v)", rt, got, ok)
		}
	}
	if got, ok := gauge("karpenter_nodepools_usage", "invalid", "nodes"); !ok || got != 0 {
		t.Errorf("usage of nodes of the invalid NodePool %v (written %v), want 0", got, ok)
	}
	if got, ok := gauge("karpenter_nodepools_limit", "default", "cpu"); !ok || got != 100 {
		t.Errorf("limit of cpu %v (written %v), want 100", got, ok)
	}
	if lines := metrics.Lines("karpenter_nodepools_limit"); len(lines) != 1 {
		t.Errorf("limit lines %v, want the default NodePool's cpu only (the invalid one has no limits)", lines)
	}
	before := good.ResourceVersion
	w.disrupt()
	if get("default").ResourceVersion != before {
		t.Error("a pass that found the NodePool as it left it wrote its status again")
	}
}
