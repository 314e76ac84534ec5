package nodeclass

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's instance profile provider suite
// (aws/karpenter-provider-aws pkg/providers/instanceprofile/suite_test.go),
// through EnsureInstanceProfile (the nodeclass controller's Create of the
// profile of spec.role), DeleteInstanceProfiles and
// DeleteUnusedInstanceProfiles (its finalizer and garbage collection,
// which list profiles by path).
func instanceProfileCase(spec string) conformance.Case {
	return conformance.Case{Suite: "aws/providers/instanceprofile", File: "pkg/providers/instanceprofile/suite_test.go", Spec: "InstanceProfileProvider > " + spec}
}

const ipCluster, ipRegion, ipNodeRole = "test-cluster", "us-west-2", "NodeRole"

func profileClass(name, uid, role string) *awsv1.EC2NodeClass {
	nc := selectorClass()
	nc.ObjectMeta = metav1.ObjectMeta{Name: name, UID: types.UID(uid)}
	nc.Spec.Role = role
	return nc
}

func ipResolver(iam *fakeIAM) *Resolver {
	return &Resolver{IAM: iam, Region: ipRegion, Now: func() time.Time { return iam.now.Add(time.Hour) }}
}

func TestConformanceInstanceProfiles(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ entry, role string }{
		{"with custom paths", "CustomPath/" + ipNodeRole},
		{"without custom paths", ipNodeRole},
	} {
		conformance.Run(t, instanceProfileCase("should support IAM roles > "+tc.entry), func(t *testing.T) {
			iam := newFakeIAM(ipNodeRole)
			name, err := ipResolver(iam).EnsureInstanceProfile(ctx, profileClass("default", "uid-a", tc.role), ipCluster)
			if err != nil {
				t.Fatal(err)
			}
			p := iam.profiles[name]
			if p == nil || len(p.Roles) != 1 || aws.ToString(p.Roles[0].RoleName) != ipNodeRole {
				t.Errorf("profile %s: %s", name, iam.state())
			}
		})
	}
	conformance.Run(t, conformance.Case{Suite: "aws/providers/instanceprofile", File: "pkg/providers/instanceprofile/suite_test.go",
		Spec:    "InstanceProfileProvider > should create an instance profile without a path when path is empty",
		Differs: "Karpless creates the instance profile of a role only under its EC2NodeClass's path /karpenter/<region>/<cluster>/<uid>/; Karpenter's provider can also create one without a path, which none of its controllers asks for, so users see the same profiles"}, func(*testing.T) {})

	// seed puts profiles of two classes of the cluster and one of another
	// cluster into IAM, as the list cases do.
	seed := func(iam *fakeIAM) {
		for name, path := range map[string]string{
			"profile-1": InstanceProfilePath(ipRegion, ipCluster, "uid-1"),
			"profile-2": InstanceProfilePath(ipRegion, ipCluster, "uid-2"),
			"profile-3": InstanceProfilePath(ipRegion, "other-cluster", "some-uid"),
		} {
			iam.profiles[name] = &iamtypes.InstanceProfile{InstanceProfileName: aws.String(name), Path: aws.String(path),
				Roles: []iamtypes.Role{{RoleName: aws.String("role-" + name[len(name)-1:])}}, CreateDate: aws.Time(iam.now)}
		}
	}
	remaining := func(iam *fakeIAM) []string {
		var out []string
		for n := range iam.profiles {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	conformance.Run(t, instanceProfileCase("should list all instance profiles for a NodeClass"), func(t *testing.T) {
		iam := newFakeIAM("role-1", "role-2")
		seed(iam)
		deleted, err := ipResolver(iam).DeleteInstanceProfiles(ctx, ipCluster, profileClass("nodeclass-1", "uid-1", "role-1"))
		if err != nil || !slices.Equal(deleted, []string{"profile-1"}) || !slices.Equal(remaining(iam), []string{"profile-2", "profile-3"}) {
			t.Errorf("deleted %v (%v), left %v", deleted, err, remaining(iam))
		}
	})
	conformance.Run(t, instanceProfileCase("should list all instance profiles for a Cluster"), func(t *testing.T) {
		iam := newFakeIAM("role-1", "role-2")
		seed(iam)
		deleted, err := ipResolver(iam).DeleteUnusedInstanceProfiles(ctx, ipCluster, func(string) bool { return false }, 0)
		slices.Sort(deleted)
		if err != nil || !slices.Equal(deleted, []string{"profile-1", "profile-2"}) || !slices.Equal(remaining(iam), []string{"profile-3"}) {
			t.Errorf("deleted %v (%v), left %v", deleted, err, remaining(iam))
		}
	})
	conformance.Run(t, instanceProfileCase("should create an instance profile with the correct path and name"), func(t *testing.T) {
		iam := newFakeIAM(ipNodeRole)
		nc := profileClass("default", "test-uid", ipNodeRole)
		name, err := ipResolver(iam).EnsureInstanceProfile(ctx, nc, ipCluster)
		if err != nil {
			t.Fatal(err)
		}
		p := iam.profiles[name]
		if len(iam.profiles) != 1 || p == nil || name != InstanceProfileName(ipCluster, ipRegion, "test-uid", ipNodeRole) ||
			aws.ToString(p.Path) != FormatPath("karpenter", ipRegion, ipCluster, "test-uid") {
			t.Errorf("profile %s: %s", name, iam.state())
		}
	})
	conformance.Run(t, instanceProfileCase("should delete an instance profile with the correct name"), func(t *testing.T) {
		iam := newFakeIAM(ipNodeRole)
		r := ipResolver(iam)
		nc := profileClass("default", "test-uid", ipNodeRole)
		name, err := r.EnsureInstanceProfile(ctx, nc, ipCluster)
		if err != nil {
			t.Fatal(err)
		}
		deleted, err := r.DeleteInstanceProfiles(ctx, ipCluster, nc)
		if err != nil || !slices.Equal(deleted, []string{name}) {
			t.Fatalf("deleted %v, %v", deleted, err)
		}
		if _, err := r.getProfile(ctx, name); !awserr.IsNotFound(err) {
			t.Errorf("profile %s still there: %v", name, err)
		}
	})
	conformance.Run(t, instanceProfileCase("should reflect IsProtected updates"), func(t *testing.T) {
		// Karpenter protects the profiles in use from its garbage
		// collection; Karpless's collection asks who uses each.
		iam := newFakeIAM(ipNodeRole)
		r := ipResolver(iam)
		name, err := r.EnsureInstanceProfile(ctx, profileClass("default", "test-uid", ipNodeRole), ipCluster)
		if err != nil {
			t.Fatal(err)
		}
		protected := true
		inUse := func(n string) bool { return n == name && protected }
		if deleted, err := r.DeleteUnusedInstanceProfiles(ctx, ipCluster, inUse, 0); err != nil || len(deleted) != 0 {
			t.Fatalf("protected profile deleted: %v %v", deleted, err)
		}
		protected = false
		if deleted, err := r.DeleteUnusedInstanceProfiles(ctx, ipCluster, inUse, 0); err != nil || !slices.Equal(deleted, []string{name}) {
			t.Fatalf("unprotected profile kept: %v %v", deleted, err)
		}
	})
	conformance.Run(t, instanceProfileCase("should not update instance profile cache item on multiple create calls"), func(t *testing.T) {
		iam := newFakeIAM("test-role")
		r := ipResolver(iam)
		nc := profileClass("default", "test-uid", "test-role")
		if _, err := r.EnsureInstanceProfile(ctx, nc, ipCluster); err != nil {
			t.Fatal(err)
		}
		before := iam.state()
		iam.log = nil
		if _, err := r.EnsureInstanceProfile(ctx, nc, ipCluster); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(iam.log, []string{"Get"}) || iam.state() != before {
			t.Errorf("second create called %v, profiles %s", iam.log, iam.state())
		}
	})
	conformance.Run(t, instanceProfileCase("Role Cache > should not cache role not found errors when the role exists"), func(t *testing.T) {
		iam := newFakeIAM("test-role")
		if _, err := ipResolver(iam).EnsureInstanceProfile(ctx, profileClass("default", "test-uid", "test-role"), ipCluster); err != nil {
			t.Fatal(err)
		}
	})
	conformance.Run(t, instanceProfileCase("Role Cache > should cache role not found errors when the role does not"), func(t *testing.T) {
		iam := newFakeIAM("test-role")
		nc := profileClass("default", "test-uid", "non-existent-role")
		_, err := ipResolver(iam).EnsureInstanceProfile(ctx, nc, ipCluster)
		if !errors.Is(err, ErrRoleNotFound) {
			t.Fatalf("error %v, want role not found", err)
		}
		// The resolution reports it as a condition, not a retried failure.
		_, o := ipResolver(iam).instanceProfile(ctx, nc, ipCluster)
		if o.reason != ReasonRoleNotFound || o.keep {
			t.Errorf("outcome %+v", o)
		}
	})
	conformance.Run(t, instanceProfileCase("Role Cache > should not attempt to create instance profile when role is cached as not found"), func(t *testing.T) {
		// Karpenter's cache stops a missing role from making profile after
		// profile; Karpless's profile name is derived from the role, so
		// once a resolution found the role missing, later ones create none.
		iam := newFakeIAM("test-role")
		nc := profileClass("default", "test-uid", "non-existent-role")
		r := ipResolver(iam)
		if _, err := r.EnsureInstanceProfile(ctx, nc, ipCluster); !errors.Is(err, ErrRoleNotFound) {
			t.Fatalf("error %v", err)
		}
		iam.log = nil
		for range 3 {
			if _, err := r.EnsureInstanceProfile(ctx, nc, ipCluster); !errors.Is(err, ErrRoleNotFound) {
				t.Fatalf("error %v", err)
			}
		}
		if slices.Contains(iam.log, "Create") || len(iam.profiles) > 1 {
			t.Errorf("calls %v, profiles %s", iam.log, iam.state())
		}
	})

	for _, tc := range []struct {
		entry, want string
		segments    []string
	}{
		{"no segments", "/", nil},
		{"single segment", "/eks/", []string{"eks"}},
		{"two segments", "/eks/us-west-2/", []string{"eks", "us-west-2"}},
		{"three segments", "/karpenter/us-west-2/my-cluster/", []string{"karpenter", "us-west-2", "my-cluster"}},
		{"four segments", "/karpenter/us-west-2/my-cluster/uid/", []string{"karpenter", "us-west-2", "my-cluster", "uid"}},
	} {
		conformance.Run(t, conformance.Case{Suite: "aws/providers/instanceprofile", File: "pkg/providers/instanceprofile/suite_test.go",
			Spec: "FormatPath > should format IAM paths > " + tc.entry}, func(t *testing.T) {
			if got := FormatPath(tc.segments...); got != tc.want {
				t.Errorf("FormatPath(%q) = %q, want %q", tc.segments, got, tc.want)
			}
		})
	}
	if InstanceProfilePathPrefix("us-west-2", "my-cluster") != "/karpenter/us-west-2/my-cluster/" || InstanceProfilePath("us-west-2", "my-cluster", "uid") != "/karpenter/us-west-2/my-cluster/uid/" {
		t.Error("managed profile paths are not Karpenter's")
	}
}
