package kube_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m, &env, kubetest.Options{})) }

func newClaim(t *testing.T, c *kube.Clients, name string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{wellknown.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		},
	}
	got, err := c.NodeClaims.Create(context.Background(), nc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating nodeclaim %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if cur, err := c.NodeClaims.Get(ctx, name, metav1.GetOptions{}); err == nil {
			cur.Finalizers = nil
			_, _ = c.NodeClaims.Update(ctx, cur, metav1.UpdateOptions{})
			_ = c.NodeClaims.Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	return got
}

// namesake deletes the claim for good and creates another under its name.
func namesake(t *testing.T, c *kube.Clients, nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	cur, err := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = nil
	if _, err := c.NodeClaims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return newClaim(t, c, nc.Name)
}

func TestNodeClaimWrites(t *testing.T) {
	e := kubetest.Need(t, env)
	c, ctx := e.Clients, context.Background()
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	setLaunched := func(x *karpv1.NodeClaim) {
		x.Status.Conditions = append(x.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: now})
	}
	for _, tc := range []struct {
		name string
		// world turns the claim into the state the write meets: nil keeps
		// it, else it returns what is there under the name (nil: nothing).
		world func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim
		write func(nc *karpv1.NodeClaim) error
		gone  bool // the write reports the claim gone (IsGone)
		check func(t *testing.T, nc, there *karpv1.NodeClaim)
	}{
		{
			name:  "delete",
			write: func(nc *karpv1.NodeClaim) error { return c.DeleteNodeClaim(ctx, nc) },
			check: func(t *testing.T, nc, _ *karpv1.NodeClaim) {
				cur, err := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if err != nil || cur.DeletionTimestamp == nil {
					t.Errorf("claim not being deleted: %v %v", cur, err)
				}
			},
		},
		{
			name:  "delete, the claim gone",
			world: func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim { namesake(t, c, nc); return nil },
			write: func(nc *karpv1.NodeClaim) error {
				_ = c.NodeClaims.Delete(ctx, nc.Name, metav1.DeleteOptions{})
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if cur != nil {
					cur.Finalizers = nil
					_, _ = c.NodeClaims.Update(ctx, cur, metav1.UpdateOptions{})
				}
				return c.DeleteNodeClaim(ctx, nc)
			},
		},
		{
			name:  "delete, a namesake there",
			world: func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim { return namesake(t, c, nc) },
			write: func(nc *karpv1.NodeClaim) error { return c.DeleteNodeClaim(ctx, nc) },
			check: func(t *testing.T, _, there *karpv1.NodeClaim) {
				cur, err := c.NodeClaims.Get(ctx, there.Name, metav1.GetOptions{})
				if err != nil || cur.UID != there.UID || cur.DeletionTimestamp != nil {
					t.Errorf("the namesake was touched: %v %v", cur, err)
				}
			},
		},
		{
			name:  "status",
			write: func(nc *karpv1.NodeClaim) error { return c.UpdateNodeClaimStatus(ctx, nc, setLaunched) },
			check: func(t *testing.T, nc, _ *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if !cur.IsTrue(karpv1.ConditionTypeLaunched) || !nc.IsTrue(karpv1.ConditionTypeLaunched) {
					t.Errorf("Launched not written and mirrored: server %v, copy %v", cur.Status.Conditions, nc.Status.Conditions)
				}
			},
		},
		{
			name: "status on a stale copy (conflict retried)",
			world: func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim {
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				cur.Labels = map[string]string{"moved": "on"}
				if _, err := c.NodeClaims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			write: func(nc *karpv1.NodeClaim) error { return c.UpdateNodeClaimStatus(ctx, nc, setLaunched) },
			check: func(t *testing.T, nc, _ *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if !cur.IsTrue(karpv1.ConditionTypeLaunched) || cur.Labels["moved"] != "on" {
					t.Errorf("status not written over the newer claim: %v", cur)
				}
			},
		},
		{
			name:  "status, a namesake there",
			world: func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim { return namesake(t, c, nc) },
			write: func(nc *karpv1.NodeClaim) error { return c.UpdateNodeClaimStatus(ctx, nc, setLaunched) },
			gone:  true,
			check: func(t *testing.T, nc, there *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, there.Name, metav1.GetOptions{})
				if cur.IsTrue(karpv1.ConditionTypeLaunched) || nc.IsTrue(karpv1.ConditionTypeLaunched) {
					t.Errorf("status written on the namesake or mirrored: %v", cur.Status.Conditions)
				}
			},
		},
		{
			name: "annotate",
			write: func(nc *karpv1.NodeClaim) error {
				return c.AnnotateNodeClaim(ctx, nc, map[string]*string{"a": new("1")})
			},
			check: func(t *testing.T, nc, _ *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if cur.Annotations["a"] != "1" || nc.Annotations["a"] != "1" {
					t.Errorf("annotation not written and mirrored: %v %v", cur.Annotations, nc.Annotations)
				}
				if err := c.AnnotateNodeClaim(ctx, nc, map[string]*string{"a": nil}); err != nil {
					t.Fatal(err)
				}
				cur, _ = c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if _, ok := cur.Annotations["a"]; ok {
					t.Errorf("annotation not removed: %v", cur.Annotations)
				}
				if _, ok := nc.Annotations["a"]; ok {
					t.Errorf("removal not mirrored: %v", nc.Annotations)
				}
			},
		},
		{
			name:  "annotate, a namesake there",
			world: func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim { return namesake(t, c, nc) },
			write: func(nc *karpv1.NodeClaim) error {
				return c.AnnotateNodeClaim(ctx, nc, map[string]*string{"a": new("1")})
			},
			gone: true,
			check: func(t *testing.T, _, there *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, there.Name, metav1.GetOptions{})
				if _, ok := cur.Annotations["a"]; ok {
					t.Errorf("the namesake was annotated: %v", cur.Annotations)
				}
			},
		},
		{
			name:  "finalizer",
			write: func(nc *karpv1.NodeClaim) error { return c.RemoveNodeClaimFinalizer(ctx, nc) },
			check: func(t *testing.T, nc, _ *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if len(cur.Finalizers) != 0 {
					t.Errorf("finalizer kept: %v", cur.Finalizers)
				}
			},
		},
		{
			name:  "finalizer, a namesake there",
			world: func(t *testing.T, nc *karpv1.NodeClaim) *karpv1.NodeClaim { return namesake(t, c, nc) },
			write: func(nc *karpv1.NodeClaim) error { return c.RemoveNodeClaimFinalizer(ctx, nc) },
			check: func(t *testing.T, _, there *karpv1.NodeClaim) {
				cur, _ := c.NodeClaims.Get(ctx, there.Name, metav1.GetOptions{})
				if len(cur.Finalizers) != 1 {
					t.Errorf("the namesake's finalizer was removed: %v", cur.Finalizers)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := newClaim(t, c, kubetest.Name(t))
			var there *karpv1.NodeClaim
			if tc.world != nil {
				there = tc.world(t, nc)
			}
			err := tc.write(nc)
			switch {
			case tc.gone && !kube.IsGone(err):
				t.Errorf("want the claim reported gone, got %v", err)
			case !tc.gone && err != nil:
				t.Errorf("write: %v", err)
			}
			if tc.check != nil {
				tc.check(t, nc, there)
			}
		})
	}
}

func TestDisruptedTaint(t *testing.T) {
	e := kubetest.Need(t, env)
	c, ctx := e.Clients, context.Background()
	nodes := c.Core.CoreV1().Nodes()
	name := kubetest.Name(t)
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tainted, added, err := c.TaintDisrupted(ctx, name, t1)
	if since, _ := wellknown.DisruptedSince(tainted); err != nil || !added || !since.Equal(t1) {
		t.Fatalf("first taint: node %v added %v err %v", tainted, added, err)
	}
	tainted, added, err = c.TaintDisrupted(ctx, name, t1.Add(time.Minute))
	if since, _ := wellknown.DisruptedSince(tainted); err != nil || added || !since.Equal(t1) {
		t.Fatalf("second taint: node %v added %v err %v (want the first time, not added)", tainted, added, err)
	}
	cur, _ := nodes.Get(ctx, name, metav1.GetOptions{})
	if len(cur.Spec.Taints) != 1 || !wellknown.IsDisrupted(cur) {
		t.Fatalf("taints %v, want the disrupted taint once", cur.Spec.Taints)
	}
	if _, _, err := c.TaintDisrupted(ctx, "no-such-node", t1); !kube.IsGone(err) {
		t.Errorf("tainting a node that is not there: %v, want it reported gone", err)
	}

	stale := node.DeepCopy()
	stale.UID = "someone-else"
	if err := c.UntaintDisrupted(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if cur, _ := nodes.Get(ctx, name, metav1.GetOptions{}); !wellknown.IsDisrupted(cur) {
		t.Errorf("untainted a namesake")
	}
	if err := c.UntaintDisrupted(ctx, node); err != nil {
		t.Fatal(err)
	}
	if cur, _ := nodes.Get(ctx, name, metav1.GetOptions{}); wellknown.IsDisrupted(cur) {
		t.Errorf("taint kept: %v", cur.Spec.Taints)
	}
	if err := c.UntaintDisrupted(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-such-node"}}); err != nil {
		t.Errorf("untainting a node that is not there: %v", err)
	}
}
