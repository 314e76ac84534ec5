// Command infra is the Karpless CDK app: one stack per EKS cluster.
//
//	cdk deploy -c clusterName=<name> [-c key=value ...]
//
// configFromContext reads every context key the app knows, each with its
// default; only clusterName is required. docs/deploy.md lists them all
// ("Context keys") and maps Karpenter's Helm values, environment settings
// and feature gates onto them ("Karpenter's settings"); the tests in this
// package hold that page and the keys read here to each other.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/karpless/karpless/infra/stack"
	fnconfig "github.com/karpless/karpless/shared/function/config"
)

// Used when neither context nor the CLI's credentials give an environment:
// lets `cdk synth` run with no AWS credentials. A deploy with these fails
// at the CLI (the account does not match the credentials).
const (
	dummyAccount = "123456789012"
	dummyRegion  = "us-east-1"
)

func main() {
	defer jsii.Close()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "karpless infra:", err)
		jsii.Close()
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	cfg, err := configFromContext(app)
	if err != nil {
		return err
	}
	if _, err := stack.NewStack(app, cfg.stackName, cfg.props); err != nil {
		return err
	}
	if cfg.nag {
		stack.AddAwsSolutionsChecks(app)
	}
	app.Synth(nil)
	return nil
}

type config struct {
	props     stack.Props
	stackName string
	nag       bool
	// keys are the context keys read, every one the app knows.
	keys []string
}

// configFromContext reads the app's context (-c key=value and cdk.json).
func configFromContext(app awscdk.App) (config, error) {
	c := ctx{app: app}
	props := stack.Props{
		ClusterName:               c.str("clusterName", ""),
		Account:                   c.str("account", firstNonEmpty(os.Getenv("CDK_DEFAULT_ACCOUNT"), dummyAccount)),
		Region:                    c.str("region", firstNonEmpty(os.Getenv("CDK_DEFAULT_REGION"), dummyRegion)),
		AssetsDir:                 c.str("assetsDir", stack.DefaultAssetsDir),
		NodeRoleName:              c.str("nodeRoleName", ""),
		ImportNodeRole:            c.boolean("importNodeRole"),
		NodeRolePath:              c.str("nodeRolePath", ""),
		SSMParameterPaths:         c.list("ssmParameterPaths"),
		SkipNodeAccessEntry:       c.boolean("skipNodeAccessEntry"),
		NodeRoles:                 c.nodeRoles("nodeRoles"),
		InstallDefaultNodePool:    c.boolean("installDefaultNodePool"),
		RemoveUserObjectsOnDelete: c.boolean("removeUserObjectsOnDelete"),
		CRDHash:                   c.str("crdHash", stack.DefaultCRDHash),
		LogRetentionDays:          c.integer("logRetentionDays", stack.DefaultLogRetentionDays),
		MetricsLevel:              c.str("metricsLevel", fnconfig.MetricsMinimal),
		Responsiveness:            c.str("responsiveness", fnconfig.ResponsivenessContinuous),
		BatchIdleDuration:         c.duration("batchIdleDuration", stack.DefaultBatchIdleDuration),
		BatchMaxDuration:          c.duration("batchMaxDuration", stack.DefaultBatchMaxDuration),
		SpotToSpotConsolidation:   c.boolean("spotToSpotConsolidation"),
		NodeRepair:                c.boolean("nodeRepair"),
		PreferencePolicy:          c.str("preferencePolicy", stack.DefaultPreferencePolicy),
		MinValuesPolicy:           c.str("minValuesPolicy", stack.DefaultMinValuesPolicy),
		ReservedENIs:              c.integer("reservedENIs", 0),
		VMMemoryOverheadPercent:   c.fraction("vmMemoryOverheadPercent", stack.DefaultVMMemoryOverheadPercent),
		IsolatedVPC:               c.boolean("isolatedVPC"),
		EnableZonalShift:          c.boolean("enableZonalShift"),
		AMIRefreshInterval:        c.duration("amiRefreshInterval", stack.DefaultRefreshInterval),
		SubnetRefreshInterval:     c.duration("subnetRefreshInterval", stack.DefaultRefreshInterval),
		ClusterEndpoint:           c.str("clusterEndpoint", ""),
		ClusterCABundle:           c.str("clusterCABundle", ""),
		Namespace:                 c.str("namespace", stack.DefaultNamespace),
		KubeClientQPS:             c.integer("kubeClientQPS", stack.DefaultKubeClientQPS),
		KubeClientBurst:           c.integer("kubeClientBurst", stack.DefaultKubeClientBurst),
		LogLevel:                  c.str("logLevel", stack.DefaultLogLevel),
		Mode:                      c.str("mode", fnconfig.ModeActive),
		Paused:                    c.boolean("paused"),
		NoAlarms:                  !c.booleanOr("alarms", true),
		AlarmTopicARN:             c.str("alarmTopicArn", ""),
		NoDashboard:               !c.booleanOr("dashboard", true),
		ReservedConcurrency:       c.integerOrNone("reservedConcurrency"),
		VpcID:                     c.str("vpcId", ""),
		SubnetIDs:                 c.list("subnetIds"),
		SecurityGroupIDs:          c.list("securityGroupIds"),
	}
	cfg := config{
		props:     props,
		stackName: c.str("stackName", "Karpless-"+props.ClusterName),
		nag:       c.boolean("nag"),
		keys:      c.read,
	}
	return cfg, c.err()
}

// ctx reads context values, which are strings when given with -c and may
// be JSON values when set in cdk.json.
type ctx struct {
	app  awscdk.App
	errs []string
	// read lists every key asked for, in order: the app's context keys
	// (contextKeys), which the docs are held to.
	read []string
}

func (c *ctx) raw(key string) (any, bool) {
	c.read = append(c.read, key)
	v := c.app.Node().TryGetContext(jsii.String(key))
	if v == nil {
		return nil, false
	}
	return v, true
}

func (c *ctx) str(key, def string) string {
	v, ok := c.raw(key)
	if !ok {
		return def
	}
	switch v := v.(type) {
	case string:
		if v == "" {
			return def
		}
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		c.errs = append(c.errs, fmt.Sprintf("context %s: want a string, got %v", key, v))
		return def
	}
}

func (c *ctx) boolean(key string) bool { return c.booleanOr(key, false) }

// booleanOr reads true or false; def when the key is absent.
func (c *ctx) booleanOr(key string, def bool) bool {
	v, ok := c.raw(key)
	if !ok {
		return def
	}
	switch v := v.(type) {
	case bool:
		return v
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			c.errs = append(c.errs, fmt.Sprintf("context %s: want true or false, got %q", key, v))
		}
		return b
	default:
		c.errs = append(c.errs, fmt.Sprintf("context %s: want true or false, got %v", key, v))
		return false
	}
}

// duration reads a Go duration such as 1s or 500ms; def when absent.
func (c *ctx) duration(key string, def time.Duration) time.Duration {
	v, ok := c.raw(key)
	if !ok {
		return def
	}
	if s, isString := v.(string); isString {
		if strings.TrimSpace(s) == "" {
			return def
		}
		if d, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
			return d
		}
	}
	c.errs = append(c.errs, fmt.Sprintf("context %s: want a duration such as 1s or 500ms, got %v", key, v))
	return def
}

// fraction reads a number such as 0.075 (a JSON number or a string); def
// when absent. Its range is checked by stack.Props.Validate.
func (c *ctx) fraction(key string, def float64) *float64 {
	v, ok := c.raw(key)
	if !ok {
		return &def
	}
	switch v := v.(type) {
	case float64:
		return &v
	case string:
		if s := strings.TrimSpace(v); s == "" {
			return &def
		} else if f, err := strconv.ParseFloat(s, 64); err == nil {
			return &f
		}
	}
	c.errs = append(c.errs, fmt.Sprintf("context %s: want a number such as 0.075, got %v", key, v))
	return &def
}

func (c *ctx) integer(key string, def int) int {
	v, ok := c.raw(key)
	if !ok {
		return def
	}
	if n, ok := wholeNumber(v); ok {
		return n
	}
	c.errs = append(c.errs, fmt.Sprintf("context %s: want a whole number, got %v", key, v))
	return def
}

// integerOrNone reads a whole number that "none" (or no value) leaves
// unset: 0. Its range is checked by stack.Props.Validate.
func (c *ctx) integerOrNone(key string) int {
	v, ok := c.raw(key)
	if !ok {
		return 0
	}
	if s, isString := v.(string); isString {
		if s = strings.TrimSpace(s); s == "" || strings.EqualFold(s, "none") {
			return 0
		}
	}
	if n, ok := wholeNumber(v); ok {
		return n
	}
	c.errs = append(c.errs, fmt.Sprintf("context %s: want none or a whole number, got %v", key, v))
	return 0
}

// wholeNumber accepts a JSON number (cdk.json) or a string (-c key=value).
func wholeNumber(v any) (int, bool) {
	switch v := v.(type) {
	case float64:
		if v == float64(int(v)) {
			return int(v), true
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n, true
		}
	}
	return 0, false
}

// list accepts a comma-separated string or a JSON array of strings.
func (c *ctx) list(key string) []string {
	v, ok := c.raw(key)
	if !ok {
		return nil
	}
	var items []string
	switch v := v.(type) {
	case string:
		items = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				c.errs = append(c.errs, fmt.Sprintf("context %s: want strings, got %v", key, e))
				return nil
			}
			items = append(items, s)
		}
	default:
		c.errs = append(c.errs, fmt.Sprintf("context %s: want a comma-separated list, got %v", key, v))
		return nil
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// nodeRoles reads a list of Name[:modifier...] entries.
func (c *ctx) nodeRoles(key string) []stack.NodeRole {
	var out []stack.NodeRole
	for _, s := range c.list(key) {
		r, err := stack.ParseNodeRole(s)
		if err != nil {
			c.errs = append(c.errs, "context "+err.Error())
			continue
		}
		out = append(out, r)
	}
	return out
}

func (c *ctx) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(c.errs, "; "))
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
