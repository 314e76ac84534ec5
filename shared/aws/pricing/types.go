package pricing

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// TypesEC2 is what reading the region's instance types needs.
type TypesEC2 interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
}

// typePages reads up to max pages (0: all) of the region's instance
// types from token on (pages of 100, EC2's maximum), as catalog facts. It
// returns the token of the next page, "" when the list is done. Types
// whose facts cannot be used (no x86_64 or arm64 architecture: mac,
// i386-only) are left out.
func typePages(ctx context.Context, api TypesEC2, token string, max int) ([]catalog.Facts, string, Traffic, error) {
	var out []catalog.Facts
	var tr Traffic
	for max == 0 || tr.Calls < max {
		in := &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)}
		if token != "" {
			in.NextToken = aws.String(token)
		}
		page, err := api.DescribeInstanceTypes(ctx, in)
		if err != nil {
			return out, token, tr, fmt.Errorf("describing instance types: %w", err)
		}
		tr.Calls++
		for _, info := range page.InstanceTypes {
			if f, ok := FactsOf(info); ok {
				out = append(out, f)
			}
		}
		token = aws.ToString(page.NextToken)
		if token == "" {
			break
		}
	}
	return out, token, tr, nil
}

// familyScheme splits a type name into category and generation, as the
// reference provider does: "m5dn.large" is category m, generation 5;
// "u-6tb1.metal" is u, 1.
var familyScheme = regexp.MustCompile(`(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`)

// kebab is the provider's label spelling of EC2's names ("NVIDIA" ->
// "nvidia", "Radeon Pro V520" -> "radeon-pro-v520").
func kebab(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "-")) }

// FactsOf turns DescribeInstanceTypes' answer for one type into catalog
// facts, with the labels the reference provider derives from the same
// answer. Network bandwidth and pod-eni are not in the answer (the
// provider reads them from tables); Catalog.Live takes them from the build
// where it knows the type. ok is false for types nodes cannot use.
func FactsOf(info ec2types.InstanceTypeInfo) (f catalog.Facts, ok bool) {
	name := string(info.InstanceType)
	f.Name = name
	if info.ProcessorInfo != nil {
		for _, a := range info.ProcessorInfo.SupportedArchitectures {
			switch a {
			case ec2types.ArchitectureTypeX8664:
				f.Arch = "amd64"
			case ec2types.ArchitectureTypeArm64:
				f.Arch = "arm64"
			}
		}
	}
	if f.Arch == "" || info.VCpuInfo == nil || info.MemoryInfo == nil || info.NetworkInfo == nil {
		return f, false
	}
	f.VCPU = int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus))
	f.MemoryMiB = aws.ToInt64(info.MemoryInfo.SizeInMiB)
	n := info.NetworkInfo
	f.IPv4PerInterface = int64(aws.ToInt32(n.Ipv4AddressesPerInterface))
	total := int64(aws.ToInt32(n.MaximumNetworkInterfaces))
	f.Interfaces = total
	// The VPC CNI uses the default network card only.
	def := aws.ToInt32(n.DefaultNetworkCardIndex)
	for _, c := range n.NetworkCards {
		if aws.ToInt32(c.NetworkCardIndex) == def && c.MaximumNetworkInterfaces != nil {
			f.Interfaces = int64(*c.MaximumNetworkInterfaces)
		}
	}
	f.MultiCard = f.Interfaces < total
	if n.EfaInfo != nil {
		f.EFA = int64(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
	}
	l := map[string]string{
		wellknown.InstanceTypeLabel:                         name,
		wellknown.ArchLabel:                                 f.Arch,
		wellknown.OSLabel:                                   "linux",
		wellknown.InstanceCPULabel:                          strconv.FormatInt(f.VCPU, 10),
		wellknown.InstanceMemoryLabel:                       strconv.FormatInt(f.MemoryMiB, 10),
		wellknown.InstanceEncryptionInTransitSupportedLabel: strconv.FormatBool(aws.ToBool(n.EncryptionInTransitSupported)),
		wellknown.InstanceCapabilityFlexLabel:               "false",
	}
	if info.Hypervisor != "" {
		l[wellknown.InstanceHypervisorLabel] = string(info.Hypervisor)
	}
	if m := familyScheme.FindStringSubmatch(name); len(m) == 4 {
		l[wellknown.InstanceCategoryLabel], l[wellknown.InstanceGenerationLabel] = m[1], m[3]
	}
	if family, size, found := strings.Cut(name, "."); found {
		l[wellknown.InstanceFamilyLabel], l[wellknown.InstanceSizeLabel] = family, size
		if strings.Contains(family, "-flex") {
			l[wellknown.InstanceCapabilityFlexLabel] = "true"
		}
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		l[wellknown.InstanceLocalNVMeLabel] = strconv.FormatInt(*s.TotalSizeInGB, 10)
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) == 1 {
		gpu := g.Gpus[0]
		l[wellknown.InstanceGPUNameLabel] = kebab(aws.ToString(gpu.Name))
		l[wellknown.InstanceGPUManufacturerLabel] = kebab(aws.ToString(gpu.Manufacturer))
		l[wellknown.InstanceGPUCountLabel] = strconv.Itoa(int(aws.ToInt32(gpu.Count)))
		if gpu.MemoryInfo != nil {
			l[wellknown.InstanceGPUMemoryLabel] = strconv.Itoa(int(aws.ToInt32(gpu.MemoryInfo.SizeInMiB)))
		}
	}
	if a := info.InferenceAcceleratorInfo; a != nil && len(a.Accelerators) == 1 && info.NeuronInfo == nil {
		acc := a.Accelerators[0]
		l[wellknown.InstanceAcceleratorNameLabel] = kebab(aws.ToString(acc.Name))
		l[wellknown.InstanceAcceleratorManufacturerLabel] = kebab(aws.ToString(acc.Manufacturer))
		l[wellknown.InstanceAcceleratorCountLabel] = strconv.Itoa(int(aws.ToInt32(acc.Count)))
	}
	if ni := info.NeuronInfo; ni != nil && len(ni.NeuronDevices) == 1 {
		d := ni.NeuronDevices[0]
		count := int64(aws.ToInt32(d.Count))
		l[wellknown.InstanceAcceleratorNameLabel] = kebab(aws.ToString(d.Name))
		l[wellknown.InstanceAcceleratorManufacturerLabel] = "aws"
		l[wellknown.InstanceAcceleratorCountLabel] = strconv.FormatInt(count, 10)
		if d.CoreInfo != nil {
			f.NeuronCores = count * int64(aws.ToInt32(d.CoreInfo.Count))
		}
	}
	if p := info.ProcessorInfo; p != nil {
		if p.Manufacturer != nil {
			l[wellknown.InstanceCPUManufacturerLabel] = kebab(*p.Manufacturer)
		}
		// As the provider does: an unpublished speed reads as 0.
		l[wellknown.InstanceCPUSustainedClockSpeedMhzLabel] = strconv.Itoa(int(math.Round(aws.ToFloat64(p.SustainedClockSpeedInGhz) * 1000)))
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil && e.EbsOptimizedSupport == ec2types.EbsOptimizedSupportDefault {
		l[wellknown.InstanceEBSBandwidthLabel] = strconv.Itoa(int(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps)))
	}
	f.Labels = l
	return f, true
}
