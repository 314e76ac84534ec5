package bootstrap

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/karpless/karpless/shared/function/config"
)

// OptionsFrom is what the bootstrap installs and removes: the function's
// own settings, which the stack writes into its environment on every
// deploy. Nothing of it is read from the CloudFormation event: whoever can
// invoke the function cannot choose the mode, the group the controllers'
// grants go to, or whether user objects are deleted.
func OptionsFrom(c config.Config) Options {
	return Options{
		ClusterName:       c.ClusterName,
		Namespace:         c.Namespace,
		ControllersGroup:  c.ControllersGroup,
		DefaultNodePool:   c.InstallDefaultNodePool,
		NodeRoleName:      c.NodeRoleName,
		RemoveUserObjects: c.RemoveUserObjectsOnDelete,
		Pause:             c.Paused,
		Shadow:            c.Shadow(),
	}
}

// SettingsHashProperty names the custom resource's property that carries
// SettingsHash of the options the stack configured. CloudFormation sends
// an Update when it changes, and the handler acts on a Create or Update
// only when it matches the function's own: in a rollback, CloudFormation
// updates the custom resource before it restores the function's older
// environment, and the newer settings are then not re-applied.
const SettingsHashProperty = "SettingsHash"

// SettingsHash identifies the options (with defaults): equal options,
// equal hashes.
func (o Options) SettingsHash() string {
	o = o.withDefaults()
	b, err := json.Marshal(struct {
		ClusterName, Namespace, ControllersGroup, NodeRoleName string
		DefaultNodePool, RemoveUserObjects, Pause, Shadow      bool
	}{o.ClusterName, o.Namespace, o.ControllersGroup, o.NodeRoleName, o.DefaultNodePool, o.RemoveUserObjects, o.Pause, o.Shadow})
	if err != nil {
		panic(err) // strings and booleans always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// responseBucketPrefix starts the name of the S3 bucket CloudFormation
// takes custom resources' answers in, one per region (its name is the
// region without dashes: cloudformation-custom-resource-response-uswest2).
const responseBucketPrefix = "cloudformation-custom-resource-response-"

// CheckResponseURL says why raw is not a CloudFormation response URL of
// region (nil when it is): an https URL, on the default port, of that
// region's response bucket, virtual-hosted or path-style, on S3's global,
// regional or legacy dashed endpoint. The answer carries what the
// bootstrap installed; it goes nowhere else.
func CheckResponseURL(raw, region string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("response URL: %w", err)
	}
	if u.Scheme != "https" || u.User != nil || u.Opaque != "" || (u.Port() != "" && u.Port() != "443") {
		return fmt.Errorf("response URL %s://%s is not an https URL of S3", u.Scheme, u.Host)
	}
	bucket := responseBucketPrefix + strings.ReplaceAll(region, "-", "")
	domain := "amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		domain = "amazonaws.com.cn"
	}
	host := strings.ToLower(u.Hostname())
	endpoints := []string{"s3." + region + "." + domain, "s3-" + region + "." + domain}
	if domain == "amazonaws.com" {
		endpoints = append(endpoints, "s3.amazonaws.com")
	}
	for _, ep := range endpoints {
		if host == bucket+"."+ep || (host == ep && strings.HasPrefix(u.EscapedPath(), "/"+bucket+"/")) {
			return nil
		}
	}
	return fmt.Errorf("response URL host %s is not CloudFormation's response bucket %s of region %s", host, bucket, region)
}
