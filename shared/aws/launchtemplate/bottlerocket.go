package launchtemplate

import (
	"strconv"
	"strings"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
)

// BottlerocketAMIVersion is the Bottlerocket version a class's AMIs are
// of, as Karpenter v1.14.1 reads it (amifamily resolveAMIVersion): an
// alias's version ("latest" or v1.46.0), else the version in a name
// term (bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a), else in the
// name of the resolved image an id term names, else in any resolved
// Bottlerocket image's name; "" when none says.
func BottlerocketAMIVersion(terms []awsv1.AMISelectorTerm, amis []awsv1.AMI) string {
	for _, t := range terms {
		if t.Alias == "" {
			continue
		}
		if parts := strings.Split(t.Alias, "@"); len(parts) == 2 {
			return parts[1]
		}
	}
	for _, t := range terms {
		if v := versionInName(t.Name); t.Name != "" && v != "" {
			return v
		}
	}
	for _, t := range terms {
		if t.ID == "" {
			continue
		}
		for _, a := range amis {
			if a.ID == t.ID && strings.Contains(a.Name, "bottlerocket") {
				if v := versionInName(a.Name); v != "" {
					return v
				}
			}
		}
	}
	for _, a := range amis {
		if strings.Contains(a.Name, "bottlerocket") {
			if v := versionInName(a.Name); v != "" {
				return v
			}
		}
	}
	return ""
}

// versionInName is the first dash-separated part of an image name that
// looks like a version (v then a dot somewhere).
func versionInName(name string) string {
	for part := range strings.SplitSeq(name, "-") {
		if strings.HasPrefix(part, "v") && strings.Contains(part, ".") {
			return part
		}
	}
	return ""
}

// SupportsDefaultBind reports whether a Bottlerocket version binds the
// instance store to its default directories by itself (1.46.0 and later;
// "latest" is taken as the newest), so RAID0's bind command names none.
func SupportsDefaultBind(version string) bool {
	if version == "latest" {
		return true
	}
	parts := strings.Split(strings.TrimLeft(version, "v"), ".")
	if len(parts) < 3 {
		return false
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	return major > 1 || (major == 1 && minor >= 46)
}

// bottlerocketKubernetesKeys are the settings.kubernetes keys Karpenter
// v1.14.1's Bottlerocket config models (bootstrap/bottlerocketsettings.go).
// Karpenter reads spec.userData into that config and writes it back, so
// any other key the user writes is dropped: Bottlerocket refuses a setting
// it does not know, and a node that cannot apply its user data launches
// but never joins.
var bottlerocketKubernetesKeys = map[string]bool{
	"api-server": true, "cloud-provider": true, "cluster-certificate": true, "cluster-name": true,
	"cluster-dns-ip": true, "credential-providers": true, "node-labels": true, "node-taints": true,
	"max-pods": true, "static-pods": true, "eviction-hard": true, "eviction-soft": true,
	"eviction-soft-grace-period": true, "eviction-max-pod-grace-period": true, "kube-reserved": true,
	"system-reserved": true, "allowed-unsafe-sysctls": true, "server-tls-bootstrap": true,
	"registry-qps": true, "registry-burst": true, "event-qps": true, "event-burst": true,
	"kube-api-qps": true, "kube-api-burst": true, "container-log-max-size": true,
	"container-log-max-files": true, "cpu-manager-policy": true, "cpu-manager-policy-options": true,
	"cpu-manager-reconcile-period": true, "memory-manager-policy": true, "topology-manager-scope": true,
	"topology-manager-policy": true, "topology-manager-policy-options": true,
	"image-gc-high-threshold-percent": true, "image-gc-low-threshold-percent": true, "ids-per-pod": true,
	"cpu-cfs-quota-enforced": true, "shutdown-grace-period": true,
	"shutdown-grace-period-for-critical-pods": true, "cluster-domain": true, "seccomp-default": true,
	"pod-pids-limit": true, "device-ownership-from-security-context": true,
	"single-process-oom-kill": true, "container-log-max-workers": true,
	"container-log-monitor-interval": true, "hostname-override-source": true, "log-level": true,
}
