package catalog

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/conformance"
)

// Karpenter v1.14.1's instance type provider suite
// (aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go),
// the cases that call NewInstanceType: capacity, pods and the three parts
// of the overhead of one type under an EC2NodeClass's kubelet settings,
// through NodeConfigFor, Capacity, Pods and OverheadParts. Karpenter's
// fake EC2 lists real types with their real figures; the catalog's are the
// same (m5.xlarge: 4 vCPU, 4 ENIs x 15 addresses; t3.large: 3 x 12;
// m6idn.32xlarge: 8 ENIs x 50 on network card 0), except dl1.24xlarge,
// which EC2 no longer lists.
const instanceTypeSuite, instanceTypeFile = "aws/providers/instancetype", "pkg/providers/instancetype/suite_test.go"

// karpenterFakeTypes are the types of Karpenter's fake DescribeInstanceTypes
// that the catalog has: the loops "for every instance type" run over them.
var karpenterFakeTypes = []string{
	"c6g.large", "g4ad.16xlarge", "g4dn.8xlarge", "g5.12xlarge", "inf2.24xlarge", "inf2.xlarge",
	"m5.large", "m5.metal", "m5.xlarge", "m6idn.32xlarge", "m7i-flex.large", "t3.large",
	"t4g.medium", "t4g.small", "t4g.xlarge", "trn1.2xlarge",
}

// itCase is one case of the suite's InstanceTypeProvider Describe.
func itCase(spec string) conformance.Case {
	return conformance.Case{Suite: instanceTypeSuite, File: instanceTypeFile, Spec: "InstanceTypeProvider > " + spec}
}

// classFor is the suite's nodeClass with an AMI family (the alias or
// spec.amiFamily resolved) and kubelet settings; the default is AL2023,
// as test.EC2NodeClass's alias al2023@latest.
func classFor(kubelet *awsv1.KubeletConfiguration, mutate ...func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{Kubelet: kubelet}}
	for _, m := range mutate {
		m(nc)
	}
	return nc
}

type resolvedType struct {
	capacity               corev1.ResourceList
	kube, system, eviction corev1.ResourceList
	cfg                    NodeConfig
	pods, vcpus            int64
}

// resolve is NewInstanceType for one type: the class's settings as the
// provider reads them (NodeConfigFor), with --reserved-enis.
func resolve(t *testing.T, c *Catalog, name string, nc *awsv1.EC2NodeClass, family string, reservedENIs int64) resolvedType {
	t.Helper()
	it, ok := c.Get(name)
	if !ok {
		t.Fatalf("%s is not in the catalog", name)
	}
	cfg := NodeConfigFor(nc, family)
	cfg.ReservedENIs += reservedENIs
	kube, system, eviction, err := it.OverheadParts(cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	capacity := it.Capacity(cfg)
	pods := capacity[corev1.ResourcePods]
	return resolvedType{capacity: capacity, kube: kube, system: system, eviction: eviction, cfg: cfg, pods: pods.Value(), vcpus: it.VCPU}
}

func qty(l corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	if q, ok := l[name]; ok {
		return q
	}
	return resource.Quantity{}
}

// wantString checks a quantity's canonical form, as the suite's
// Cpu().String() and Memory().String().
func wantString(t *testing.T, what string, l corev1.ResourceList, name corev1.ResourceName, want string) {
	t.Helper()
	q := qty(l, name)
	if q.Cmp(resource.MustParse(want)) != 0 {
		t.Errorf("%s %s = %s, want %s", what, name, q.String(), want)
	}
}

// wantNear checks a quantity within tolerance of a figure, as the suite's
// BeNumerically("~", x, tol).
func wantNear(t *testing.T, what string, got resource.Quantity, want, tol float64) {
	t.Helper()
	if math.Abs(got.AsApproximateFloat64()-want) > tol {
		t.Errorf("%s = %s, want %.0f +- %.0f", what, got.String(), want, tol)
	}
}

func TestConformanceInstanceTypeOverhead(t *testing.T) {
	c := mustLoad(t)
	const m5 = "m5.xlarge"
	memReserved := func(kube, system map[string]string) *awsv1.KubeletConfiguration {
		return &awsv1.KubeletConfiguration{KubeReserved: kube, SystemReserved: system}
	}
	reserved := func(hard, soft map[string]string) *awsv1.KubeletConfiguration {
		k := memReserved(map[string]string{"memory": "10Gi"}, map[string]string{"memory": "20Gi"})
		k.EvictionHard, k.EvictionSoft = hard, soft
		return k
	}

	conformance.Run(t, itCase("Overhead > System Reserved Resources > should use defaults when no kubelet is specified"), func(t *testing.T) {
		r := resolve(t, c, m5, classFor(&awsv1.KubeletConfiguration{}), FamilyAL2023, 0)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			wantString(t, "systemReserved", r.system, name, "0")
		}
	})
	conformance.Run(t, itCase("Overhead > System Reserved Resources > should override system reserved cpus when specified"), func(t *testing.T) {
		r := resolve(t, c, m5, classFor(memReserved(nil, map[string]string{"cpu": "2", "memory": "20Gi", "ephemeral-storage": "10Gi"})), FamilyAL2023, 0)
		wantString(t, "systemReserved", r.system, corev1.ResourceCPU, "2")
		wantString(t, "systemReserved", r.system, corev1.ResourceMemory, "20Gi")
		wantString(t, "systemReserved", r.system, corev1.ResourceEphemeralStorage, "10Gi")
	})
	conformance.Run(t, itCase("Overhead > Kube Reserved Resources > should use defaults when no kubelet is specified"), func(t *testing.T) {
		r := resolve(t, c, m5, classFor(&awsv1.KubeletConfiguration{}), FamilyAL2023, 0)
		wantString(t, "kubeReserved", r.kube, corev1.ResourceCPU, "80m")
		wantString(t, "kubeReserved", r.kube, corev1.ResourceMemory, "893Mi") // 11 x 58 + 255
		wantString(t, "kubeReserved", r.kube, corev1.ResourceEphemeralStorage, "1Gi")
	})
	conformance.Run(t, itCase("Overhead > Kube Reserved Resources > should override kube reserved when specified"), func(t *testing.T) {
		r := resolve(t, c, m5, classFor(memReserved(
			map[string]string{"cpu": "2", "memory": "10Gi", "ephemeral-storage": "2Gi"},
			map[string]string{"cpu": "1", "memory": "20Gi", "ephemeral-storage": "1Gi"})), FamilyAL2023, 0)
		wantString(t, "kubeReserved", r.kube, corev1.ResourceCPU, "2")
		wantString(t, "kubeReserved", r.kube, corev1.ResourceMemory, "10Gi")
		wantString(t, "kubeReserved", r.kube, corev1.ResourceEphemeralStorage, "2Gi")
	})

	// The suite sets VMMemoryOverheadPercent to 0 here; the percentages
	// are checked against the capacity the type reports, whatever it is.
	const ev = "Overhead > Eviction Thresholds > "
	percentOfCapacity := func(t *testing.T, r resolvedType, pct float64) {
		t.Helper()
		mem := qty(r.capacity, corev1.ResourceMemory)
		wantNear(t, "evictionThreshold memory", qty(r.eviction, corev1.ResourceMemory), mem.AsApproximateFloat64()*pct, 10)
	}
	for _, tc := range []struct {
		spec       string
		hard, soft map[string]string
		family     string
		want       string  // exact
		pct        float64 // or a share of capacity
	}{
		{spec: "Eviction Hard > should override eviction threshold when specified as a quantity", hard: map[string]string{"memory.available": "500Mi"}, want: "500Mi"},
		{spec: "Eviction Hard > should override eviction threshold when specified as a percentage value", hard: map[string]string{"memory.available": "10%"}, pct: 0.1},
		{spec: "Eviction Hard > should consider the eviction threshold disabled when specified as 100%", hard: map[string]string{"memory.available": "100%"}, want: "0"},
		{spec: "Eviction Hard > should used default eviction threshold for memory when evictionHard not specified", soft: map[string]string{"memory.available": "50Mi"}, want: "100Mi"},
		{spec: "Eviction Soft > should use default threshold when only evictionSoft is specified", soft: map[string]string{"memory.available": "500Mi"}, want: "100Mi"},
		{spec: "Eviction Soft > should use evictionHard percentage and ignore evictionSoft percentage", hard: map[string]string{"memory.available": "5%"}, soft: map[string]string{"memory.available": "10%"}, pct: 0.05},
		{spec: "Eviction Soft > should use default threshold when evictionSoft is 100% (ignored)", soft: map[string]string{"memory.available": "100%"}, want: "100Mi"},
		{spec: "Eviction Soft > should ignore eviction threshold when using Bottlerocket AMI", hard: map[string]string{"memory.available": "1Gi"}, soft: map[string]string{"memory.available": "10Gi"}, family: FamilyBottlerocket, want: "1Gi"},
		{spec: "should use only evictionHard for overhead, ignoring evictionSoft", hard: map[string]string{"memory.available": "1Gi"}, soft: map[string]string{"memory.available": "3Gi"}, want: "1Gi"},
		{spec: "should use only evictionHard percentage for overhead, ignoring evictionSoft", hard: map[string]string{"memory.available": "5%"}, soft: map[string]string{"memory.available": "2%"}, pct: 0.05},
		{spec: "should use only evictionHard value with mixed percentage/value types", hard: map[string]string{"memory.available": "1Gi"}, soft: map[string]string{"memory.available": "10%"}, want: "1Gi"},
	} {
		conformance.Run(t, itCase(ev+tc.spec), func(t *testing.T) {
			family := tc.family
			if family == "" {
				family = FamilyAL2023
			}
			r := resolve(t, c, m5, classFor(reserved(tc.hard, tc.soft)), family, 0)
			if tc.want != "" {
				wantString(t, "evictionThreshold", r.eviction, corev1.ResourceMemory, tc.want)
				return
			}
			percentOfCapacity(t, r, tc.pct)
		})
	}
	conformance.Run(t, itCase(ev+"should take the default eviction threshold when none is specified"), func(t *testing.T) {
		r := resolve(t, c, m5, classFor(&awsv1.KubeletConfiguration{}), FamilyAL2023, 0)
		wantString(t, "evictionThreshold", r.eviction, corev1.ResourceCPU, "0")
		wantString(t, "evictionThreshold", r.eviction, corev1.ResourceMemory, "100Mi")
		twoGi := resource.MustParse("2Gi")
		wantNear(t, "evictionThreshold ephemeral-storage", qty(r.eviction, corev1.ResourceEphemeralStorage), twoGi.AsApproximateFloat64(), 1)
	})
}

func TestConformanceInstanceTypePods(t *testing.T) {
	c := mustLoad(t)
	everyType := func(t *testing.T, kubelet *awsv1.KubeletConfiguration, family string, want func(name string, r resolvedType) int64) {
		t.Helper()
		for _, name := range karpenterFakeTypes {
			r := resolve(t, c, name, classFor(kubelet), family, 0)
			if w := want(name, r); r.pods != w {
				t.Errorf("%s: pods = %d, want %d", name, r.pods, w)
			}
		}
	}
	eniPods := func(name string) int64 {
		it, _ := c.Get(name)
		return it.ENILimitedPods(0)
	}

	conformance.Run(t, itCase("Overhead > should default max pods based off of network interfaces"), func(t *testing.T) {
		for name, want := range map[string]int64{"t3.large": 35, "m6idn.32xlarge": 394} {
			if r := resolve(t, c, name, classFor(&awsv1.KubeletConfiguration{}), FamilyAL2023, 0); r.pods != want {
				t.Errorf("%s: pods = %d, want %d", name, r.pods, want)
			}
		}
	})
	conformance.Run(t, itCase("Overhead > should set max-pods to user-defined value if specified"), func(t *testing.T) {
		everyType(t, &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](10)}, FamilyAL2023, func(string, resolvedType) int64 { return 10 })
	})
	families := []struct{ entry, family string }{
		{"al2 (latest)", FamilyAL2}, {"al2023 (latest)", FamilyAL2023}, {"bottlerocket (latest)", FamilyBottlerocket},
		{"windows2019 (latest)", FamilyWindows2019}, {"windows2022 (latest)", FamilyWindows2022}, {"windows2025 (latest)", FamilyWindows2025},
		{"custom", FamilyCustom},
	}
	// t3.large: 3 ENIs x 12 addresses, 35 pods by its ENIs.
	for _, tc := range []struct {
		maxPods, reservedPods int64
		memory, reservedMem   string
	}{
		{10, 24, "640Mi", "640Mi"}, // al2
		{10, 24, "640Mi", "640Mi"}, // al2023
		{10, 24, "365Mi", "519Mi"}, // bottlerocket
		{10, 110, "365Mi", "1465Mi"},
		{10, 110, "365Mi", "1465Mi"},
		{10, 110, "365Mi", "1465Mi"},
		{10, 24, "640Mi", "640Mi"}, // custom
	} {
		f := families[0]
		families = families[1:]
		conformance.Run(t, itCase("Overhead > should set max-pods to user-defined value if specified > "+f.entry), func(t *testing.T) {
			r := resolve(t, c, "t3.large", classFor(&awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](10)}), f.family, 0)
			if r.pods != tc.maxPods {
				t.Errorf("pods = %d, want %d", r.pods, tc.maxPods)
			}
			wantString(t, "kubeReserved", r.kube, corev1.ResourceMemory, tc.memory)
		})
		conformance.Run(t, itCase("Overhead > should reserve ENIs when aws.reservedENIs is set and use it in max-pods calculation > "+f.entry), func(t *testing.T) {
			r := resolve(t, c, "t3.large", classFor(&awsv1.KubeletConfiguration{}), f.family, 1)
			if r.pods != tc.reservedPods {
				t.Errorf("pods = %d, want %d", r.pods, tc.reservedPods)
			}
			wantString(t, "kubeReserved", r.kube, corev1.ResourceMemory, tc.reservedMem)
		})
	}
	conformance.Run(t, itCase("Overhead > should override max-pods value"), func(t *testing.T) {
		everyType(t, &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](10)}, FamilyAL2023, func(string, resolvedType) int64 { return 10 })
	})
	conformance.Run(t, itCase("Overhead > should reserve ENIs when aws.reservedENIs is set and not go below 0 ENIs in max-pods calculation"), func(t *testing.T) {
		// max(3 - 1,000,000, 0) x 11 + 2 would be 2: no usable ENI is 0 pods.
		if r := resolve(t, c, "t3.large", classFor(&awsv1.KubeletConfiguration{}), FamilyAL2023, 1_000_000); r.pods != 0 {
			t.Errorf("pods = %d, want 0", r.pods)
		}
	})
	conformance.Run(t, itCase("Overhead > should override pods-per-core value"), func(t *testing.T) {
		// Each of the suite's types has more ENI pods than vCPUs.
		everyType(t, &awsv1.KubeletConfiguration{PodsPerCore: ptr.To[int32](1)}, FamilyAL2023, func(_ string, r resolvedType) int64 { return r.vcpus })
	})
	conformance.Run(t, itCase("Overhead > should take the minimum of pods-per-core and max-pods"), func(t *testing.T) {
		everyType(t, &awsv1.KubeletConfiguration{PodsPerCore: ptr.To[int32](4), MaxPods: ptr.To[int32](20)}, FamilyAL2023, func(_ string, r resolvedType) int64 { return min(20, 4*r.vcpus) })
	})
	conformance.Run(t, itCase("Overhead > should ignore pods-per-core when using Bottlerocket AMI"), func(t *testing.T) {
		everyType(t, &awsv1.KubeletConfiguration{PodsPerCore: ptr.To[int32](1)}, FamilyBottlerocket, func(name string, _ resolvedType) int64 { return eniPods(name) })
	})
	conformance.Run(t, itCase("Overhead > should take limited pod density to be the default pods number when pods-per-core is 0"), func(t *testing.T) {
		for name, want := range map[string]int64{"t3.large": 35, "m6idn.32xlarge": 394} {
			if r := resolve(t, c, name, classFor(&awsv1.KubeletConfiguration{PodsPerCore: ptr.To[int32](0)}), FamilyAL2023, 0); r.pods != want {
				t.Errorf("%s: pods = %d, want %d", name, r.pods, want)
			}
		}
	})
	conformance.Run(t, itCase("should not set pods to 110 if using ENI-based pod density"), func(t *testing.T) {
		for _, name := range karpenterFakeTypes {
			if r := resolve(t, c, name, classFor(&awsv1.KubeletConfiguration{}), FamilyAL2023, 0); r.pods == 110 {
				t.Errorf("%s: pods = 110", name)
			}
		}
	})
	conformance.Run(t, itCase("should set pods to 110 if AMI Family doesn't support"), func(t *testing.T) {
		everyType(t, &awsv1.KubeletConfiguration{}, FamilyWindows2022, func(string, resolvedType) int64 { return 110 })
	})

	efaOnNC := func(card int32) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: card, DeviceIndex: map[bool]int32{true: 1, false: 0}[card == 0], InterfaceType: awsv1.InterfaceTypeEFAOnly},
			}
		}
	}
	conformance.Run(t, itCase("Network Interfaces > should calculate max pods according when no EFA-only interfaces used on NC 0"), func(t *testing.T) {
		// 8 ENIs on card 0 x (50 - 1) + 2
		if r := resolve(t, c, "m6idn.32xlarge", classFor(nil, efaOnNC(1)), FamilyAL2023, 0); r.pods != 394 {
			t.Errorf("pods = %d, want 394", r.pods)
		}
	})
	conformance.Run(t, itCase("Network Interfaces > should calculate max pods according to EFA-only interfaces used"), func(t *testing.T) {
		// (8 - 1) x 49 + 2
		r := resolve(t, c, "m6idn.32xlarge", classFor(nil, efaOnNC(0)), FamilyAL2023, 0)
		if r.pods != 345 {
			t.Errorf("pods = %d, want 345", r.pods)
		}
		// Kube-reserved memory is sized by the ENI pods without the
		// EFA-only interface, as Karpenter's ENILimitedPods(ctx, info, 0,
		// networkInterfaces): 11 x 345 + 255.
		wantString(t, "kubeReserved", r.kube, corev1.ResourceMemory, "4050Mi")
	})
}

func TestConformanceInstanceTypeStorage(t *testing.T) {
	c := mustLoad(t)
	// The Ephemeral Storage context's BeforeEach: one mapping for the
	// kubelet's device with a snapshot and no volumeSize.
	bdm := func(device string) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{
				DeviceName: ptr.To(device),
				EBS:        &awsv1.BlockDevice{SnapshotID: ptr.To("snap-xxxxxxxx"), VolumeInitializationRate: ptr.To[int32](100)},
			}}
		}
	}
	for _, tc := range []struct{ spec, family, device string }{
		{"should default to EBS defaults when volumeSize is not defined in blockDeviceMappings for custom AMIs", FamilyCustom, "/dev/xvda"},
		{"should default to EBS defaults when volumeSize is not defined in blockDeviceMappings for AL2 Root volume", FamilyAL2, "/dev/xvda"},
		{"should default to EBS defaults when volumeSize is not defined in blockDeviceMappings for AL2023 Root volume", FamilyAL2023, "/dev/xvda"},
		{"should default to EBS defaults when volumeSize is not defined in blockDeviceMappings for Bottlerocket Root volume", FamilyBottlerocket, "/dev/xvdb"},
	} {
		// The launch template half (the mapping sent as given) is ported
		// in shared/aws/launchtemplate.
		conformance.Run(t, itCase("Ephemeral Storage > "+tc.spec), func(t *testing.T) {
			r := resolve(t, c, "m5.large", classFor(nil, bdm(tc.device)), tc.family, 0)
			wantString(t, "capacity", r.capacity, corev1.ResourceEphemeralStorage, "20Gi")
		})
	}
	conformance.Run(t, itCase("should launch instances w/ instance storage for ephemeral storage resource requests when disks are mounted for ephemeral-storage"), func(t *testing.T) {
		// The capacity half: RAID0 gives the instance store's size in GB
		// (the choice of type among those that hold 5000Gi is ported in
		// shared/core/instancetype).
		raid := awsv1.InstanceStorePolicyRAID0
		r := resolve(t, c, "m6idn.32xlarge", classFor(nil, func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = &raid }), FamilyAL2023, 0)
		wantString(t, "capacity", r.capacity, corev1.ResourceEphemeralStorage, "7600G")
	})
	conformance.Run(t, itCase("Overhead > shouldn't report more resources than are actually available on instances"), func(t *testing.T) {
		// What the kubelet reported on launched nodes (AL2023 defaults):
		// the estimate must not exceed it, or nodes launch that cannot
		// run the pods they were launched for.
		for _, tc := range []struct{ name, memory, cpu string }{
			{"t4g.small", "1408312Ki", "1930m"},
			{"t4g.medium", "3377496Ki", "1930m"},
			{"t4g.xlarge", "15136012Ki", "3920m"},
			{"m5.large", "7220184Ki", "1930m"},
		} {
			it, _ := c.Get(tc.name)
			alloc, err := it.Allocatable(NodeConfigFor(classFor(nil), FamilyAL2023))
			if err != nil {
				t.Fatal(err)
			}
			if m, want := qty(alloc, corev1.ResourceMemory), resource.MustParse(tc.memory); m.Cmp(want) > 0 {
				t.Errorf("%s: memory estimate %s above the kubelet's %s", tc.name, m.String(), want.String())
			}
			if cpu, want := qty(alloc, corev1.ResourceCPU), resource.MustParse(tc.cpu); cpu.Cmp(want) > 0 {
				t.Errorf("%s: CPU estimate %s above the kubelet's %s", tc.name, cpu.String(), want.String())
			}
		}
	})
}
