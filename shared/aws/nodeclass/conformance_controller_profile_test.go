package nodeclass

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's instance profile status controller
// (pkg/controllers/nodeclass/instanceprofile_test.go) and the EC2NodeClass
// termination cases of its suite_test.go, through Resolve (the status
// controller) and Finalization plus DeleteManagedInstanceProfiles (the
// finalizer's decision and its IAM step; its launch template step is
// ported beside launchtemplate.Provider.DeleteForNodeClass).

// Differs texts shared by several cases.
const (
	differsProtection = "Karpless keeps no in-memory protection of instance profiles: Karpenter marks a profile it just made or just stopped using as protected so that its garbage collection, which may run before its informer sees the new status or NodeClaim, does not delete it; Karpless does not collect a class's profiles while the class exists (they go with the class), so there is nothing to protect them from"
	differsRecreation = "Karpless keeps no recreation cache of instance profile names: the profile of a role is named from the cluster, region, class UID and role, so a resolution after a lost status write finds the same profile by name; a profile named only in Karpenter's process memory (its cache) is not found, and Karpless makes its own profile for the role, one more profile in IAM until the class is deleted"
)

// profileOf is the IAM profile status.instanceProfile names.
func profileOf(e *ctrlEnv, nc *awsv1.EC2NodeClass) *iamtypes.InstanceProfile {
	return e.iam.profiles[nc.Status.InstanceProfile]
}

func roleOf(p *iamtypes.InstanceProfile) string {
	if p == nil || len(p.Roles) != 1 {
		return ""
	}
	return aws.ToString(p.Roles[0].RoleName)
}

func seedProfile(e *ctrlEnv, name string, roles ...string) {
	p := &iamtypes.InstanceProfile{InstanceProfileName: aws.String(name), InstanceProfileId: aws.String("AIPA" + name)}
	for _, r := range roles {
		p.Roles = append(p.Roles, iamtypes.Role{RoleName: aws.String(r)})
	}
	e.iam.profiles[name] = p
}

func calls(e *ctrlEnv, op string) int {
	n := 0
	for _, o := range e.iam.log {
		if o == op {
			n++
		}
	}
	return n
}

func TestConformanceNodeClassInstanceProfiles(t *testing.T) {
	run := func(spec, differs string, body func(t *testing.T)) {
		c := ctrlCase("instanceprofile_test.go", "NodeClass InstanceProfile Status Controller > "+spec)
		c.Differs = differs
		conformance.Run(t, c, body)
	}
	setup := func(role string) (*ctrlEnv, *awsv1.EC2NodeClass) {
		e := newCtrlEnv()
		nc := statusClass()
		nc.Spec.Role = role
		return e, nc
	}
	// hasRole expects the profile in status to hold role, and the
	// condition true.
	hasRole := func(t *testing.T, e *ctrlEnv, nc *awsv1.EC2NodeClass, role string) {
		t.Helper()
		if got := roleOf(profileOf(e, nc)); got != role {
			t.Errorf("profile %q holds %q, want %q:\n%s", nc.Status.InstanceProfile, got, role, e.iam.state())
		}
		expectCond(t, nc, awsv1.ConditionTypeInstanceProfileReady, metav1.ConditionTrue)
	}
	profiles := func(t *testing.T, e *ctrlEnv, n int) {
		t.Helper()
		if len(e.iam.profiles) != n {
			t.Errorf("%d profiles, want %d:\n%s", len(e.iam.profiles), n, e.iam.state())
		}
	}
	hasTags := func(t *testing.T, p *iamtypes.InstanceProfile, want map[string]string) {
		t.Helper()
		got := map[string]string{}
		for _, tag := range p.Tags {
			got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("tag %s = %q, want %q (tags %v)", k, got[k], v, got)
			}
		}
	}
	run("should create the instance profile when it doesn't exist", "", func(t *testing.T) {
		e, nc := setup("role-A")
		e.mustReconcile(t, nc)
		profiles(t, e, 1)
		hasRole(t, e, nc, "role-A")
		if p := profileOf(e, nc); p != nil {
			hasTags(t, p, map[string]string{"kubernetes.io/cluster/c1": "owned", wellknown.EC2NodeClassTagKey: nc.Name, wellknown.EKSClusterNameTagKey: "c1"})
		}
	})
	run("should delete all the instance profiles from cache when the nodeClass is deleted", "", func(t *testing.T) {
		// Karpless keeps no cache of profiles; what the case asks of IAM
		// is that the three profiles of the class's roles go with it.
		e, nc := setup("role-A")
		for _, role := range []string{"role-A", "role-B", "role-C"} {
			nc.Spec.Role = role
			e.mustReconcile(t, nc)
		}
		profiles(t, e, 3)
		expectCond(t, nc, awsv1.ConditionTypeInstanceProfileReady, metav1.ConditionTrue)
		deleteClass(t, e, nc, nil)
		profiles(t, e, 0)
	})
	run("should add the role to the instance profile when it exists without a role", "", func(t *testing.T) {
		e, nc := setup("role-A")
		seedProfile(e, "profile-A")
		nc.Status.InstanceProfile = "profile-A"
		e.mustReconcile(t, nc)
		profiles(t, e, 2)
		hasRole(t, e, nc, "role-A")
	})
	run("should update the role for the instance profile when the wrong role exists", "", func(t *testing.T) {
		e, nc := setup("other-role")
		seedProfile(e, "profile-A", "role-A")
		nc.Status.InstanceProfile = "profile-A"
		e.mustReconcile(t, nc)
		profiles(t, e, 2)
		hasRole(t, e, nc, "other-role")
	})
	run("should not call CreateInstanceProfile or AddRoleToInstanceProfile when instance profile exists with correct role",
		"Karpless does not adopt a profile its status names (profile-A, made by Karpenter with a random name): it uses the profile named from the class UID and role, creating it once, so a class Karpless takes over from Karpenter gets one more instance profile (same role, so the same node credentials); nodes launched before keep theirs, and Karpenter's profile is deleted with the class", func(*testing.T) {})
	withProfile := func(t *testing.T) (*ctrlEnv, *awsv1.EC2NodeClass) {
		// Karpenter's fake IAM answers for any profile; Karpless checks
		// that the user's profile exists and holds a role, so the user's
		// profile is in the account.
		e, nc := setup("")
		nc.Spec.InstanceProfile = aws.String("test-instance-profile")
		seedProfile(e, "test-instance-profile", "fake-role")
		return e, nc
	}
	run("should resolve the specified instance profile into the status when using instanceProfile field", "", func(t *testing.T) {
		e, nc := withProfile(t)
		e.mustReconcile(t, nc)
		if nc.Status.InstanceProfile != "test-instance-profile" {
			t.Errorf("instance profile %q", nc.Status.InstanceProfile)
		}
		expectCond(t, nc, awsv1.ConditionTypeInstanceProfileReady, metav1.ConditionTrue)
	})
	run("should not call the the IAM API when specifying an instance profile", "", func(t *testing.T) {
		e, nc := withProfile(t)
		e.mustReconcile(t, nc)
		if calls(e, "Create")+calls(e, "AddRole") != 0 {
			t.Errorf("IAM calls %v", e.iam.log)
		}
		expectCond(t, nc, awsv1.ConditionTypeInstanceProfileReady, metav1.ConditionTrue)
	})
	run("should create a new instance profile when spec.role changes", "", func(t *testing.T) {
		e, nc := setup("role-A")
		e.mustReconcile(t, nc)
		first := nc.Status.InstanceProfile
		profiles(t, e, 1)
		hasRole(t, e, nc, "role-A")
		nc.Spec.Role = "role-B"
		e.mustReconcile(t, nc)
		profiles(t, e, 2)
		if nc.Status.InstanceProfile == first {
			t.Error("the profile did not change with the role")
		}
		hasRole(t, e, nc, "role-B")
	})
	run("should mark new instance profile as protected", differsProtection, func(*testing.T) {})
	run("should mark old instance profile as protected", differsProtection, func(*testing.T) {})
	run("should use the cached instance profile when spec.role is changed", differsRecreation, func(*testing.T) {})
	run("should not use the cached instance profile if it was for a different role", "", func(t *testing.T) {
		e, nc := setup("role-A")
		seedProfile(e, "cached-profile", "role-B")
		e.mustReconcile(t, nc)
		if nc.Status.InstanceProfile == "cached-profile" {
			t.Error("used the other role's profile")
		}
		profiles(t, e, 2)
	})
	run("should not use the cached instance profile if it was for a different nodeclass", "", func(t *testing.T) {
		e, nc := setup("role-A")
		seedProfile(e, "cached-profile", "role-A")
		other := statusClass()
		other.UID = "different-uid"
		other.Spec.Role = "role-A"
		if InstanceProfileName("c1", "eu-west-1", string(other.UID), "role-A") == InstanceProfileName("c1", "eu-west-1", string(nc.UID), "role-A") {
			t.Fatal("two classes share a profile name")
		}
		e.mustReconcile(t, nc)
		if nc.Status.InstanceProfile == "cached-profile" {
			t.Error("used another class's profile")
		}
		profiles(t, e, 2)
	})
	run("should update the cache when a new instance profile is created", "", func(t *testing.T) {
		// The cache is there so that a reconcile after a lost status
		// write does not make a second profile; Karpless's derived name
		// gives the same.
		e, nc := setup("role-A")
		e.mustReconcile(t, nc)
		made := nc.Status.InstanceProfile
		nc.Status = awsv1.EC2NodeClassStatus{} // the status write was lost
		e.mustReconcile(t, nc)
		if nc.Status.InstanceProfile != made {
			t.Errorf("profile %q, then %q", made, nc.Status.InstanceProfile)
		}
		profiles(t, e, 1)
	})
	run("should mark old instance profile as protected when switching from spec.role to spec.instanceProfile", differsProtection, func(*testing.T) {})
	run("should allow different NodeClasses with same role to create instance profiles independently", "", func(t *testing.T) {
		e, one := setup("role-A")
		e.mustReconcile(t, one)
		two := statusClass()
		two.Name, two.UID, two.Spec.Role = "second", types.UID("second-uid"), "role-A"
		e.mustReconcile(t, two)
		if one.Status.InstanceProfile == two.Status.InstanceProfile {
			t.Errorf("both classes use %q", one.Status.InstanceProfile)
		}
		profiles(t, e, 2)
		hasRole(t, e, one, "role-A")
		hasRole(t, e, two, "role-A")
	})
	run("should handle multiple role transitions",
		"going back to a role the class used before reuses the class's profile of that role (its name is derived from the class UID and role), where Karpenter, its recreation cache expired, makes a fourth profile with a new random name; the nodes get the same role either way, and IAM holds one profile fewer", func(*testing.T) {})
	run("should return error on transient failures getting instance profile", "", func(t *testing.T) {
		e, nc := setup("role-A")
		seedProfile(e, "profile-A", "role-A")
		nc.Status.InstanceProfile = "profile-A"
		nc.Spec.Role = "role-B"
		e.iam.getErr = &transientErr{msg: "simulated transient error"}
		err := e.reconcile(nc)
		if err == nil || !strings.Contains(err.Error(), "getting instance profile") || !strings.Contains(err.Error(), "simulated transient error") {
			t.Errorf("err = %v", err)
		}
		profiles(t, e, 1)
	})
	run("should properly tag new instance profiles", "", func(t *testing.T) {
		e, nc := setup("role-A")
		e.mustReconcile(t, nc)
		profiles(t, e, 1)
		if p := profileOf(e, nc); p != nil {
			hasTags(t, p, map[string]string{"kubernetes.io/cluster/c1": "owned", wellknown.EC2NodeClassTagKey: nc.Name,
				wellknown.EKSClusterNameTagKey: "c1", "topology.kubernetes.io/region": "eu-west-1"})
		}
		hasRole(t, e, nc, "role-A")
	})
	run("should attempt to delete the instance profile if there was a creation failure",
		"when adding the role to a new profile fails, Karpless leaves the profile for the next resolution to finish (its name is derived from the class and role, so there is never a second one), where Karpenter, whose names are random, deletes it so that retries do not pile up profiles; the class's InstanceProfileReady stays as it was and the error is reported either way", func(*testing.T) {})
}

// transientErr is an error that is neither an AWS "not found" nor a
// denial: a transient failure.
type transientErr struct{ msg string }

func (e *transientErr) Error() string { return e.msg }

// deleteClass runs Karpless's finalizer on nc, deleted, with claims: it
// expects the cleanup step (no claim of it left) and runs its IAM part.
func deleteClass(t *testing.T, e *ctrlEnv, nc *awsv1.EC2NodeClass, claims []*karpv1.NodeClaim) {
	t.Helper()
	deleting(nc)
	if step, waiting := Finalization(nc, claims); step != FinalizerCleanUp {
		t.Fatalf("finalizer step %s (waiting for %v), want cleanup", step, waiting)
	}
	if _, _, err := e.resolver().DeleteManagedInstanceProfiles(context.Background(), e.cluster.Name, nc, false); err != nil {
		t.Fatal(err)
	}
}

func deleting(nc *awsv1.EC2NodeClass) {
	now := metav1.NewTime(testNow)
	nc.DeletionTimestamp = &now
	if !slices.Contains(nc.Finalizers, wellknown.AWSTerminationFinalizer) {
		nc.Finalizers = append(nc.Finalizers, wellknown.AWSTerminationFinalizer)
	}
}

func TestConformanceNodeClassTermination(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, ctrlCase("suite_test.go", "NodeClass Termination > "+spec), body)
	}
	ctx := context.Background()
	setup := func() (*ctrlEnv, *awsv1.EC2NodeClass) {
		e := newCtrlEnv()
		nc := customClass()
		nc.Spec.Role = "test-role"
		return e, nc
	}
	run("should succeed to delete the instance profile with no NodeClaims", func(t *testing.T) {
		e, nc := setup()
		e.mustReconcile(t, nc)
		if len(e.iam.profiles) != 1 || roleOf(profileOf(e, nc)) != "test-role" {
			t.Fatalf("profiles:\n%s", e.iam.state())
		}
		deleteClass(t, e, nc, nil)
		if len(e.iam.profiles) != 0 {
			t.Errorf("profiles left:\n%s", e.iam.state())
		}
	})
	run("should succeed to delete the instance profile when no roles exist with no NodeClaims", func(t *testing.T) {
		e, nc := setup()
		e.mustReconcile(t, nc)
		profileOf(e, nc).Roles = nil
		deleteClass(t, e, nc, nil)
		if len(e.iam.profiles) != 0 {
			t.Errorf("profiles left:\n%s", e.iam.state())
		}
	})
	run("should succeed to delete the NodeClass when the instance profile doesn't exist", func(t *testing.T) {
		e, nc := setup()
		deleteClass(t, e, nc, nil)
		if len(e.iam.profiles) != 0 {
			t.Errorf("profiles:\n%s", e.iam.state())
		}
	})
	run("should succeed to delete both legacy and current instance profiles if the NodeClass is deleted", func(t *testing.T) {
		e, nc := setup()
		// Karpenter v0.32-v1.0 made the legacy profile tagged as its
		// cluster's; Karpless deletes only a legacy profile so tagged.
		legacy := LegacyInstanceProfileName("c1", "eu-west-1", nc.Name)
		seedProfile(e, legacy, "fake-role")
		e.iam.profiles[legacy].Tags = iamTags(map[string]string{"kubernetes.io/cluster/c1": "owned"})
		e.mustReconcile(t, nc)
		if len(e.iam.profiles) != 2 {
			t.Fatalf("profiles:\n%s", e.iam.state())
		}
		deleteClass(t, e, nc, nil)
		if len(e.iam.profiles) != 0 {
			t.Errorf("profiles left:\n%s", e.iam.state())
		}
	})
	run("should not delete the EC2NodeClass until all associated NodeClaims are terminated", func(t *testing.T) {
		e, nc := setup()
		e.mustReconcile(t, nc)
		claim := func(name string) *karpv1.NodeClaim {
			return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}}}
		}
		claims := []*karpv1.NodeClaim{claim("a"), claim("b")}
		deleting(nc)
		for len(claims) > 0 {
			if step, waiting := Finalization(nc, claims); step != FinalizerWait || len(waiting) != len(claims) {
				t.Fatalf("step %s waiting for %v with %d claims", step, waiting, len(claims))
			}
			if len(e.iam.profiles) != 1 {
				t.Fatalf("profiles:\n%s", e.iam.state())
			}
			claims = claims[1:]
		}
		deleteClass(t, e, nc, claims)
		if len(e.iam.profiles) != 0 {
			t.Errorf("profiles left:\n%s", e.iam.state())
		}
	})
	run("should not call the IAM API when deleting a NodeClass with an instanceProfile specified", func(t *testing.T) {
		e, nc := setup()
		seedProfile(e, "test-instance-profile", "fake-role")
		nc.Spec.Role = ""
		nc.Spec.InstanceProfile = aws.String("test-instance-profile")
		e.mustReconcile(t, nc)
		deleteClass(t, e, nc, nil)
		if len(e.iam.profiles) != 1 || calls(e, "Delete")+calls(e, "RemoveRole") != 0 {
			t.Errorf("IAM calls %v, profiles:\n%s", e.iam.log, e.iam.state())
		}
	})
	run("should skip legacy instance profile cleanup when the synthesized name is not IAM-valid", func(t *testing.T) {
		e, nc := setup()
		e.cluster.Name = "aws:12345678910:eu-central-1:kubernetes"
		nc.Spec.Role = ""
		nc.Spec.InstanceProfile = aws.String("test-instance-profile")
		seedProfile(e, "test-instance-profile", "fake-role")
		e.mustReconcile(t, nc)
		e.iam.log = nil
		deleteClass(t, e, nc, nil)
		if calls(e, "Get")+calls(e, "Delete")+calls(e, "RemoveRole") != 0 {
			t.Errorf("IAM calls %v", e.iam.log)
		}
	})
	run("should skip instance profile cleanup in isolated VPCs", func(t *testing.T) {
		e, nc := setup()
		e.mustReconcile(t, nc)
		if len(e.iam.profiles) != 1 {
			t.Fatalf("profiles:\n%s", e.iam.state())
		}
		deleting(nc)
		if step, _ := Finalization(nc, nil); step != FinalizerCleanUp {
			t.Fatalf("step %s", step)
		}
		e.iam.log = nil
		if _, _, err := e.resolver().DeleteManagedInstanceProfiles(ctx, "c1", nc, true); err != nil {
			t.Fatal(err)
		}
		if len(e.iam.log) != 0 || len(e.iam.profiles) != 1 {
			t.Errorf("IAM calls %v, profiles:\n%s", e.iam.log, e.iam.state())
		}
	})
}
