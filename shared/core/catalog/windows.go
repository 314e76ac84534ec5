package catalog

// WindowsBuild is the node.kubernetes.io/windows-build a Windows AMI
// family's nodes carry, "" for other families (Karpenter's
// Windows2019Build, Windows2022Build, Windows2025Build in
// pkg/apis/v1/labels.go).
func WindowsBuild(family string) string {
	switch family {
	case FamilyWindows2019:
		return "10.0.17763"
	case FamilyWindows2022:
		return "10.0.20348"
	case FamilyWindows2025:
		return "10.0.26100"
	}
	return ""
}

// WindowsPrivateIPv4 is the vpc.amazonaws.com/PrivateIPv4Address a Windows
// node of this type offers: EKS's VPC resource controller gives Windows pods
// a secondary address of the primary interface each, and its admission
// webhook makes every Windows pod request one. Karpenter counts the
// interface's addresses less the node's own (privateIPv4Address in
// pkg/providers/instancetype/types.go); 0 for other families, or when the
// catalog has no address count for the type.
func (t *InstanceType) WindowsPrivateIPv4(family string) int64 {
	if !isWindows(family) || t.ipv4PerInterface <= 1 {
		return 0
	}
	return t.ipv4PerInterface - 1
}
