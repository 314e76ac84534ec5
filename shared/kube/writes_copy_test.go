package kube_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/kube"
	"github.com/karpless/karpless/shared/local/kubetest"
)

// TestUpdateNodeClaimStatusFromCopy: the status is written in one request
// on a copy as read, and the latest is read only when the copy is stale; a
// namesake is never written.
func TestUpdateNodeClaimStatusFromCopy(t *testing.T) {
	e := kubetest.Need(t, env)
	c := e.Clients
	ctx := context.Background()
	setLaunched := func(nc *karpv1.NodeClaim) {
		nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", metav1.Now())
	}
	for _, tc := range []struct {
		name  string
		world func(t *testing.T, nc *karpv1.NodeClaim)
		gone  bool
		check func(t *testing.T, nc, cur *karpv1.NodeClaim)
	}{
		{name: "unchanged since read"},
		{name: "changed since read", world: func(t *testing.T, nc *karpv1.NodeClaim) {
			cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
			cur.Labels = map[string]string{"moved": "on"}
			if _, err := c.NodeClaims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, check: func(t *testing.T, _, cur *karpv1.NodeClaim) {
			if cur.Labels["moved"] != "on" {
				t.Errorf("the newer claim was overwritten: %v", cur.Labels)
			}
		}},
		{name: "a namesake there", world: func(t *testing.T, nc *karpv1.NodeClaim) { namesake(t, c, nc) }, gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := newClaim(t, c, kubetest.Name(t))
			if tc.world != nil {
				tc.world(t, nc)
			}
			err := c.UpdateNodeClaimStatusFromCopy(ctx, nc, setLaunched)
			if tc.gone {
				if !kube.IsGone(err) {
					t.Fatalf("want gone, got %v", err)
				}
				cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
				if cur.IsTrue(karpv1.ConditionTypeLaunched) || nc.IsTrue(karpv1.ConditionTypeLaunched) {
					t.Errorf("status written on the namesake or mirrored: %v", cur.Status.Conditions)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cur, _ := c.NodeClaims.Get(ctx, nc.Name, metav1.GetOptions{})
			if !cur.IsTrue(karpv1.ConditionTypeLaunched) || !nc.IsTrue(karpv1.ConditionTypeLaunched) {
				t.Errorf("Launched not written and mirrored: server %v, copy %v", cur.Status.Conditions, nc.Status.Conditions)
			}
			if tc.check != nil {
				tc.check(t, nc, cur)
			}
		})
	}
}
