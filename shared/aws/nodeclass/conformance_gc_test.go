package nodeclass

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's instance profile garbage collection
// (pkg/controllers/nodeclass/garbagecollection/suite_test.go). Karpless
// collects no instance profile while its EC2NodeClass exists: the profiles
// of a class go with the class (its finalizer deletes every profile under
// the class's IAM path). The cases that keep a profile are ported through
// what Karpless does to IAM over a class's life, resolution after
// resolution (role changes included); the cases that delete are
// differences.
const differsNoProfileGC = "Karpless does not garbage-collect instance profiles while their EC2NodeClass exists: a profile left by a role change stays in IAM until the class is deleted, when the finalizer deletes every profile under the class's IAM path (Karpless does not record on NodeClaims which profile their instance uses, so it cannot tell an unused profile from one a running node still needs); IAM profiles cost nothing"

func TestConformanceNodeClassProfileGC(t *testing.T) {
	run := func(spec, differs string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/nodeclass/garbagecollection", File: "pkg/controllers/nodeclass/garbagecollection/suite_test.go",
			Spec: "Instance Profile GarbageCollection > " + spec, Differs: differs}, body)
	}
	// kept seeds profile-A (role-A) under the class's IAM path, makes it
	// the class's status profile when current, resolves the class through
	// two role changes, and expects profile-A untouched.
	kept := func(current bool) func(t *testing.T) {
		return func(t *testing.T) {
			e := newCtrlEnv()
			nc := statusClass()
			seedProfile(e, "profile-A", "role-A")
			e.iam.profiles["profile-A"].Path = aws.String(InstanceProfilePath("eu-west-1", "c1", string(nc.UID)))
			if current {
				nc.Status.InstanceProfile = "profile-A"
			}
			for _, role := range []string{"role-B", "role-C"} {
				nc.Spec.Role = role
				e.mustReconcile(t, nc)
			}
			if p := e.iam.profiles["profile-A"]; p == nil || roleOf(p) != "role-A" || calls(e, "Delete")+calls(e, "RemoveRole") != 0 {
				t.Errorf("profile-A touched: IAM calls %v\n%s", e.iam.log, e.iam.state())
			}
		}
	}
	// Active: a NodeClaim's instance runs with profile-A (Karpenter's
	// annotation karpenter.k8s.aws/instance-profile-name).
	run("should not delete active profiles", "", kept(false))
	run("should not delete current profiles", "", kept(true))
	// Protected: profile-A was just made or just left.
	run("should not delete protected profiles", "", kept(false))
	run("should delete inactive profiles which are not current or protected", differsNoProfileGC, func(*testing.T) {})
	run("should requeue after 30 minutes for a successful run", differsNoProfileGC, func(*testing.T) {})
	run("should requeue immediately on deletion failure", differsNoProfileGC, func(*testing.T) {})
}
