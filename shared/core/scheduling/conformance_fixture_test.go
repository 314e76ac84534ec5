package scheduling

import (
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Karpenter v1.14.1's fake cloud provider (pkg/cloudprovider/fake), as the
// ported cases of its scheduling suites see it, in Karpless's inputs.
//
// The fake's own instance labels, which its suites register as well-known,
// are AWS labels of the same kind here: an instance type's size, an
// "exotic" label only large types carry, and its CPU count.
const (
	fakeSizeKey    = wellknown.InstanceSizeLabel       // fake.LabelInstanceSize
	fakeExoticKey  = wellknown.InstanceHypervisorLabel // fake.ExoticInstanceLabelKey
	fakeIntegerKey = wellknown.InstanceCPULabel        // fake.IntegerInstanceLabelKey

	fakeZone1, fakeZone2, fakeZone3 = "test-zone-1", "test-zone-2", "test-zone-3"

	fakeVendorA = "fake.com/vendor-a"
	fakeVendorB = "fake.com/vendor-b"
)

// fakeTypeOpts are fake.NewInstanceType's options.
type fakeTypeOpts struct {
	resources corev1.ResourceList
	arch      string
	offerings []Offering
}

// fakeOffer is an available offering.
func fakeOffer(ct, zone string, price float64) Offering {
	return Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
}

// fakePrice is fake.PriceFromResources: 0.1 per CPU and per GB of memory,
// 1 per GPU of the fake vendors.
func fakePrice(r corev1.ResourceList) float64 {
	p := 0.0
	for k, v := range r {
		switch k {
		case corev1.ResourceCPU:
			p += 0.1 * v.AsApproximateFloat64()
		case corev1.ResourceMemory:
			p += 0.1 * v.AsApproximateFloat64() / 1e9
		case fakeVendorA, fakeVendorB:
			p += 1.0
		}
	}
	return p
}

// fakeType is fake.NewInstanceType: 4 CPU, 4Gi and 5 pods unless told,
// spot in zones 1 and 2 and on-demand in all three at a price by its
// resources, kube-reserved 100m CPU and 10Mi taken from its allocatable.
// Its operating system is linux (the fake's types list several, which a
// Karpless type cannot).
func fakeType(name string, o fakeTypeOpts) *InstanceType {
	capacity := corev1.ResourceList{}
	maps.Copy(capacity, o.resources)
	defaults := map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "4Gi", corev1.ResourcePods: "5"}
	for k, v := range defaults {
		if q := capacity[k]; q.IsZero() {
			capacity[k] = resource.MustParse(v)
		}
	}
	if o.arch == "" {
		o.arch = "amd64"
	}
	if o.offerings == nil {
		price := fakePrice(capacity)
		o.offerings = []Offering{
			fakeOffer(wellknown.CapacityTypeSpot, fakeZone1, price),
			fakeOffer(wellknown.CapacityTypeSpot, fakeZone2, price),
			fakeOffer(wellknown.CapacityTypeOnDemand, fakeZone1, price),
			fakeOffer(wellknown.CapacityTypeOnDemand, fakeZone2, price),
			fakeOffer(wellknown.CapacityTypeOnDemand, fakeZone3, price),
		}
	}
	cpu, mem := capacity[corev1.ResourceCPU], capacity[corev1.ResourceMemory]
	labels := map[string]string{
		wellknown.InstanceTypeLabel: name,
		wellknown.ArchLabel:         o.arch,
		wellknown.OSLabel:           "linux",
		fakeIntegerKey:              fmt.Sprint(cpu.Value()),
		fakeSizeKey:                 "small",
	}
	if cpu.Cmp(resource.MustParse("4")) > 0 && mem.Cmp(resource.MustParse("8Gi")) > 0 {
		labels[fakeSizeKey] = "large"
		labels[fakeExoticKey] = "optional"
	}
	alloc := capacity.DeepCopy()
	for k, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: "100m", corev1.ResourceMemory: "10Mi"} {
		q := alloc[k]
		q.Sub(resource.MustParse(v))
		alloc[k] = q
	}
	return &InstanceType{Name: name, Labels: labels, Capacity: capacity, Allocatable: alloc, Offerings: o.offerings}
}

// fakeTypes are the fake cloud provider's default instance types.
func fakeTypes() []*InstanceType {
	return []*InstanceType{
		fakeType("default-instance-type", fakeTypeOpts{}),
		fakeType("small-instance-type", fakeTypeOpts{resources: rl("cpu", "2", "memory", "2Gi")}),
		fakeType("gpu-vendor-instance-type", fakeTypeOpts{resources: rl(fakeVendorA, "2")}),
		fakeType("gpu-vendor-b-instance-type", fakeTypeOpts{resources: rl(fakeVendorB, "2")}),
		fakeType("arm-instance-type", fakeTypeOpts{arch: "arm64", resources: rl("cpu", "16", "memory", "128Gi")}),
		fakeType("single-pod-instance-type", fakeTypeOpts{resources: rl("pods", "1")}),
	}
}

// fakeInstanceTypes is fake.InstanceTypes(n): fake-it-i with i+1 CPU,
// 2(i+1)Gi and 10(i+1) pods.
func fakeInstanceTypes(n int) []*InstanceType {
	var out []*InstanceType
	for i := 0; i < n; i++ {
		out = append(out, fakeType(fmt.Sprintf("fake-it-%d", i), fakeTypeOpts{resources: rl("cpu", fmt.Sprint(i+1), "memory", fmt.Sprintf("%dGi", (i+1)*2), "pods", fmt.Sprint((i+1)*10))}))
	}
	return out
}

// fakePool is the scheduling suite's NodePool: capacity types spot,
// on-demand and reserved, on the default class.
func fakePool(opts ...poolOpt) *karpv1.NodePool {
	np := mkPool("default", withReq(wellknown.CapacityTypeLabel, corev1.NodeSelectorOpIn,
		wellknown.CapacityTypeSpot, wellknown.CapacityTypeOnDemand, wellknown.CapacityTypeReserved))
	for _, o := range opts {
		o(np)
	}
	return np
}

// withReqs replaces the NodePool's requirements.
func withReqs(reqs ...karpv1.NodeSelectorRequirementWithMinValues) poolOpt {
	return func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements = reqs }
}

func npReq(key string, op corev1.NodeSelectorOperator, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

var fakePodSeq int

// fakePod is test.UnschedulablePod: no requests unless given.
func fakePod(opts ...podOpt) *corev1.Pod {
	fakePodSeq++
	name := fmt.Sprintf("pod-%06d", fakePodSeq)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// requests sets the pod's requests.
func requests(kv ...string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl(kv...) }
}

// nodeRequirements is PodOptions.NodeRequirements: one required term.
func nodeRequirements(exprs ...corev1.NodeSelectorRequirement) podOpt {
	return requiredAffinity(exprs)
}

// nodePreferences is PodOptions.NodePreferences: one preferred term of
// weight 1.
func nodePreferences(exprs ...corev1.NodeSelectorRequirement) podOpt {
	return preferredAffinity(1, exprs...)
}

// fakeSnapshot is a snapshot on the fake cloud provider's types (or those
// given).
func fakeSnapshot(its []*InstanceType, pools []*karpv1.NodePool, pods ...*corev1.Pod) *Snapshot {
	if its == nil {
		its = fakeTypes()
	}
	return &Snapshot{
		Pods:        pods,
		NodePools:   pools,
		NodeClasses: map[string]*NodeClass{"default": {Name: "default", Ready: true, InstanceTypes: its}},
	}
}

// launchedLabels are the labels of the node a new claim becomes: its own,
// the labels of the type the launch picks and its offering's zone and
// capacity type (Karpenter's fake Create, then the node).
func launchedLabels(c *NewNodeClaim) map[string]string {
	out := maps.Clone(c.Labels)
	if out == nil {
		out = map[string]string{}
	}
	it, o := c.CheapestOffering()
	if it == nil {
		return out
	}
	maps.Copy(out, it.Labels)
	out[wellknown.ZoneLabel] = o.Zone
	out[wellknown.CapacityTypeLabel] = o.CapacityType
	return out
}

// expectScheduled is ExpectScheduled: the pod went somewhere; it returns
// that node's labels and a name ("claim#i" for a new one).
func expectScheduled(t *testing.T, s *Snapshot, r *Results, p *corev1.Pod) (string, map[string]string) {
	t.Helper()
	where := placementOf(r, p)
	if where == "" {
		t.Fatalf("pod %s not scheduled: %s", p.Name, reasonOf(r, p))
	}
	if c := claimOf(r, p); c != nil {
		return where, launchedLabels(c)
	}
	for _, n := range s.Nodes {
		if n.Name == where {
			return where, n.Labels
		}
	}
	return where, nil
}

// expectNotScheduled is ExpectNotScheduled.
func expectNotScheduled(t *testing.T, r *Results, p *corev1.Pod) {
	t.Helper()
	if where := placementOf(r, p); where != "" {
		t.Fatalf("pod %s scheduled on %s, want it pending", p.Name, where)
	}
}

// expectLabel checks a label's value ("" with present false: absent).
func expectLabel(t *testing.T, labels map[string]string, key, want string) {
	t.Helper()
	if got, ok := labels[key]; !ok || got != want {
		t.Fatalf("label %s = %q (present %v), want %q; labels %v", key, got, ok, want, labels)
	}
}
