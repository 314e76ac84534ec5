package wellknown

import "testing"

func TestIsRestrictedLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"karpenter.sh/capacity-type":          false,
		"karpenter.sh/nodepool":               true,
		"karpenter.sh/anything":               true,
		"sub.karpenter.sh/anything":           true,
		"kubernetes.io/hostname":              true,
		"karpenter.k8s.aws/instance-family":   false,
		"karpenter.k8s.aws/instance-anything": true,
		"topology.kubernetes.io/zone":         false,
		"team":                                false,
		"example.com/team":                    false,
	} {
		if got := IsRestrictedLabel(key); got != want {
			t.Errorf("IsRestrictedLabel(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestProviderID(t *testing.T) {
	id := ProviderID("us-west-2a", "i-0123456789abcdef0")
	if id != "aws:///us-west-2a/i-0123456789abcdef0" {
		t.Fatalf("ProviderID = %s", id)
	}
	for in, want := range map[string]string{
		id:                            "i-0123456789abcdef0",
		"aws:///i-0123456789abcdef0":  "i-0123456789abcdef0",
		"kind://docker/node":          "",
		"aws:///us-west-2a/not-an-id": "",
		"":                            "",
	} {
		if got := InstanceIDFromProviderID(in); got != want {
			t.Errorf("InstanceIDFromProviderID(%q) = %q, want %q", in, got, want)
		}
	}
	if ClusterTagKey("demo") != "kubernetes.io/cluster/demo" {
		t.Error("ClusterTagKey")
	}
}
