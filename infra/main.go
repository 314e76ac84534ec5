// Command infra is the Karpless CDK app: one stack per EKS cluster.
//
//	cdk deploy -c clusterName=<name> [-c key=value ...]
//
// Context keys (all but clusterName optional):
//
//	clusterName               EKS cluster name (required)
//	account, region           stack environment; default: the CLI's
//	                          credentials (CDK_DEFAULT_ACCOUNT/REGION), else
//	                          123456789012/us-east-1 so that synth works
//	                          without credentials
//	assetsDir                 folder holding <fn>/bootstrap (default build)
//	nodeRoleName              node role name (default KarpenterNodeRole-<cluster>)
//	importNodeRole            true: use the existing role nodeRoleName
//	nodeRolePath              the node role's IAM path (default /): an imported role's, or the created one's
//	skipNodeAccessEntry       true: the node role already has an access entry
//	nodeRoles                 further node roles (list), each Name[:windows][:create][:skipAccessEntry][:path=/p/]:
//	                          PassRole and an EC2_LINUX (EC2_WINDOWS with :windows) access entry each;
//	                          :create makes the role, :skipAccessEntry leaves out its entry
//	installDefaultNodePool    true: bootstrap installs a default NodePool and EC2NodeClass
//	removeUserObjectsOnDelete true: bootstrap deletes user objects on stack deletion
//	crdHash                   identity of the embedded CRDs (default dev)
//	ssmParameterPaths         prefixes of your own SSM parameters the functions may read (list), for
//	                          amiSelectorTerms.ssmParameter outside /aws/service/

// logRetentionDays          log retention of every function (default 30)
// metricsLevel              minimal (default: only the alarms' metrics are
//
//	CloudWatch metrics, every figure a log field) or full
//
// responsiveness            continuous (default: the watcher function invokes
//
//	the provisioner as soon as pods wait) or economy
//	(no watcher; the next tick, within a minute)
//
// batchIdleDuration         the provisioner's BATCH_IDLE_DURATION (default 1s)
// batchMaxDuration          the provisioner's BATCH_MAX_DURATION (default 10s, at most 1m)
// spotToSpotConsolidation   true: the disruption function's SPOT_TO_SPOT_CONSOLIDATION
// logLevel                  every function's LOG_LEVEL: debug, info (default), warn, error
// mode                      active (default) or shadow: beside a running Karpenter, record
//
//	the decisions Karpless would make and change nothing (docs/shadow.md)
//
// paused                    true: deploy paused (the bootstrap sets the pause
//
//	switch); absent or false leaves the switch as it is
//
// alarms                    false: no CloudWatch alarms on throttled and
//
//	dropped invocations (default true, $0.10 a month each)
//
// alarmTopicArn             an SNS topic the alarms notify
// reservedConcurrency       none (default) or a positive number reserved for
//
//	each scheduled function (the account must keep
//	100 unreserved; see docs/deploy.md)
//
// vpcId, subnetIds, securityGroupIds
//
//	VPC placement of the functions (lists: comma-separated)
//
// stackName                 default Karpless-<clusterName>
// nag                       true: run cdk-nag's AwsSolutions checks
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
		LogLevel:                  c.str("logLevel", stack.DefaultLogLevel),
		Mode:                      c.str("mode", fnconfig.ModeActive),
		Paused:                    c.boolean("paused"),
		NoAlarms:                  !c.booleanOr("alarms", true),
		AlarmTopicARN:             c.str("alarmTopicArn", ""),
		ReservedConcurrency:       c.integerOrNone("reservedConcurrency"),
		VpcID:                     c.str("vpcId", ""),
		SubnetIDs:                 c.list("subnetIds"),
		SecurityGroupIDs:          c.list("securityGroupIds"),
	}
	cfg := config{
		props:     props,
		stackName: c.str("stackName", "Karpless-"+props.ClusterName),
		nag:       c.boolean("nag"),
	}
	return cfg, c.err()
}

// ctx reads context values, which are strings when given with -c and may
// be JSON values when set in cdk.json.
type ctx struct {
	app  awscdk.App
	errs []string
}

func (c *ctx) raw(key string) (any, bool) {
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
