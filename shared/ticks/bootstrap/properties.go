package bootstrap

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Properties are the bootstrap custom resource's properties, as the CDK
// stack (infra/stack) sets them. CloudFormation passes every value as a
// string.
type Properties struct {
	ClusterName               string
	NodeRoleName              string
	InstallDefaultNodePool    bool
	RemoveUserObjectsOnDelete bool
	// ControllersGroup: DefaultControllersGroup when absent.
	ControllersGroup string
	// Namespace: the function's configured namespace when absent.
	Namespace string
	// Paused sets the pause switch on Create and Update (cdk deploy -c
	// paused=true); false or absent leaves it as it is.
	Paused bool
	// Mode is the stack's mode: "shadow" (cdk deploy -c mode=shadow)
	// leaves Karpenter's CRDs alone; absent or "active" installs them.
	Mode string
	// CRDHash and BootstrapSHA256 only make CloudFormation send an Update
	// when the CRDs or the function change.
	CRDHash         string
	BootstrapSHA256 string
}

// knownProperties are read (or deliberately ignored: ServiceToken and
// ServiceTimeout belong to CloudFormation).
var knownProperties = map[string]bool{
	"ServiceToken": true, "ServiceTimeout": true,
	"ClusterName": true, "NodeRoleName": true, "InstallDefaultNodePool": true,
	"RemoveUserObjectsOnDelete": true, "ControllersGroup": true, "Namespace": true,
	"CRDHash": true, "BootstrapSHA256": true, "Paused": true, "Mode": true,
}

// ParseProperties reads the properties of a custom resource event. It
// reports every malformed value at once; unknown names are returned so the
// caller can log them (a newer stack may pass more).
func ParseProperties(m map[string]any) (p Properties, unknown []string, err error) {
	var errs []error
	str := func(key string, required bool) string {
		v, ok := m[key]
		if !ok || v == nil {
			if required {
				errs = append(errs, fmt.Errorf("property %s is required", key))
			}
			return ""
		}
		s, ok := v.(string)
		if !ok {
			errs = append(errs, fmt.Errorf("property %s must be a string, got %T", key, v))
			return ""
		}
		s = strings.TrimSpace(s)
		if required && s == "" {
			errs = append(errs, fmt.Errorf("property %s is empty", key))
		}
		return s
	}
	boolean := func(key string) bool {
		v, ok := m[key]
		if !ok || v == nil {
			return false
		}
		switch x := v.(type) {
		case bool:
			return x
		case string:
			if strings.TrimSpace(x) == "" {
				return false
			}
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			if err != nil {
				errs = append(errs, fmt.Errorf("property %s=%q is not true or false", key, x))
			}
			return b
		}
		errs = append(errs, fmt.Errorf("property %s must be \"true\" or \"false\", got %T", key, v))
		return false
	}
	p = Properties{
		ClusterName:               str("ClusterName", true),
		NodeRoleName:              str("NodeRoleName", false),
		InstallDefaultNodePool:    boolean("InstallDefaultNodePool"),
		RemoveUserObjectsOnDelete: boolean("RemoveUserObjectsOnDelete"),
		ControllersGroup:          str("ControllersGroup", false),
		Namespace:                 str("Namespace", false),
		Paused:                    boolean("Paused"),
		Mode:                      str("Mode", false),
		CRDHash:                   str("CRDHash", false),
		BootstrapSHA256:           str("BootstrapSHA256", false),
	}
	if p.Mode != "" && p.Mode != "active" && p.Mode != "shadow" {
		errs = append(errs, fmt.Errorf("property Mode=%q is not active or shadow", p.Mode))
	}
	for k := range m {
		if !knownProperties[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	return p, unknown, errors.Join(errs...)
}

// Options turns the properties into engine options; namespace is used when
// the properties name none.
func (p Properties) Options(namespace string) Options {
	ns := p.Namespace
	if ns == "" {
		ns = namespace
	}
	return Options{
		ClusterName:       p.ClusterName,
		Namespace:         ns,
		ControllersGroup:  p.ControllersGroup,
		DefaultNodePool:   p.InstallDefaultNodePool,
		NodeRoleName:      p.NodeRoleName,
		RemoveUserObjects: p.RemoveUserObjectsOnDelete,
		Pause:             p.Paused,
		Shadow:            p.Mode == "shadow",
	}
}
