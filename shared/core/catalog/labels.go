package catalog

import "github.com/karpless/karpless/shared/core/wellknown"

// Slots of InstanceType.labels; the generator writes values in this order.
const (
	labelInstanceType = iota
	labelArch
	labelOS
	labelFamily
	labelSize
	labelCPU
	labelMemory
	labelCategory
	labelGeneration
	labelHypervisor
	labelCPUManufacturer
	labelCPUClock
	labelEBSBandwidth
	labelNetworkBandwidth
	labelEncryptionInTransit
	labelCapabilityFlex
	labelLocalNVMe
	labelGPUName
	labelGPUManufacturer
	labelGPUCount
	labelGPUMemory
	labelAcceleratorName
	labelAcceleratorManufacturer
	labelAcceleratorCount
	numLabels
)

var labelKeys = [numLabels]string{
	labelInstanceType:            wellknown.InstanceTypeLabel,
	labelArch:                    wellknown.ArchLabel,
	labelOS:                      wellknown.OSLabel,
	labelFamily:                  wellknown.InstanceFamilyLabel,
	labelSize:                    wellknown.InstanceSizeLabel,
	labelCPU:                     wellknown.InstanceCPULabel,
	labelMemory:                  wellknown.InstanceMemoryLabel,
	labelCategory:                wellknown.InstanceCategoryLabel,
	labelGeneration:              wellknown.InstanceGenerationLabel,
	labelHypervisor:              wellknown.InstanceHypervisorLabel,
	labelCPUManufacturer:         wellknown.InstanceCPUManufacturerLabel,
	labelCPUClock:                wellknown.InstanceCPUSustainedClockSpeedMhzLabel,
	labelEBSBandwidth:            wellknown.InstanceEBSBandwidthLabel,
	labelNetworkBandwidth:        wellknown.InstanceNetworkBandwidthLabel,
	labelEncryptionInTransit:     wellknown.InstanceEncryptionInTransitSupportedLabel,
	labelCapabilityFlex:          wellknown.InstanceCapabilityFlexLabel,
	labelLocalNVMe:               wellknown.InstanceLocalNVMeLabel,
	labelGPUName:                 wellknown.InstanceGPUNameLabel,
	labelGPUManufacturer:         wellknown.InstanceGPUManufacturerLabel,
	labelGPUCount:                wellknown.InstanceGPUCountLabel,
	labelGPUMemory:               wellknown.InstanceGPUMemoryLabel,
	labelAcceleratorName:         wellknown.InstanceAcceleratorNameLabel,
	labelAcceleratorManufacturer: wellknown.InstanceAcceleratorManufacturerLabel,
	labelAcceleratorCount:        wellknown.InstanceAcceleratorCountLabel,
}

func labelIndex(key string) int {
	for i, k := range labelKeys {
		if k == key {
			return i
		}
	}
	return -1
}
