package nodeclass

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TestFinalization ports the decisions of Karpenter v1.14.1's EC2NodeClass
// finalizer (pkg/controllers/nodeclass/controller.go and its "NodeClass
// Termination" suite): the finalizer is added to every live class; a
// deleted class waits while any NodeClaim, deleting ones included, refers
// to it by group, kind and name; then it is cleaned up; a deleted class
// without the finalizer is left alone.
func TestFinalization(t *testing.T) {
	deleted := metav1.Now()
	claim := func(name, group, kind, class string, deleting bool) *karpv1.NodeClaim {
		c := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if class != "" {
			c.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: group, Kind: kind, Name: class}
		}
		if deleting {
			c.DeletionTimestamp = &deleted
		}
		return c
	}
	ours := func(name, class string) *karpv1.NodeClaim {
		return claim(name, awsv1.Group, "EC2NodeClass", class, false)
	}
	tests := []struct {
		name       string
		finalizers []string
		deleting   bool
		claims     []*karpv1.NodeClaim
		want       FinalizerStep
		waiting    []string
	}{
		{name: "a new class gets the finalizer", want: FinalizerAdd},
		{name: "a class with another finalizer only gets ours too", finalizers: []string{"example.com/keep"}, want: FinalizerAdd},
		{name: "a live class with the finalizer needs nothing", finalizers: []string{wellknown.AWSTerminationFinalizer}, claims: []*karpv1.NodeClaim{ours("a", "default")}, want: FinalizerNone},
		{name: "a deleted class without the finalizer is not ours to finish", deleting: true, want: FinalizerNone},
		{
			name: "should not delete the EC2NodeClass until all associated NodeClaims are terminated", finalizers: []string{wellknown.AWSTerminationFinalizer}, deleting: true,
			claims: []*karpv1.NodeClaim{ours("b", "default"), ours("a", "default")}, want: FinalizerWait, waiting: []string{"a", "b"},
		},
		{
			name: "a deleting NodeClaim is still waited for", finalizers: []string{wellknown.AWSTerminationFinalizer}, deleting: true,
			claims: []*karpv1.NodeClaim{claim("a", awsv1.Group, "EC2NodeClass", "default", true)}, want: FinalizerWait, waiting: []string{"a"},
		},
		{
			name: "the finalizer a Karpenter install left is honoured", finalizers: []string{"example.com/keep", wellknown.AWSTerminationFinalizer}, deleting: true,
			claims: []*karpv1.NodeClaim{ours("a", "default")}, want: FinalizerWait, waiting: []string{"a"},
		},
		{
			name: "claims of other classes, groups or kinds, or with no class, do not hold it", finalizers: []string{wellknown.AWSTerminationFinalizer}, deleting: true,
			claims: []*karpv1.NodeClaim{
				ours("a", "other"), claim("b", "example.com", "EC2NodeClass", "default", false),
				claim("c", awsv1.Group, "OtherNodeClass", "default", false), claim("d", "", "", "", false),
			},
			want: FinalizerCleanUp,
		},
		{name: "with no NodeClaims left it is cleaned up", finalizers: []string{wellknown.AWSTerminationFinalizer}, deleting: true, want: FinalizerCleanUp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Finalizers: tc.finalizers}}
			if tc.deleting {
				nc.DeletionTimestamp = &deleted
			}
			got, waiting := Finalization(nc, tc.claims)
			if got != tc.want || !slices.Equal(waiting, tc.waiting) {
				t.Errorf("Finalization = %s waiting on %v; want %s waiting on %v", got, waiting, tc.want, tc.waiting)
			}
		})
	}
}

// TestLegacyInstanceProfileName checks the name against Karpenter's own
// (EC2NodeClass.LegacyInstanceProfileName, hashstructure v2 of region and
// name), computed with hashstructure v2.0.2 for cluster "demo", region
// us-west-2, class "default".
func TestLegacyInstanceProfileName(t *testing.T) {
	if got, want := LegacyInstanceProfileName("demo", "us-west-2", "default"), "demo_4067990795380418201"; got != want {
		t.Errorf("LegacyInstanceProfileName = %s; want %s", got, want)
	}
	if iamProfileName.MatchString(LegacyInstanceProfileName("aws:12345678910:eu-central-1:kubernetes", "eu-central-1", "default")) {
		t.Error("a cluster name with ':' makes a name IAM refuses; Karpenter skips it")
	}
}

// TestDeleteLegacyInstanceProfile: the legacy profile is deleted with its
// role, as Karpenter's "should succeed to delete both legacy and current
// instance profiles" case; beyond Karpenter, only when it is this
// cluster's and not the class's spec.instanceProfile; a name IAM would
// refuse makes no call ("should skip legacy instance profile cleanup when
// the synthesized name is not IAM-valid").
func TestDeleteLegacyInstanceProfile(t *testing.T) {
	const region = "eu-west-1"
	owned := []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/c1"), Value: aws.String("owned")}}
	tests := []struct {
		name    string
		cluster string
		tags    []iamtypes.Tag
		absent  bool
		spec    bool // spec.instanceProfile names the legacy profile
		deleted bool
		calls   int
	}{
		{name: "legacy profile of this cluster is deleted with its role", cluster: "c1", tags: owned, deleted: true, calls: 3},
		{name: "no legacy profile", cluster: "c1", absent: true, calls: 1},
		{name: "a profile of that name not tagged for this cluster stays", cluster: "c1", calls: 1},
		{name: "the class's own spec.instanceProfile stays", cluster: "c1", tags: owned, spec: true},
		{name: "a name IAM refuses makes no call", cluster: "aws:12345678910:eu-central-1:kubernetes", tags: owned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := defaultClass()
			f := newFakeIAM("KarpenterNodeRole-c1")
			name := LegacyInstanceProfileName(tc.cluster, region, nc.Name)
			if !tc.absent {
				f.profiles[name] = &iamtypes.InstanceProfile{InstanceProfileName: aws.String(name), Path: aws.String("/"), Tags: tc.tags,
					Roles: []iamtypes.Role{{RoleName: aws.String("KarpenterNodeRole-c1")}}}
			}
			if tc.spec {
				nc.Spec.Role, nc.Spec.InstanceProfile = "", aws.String(name)
			}
			r := &Resolver{IAM: f, Region: region}
			deleted, err := r.DeleteLegacyInstanceProfile(context.Background(), tc.cluster, nc)
			if err != nil {
				t.Fatal(err)
			}
			_, left := f.profiles[name]
			if deleted != tc.deleted || left == tc.deleted && !tc.absent || f.calls != tc.calls {
				t.Errorf("deleted %v, profile left %v, %d calls %v; want deleted %v, %d calls", deleted, left, f.calls, f.log, tc.deleted, tc.calls)
			}
			// Deleting again finds nothing: a retry after a kill is a no-op.
			if again, err := r.DeleteLegacyInstanceProfile(context.Background(), tc.cluster, nc); err != nil || again {
				t.Errorf("second deletion: %v %v", again, err)
			}
		})
	}
}
