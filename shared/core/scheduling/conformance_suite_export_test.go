package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
)

// The conformance fixture (conformance_fixture_test.go), exported for the
// ported cases of package scheduling_test: those that go through
// shared/core/planning (a cluster of NodeClaims, Nodes and pods turned into
// a Snapshot), which imports this package and so cannot be imported by its
// internal tests.

const (
	FakeZone1, FakeZone2, FakeZone3 = fakeZone1, fakeZone2, fakeZone3
	FakeVendorA                     = fakeVendorA
)

// FakeTypes is fake.NewCloudProvider's default instance types.
func FakeTypes() []*InstanceType { return fakeTypes() }

// FakeType is fake.NewInstanceType with the resources given (kv pairs), on
// arch (amd64 if "") and, when given, only the offerings given.
func FakeType(name, arch string, resources corev1.ResourceList, offerings ...Offering) *InstanceType {
	return fakeType(name, fakeTypeOpts{resources: resources, arch: arch, offerings: offerings})
}

// FakeOffer is an available offering.
func FakeOffer(ct, zone string, price float64) Offering { return fakeOffer(ct, zone, price) }

// FakePrice is fake.PriceFromResources.
func FakePrice(r corev1.ResourceList) float64 { return fakePrice(r) }

// FakePool is the scheduling suite's NodePool, named name.
func FakePool(name string, opts ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := fakePool()
	for _, o := range opts {
		o(np)
	}
	np.Name = name
	return np
}

// FakePod is test.UnschedulablePod.
func FakePod(opts ...func(*corev1.Pod)) *corev1.Pod {
	p := fakePod()
	for _, o := range opts {
		o(p)
	}
	return p
}

// RL is a resource list from name, quantity pairs.
func RL(kv ...string) corev1.ResourceList { return rl(kv...) }

// CheckInvariants checks what every solve must keep.
func CheckInvariants(t *testing.T, s *Snapshot, r *Results) { t.Helper(); checkInvariants(t, s, r) }

// Pod and NodePool options of the fixture.
var (
	Requests         = requests
	NodeRequirements = nodeRequirements
	NodePreferences  = nodePreferences
	NodeSelector     = nodeSelector
	PodLabels        = podLabels
	PodAffinity      = podAffinity
	PodAntiAffinity  = podAntiAffinity
	Spread           = spread
	HostPort         = hostPortOpt
	Expr             = expr
	WithReqs         = withReqs
	WithReq          = withReq
	WithWeight       = withWeight
	NPReq            = npReq
)
