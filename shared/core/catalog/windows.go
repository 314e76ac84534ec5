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
