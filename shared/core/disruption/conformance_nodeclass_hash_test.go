package disruption

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's EC2NodeClass hash controller
// (aws/karpenter-provider-aws pkg/controllers/nodeclass/hash/suite_test.go),
// its cases on NodeClaims, through StatusChanges: the disruption tick
// re-stamps a claim whose ec2nodeclass-hash-version differs from its
// class's with the class's hash and version, as the hash controller does
// when the version changes. The class carries what the provisioning tick
// stamped on it (nodeclass.Apply): its hash and version.
func TestConformanceNodeClassHashNodeClaims(t *testing.T) {
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/nodeclass/hash", File: "pkg/controllers/nodeclass/hash/suite_test.go",
			Spec: "NodeClass Hash Controller > " + spec}, body)
	}
	const classHash, classVersion = "111", "karpless-v1" // the fixture's class
	claim := func(f *fixture, name, hash, version string) *karpv1.NodeClaim {
		nc := f.node(name, "m.xlarge", "test-1a", "on-demand")
		nc.Annotations[wellknown.EC2NodeClassHashAnnotation] = hash
		nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] = version
		return nc
	}
	// stamped is what the claim's annotations become: the tick patches
	// the changed ones.
	stamped := func(t *testing.T, f *fixture, nc *karpv1.NodeClaim) (string, string) {
		t.Helper()
		hash, version := nc.Annotations[wellknown.EC2NodeClassHashAnnotation], nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation]
		if ch := changeOf(t, f, nc.Name); ch != nil {
			if v, ok := ch.Annotations[wellknown.EC2NodeClassHashAnnotation]; ok {
				hash = v
			}
			if v, ok := ch.Annotations[wellknown.EC2NodeClassHashVersionAnnotation]; ok {
				version = v
			}
		}
		return hash, version
	}
	run("should update ec2nodeclass-hash-versions on all NodeClaims when the ec2nodeclass-hash-version does not match with the controller hash version", func(t *testing.T) {
		f := newFixture(t)
		one, two := claim(f, "one", "123456", "test"), claim(f, "two", "123456", "test")
		for _, nc := range []*karpv1.NodeClaim{one, two} {
			if h, v := stamped(t, f, nc); h != classHash || v != classVersion {
				t.Errorf("%s: hash %q version %q, want %q %q", nc.Name, h, v, classHash, classVersion)
			}
		}
	})
	run("should not update ec2nodeclass-hash on all NodeClaims when the ec2nodeclass-hash-version matches the controller hash version", func(t *testing.T) {
		f := newFixture(t)
		nc := claim(f, "one", "1234564654", classVersion)
		if h, v := stamped(t, f, nc); h != "1234564654" || v != classVersion {
			t.Errorf("hash %q version %q", h, v)
		}
	})
	run("should not update ec2nodeclass-hash on the NodeClaim if it's drifted and the ec2nodeclass-hash-version does not match the controller hash version", func(t *testing.T) {
		f := newFixture(t)
		nc := claim(f, "one", "123456", "test")
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: NodeClassDrift})
		if h, v := stamped(t, f, nc); h != "123456" || v != classVersion {
			t.Errorf("hash %q version %q, want the old hash under the new version", h, v)
		}
	})
}
