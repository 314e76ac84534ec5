package nodeclass

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/core/wellknown"
)

// Alias is a parsed amiSelectorTerms[].alias, e.g. al2023@latest.
type Alias struct {
	// Family is the AMI family the alias names, spelled as spec.amiFamily
	// spells it (AL2023, Bottlerocket, ...).
	Family string
	// Version is "latest" or a pinned AMI version (v20240807, v1.26.0, ...).
	Version string
}

// AliasVersionLatest is the floating alias version.
const AliasVersionLatest = "latest"

func (a Alias) String() string { return strings.ToLower(a.Family) + "@" + a.Version }

var aliasFamilies = []string{
	catalog.FamilyAL2, catalog.FamilyAL2023, catalog.FamilyBottlerocket,
	catalog.FamilyWindows2019, catalog.FamilyWindows2022, catalog.FamilyWindows2025,
}

// ParseAlias parses family@version; the family is case-insensitive.
func ParseAlias(s string) (Alias, error) {
	fam, ver, ok := strings.Cut(s, "@")
	if !ok || fam == "" || ver == "" || strings.Contains(ver, "@") {
		return Alias{}, fmt.Errorf("alias %q is not family@version", s)
	}
	for _, f := range aliasFamilies {
		if strings.EqualFold(f, fam) {
			return Alias{Family: f, Version: ver}, nil
		}
	}
	return Alias{}, fmt.Errorf("alias %q: family %q is not one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025", s, fam)
}

// AliasOf returns the class's alias term, if it has one (the CRD allows an
// alias only as the single AMI selector term).
func AliasOf(nc *awsv1.EC2NodeClass) (Alias, bool, error) {
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			a, err := ParseAlias(t.Alias)
			return a, err == nil, err
		}
	}
	return Alias{}, false, nil
}

// Family is the AMI family that decides user data and default volumes:
// spec.amiFamily when set, else the alias's family, else Custom (which the
// CRD makes unreachable).
func Family(nc *awsv1.EC2NodeClass) string {
	if nc.Spec.AMIFamily != nil && *nc.Spec.AMIFamily != "" {
		return *nc.Spec.AMIFamily
	}
	if a, ok, _ := AliasOf(nc); ok {
		return a.Family
	}
	return catalog.FamilyCustom
}

// Variant is an EKS optimized AMI flavour for a kind of accelerator.
type Variant string

// Variants of the EKS optimized AMIs.
const (
	VariantStandard Variant = "standard"
	VariantNvidia   Variant = "nvidia"
	VariantNeuron   Variant = "neuron"
)

// Requirements are what an instance type must satisfy to use an AMI of
// this variant, as Karpenter writes them into status.amis (the
// architecture is added per image): standard has neither GPUs nor
// accelerators, nvidia has GPUs, neuron has accelerators.
func (v Variant) Requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case VariantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpExists}}
	case VariantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpExists}}
	default:
		return []corev1.NodeSelectorRequirement{
			{Key: wellknown.InstanceAcceleratorCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
		}
	}
}

// AliasParameter is one SSM parameter an alias reads, with what the image
// it names is for. Requirements are without the architecture, which comes
// from the image itself.
type AliasParameter struct {
	Path string
	// Arch is the EC2 architecture (x86_64, arm64) the path is for.
	Arch string
	// Requirements, one set per use: the AL2 GPU image serves both NVIDIA
	// and Neuron instances, so it has two sets.
	Requirements [][]corev1.NodeSelectorRequirement
}

// Windows builds, for the node.kubernetes.io/windows-build requirement.
var windowsBuilds = map[string]string{
	catalog.FamilyWindows2019: "10.0.17763",
	catalog.FamilyWindows2022: "10.0.20348",
	catalog.FamilyWindows2025: "10.0.26100",
}

// UnsupportedAliasError says an alias cannot be used with the cluster's
// Kubernetes version; it is a condition for a person to fix, not a retry.
type UnsupportedAliasError struct{ Reason string }

func (e *UnsupportedAliasError) Error() string { return e.Reason }

// AliasParameters lists the SSM parameters an alias resolves through for a
// cluster on kubernetesVersion (major.minor), in a fixed order.
//
//	AL2023:       /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/<recommended|amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<version>>/image_id
//	              (x86_64: standard, nvidia, neuron; arm64: standard, nvidia)
//	AL2:          /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2{,-arm64,-gpu}/<recommended|amazon-eks-{,arm64-,gpu-}node-<k8s>-<version>>/image_id
//	Bottlerocket: /aws/service/bottlerocket/aws-k8s-<k8s>{,-nvidia}/<arch>/<version without v|latest>/image_id
//	Windows:      /aws/service/ami-windows-latest/Windows_Server-<year>-English-Core-EKS_Optimized-<k8s>/image_id
func AliasParameters(a Alias, kubernetesVersion string) ([]AliasParameter, error) {
	minor, err := minorVersion(kubernetesVersion)
	if err != nil {
		return nil, err
	}
	k8s := fmt.Sprintf("1.%d", minor)
	latest := a.Version == AliasVersionLatest
	std, nvidia, neuron := VariantStandard.Requirements(), VariantNvidia.Requirements(), VariantNeuron.Requirements()
	switch a.Family {
	case catalog.FamilyAL2023:
		var out []AliasParameter
		for _, av := range []struct {
			arch    string
			variant Variant
		}{{"x86_64", VariantStandard}, {"x86_64", VariantNvidia}, {"x86_64", VariantNeuron}, {"arm64", VariantStandard}, {"arm64", VariantNvidia}} {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", av.arch, av.variant, k8s, a.Version)
			}
			out = append(out, AliasParameter{
				Path:         fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8s, av.arch, av.variant, name),
				Arch:         av.arch,
				Requirements: [][]corev1.NodeSelectorRequirement{av.variant.Requirements()},
			})
		}
		return out, nil
	case catalog.FamilyAL2:
		if minor >= 33 {
			return nil, &UnsupportedAliasError{Reason: fmt.Sprintf("alias %s: AL2 AMIs are not published for Kubernetes %s (EKS stopped AL2 at 1.32); use al2023@latest or bottlerocket@latest", a, k8s)}
		}
		name := func(prefix string) string {
			if latest {
				return "recommended"
			}
			return fmt.Sprintf("amazon-eks-%snode-%s-%s", prefix, k8s, a.Version)
		}
		return []AliasParameter{
			{Path: fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2/%s/image_id", k8s, name("")), Arch: "x86_64", Requirements: [][]corev1.NodeSelectorRequirement{std}},
			{Path: fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2-arm64/%s/image_id", k8s, name("arm64-")), Arch: "arm64", Requirements: [][]corev1.NodeSelectorRequirement{std}},
			{Path: fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2-gpu/%s/image_id", k8s, name("gpu-")), Arch: "x86_64", Requirements: [][]corev1.NodeSelectorRequirement{neuron, nvidia}},
		}, nil
	case catalog.FamilyBottlerocket:
		ver := strings.TrimPrefix(a.Version, "v")
		return []AliasParameter{
			// The standard x86_64 image also carries the Neuron driver.
			{Path: fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/x86_64/%s/image_id", k8s, ver), Arch: "x86_64", Requirements: [][]corev1.NodeSelectorRequirement{std, neuron}},
			{Path: fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/arm64/%s/image_id", k8s, ver), Arch: "arm64", Requirements: [][]corev1.NodeSelectorRequirement{std}},
			{Path: fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s-nvidia/x86_64/%s/image_id", k8s, ver), Arch: "x86_64", Requirements: [][]corev1.NodeSelectorRequirement{nvidia}},
			{Path: fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s-nvidia/arm64/%s/image_id", k8s, ver), Arch: "arm64", Requirements: [][]corev1.NodeSelectorRequirement{nvidia}},
		}, nil
	case catalog.FamilyWindows2019, catalog.FamilyWindows2022, catalog.FamilyWindows2025:
		if !latest {
			return nil, &UnsupportedAliasError{Reason: fmt.Sprintf("alias %s: Windows aliases only support the version latest", a)}
		}
		if a.Family == catalog.FamilyWindows2025 && minor < 35 {
			return nil, &UnsupportedAliasError{Reason: fmt.Sprintf("alias %s: Windows Server 2025 requires EKS version 1.35 or higher, current version: %s", a, k8s)}
		}
		year := strings.TrimPrefix(a.Family, "Windows")
		return []AliasParameter{{
			Path: fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, k8s),
			Arch: "x86_64",
			Requirements: [][]corev1.NodeSelectorRequirement{{
				{Key: wellknown.OSLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}},
				{Key: wellknown.WindowsBuildLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{windowsBuilds[a.Family]}},
			}},
		}}, nil
	}
	return nil, fmt.Errorf("alias %s: unknown family", a)
}

// minorVersion parses the minor of "1.33" (a leading v and a patch are tolerated).
func minorVersion(v string) (int, error) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 || parts[0] != "1" {
		return 0, fmt.Errorf("kubernetes version %q is not 1.<minor>", v)
	}
	n, err := strconv.Atoi(strings.TrimRight(parts[1], "+"))
	if err != nil {
		return 0, fmt.Errorf("kubernetes version %q is not 1.<minor>", v)
	}
	return n, nil
}

// kubeArch maps EC2 image architectures to kubernetes.io/arch values;
// others (i386, x86_64_mac, ...) cannot be used.
func kubeArch(ec2Arch string) (string, bool) {
	switch ec2Arch {
	case "x86_64":
		return "amd64", true
	case "arm64":
		return "arm64", true
	}
	return "", false
}
