package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// AMI families, as EC2NodeClass spec.amiFamily names them.
const (
	FamilyAL2023       = "AL2023"
	FamilyAL2          = "AL2"
	FamilyBottlerocket = "Bottlerocket"
	FamilyCustom       = "Custom"
	FamilyWindows2019  = "Windows2019"
	FamilyWindows2022  = "Windows2022"
	FamilyWindows2025  = "Windows2025"
)

// DefaultVMMemoryOverheadPercent is the share of memory the hypervisor
// keeps, as Karpenter assumes when EC2 does not report it (its
// VM_MEMORY_OVERHEAD_PERCENT default).
const DefaultVMMemoryOverheadPercent = 0.075

// gravitonCMAMiB is memory arm64 kernels reserve for the contiguous memory
// allocator, unusable by pods.
const gravitonCMAMiB = 64

// NodeConfig is what of an EC2NodeClass changes a node's allocatable
// resources. The zero value is Karpenter's default: AL2023, ENI-limited pods,
// a 20Gi root volume and no kubelet overrides.
type NodeConfig struct {
	Family         string
	MaxPods        *int32
	PodsPerCore    *int32
	KubeReserved   map[string]string
	SystemReserved map[string]string
	EvictionHard   map[string]string
	// EphemeralStorage is the kubelet's filesystem size; nil means the AMI
	// family's default root volume.
	EphemeralStorage *resource.Quantity
	// InstanceStoreRAID0 puts ephemeral storage on the instance-store NVMe disks.
	InstanceStoreRAID0 bool
	// ReservedENIs are default-card interfaces kept out of the pod limit
	// (the --reserved-enis setting).
	ReservedENIs int64
	// VMMemoryOverheadPercent is the --vm-memory-overhead-percent setting;
	// nil means DefaultVMMemoryOverheadPercent.
	VMMemoryOverheadPercent *float64
	// EFAOnlyENIs are the class's EFA-only interfaces on network card 0:
	// they carry no pod IPs, so they come off the pod limit and, unlike
	// ReservedENIs, off the pod count kube-reserved memory is sized by.
	EFAOnlyENIs int64
	// EFAInterfaces, when the class lists network interfaces, is how many
	// of them are EFA-only: the node then advertises that many
	// vpc.amazonaws.com/efa whatever the type could attach (nil: the
	// type's own EFA limit).
	EFAInterfaces *int64
}

// NodeConfigFor extracts the allocatable-relevant settings of an
// EC2NodeClass. amiFamily is the resolved family (from spec.amiFamily or the
// alias).
func NodeConfigFor(nc *awsv1.EC2NodeClass, amiFamily string) NodeConfig {
	cfg := NodeConfig{Family: amiFamily}
	if k := nc.Spec.Kubelet; k != nil {
		cfg.MaxPods, cfg.PodsPerCore = k.MaxPods, k.PodsPerCore
		cfg.KubeReserved, cfg.SystemReserved, cfg.EvictionHard = k.KubeReserved, k.SystemReserved, k.EvictionHard
	}
	cfg.InstanceStoreRAID0 = nc.Spec.InstanceStorePolicy != nil && *nc.Spec.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0
	cfg.EphemeralStorage = rootVolumeSize(nc.Spec.BlockDeviceMappings, amiFamily)
	if len(nc.Spec.NetworkInterfaces) > 0 {
		var efa int64
		for _, ni := range nc.Spec.NetworkInterfaces {
			if ni == nil || ni.InterfaceType != awsv1.InterfaceTypeEFAOnly {
				continue
			}
			efa++
			if ni.NetworkCardIndex == 0 {
				cfg.EFAOnlyENIs++
			}
		}
		cfg.EFAInterfaces = &efa
	}
	return cfg
}

// rootVolumeSize follows Karpenter: an explicit root volume wins; a Custom
// family uses its last mapping; otherwise the family's kubelet device.
func rootVolumeSize(bdms []*awsv1.BlockDeviceMapping, family string) *resource.Quantity {
	for _, b := range bdms {
		if b != nil && b.RootVolume && b.EBS != nil && b.EBS.VolumeSize != nil {
			return b.EBS.VolumeSize
		}
	}
	if len(bdms) == 0 {
		return nil
	}
	if family == FamilyCustom {
		if last := bdms[len(bdms)-1]; last != nil && last.EBS != nil {
			return last.EBS.VolumeSize
		}
		return nil
	}
	dev := EphemeralDevice(family)
	for _, b := range bdms {
		if b != nil && b.DeviceName != nil && *b.DeviceName == dev && b.EBS != nil {
			return b.EBS.VolumeSize
		}
	}
	return nil
}

// EphemeralDevice is the device the kubelet's filesystem lives on per family.
func EphemeralDevice(family string) string {
	switch family {
	case FamilyBottlerocket:
		return "/dev/xvdb"
	case FamilyWindows2019, FamilyWindows2022, FamilyWindows2025:
		return "/dev/sda1"
	default:
		return "/dev/xvda"
	}
}

// DefaultRootVolume is the family's default kubelet volume size.
func DefaultRootVolume(family string) resource.Quantity {
	if isWindows(family) {
		return resource.MustParse("50Gi")
	}
	return resource.MustParse("20Gi")
}

func isWindows(family string) bool { return strings.HasPrefix(family, "Windows") }

// familyFlags are the per-family switches of Karpenter's arithmetic.
type familyFlags struct {
	eniLimitedMemoryOverhead bool // kube-reserved memory from ENI pods even if maxPods is overridden
	podsPerCore              bool
	eniLimitedPodDensity     bool // else 110 pods
}

func flagsFor(family string) familyFlags {
	switch {
	case family == FamilyBottlerocket:
		return familyFlags{eniLimitedPodDensity: true}
	case isWindows(family):
		return familyFlags{podsPerCore: true}
	default:
		return familyFlags{eniLimitedMemoryOverhead: true, podsPerCore: true, eniLimitedPodDensity: true}
	}
}

// Pods is the node's pod capacity under cfg.
func (t *InstanceType) Pods(cfg NodeConfig) int64 {
	f := flagsFor(cfg.Family)
	var n int64
	switch {
	case cfg.MaxPods != nil:
		n = int64(*cfg.MaxPods)
	case f.eniLimitedPodDensity:
		n = t.ENILimitedPods(cfg.ReservedENIs + cfg.EFAOnlyENIs)
	default:
		n = 110
	}
	if cfg.PodsPerCore != nil && *cfg.PodsPerCore > 0 && f.podsPerCore {
		n = min(n, int64(*cfg.PodsPerCore)*t.VCPU)
	}
	return n
}

// Capacity is what the node reports as capacity.
func (t *InstanceType) Capacity(cfg NodeConfig) corev1.ResourceList {
	mem := t.MemoryMiB
	if t.Arch == "arm64" {
		mem -= gravitonCMAMiB
	}
	overhead := DefaultVMMemoryOverheadPercent
	if cfg.VMMemoryOverheadPercent != nil {
		overhead = *cfg.VMMemoryOverheadPercent
	}
	mem -= int64(math.Ceil(float64(mem) * overhead))
	out := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(t.VCPU, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(mem*1024*1024, resource.BinarySI),
		corev1.ResourceEphemeralStorage: t.ephemeralStorage(cfg),
		corev1.ResourcePods:             *resource.NewQuantity(t.Pods(cfg), resource.DecimalSI),
	}
	for name, n := range t.extended(cfg) {
		out[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if n := t.WindowsPrivateIPv4(cfg.Family); n > 0 {
		out[wellknown.ResourcePrivateIPv4] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

func (t *InstanceType) ephemeralStorage(cfg NodeConfig) resource.Quantity {
	if cfg.InstanceStoreRAID0 {
		if gb, err := strconv.ParseInt(t.labels[labelLocalNVMe], 10, 64); err == nil && gb > 0 {
			return *resource.NewQuantity(gb*1000*1000*1000, resource.DecimalSI)
		}
	}
	if cfg.EphemeralStorage != nil {
		return cfg.EphemeralStorage.DeepCopy()
	}
	return DefaultRootVolume(cfg.Family)
}

func (t *InstanceType) extended(cfg NodeConfig) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	if n, maker := t.GPUs(); n > 0 {
		switch maker {
		case "nvidia":
			out[wellknown.ResourceNVIDIAGPU] = n
		case "amd":
			out[wellknown.ResourceAMDGPU] = n
		case "habana":
			// EC2 lists Gaudi (dl1) among the GPUs; Karpenter
			// advertises them as habana.ai/gaudi.
			out[wellknown.ResourceHabanaGaudi] = n
		}
	}
	if n, maker := t.Accelerators(); n > 0 {
		switch maker {
		case "aws":
			out[wellknown.ResourceAWSNeuron] = n
		case "habana":
			out[wellknown.ResourceHabanaGaudi] = n
		}
	}
	if t.neuronCores > 0 {
		out[wellknown.ResourceAWSNeuronCore] = t.neuronCores
	}
	efa := t.efa
	if cfg.EFAInterfaces != nil {
		efa = *cfg.EFAInterfaces
	}
	if efa > 0 {
		out[wellknown.ResourceEFA] = efa
	}
	if t.podENI {
		out[wellknown.ResourceAWSPodENI] = t.branchInterfaces
	}
	return out
}

// Overhead is what the kubelet keeps from capacity: kube-reserved,
// system-reserved and the hard eviction thresholds, summed per resource.
func (t *InstanceType) Overhead(cfg NodeConfig) (corev1.ResourceList, error) {
	return t.overhead(cfg, t.Capacity(cfg))
}

// OverheadParts are the three parts of Overhead, as Karpenter's instance
// types carry them: kube-reserved (defaults overlaid by the class's
// kubeReserved), system-reserved (the class's only) and the hard eviction
// thresholds (defaults overlaid by evictionHard; evictionSoft never counts).
func (t *InstanceType) OverheadParts(cfg NodeConfig) (kube, system, eviction corev1.ResourceList, err error) {
	return t.overheadParts(cfg, t.Capacity(cfg))
}

// overhead is Overhead given the capacity: a cold start builds every
// type's capacity and allocatable, and capacity is the costly part.
func (t *InstanceType) overhead(cfg NodeConfig, capacity corev1.ResourceList) (corev1.ResourceList, error) {
	kube, system, eviction, err := t.overheadParts(cfg, capacity)
	if err != nil {
		return nil, err
	}
	total := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{kube, system, eviction} {
		for k, v := range l {
			if k == "pid" {
				continue
			}
			sum := total[k]
			sum.Add(v)
			total[k] = sum
		}
	}
	return total, nil
}

func (t *InstanceType) overheadParts(cfg NodeConfig, capacity corev1.ResourceList) (kube, system, eviction corev1.ResourceList, err error) {
	f := flagsFor(cfg.Family)
	podsForMemory := t.Pods(cfg)
	if f.eniLimitedMemoryOverhead {
		// As Karpenter: the ENI limit without --reserved-enis (but
		// without the EFA-only interfaces, which never carry pods).
		podsForMemory = t.ENILimitedPods(cfg.EFAOnlyENIs)
	}
	kube = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(kubeReservedCPUMilli(t.VCPU*1000), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*podsForMemory+255)*1024*1024, resource.BinarySI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	if err := overlay(kube, cfg.KubeReserved, "kubeReserved"); err != nil {
		return nil, nil, nil, err
	}
	system = corev1.ResourceList{}
	if err := overlay(system, cfg.SystemReserved, "systemReserved"); err != nil {
		return nil, nil, nil, err
	}
	storage := capacity[corev1.ResourceEphemeralStorage]
	mem := capacity[corev1.ResourceMemory]
	eviction = corev1.ResourceList{
		corev1.ResourceMemory:           resource.MustParse("100Mi"),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(float64(storage.Value())/100*10)), resource.DecimalSI),
	}
	for signal, resourceName := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
		v, ok := cfg.EvictionHard[signal]
		if !ok {
			continue
		}
		base := mem
		if resourceName == corev1.ResourceEphemeralStorage {
			base = storage
		}
		q, err := evictionSignal(base, v)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("evictionHard[%s]: %w", signal, err)
		}
		eviction[resourceName] = q
	}
	return kube, system, eviction, nil
}

// Allocatable is capacity minus overhead, floored at zero.
func (t *InstanceType) Allocatable(cfg NodeConfig) (corev1.ResourceList, error) {
	_, alloc, err := t.Resources(cfg)
	return alloc, err
}

// Resources is the node's capacity and allocatable, capacity computed once.
func (t *InstanceType) Resources(cfg NodeConfig) (capacity, allocatable corev1.ResourceList, err error) {
	capacity = t.Capacity(cfg)
	overhead, err := t.overhead(cfg, capacity)
	if err != nil {
		return nil, nil, fmt.Errorf("instance type %s: %w", t.Name, err)
	}
	out := make(corev1.ResourceList, len(capacity))
	for k, v := range capacity {
		out[k] = v.DeepCopy()
	}
	for k, v := range overhead {
		q, ok := out[k]
		if !ok {
			continue
		}
		q.Sub(v)
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[k] = q
	}
	return capacity, out, nil
}

// kubeReservedCPUMilli is the EKS AMIs' tiered CPU reservation: 6% of the
// first core, 1% of the second, 0.5% of the third and fourth, 0.25% above.
func kubeReservedCPUMilli(cpuMilli int64) int64 {
	var total int64
	for _, tier := range []struct {
		from, to int64
		percent  float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, 1 << 31, 0.0025}} {
		if cpuMilli < tier.from {
			break
		}
		span := min(cpuMilli, tier.to) - tier.from
		total += int64(float64(span) * tier.percent)
	}
	return total
}

func overlay(dst corev1.ResourceList, src map[string]string, field string) error {
	for k, v := range src {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("%s[%s]=%q: %w", field, k, v, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("%s[%s]=%q is negative", field, k, v)
		}
		dst[corev1.ResourceName(k)] = q
	}
	return nil
}

// evictionSignal resolves a threshold given as a quantity or as a percentage
// of capacity; 100% disables the threshold, as in the kubelet.
func evictionSignal(capacity resource.Quantity, v string) (resource.Quantity, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil || pct < 0 || pct > 100 {
			return resource.Quantity{}, fmt.Errorf("%q is not a percentage", v)
		}
		if pct == 100 {
			pct = 0
		}
		return *resource.NewQuantity(int64(math.Ceil(capacity.AsApproximateFloat64()/100*pct)), resource.DecimalSI), nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q: %w", v, err)
	}
	return q, nil
}
