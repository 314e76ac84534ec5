package catalog

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
)

func mustLoad(t testing.TB) *Catalog {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAllocatableMatchesReference checks the computed allocatable resources of
// every catalog type against the values the reference autoscaler publishes
// under its defaults (AL2023, ENI-limited pods, 20Gi root, no overrides).
func TestAllocatableMatchesReference(t *testing.T) {
	c := mustLoad(t)
	b, err := os.ReadFile("testdata/reference-allocatable.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]string
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != c.Len() || c.Len() != 1363 {
		t.Fatalf("catalog has %d types, reference %d, want 1363", c.Len(), len(ref))
	}
	exact := 0
	for _, it := range c.All() {
		want, ok := ref[it.Name]
		if !ok {
			t.Errorf("%s: no reference values", it.Name)
			continue
		}
		got, err := it.Allocatable(NodeConfig{})
		if err != nil {
			t.Fatalf("%s: %v", it.Name, err)
		}
		match := len(got) == len(want)
		for name, w := range want {
			g, ok := got[corev1.ResourceName(name)]
			if !ok || g.Cmp(resource.MustParse(w)) != 0 {
				match = false
				t.Errorf("%s %s: computed %s, reference %s", it.Name, name, g.String(), w)
			}
		}
		for name := range got {
			if _, ok := want[string(name)]; !ok {
				match = false
				t.Errorf("%s: computed %s which the reference does not publish", it.Name, name)
			}
		}
		if match {
			exact++
		}
	}
	t.Logf("allocatable matches the reference exactly for %d of %d instance types", exact, c.Len())
}

func TestAllocatableOverrides(t *testing.T) {
	c := mustLoad(t)
	m5, _ := c.Get("m5.xlarge") // 4 vCPU, 16384 MiB, 4 ENIs x 15 IPs: 58 ENI pods
	m6g, _ := c.Get("m6g.large")
	cases := []struct {
		name string
		it   *InstanceType
		cfg  NodeConfig
		want map[corev1.ResourceName]string
	}{
		{
			name: "defaults",
			it:   m5,
			want: map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14162Mi", "pods": "58", "ephemeral-storage": "17Gi"},
		},
		{
			// maxPods changes the pod count but, on AL2023, not the kube-reserved
			// memory, which Karpenter keeps on the ENI-limited figure.
			name: "maxPods on AL2023",
			it:   m5,
			cfg:  NodeConfig{MaxPods: ptr.To[int32](20)},
			want: map[corev1.ResourceName]string{"pods": "20", "memory": "14162Mi"},
		},
		{
			// On Bottlerocket the reservation follows the overridden pod count:
			// 16384 - ceil(16384*0.075)=1229 -> 15155; - (11*20+255)=475 - 100 = 14580.
			name: "maxPods on Bottlerocket",
			it:   m5,
			cfg:  NodeConfig{Family: FamilyBottlerocket, MaxPods: ptr.To[int32](20)},
			want: map[corev1.ResourceName]string{"pods": "20", "memory": "14580Mi"},
		},
		{
			name: "podsPerCore caps the ENI limit",
			it:   m5,
			cfg:  NodeConfig{PodsPerCore: ptr.To[int32](10)},
			want: map[corev1.ResourceName]string{"pods": "40"},
		},
		{
			name: "podsPerCore is ignored on Bottlerocket",
			it:   m5,
			cfg:  NodeConfig{Family: FamilyBottlerocket, PodsPerCore: ptr.To[int32](10)},
			want: map[corev1.ResourceName]string{"pods": "58"},
		},
		{
			name: "Windows uses 110 pods",
			it:   m5,
			cfg:  NodeConfig{Family: FamilyWindows2022},
			// 50Gi root - 1Gi kube-reserved - 10% eviction = 44Gi
			want: map[corev1.ResourceName]string{"pods": "110", "ephemeral-storage": "44Gi"},
		},
		{
			// kubeReserved replaces only the keys given; systemReserved adds.
			name: "kubeReserved and systemReserved",
			it:   m5,
			cfg: NodeConfig{
				KubeReserved:   map[string]string{"cpu": "200m", "memory": "1Gi"},
				SystemReserved: map[string]string{"cpu": "100m", "memory": "200Mi"},
			},
			// memory: 15155 - 1024 - 200 - 100 = 13831
			want: map[corev1.ResourceName]string{"cpu": "3700m", "memory": "13831Mi"},
		},
		{
			// capacity 15155Mi = 15891169280 B; 5% = 794558464 B; kube-reserved
			// 11*58+255 = 893Mi = 936378368 B: 15891169280-936378368-794558464.
			name: "evictionHard percentage and quantity",
			it:   m5,
			cfg:  NodeConfig{EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "1Gi"}},
			want: map[corev1.ResourceName]string{"memory": "14160232448", "ephemeral-storage": "18Gi"},
		},
		{
			name: "evictionHard 100% disables the threshold",
			it:   m5,
			cfg:  NodeConfig{EvictionHard: map[string]string{"memory.available": "100%"}},
			want: map[corev1.ResourceName]string{"memory": "14262Mi"},
		},
		{
			name: "larger root volume",
			it:   m6g,
			cfg:  NodeConfig{EphemeralStorage: ptr.To(resource.MustParse("100Gi"))},
			// 100Gi - 1Gi - 10Gi
			want: map[corev1.ResourceName]string{"ephemeral-storage": "89Gi"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.it.Allocatable(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range tc.want {
				g := got[k]
				if g.Cmp(resource.MustParse(w)) != 0 {
					t.Errorf("%s: got %s, want %s", k, g.String(), w)
				}
			}
		})
	}
}

func TestAllocatableRejectsBadOverrides(t *testing.T) {
	c := mustLoad(t)
	it, _ := c.Get("m5.large")
	for _, cfg := range []NodeConfig{
		{KubeReserved: map[string]string{"memory": "lots"}},
		{SystemReserved: map[string]string{"cpu": "-1"}},
		{EvictionHard: map[string]string{"memory.available": "150%"}},
	} {
		if _, err := it.Allocatable(cfg); err == nil {
			t.Errorf("Allocatable(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestNodeConfigFor(t *testing.T) {
	raid := awsv1.InstanceStorePolicyRAID0
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{
		Kubelet: &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](30)},
		BlockDeviceMappings: []*awsv1.BlockDeviceMapping{
			{DeviceName: ptr.To("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("80Gi"))}},
		},
		NetworkInterfaces: []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		},
		InstanceStorePolicy: &raid,
	}}
	cfg := NodeConfigFor(nc, FamilyAL2023)
	if *cfg.MaxPods != 30 || cfg.EphemeralStorage.String() != "80Gi" || cfg.EFAOnlyENIs != 1 || cfg.EFAInterfaces == nil || *cfg.EFAInterfaces != 1 || !cfg.InstanceStoreRAID0 {
		t.Fatalf("unexpected config %+v", cfg)
	}
	c := mustLoad(t)
	it, _ := c.Get("m5d.large") // 75 GB of NVMe
	got, err := it.Allocatable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 75e9 B - 1Gi kube-reserved - 10% (7.5e9 B) eviction
	if s := got[corev1.ResourceEphemeralStorage]; s.Cmp(resource.MustParse("66426258176")) != 0 {
		t.Errorf("RAID0 ephemeral storage = %s", s.String())
	}
}

func TestCatalogLookups(t *testing.T) {
	c := mustLoad(t)
	it, ok := c.Get("p4d.24xlarge")
	if !ok {
		t.Fatal("p4d.24xlarge missing")
	}
	if n, maker := it.GPUs(); n != 8 || maker != "nvidia" {
		t.Errorf("GPUs() = %d %s", n, maker)
	}
	if it.Labels()["node.kubernetes.io/instance-type"] != "p4d.24xlarge" || it.Labels()["karpenter.k8s.aws/instance-family"] != "p4d" || it.Labels()["karpenter.k8s.aws/instance-size"] != "24xlarge" {
		t.Errorf("labels %v", it.Labels())
	}
	if _, ok := c.Get("nope.large"); ok {
		t.Error("unknown type found")
	}
	names := make([]string, 0, c.Len())
	for _, it := range c.All() {
		names = append(names, it.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Error("All() is not sorted by name")
	}
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAllocatableAllTypes(b *testing.B) {
	c := mustLoad(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, it := range c.All() {
			if _, err := it.Allocatable(NodeConfig{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// VM_MEMORY_OVERHEAD_PERCENT: nil is Karpenter's 0.075; a value replaces it.
func TestVMMemoryOverheadPercent(t *testing.T) {
	it := &InstanceType{Name: "x.large", VCPU: 2, MemoryMiB: 16384, Arch: "amd64"}
	mem := func(cfg NodeConfig) int64 {
		q := it.Capacity(cfg)[corev1.ResourceMemory]
		return q.Value() / (1024 * 1024)
	}
	if got := mem(NodeConfig{}); got != 16384-1229 {
		t.Errorf("default: %d MiB, want %d", got, 16384-1229)
	}
	zero, tenth := 0.0, 0.1
	if got := mem(NodeConfig{VMMemoryOverheadPercent: &zero}); got != 16384 {
		t.Errorf("0: %d MiB", got)
	}
	if got := mem(NodeConfig{VMMemoryOverheadPercent: &tenth}); got != 16384-1639 {
		t.Errorf("0.1: %d MiB, want %d", got, 16384-1639)
	}
}
