package nodeclass

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's EC2NodeClass hash controller
// (pkg/controllers/nodeclass/hash/suite_test.go), its cases on the class's
// own annotations, through Apply, which stamps them each time the tick
// writes a resolved status. Its cases on NodeClaims are ported beside the
// disruption tick's StatusChanges, which re-stamps them.
func TestConformanceNodeClassHash(t *testing.T) {
	ctx := context.Background()
	run := func(spec string, body func(t *testing.T)) {
		conformance.Run(t, conformance.Case{Suite: "aws/controllers/nodeclass/hash", File: "pkg/controllers/nodeclass/hash/suite_test.go",
			Spec: "NodeClass Hash Controller > " + spec}, body)
	}
	const ca = "Y2E="
	// apply writes the class's status as the tick does, with the cluster's
	// CA bundle, and returns the class as stored.
	apply := func(t *testing.T, c *fakeClient, nc *awsv1.EC2NodeClass, caBundle string) *awsv1.EC2NodeClass {
		t.Helper()
		c.obj = nc.DeepCopy()
		out, err := Apply(ctx, c, nc, nc.Status, caBundle, testNow)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	hashOf := func(nc *awsv1.EC2NodeClass) string { return nc.Annotations[wellknown.EC2NodeClassHashAnnotation] }
	for _, tc := range []struct {
		entry string
		edit  func(*awsv1.EC2NodeClassSpec)
	}{
		{"UserData Drift", func(s *awsv1.EC2NodeClassSpec) { s.UserData = aws.String("userdata-test-2") }},
		{"Tags Drift", func(s *awsv1.EC2NodeClassSpec) { s.Tags = map[string]string{"keyTag-test-3": "valueTag-test-3"} }},
		{"BlockDeviceMappings Drift", func(s *awsv1.EC2NodeClassSpec) {
			s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: aws.String("map-device-test-3")}}
		}},
		{"DetailedMonitoring Drift", func(s *awsv1.EC2NodeClassSpec) { s.DetailedMonitoring = aws.Bool(true) }},
		{"MetadataOptions Drift", func(s *awsv1.EC2NodeClassSpec) {
			s.MetadataOptions = &awsv1.MetadataOptions{HTTPEndpoint: aws.String("disabled")}
		}},
		{"Context Drift", func(s *awsv1.EC2NodeClassSpec) { s.Context = aws.String("context-2") }},
		{"CPUOptions Drift", func(s *awsv1.EC2NodeClassSpec) {
			s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: aws.String("enabled")}
		}},
	} {
		run("should update the drift hash when static field is updated > "+tc.entry, func(t *testing.T) {
			c := &fakeClient{}
			nc := apply(t, c, customClass(), ca)
			first := hashOf(nc)
			if first != Hash(nc, ca) {
				t.Fatalf("hash %q, want %q", first, Hash(nc, ca))
			}
			tc.edit(&nc.Spec)
			nc = apply(t, c, nc, ca)
			if hashOf(nc) != Hash(nc, ca) || hashOf(nc) == first {
				t.Errorf("hash %q after the edit (was %q, want %q)", hashOf(nc), first, Hash(nc, ca))
			}
		})
	}
	run("should update the drift hash when the CA bundle changes", func(t *testing.T) {
		c := &fakeClient{}
		nc := apply(t, c, customClass(), ca)
		first := hashOf(nc)
		nc = apply(t, c, nc, "bmV3LWNhLWJ1bmRsZQ==")
		if hashOf(nc) != Hash(nc, "bmV3LWNhLWJ1bmRsZQ==") || hashOf(nc) == first {
			t.Errorf("hash %q after the CA changed (was %q)", hashOf(nc), first)
		}
	})
	run("should not update the drift hash when dynamic field is updated", func(t *testing.T) {
		c := &fakeClient{}
		nc := apply(t, c, customClass(), ca)
		first := hashOf(nc)
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-test1"}}
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-test1"}}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"ami-test-key": "ami-test-value"}}}
		nc = apply(t, c, nc, ca)
		if hashOf(nc) != first {
			t.Errorf("hash %q, was %q", hashOf(nc), first)
		}
	})
	run("should update ec2nodeclass-hash-version annotation when the ec2nodeclass-hash-version on the NodeClass does not match with the controller hash version", func(t *testing.T) {
		nc := customClass()
		nc.Annotations = map[string]string{wellknown.EC2NodeClassHashAnnotation: "abceduefed", wellknown.EC2NodeClassHashVersionAnnotation: "test"}
		nc = apply(t, &fakeClient{}, nc, ca)
		if hashOf(nc) != Hash(nc, ca) || nc.Annotations[wellknown.EC2NodeClassHashVersionAnnotation] != HashVersion {
			t.Errorf("annotations %v, want hash %s version %s", nc.Annotations, Hash(nc, ca), HashVersion)
		}
	})
}

// TestHashCABundleWhitespace: the same CA, base64 wrapped or not, is the
// same hash, so a change of where the CA is read from drifts no node.
func TestHashCABundleWhitespace(t *testing.T) {
	if Hash(customClass(), "Y2Fj\nYWM=\n") != Hash(customClass(), "Y2FjYWM=") {
		t.Error("a wrapped CA bundle changes the hash")
	}
	if Hash(customClass(), "Y2FjYWM=") == Hash(customClass(), "") {
		t.Error("the CA bundle does not change the hash")
	}
}
