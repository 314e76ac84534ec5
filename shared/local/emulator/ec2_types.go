package emulator

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// --- DescribeInstanceTypes ---

type xmlInstanceType struct {
	InstanceType                 string           `xml:"instanceType"`
	CurrentGeneration            bool             `xml:"currentGeneration"`
	FreeTierEligible             bool             `xml:"freeTierEligible"`
	SupportedUsageClasses        []string         `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes     []string         `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes []string         `xml:"supportedVirtualizationTypes>item"`
	BareMetal                    bool             `xml:"bareMetal"`
	Hypervisor                   string           `xml:"hypervisor,omitempty"`
	ProcessorInfo                xmlProcessorInfo `xml:"processorInfo"`
	VCPUInfo                     xmlVCPUInfo      `xml:"vCpuInfo"`
	MemoryInfo                   struct {
		SizeInMiB int64 `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
	InstanceStorageSupported      bool                    `xml:"instanceStorageSupported"`
	InstanceStorageInfo           *xmlInstanceStorageInfo `xml:"instanceStorageInfo,omitempty"`
	EBSInfo                       xmlEBSInfo              `xml:"ebsInfo"`
	NetworkInfo                   xmlNetworkInfo          `xml:"networkInfo"`
	GPUInfo                       *xmlGPUInfo             `xml:"gpuInfo,omitempty"`
	NeuronInfo                    *xmlNeuronInfo          `xml:"neuronInfo,omitempty"`
	InferenceAcceleratorInfo      *xmlInferenceInfo       `xml:"inferenceAcceleratorInfo,omitempty"`
	PlacementGroupStrategies      []string                `xml:"placementGroupInfo>supportedStrategies>item"`
	HibernationSupported          bool                    `xml:"hibernationSupported"`
	BurstablePerformanceSupported bool                    `xml:"burstablePerformanceSupported"`
	DedicatedHostsSupported       bool                    `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported         bool                    `xml:"autoRecoverySupported"`
	SupportedBootModes            []string                `xml:"supportedBootModes>item"`
}

type xmlProcessorInfo struct {
	SupportedArchitectures   []string `xml:"supportedArchitectures>item"`
	SustainedClockSpeedInGhz string   `xml:"sustainedClockSpeedInGhz,omitempty"`
	Manufacturer             string   `xml:"manufacturer,omitempty"`
}

type xmlVCPUInfo struct {
	DefaultVCPUs          int64 `xml:"defaultVCpus"`
	DefaultCores          int64 `xml:"defaultCores"`
	DefaultThreadsPerCore int64 `xml:"defaultThreadsPerCore"`
}

type xmlInstanceStorageInfo struct {
	TotalSizeInGB int64 `xml:"totalSizeInGB"`
	Disks         []struct {
		SizeInGB int64  `xml:"sizeInGB"`
		Count    int64  `xml:"count"`
		Type     string `xml:"type"`
	} `xml:"disks>item"`
	NVMeSupport       string `xml:"nvmeSupport"`
	EncryptionSupport string `xml:"encryptionSupport"`
}

type xmlEBSInfo struct {
	EBSOptimizedSupport string `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string `xml:"encryptionSupport"`
	EBSOptimizedInfo    *struct {
		BaselineBandwidthInMbps int64 `xml:"baselineBandwidthInMbps"`
		MaximumBandwidthInMbps  int64 `xml:"maximumBandwidthInMbps"`
	} `xml:"ebsOptimizedInfo,omitempty"`
	NVMeSupport string `xml:"nvmeSupport"`
}

type xmlNetworkInfo struct {
	NetworkPerformance        string           `xml:"networkPerformance"`
	MaximumNetworkInterfaces  int64            `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards       int64            `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex   int64            `xml:"defaultNetworkCardIndex"`
	NetworkCards              []xmlNetworkCard `xml:"networkCards>item"`
	IPv4AddressesPerInterface int64            `xml:"ipv4AddressesPerInterface"`
	IPv6AddressesPerInterface int64            `xml:"ipv6AddressesPerInterface"`
	IPv6Supported             bool             `xml:"ipv6Supported"`
	ENASupport                string           `xml:"enaSupport"`
	EFASupported              bool             `xml:"efaSupported"`
	EFAInfo                   *struct {
		MaximumEFAInterfaces int64 `xml:"maximumEfaInterfaces"`
	} `xml:"efaInfo,omitempty"`
	EncryptionInTransitSupported bool `xml:"encryptionInTransitSupported"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int64   `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance"`
	MaximumNetworkInterfaces int64   `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps"`
}

type xmlGPUInfo struct {
	GPUs []struct {
		Name         string `xml:"name"`
		Manufacturer string `xml:"manufacturer"`
		Count        int64  `xml:"count"`
		MemoryInfo   struct {
			SizeInMiB int64 `xml:"sizeInMiB"`
		} `xml:"memoryInfo"`
	} `xml:"gpus>item"`
	TotalGPUMemoryInMiB int64 `xml:"totalGpuMemoryInMiB"`
}

// xmlInferenceInfo lists non-Neuron accelerators (EC2 writes this list
// with member elements, not item).
type xmlInferenceInfo struct {
	Accelerators []xmlInferenceDevice `xml:"accelerators>member"`
}

type xmlInferenceDevice struct {
	Count        int64  `xml:"count"`
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
}

type xmlNeuronInfo struct {
	Devices []struct {
		Count    int64  `xml:"count"`
		Name     string `xml:"name"`
		CoreInfo struct {
			Count   int64 `xml:"count"`
			Version int64 `xml:"version"`
		} `xml:"coreInfo"`
	} `xml:"neuronDevices>item"`
}

// ENIFacts are the network limits of an instance type as DescribeInstanceTypes
// reports them. The catalog keeps them private, so they are recovered from
// its pod arithmetic: pods(0 reserved) - pods(1 reserved) = addresses - 1.
// Types with no published ENI facts (hpc*, trn2.48xlarge) get a pair that
// reproduces the catalog's pod count.
func ENIFacts(t *catalog.InstanceType) (interfaces, ipv4PerInterface int64) {
	p0, p1 := t.ENILimitedPods(0), t.ENILimitedPods(1)
	switch {
	case p0 > 2 && p1 == 0:
		return 1, p0 - 1
	case p0 > p1 && p1 > 0:
		ipv4 := p0 - p1 + 1
		return (p0 - 2) / (ipv4 - 1), ipv4
	case p0 > 2 && (p0-2)%49 == 0:
		return (p0 - 2) / 49, 50
	case p0 > 2:
		return 1, p0 - 1
	}
	return 1, 2
}

var previousGeneration = map[string]bool{
	"c1": true, "c3": true, "c4": true, "cc2": true, "cr1": true, "g2": true, "hs1": true, "i2": true,
	"m1": true, "m2": true, "m3": true, "m4": true, "r3": true, "r4": true, "t1": true,
}

func cpuManufacturer(v string) string {
	switch v {
	case "intel":
		return "Intel"
	case "amd":
		return "AMD"
	case "aws":
		return "AWS"
	case "apple":
		return "Apple"
	}
	return v
}

// instanceTypeInfo renders one catalog entry as EC2 does.
func instanceTypeInfo(t *catalog.InstanceType) xmlInstanceType {
	label := func(k string) string { v, _ := t.Label(k); return v }
	atoi := func(k string) int64 { n, _ := strconv.ParseInt(label(k), 10, 64); return n }
	family := label(wellknown.InstanceFamilyLabel)
	x := xmlInstanceType{
		InstanceType:                  t.Name,
		CurrentGeneration:             !previousGeneration[family],
		SupportedRootDeviceTypes:      []string{"ebs"},
		SupportedVirtualizationTypes:  []string{"hvm"},
		BareMetal:                     t.IsMetal(),
		Hypervisor:                    label(wellknown.InstanceHypervisorLabel),
		BurstablePerformanceSupported: strings.HasPrefix(family, "t"),
		AutoRecoverySupported:         !t.IsMetal(),
		PlacementGroupStrategies:      []string{"cluster", "partition", "spread"},
	}
	x.SupportedUsageClasses = []string{"on-demand"}
	if t.OnDemandPrice > 0 {
		x.SupportedUsageClasses = append(x.SupportedUsageClasses, "spot")
	}
	arch, threads, boot := "x86_64", int64(2), []string{"legacy-bios", "uefi"}
	if t.Arch == "arm64" {
		arch, threads, boot = "arm64", 1, []string{"uefi"}
	}
	if t.VCPU < 2 {
		threads = 1
	}
	x.SupportedBootModes = boot
	x.ProcessorInfo = xmlProcessorInfo{SupportedArchitectures: []string{arch}, Manufacturer: cpuManufacturer(label(wellknown.InstanceCPUManufacturerLabel))}
	if mhz := atoi(wellknown.InstanceCPUSustainedClockSpeedMhzLabel); mhz > 0 {
		x.ProcessorInfo.SustainedClockSpeedInGhz = strconv.FormatFloat(float64(mhz)/1000, 'f', -1, 64)
	}
	x.VCPUInfo = xmlVCPUInfo{DefaultVCPUs: t.VCPU, DefaultCores: max(1, t.VCPU/threads), DefaultThreadsPerCore: threads}
	x.MemoryInfo.SizeInMiB = t.MemoryMiB
	if gb := atoi(wellknown.InstanceLocalNVMeLabel); gb > 0 {
		x.InstanceStorageSupported = true
		x.InstanceStorageInfo = &xmlInstanceStorageInfo{TotalSizeInGB: gb, NVMeSupport: "required", EncryptionSupport: "required"}
		x.InstanceStorageInfo.Disks = append(x.InstanceStorageInfo.Disks, struct {
			SizeInGB int64  `xml:"sizeInGB"`
			Count    int64  `xml:"count"`
			Type     string `xml:"type"`
		}{gb, 1, "ssd"})
	}
	nitro := x.Hypervisor == "nitro" || t.IsMetal()
	x.EBSInfo = xmlEBSInfo{EBSOptimizedSupport: "supported", EncryptionSupport: "supported", NVMeSupport: "unsupported"}
	if nitro {
		x.EBSInfo.NVMeSupport = "required"
	}
	if bw := atoi(wellknown.InstanceEBSBandwidthLabel); bw > 0 {
		x.EBSInfo.EBSOptimizedSupport = "default"
		x.EBSInfo.EBSOptimizedInfo = &struct {
			BaselineBandwidthInMbps int64 `xml:"baselineBandwidthInMbps"`
			MaximumBandwidthInMbps  int64 `xml:"maximumBandwidthInMbps"`
		}{bw, bw}
	}
	ifaces, ipv4 := ENIFacts(t)
	gbps := float64(atoi(wellknown.InstanceNetworkBandwidthLabel)) / 1000
	perf := "Moderate"
	if gbps > 0 {
		perf = strconv.FormatFloat(gbps, 'f', -1, 64) + " Gigabit"
	}
	capacity := t.Capacity(catalog.NodeConfig{})
	x.NetworkInfo = xmlNetworkInfo{
		NetworkPerformance: perf, MaximumNetworkInterfaces: ifaces, MaximumNetworkCards: 1, DefaultNetworkCardIndex: 0,
		NetworkCards:              []xmlNetworkCard{{NetworkCardIndex: 0, NetworkPerformance: perf, MaximumNetworkInterfaces: ifaces, BaselineBandwidthInGbps: gbps, PeakBandwidthInGbps: gbps}},
		IPv4AddressesPerInterface: ipv4, IPv6AddressesPerInterface: ipv4, IPv6Supported: nitro, ENASupport: "supported",
		EncryptionInTransitSupported: label(wellknown.InstanceEncryptionInTransitSupportedLabel) == "true",
	}
	if nitro {
		x.NetworkInfo.ENASupport = "required"
	}
	if q, ok := capacity[wellknown.ResourceEFA]; ok && q.Value() > 0 {
		x.NetworkInfo.EFASupported = true
		x.NetworkInfo.EFAInfo = &struct {
			MaximumEFAInterfaces int64 `xml:"maximumEfaInterfaces"`
		}{q.Value()}
	}
	// Fractional-GPU types (g6f) publish a GPU with a count of 0.
	if n, maker := t.GPUs(); n > 0 || label(wellknown.InstanceGPUNameLabel) != "" {
		mem := atoi(wellknown.InstanceGPUMemoryLabel)
		g := &xmlGPUInfo{TotalGPUMemoryInMiB: mem * n}
		g.GPUs = append(g.GPUs, struct {
			Name         string `xml:"name"`
			Manufacturer string `xml:"manufacturer"`
			Count        int64  `xml:"count"`
			MemoryInfo   struct {
				SizeInMiB int64 `xml:"sizeInMiB"`
			} `xml:"memoryInfo"`
		}{Name: strings.ToUpper(label(wellknown.InstanceGPUNameLabel)), Manufacturer: strings.ToUpper(maker), Count: n})
		g.GPUs[0].MemoryInfo.SizeInMiB = mem
		x.GPUInfo = g
	}
	if n, maker := t.Accelerators(); n > 0 && maker != "aws" {
		x.InferenceAcceleratorInfo = &xmlInferenceInfo{Accelerators: []xmlInferenceDevice{{
			Count: n, Name: strings.ReplaceAll(label(wellknown.InstanceAcceleratorNameLabel), "-", " "), Manufacturer: maker,
		}}}
	}
	if n, maker := t.Accelerators(); n > 0 && maker == "aws" {
		ni := &xmlNeuronInfo{}
		ni.Devices = append(ni.Devices, struct {
			Count    int64  `xml:"count"`
			Name     string `xml:"name"`
			CoreInfo struct {
				Count   int64 `xml:"count"`
				Version int64 `xml:"version"`
			} `xml:"coreInfo"`
		}{Count: n, Name: label(wellknown.InstanceAcceleratorNameLabel)})
		if q, ok := capacity[wellknown.ResourceAWSNeuronCore]; ok {
			ni.Devices[0].CoreInfo.Count = q.Value() / n
			ni.Devices[0].CoreInfo.Version = 2
		}
		x.NeuronInfo = ni
	}
	return x
}

// instanceTypes renders the catalog once per emulator; callers hold e.mu.
func (e *Emulator) instanceTypes() []xmlInstanceType {
	if e.typeCache == nil {
		for _, t := range e.cfg.Catalog.All() {
			e.typeCache = append(e.typeCache, instanceTypeInfo(t))
		}
	}
	return e.typeCache
}

type describeInstanceTypesResponse struct {
	ec2Meta
	InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeInstanceTypes(r *request) (any, *apiError) {
	names := list(r.params, "InstanceType")
	var missing []string
	for _, n := range names {
		if _, ok := e.cfg.Catalog.Get(n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, errorf(400, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	filters := parseFilters(r.params)
	var matched []xmlInstanceType
	for _, x := range e.instanceTypes() {
		if len(names) > 0 && !contains(names, x.InstanceType) {
			continue
		}
		get := func(name string) ([]string, bool) {
			b := strconv.FormatBool
			switch name {
			case "instance-type":
				return []string{x.InstanceType}, true
			case "current-generation":
				return []string{b(x.CurrentGeneration)}, true
			case "processor-info.supported-architecture":
				return x.ProcessorInfo.SupportedArchitectures, true
			case "bare-metal":
				return []string{b(x.BareMetal)}, true
			case "hypervisor":
				return []string{x.Hypervisor}, true
			case "supported-usage-class":
				return x.SupportedUsageClasses, true
			case "supported-virtualization-type":
				return x.SupportedVirtualizationTypes, true
			case "supported-root-device-type":
				return x.SupportedRootDeviceTypes, true
			case "burstable-performance-supported":
				return []string{b(x.BurstablePerformanceSupported)}, true
			case "instance-storage-supported":
				return []string{b(x.InstanceStorageSupported)}, true
			case "vcpu-info.default-vcpus":
				return []string{strconv.FormatInt(x.VCPUInfo.DefaultVCPUs, 10)}, true
			case "memory-info.size-in-mib":
				return []string{strconv.FormatInt(x.MemoryInfo.SizeInMiB, 10)}, true
			case "network-info.efa-supported":
				return []string{b(x.NetworkInfo.EFASupported)}, true
			case "network-info.ena-support":
				return []string{x.NetworkInfo.ENASupport}, true
			case "free-tier-eligible":
				return []string{b(x.FreeTierEligible)}, true
			case "hibernation-supported":
				return []string{b(x.HibernationSupported)}, true
			case "auto-recovery-supported":
				return []string{b(x.AutoRecoverySupported)}, true
			case "dedicated-hosts-supported":
				return []string{b(x.DedicatedHostsSupported)}, true
			}
			return nil, false
		}
		ok, err := matchFilters(filters, get, nil)
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, x)
		}
	}
	page, next, err := paginate(matched, r.params, 100, 5, 100)
	if err != nil {
		return nil, err
	}
	return &describeInstanceTypesResponse{InstanceTypes: page, NextToken: next}, nil
}

// --- DescribeInstanceTypeOfferings ---

type xmlOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeOfferingsResponse struct {
	ec2Meta
	Offerings []xmlOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeInstanceTypeOfferings(r *request) (any, *apiError) {
	lt := r.params.Get("LocationType")
	if lt == "" {
		lt = "region"
	}
	switch lt {
	case "region", "availability-zone", "availability-zone-id":
	default:
		return nil, errorf(400, "InvalidParameterValue", "Value (%s) for parameter locationType is invalid.", lt)
	}
	filters := parseFilters(r.params)
	var matched []xmlOffering
	for _, t := range e.cfg.Catalog.All() {
		var locations []string
		if lt == "region" {
			locations = []string{e.cfg.Region}
		} else {
			for _, z := range e.cfg.Zones {
				if e.unoffered(t.Name, z.Name) {
					continue
				}
				if lt == "availability-zone" {
					locations = append(locations, z.Name)
				} else {
					locations = append(locations, z.ID)
				}
			}
		}
		for _, loc := range locations {
			get := func(name string) ([]string, bool) {
				switch name {
				case "instance-type":
					return []string{t.Name}, true
				case "location":
					return []string{loc}, true
				}
				return nil, false
			}
			ok, err := matchFilters(filters, get, nil)
			if err != nil {
				return nil, err
			}
			if ok {
				matched = append(matched, xmlOffering{t.Name, lt, loc})
			}
		}
	}
	page, next, err := paginate(matched, r.params, 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &describeOfferingsResponse{Offerings: page, NextToken: next}, nil
}

// --- spot prices ---

// SpotPriceInterval is how often emulated spot prices change.
const SpotPriceInterval = time.Hour

// spotPrice is the emulated spot price of a type in a zone at a time:
// between 30% and 70% of on-demand by a hash of type and zone, moving by up
// to ±5% each SpotPriceInterval. 0 means no spot market (no on-demand
// price, or Hostility.NoSpotMarketFraction). Callers hold e.mu.
func (e *Emulator) spotPrice(t *catalog.InstanceType, zone string, at time.Time) float64 {
	if t.OnDemandPrice <= 0 || e.noSpotMarket(t.Name, zone) {
		return 0
	}
	bucket := at.Truncate(SpotPriceInterval).Unix()
	base := 0.3 + 0.4*unitHash("spot", t.Name, zone)
	drift := 1 + 0.1*(unitHash("drift", t.Name, zone, strconv.FormatInt(bucket, 10))-0.5)
	return math.Round(t.OnDemandPrice*base*drift*1e6) / 1e6
}

// SpotPrice is the current emulated spot price (USD/hour) of an instance
// type in a zone; 0 when it has none (no spot market there).
func (e *Emulator) SpotPrice(instanceType, zone string) float64 {
	t, ok := e.cfg.Catalog.Get(instanceType)
	if !ok {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.spotPrice(t, zone, e.clock.Now())
}

type xmlSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type describeSpotPriceHistoryResponse struct {
	ec2Meta
	Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

var spotProducts = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

// describeSpotPriceHistory returns, per type, zone and product, the price
// in effect at StartTime and every change up to EndTime (at most 48
// intervals), newest first; without StartTime only the current price.
func (e *Emulator) describeSpotPriceHistory(r *request) (any, *apiError) {
	p := r.params
	now := e.now()
	end := now
	if s := p.Get("EndTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, errorf(400, "InvalidParameterValue", "Invalid EndTime %q", s)
		}
		if t.Before(end) {
			end = t
		}
	}
	start := end
	if s := p.Get("StartTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, errorf(400, "InvalidParameterValue", "Invalid StartTime %q", s)
		}
		if t.Before(start) {
			start = t
		}
	}
	if end.Sub(start) > 48*SpotPriceInterval {
		start = end.Add(-48 * SpotPriceInterval)
	}
	types, products := list(p, "InstanceType"), list(p, "ProductDescription")
	if len(products) == 0 {
		products = spotProducts
	}
	zones := e.cfg.Zones
	if z := p.Get("AvailabilityZone"); z != "" {
		zz, ok := e.zone(z)
		if !ok {
			return nil, errorf(400, "InvalidParameterValue", "Invalid availability zone: [%s]", z)
		}
		zones = []Zone{zz}
	}
	filters := parseFilters(p)
	var buckets []time.Time
	for b := end.Truncate(SpotPriceInterval); !b.Before(start.Truncate(SpotPriceInterval)); b = b.Add(-SpotPriceInterval) {
		buckets = append(buckets, b)
	}
	var matched []xmlSpotPrice
	for _, b := range buckets {
		for _, t := range e.cfg.Catalog.All() {
			if t.OnDemandPrice <= 0 || (len(types) > 0 && !contains(types, t.Name)) {
				continue
			}
			for _, z := range zones {
				if e.unoffered(t.Name, z.Name) {
					continue
				}
				sp := e.spotPrice(t, z.Name, b)
				if sp == 0 {
					continue // no spot market: no rows, as EC2 has none
				}
				price := strconv.FormatFloat(sp, 'f', 6, 64)
				for _, prod := range products {
					if !contains(spotProducts, prod) {
						continue
					}
					x := xmlSpotPrice{z.Name, z.ID, t.Name, prod, price, awsTime(b)}
					get := func(name string) ([]string, bool) {
						switch name {
						case "instance-type":
							return []string{x.InstanceType}, true
						case "availability-zone":
							return []string{x.AvailabilityZone}, true
						case "product-description":
							return []string{x.ProductDescription}, true
						case "spot-price":
							return []string{x.SpotPrice}, true
						case "timestamp":
							return []string{x.Timestamp}, true
						}
						return nil, false
					}
					ok, err := matchFilters(filters, get, nil)
					if err != nil {
						return nil, err
					}
					if ok {
						matched = append(matched, x)
					}
				}
			}
		}
	}
	sort.SliceStable(matched, func(i, j int) bool { return matched[i].Timestamp > matched[j].Timestamp })
	page, next, err := paginate(matched, p, 1000, 0, 0)
	if err != nil {
		return nil, err
	}
	return &describeSpotPriceHistoryResponse{Prices: page, NextToken: next}, nil
}

// OnDemandPrice is a type's on-demand price in the emulated region.
func (e *Emulator) OnDemandPrice(instanceType string) (float64, error) {
	t, ok := e.cfg.Catalog.Get(instanceType)
	if !ok {
		return 0, fmt.Errorf("emulator: unknown instance type %q", instanceType)
	}
	return t.OnDemandPrice, nil
}
