package stack

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/shared/core/catalog"
	fnconfig "github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// The Lambda functions (registered in package functions). Each one's
// binary is <AssetsDir>/<name>/bootstrap. The watcher is deployed with
// responsiveness continuous only.
const (
	Provisioner  = functions.Provisioner
	Disruption   = functions.Disruption
	Interruption = functions.Interruption
	Bootstrap    = functions.Bootstrap
	Watcher      = functions.Watcher
)

// Defaults applied by Props.withDefaults.
const (
	DefaultAssetsDir        = "build"
	DefaultCRDHash          = "dev"
	DefaultLogRetentionDays = 30
	// DefaultNodeRolePrefix followed by the cluster name is the node role's
	// name, as in Karpenter's getting-started template.
	DefaultNodeRolePrefix = "KarpenterNodeRole-"
	DefaultLogLevel       = "info"
	// DefaultBatchIdleDuration and DefaultBatchMaxDuration are Karpenter's
	// BATCH_IDLE_DURATION and BATCH_MAX_DURATION defaults.
	DefaultBatchIdleDuration = time.Second
	DefaultBatchMaxDuration  = 10 * time.Second
	// MaxBatchDuration bounds batchMaxDuration: a batch must close inside
	// the minute a tick (or the watcher) watches.
	MaxBatchDuration = time.Minute
	// DefaultNamespace is Karpless's namespace (KARPLESS_NAMESPACE).
	DefaultNamespace = fnconfig.DefaultNamespace
	// The rest are Karpenter v1.14.1's defaults of its settings of the
	// same names (docs/deploy.md, "Karpenter's settings").
	DefaultPreferencePolicy        = fnconfig.PreferencesRespect
	DefaultMinValuesPolicy         = fnconfig.MinValuesStrict
	DefaultVMMemoryOverheadPercent = catalog.DefaultVMMemoryOverheadPercent
	DefaultKubeClientQPS           = eksauth.DefaultQPS
	DefaultKubeClientBurst         = eksauth.DefaultBurst
	DefaultRefreshInterval         = fnconfig.MinRefreshInterval
)

// Props configures one Karpless deployment (one EKS cluster).
type Props struct {
	// ClusterName is the name of the existing EKS cluster. Required.
	ClusterName string
	// Account and Region pin the stack's environment. Both or neither:
	// neither gives an environment-agnostic template.
	Account string
	Region  string

	// AssetsDir holds <fn>/bootstrap for each function (linux/arm64).
	AssetsDir string

	// NodeRoleName names the IAM role the nodes run with. With
	// ImportNodeRole the role must already exist and is not created (for
	// instance the one Karpenter's getting-started template made).
	NodeRoleName   string
	ImportNodeRole bool
	// NodeRolePath is the node role's IAM path ("/" when empty): the
	// path of an imported role (its ARN, which iam:PassRole and the access
	// entry are checked against, carries it), or the one a created role
	// gets.
	NodeRolePath string
	// SSMParameterPaths are prefixes of the account's SSM parameters the
	// functions may read, for amiSelectorTerms.ssmParameter outside
	// EKS's public /aws/service/ (which is always readable).
	SSMParameterPaths []string
	// SkipNodeAccessEntry leaves out the EC2_LINUX access entry of the node
	// role, for a role that already has one.
	SkipNodeAccessEntry bool
	// NodeRoles are further node roles, besides NodeRoleName, that an
	// EC2NodeClass may name in spec.role or that the pre-made instance
	// profile of its spec.instanceProfile may hold. Each gets iam:PassRole
	// and an access entry of its nodes' type. At most MaxNodeRoles.
	NodeRoles []NodeRole

	// InstallDefaultNodePool asks the bootstrap function to install a
	// default NodePool and EC2NodeClass.
	InstallDefaultNodePool bool
	// RemoveUserObjectsOnDelete asks the bootstrap function to delete the
	// user's NodePools, EC2NodeClasses and NodeClaims (and the CRDs) on
	// stack deletion. Off by default: user objects are left alone.
	RemoveUserObjectsOnDelete bool
	// CRDHash identifies the CRDs embedded in the bootstrap binary; a new
	// value makes CloudFormation send an Update to the custom resource.
	CRDHash string

	// LogRetentionDays is the retention of every function's log group; one
	// of the values CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, ...).
	LogRetentionDays int

	// MetricsLevel is the functions' METRICS_LEVEL: minimal (the default)
	// publishes as CloudWatch metrics only the few an alarm reads and
	// leaves every other figure a JSON log field; full publishes every
	// metric under Karpenter's names, each series billed by CloudWatch
	// (docs/deploy.md prices both).
	MetricsLevel string

	// Responsiveness is the reaction after a quiet period: continuous (the
	// default) deploys the watcher function, which keeps watches open and
	// invokes the provisioner as soon as pods wait; economy deploys no
	// watcher, and a pod that arrives while no tick watches waits for the
	// next scheduled tick (up to a minute). The provisioner's
	// RESPONSIVENESS.
	Responsiveness string
	// BatchIdleDuration and BatchMaxDuration are the provisioner's (and
	// the watcher's) BATCH_IDLE_DURATION and BATCH_MAX_DURATION: a batch
	// of pending pods closes after BatchIdleDuration without a new one, or
	// BatchMaxDuration after it began (Karpenter's 1 s and 10 s when zero).
	BatchIdleDuration time.Duration
	BatchMaxDuration  time.Duration
	// SpotToSpotConsolidation is the disruption function's
	// SPOT_TO_SPOT_CONSOLIDATION, Karpenter's feature gate (off by default).
	SpotToSpotConsolidation bool
	// NodeRepair is the disruption function's NODE_REPAIR, Karpenter's
	// NodeRepair feature gate (off by default).
	NodeRepair bool
	// PreferencePolicy is the controllers' PREFERENCE_POLICY: Respect (the
	// default) or Ignore, for provisioning and disruption alike.
	PreferencePolicy string
	// MinValuesPolicy is the controllers' MIN_VALUES_POLICY: Strict (the
	// default) or BestEffort.
	MinValuesPolicy string
	// ReservedENIs is the controllers' RESERVED_ENIS (0 by default).
	ReservedENIs int
	// VMMemoryOverheadPercent is the controllers'
	// VM_MEMORY_OVERHEAD_PERCENT; nil means the default, 0.075.
	VMMemoryOverheadPercent *float64
	// IsolatedVPC is the controllers' ISOLATED_VPC: no Price List API
	// call; the build's on-demand prices stand in.
	IsolatedVPC bool
	// EnableZonalShift is the controllers' ENABLE_ZONAL_SHIFT: they read
	// the cluster's ARC zonal shifts (CLUSTER_ARN, set with it) and may
	// call arc-zonal-shift:GetManagedResource on the cluster.
	EnableZonalShift bool
	// AMIRefreshInterval and SubnetRefreshInterval are the controllers'
	// AMI_REFRESH_INTERVAL and SUBNET_REFRESH_INTERVAL (1m, the least).
	AMIRefreshInterval    time.Duration
	SubnetRefreshInterval time.Duration
	// ClusterEndpoint and ClusterCABundle are every function's
	// CLUSTER_ENDPOINT and CLUSTER_CA_DATA: both or neither; neither reads
	// them from EKS DescribeCluster. The functions connect to this
	// endpoint and the nodes' user data names it and the CA.
	ClusterEndpoint string
	ClusterCABundle string
	// Namespace is every function's KARPLESS_NAMESPACE (kube-system by
	// default): its Leases, ConfigMaps and Role.
	Namespace string
	// KubeClientQPS and KubeClientBurst are every function's
	// KUBE_CLIENT_QPS and KUBE_CLIENT_BURST (200 and 300).
	KubeClientQPS   int
	KubeClientBurst int
	// LogLevel is every function's LOG_LEVEL: debug, info (the default),
	// warn or error.
	LogLevel string
	// Mode is every function's MODE: active (the default) acts; shadow
	// runs beside a running Karpenter and only records the decisions it
	// would have made (docs/shadow.md). A shadow stack grants the
	// functions no mutating AWS action, wires no queue to the
	// interruption function and leaves the interruption rules disabled.
	Mode string
	// Paused deploys Karpless paused (-c paused=true): the bootstrap turns
	// the pause switch on at Create and Update. Otherwise a deploy leaves
	// the switch as it is (karpless pause and karpless resume set it).
	Paused bool

	// NoAlarms leaves out the CloudWatch alarms on throttled and dropped
	// invocations (alarms=false); they cost $0.10 a month each.
	NoAlarms bool
	// AlarmTopicARN, when set, is an SNS topic each alarm notifies.
	AlarmTopicARN string
	// NoDashboard leaves out the CloudWatch dashboard (dashboard=false),
	// $3 a month beyond an account's three free ones.
	NoDashboard bool

	// ReservedConcurrency, when positive, is reserved for each of the two
	// scheduled functions (provisioner and disruption); 0, the default,
	// reserves nothing. Off by default because Lambda refuses a reservation
	// that leaves fewer than 100 of the account's concurrent executions
	// unreserved, and new accounts often have a quota of 10; a default
	// deploy would fail there. Nothing needs it: each tick takes its Lease
	// (provisioning or disruption) before acting, and a tick that finds the
	// Lease held returns at once, so overlapping ticks never act twice.
	ReservedConcurrency int

	// Optional VPC placement of the functions (for a cluster whose API
	// endpoint is private). SubnetIDs is required for placement; with no
	// SecurityGroupIDs the stack creates a security group in VpcID that
	// allows only outbound HTTPS.
	VpcID            string
	SubnetIDs        []string
	SecurityGroupIDs []string
}

// MaxNodeRoles bounds Props.NodeRoles: each adds its ARN to the launch
// policy's PassRole statement, and that managed policy must stay under
// IAM's 6,144 characters with the longest names (TestPolicySizes).
const MaxNodeRoles = 10

// NodeRole is one of Props.NodeRoles.
type NodeRole struct {
	// Name is the IAM role's name: no ARN and no path.
	Name string
	// Path is the role's IAM path ("/" when empty): iam:PassRole and the
	// access entry name role<Path><Name>.
	Path string
	// Windows: the role's nodes run Windows, and its access entry is of
	// type EC2_WINDOWS (EC2_LINUX otherwise). An access entry has one type,
	// so Linux and Windows nodes need different roles.
	Windows bool
	// Create: the stack creates the role, as it creates NodeRoleName
	// (same AWS managed policies and trust). Otherwise the role must exist.
	Create bool
	// SkipAccessEntry leaves out the role's access entry, for a role that
	// already has one.
	SkipAccessEntry bool
}

// Modifiers of a nodeRoles context entry, Name[:modifier...].
const (
	nodeRoleWindows         = "windows"
	nodeRoleCreate          = "create"
	nodeRoleSkipAccessEntry = "skipAccessEntry"
	nodeRolePathPrefix      = "path="
)

// ParseNodeRole reads a nodeRoles context entry: the role name, then
// modifiers after colons (a colon is not allowed in role names), e.g.
// "KarpenterWindowsNodeRole-prod:windows:create".
func ParseNodeRole(s string) (NodeRole, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	r := NodeRole{Name: strings.TrimSpace(parts[0])}
	for _, m := range parts[1:] {
		switch m = strings.TrimSpace(m); {
		case strings.EqualFold(m, nodeRoleWindows):
			r.Windows = true
		case strings.EqualFold(m, nodeRoleCreate):
			r.Create = true
		case strings.EqualFold(m, nodeRoleSkipAccessEntry):
			r.SkipAccessEntry = true
		case strings.HasPrefix(m, nodeRolePathPrefix):
			r.Path = strings.TrimPrefix(m, nodeRolePathPrefix)
		default:
			return r, fmt.Errorf("nodeRoles: %q: unknown modifier %q (use %s, %s, %s or %s/<path>/ after the role name, e.g. MyWindowsNodes:%s)",
				s, m, nodeRoleWindows, nodeRoleCreate, nodeRoleSkipAccessEntry, nodeRolePathPrefix, nodeRoleWindows)
		}
	}
	return r, nil
}

// AccessEntryType is the EKS access entry type of the role's nodes.
func (r NodeRole) AccessEntryType() string {
	if r.Windows {
		return "EC2_WINDOWS"
	}
	return "EC2_LINUX"
}

var (
	// EKS: 1-100 characters, starts with a letter or digit.
	clusterNameRE = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)
	accountRE     = regexp.MustCompile(`^[0-9]{12}$`)
	regionRE      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	roleNameRE    = regexp.MustCompile(`^[A-Za-z0-9+=,.@_-]{1,64}$`)
	// rolePathRE is an IAM path: slashes around segments of IAM's name
	// characters ("${" could not reach the Fn::Sub the ARN is written in).
	rolePathRE = regexp.MustCompile(`^/([A-Za-z0-9+=,.@_-]+/)*$`)
	// ssmPathRE is a prefix of SSM parameter names.
	ssmPathRE  = regexp.MustCompile(`^/[A-Za-z0-9_.\-/]{1,1000}$`)
	vpcRE      = regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`)
	subnetRE   = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	sgRE       = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	crdHashRE  = regexp.MustCompile(`^[A-Za-z0-9._:+-]{1,128}$`)
	snsTopicRE = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)
)

// retentionDays are the retention periods CloudWatch Logs accepts.
var retentionDays = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// withDefaults fills the optional fields that have a default.
func (p Props) withDefaults() Props {
	if p.AssetsDir == "" {
		p.AssetsDir = DefaultAssetsDir
	}
	if p.NodeRoleName == "" && p.ClusterName != "" {
		p.NodeRoleName = DefaultNodeRolePrefix + p.ClusterName
	}
	if p.CRDHash == "" {
		p.CRDHash = DefaultCRDHash
	}
	if p.LogRetentionDays == 0 {
		p.LogRetentionDays = DefaultLogRetentionDays
	}
	if p.MetricsLevel == "" {
		p.MetricsLevel = fnconfig.MetricsMinimal
	}
	if p.Responsiveness == "" {
		p.Responsiveness = fnconfig.ResponsivenessContinuous
	}
	if p.BatchIdleDuration == 0 {
		p.BatchIdleDuration = DefaultBatchIdleDuration
	}
	if p.BatchMaxDuration == 0 {
		p.BatchMaxDuration = DefaultBatchMaxDuration
	}
	if p.LogLevel == "" {
		p.LogLevel = DefaultLogLevel
	}
	if p.PreferencePolicy == "" {
		p.PreferencePolicy = DefaultPreferencePolicy
	}
	if p.MinValuesPolicy == "" {
		p.MinValuesPolicy = DefaultMinValuesPolicy
	}
	if p.VMMemoryOverheadPercent == nil {
		v := DefaultVMMemoryOverheadPercent
		p.VMMemoryOverheadPercent = &v
	}
	if p.AMIRefreshInterval == 0 {
		p.AMIRefreshInterval = DefaultRefreshInterval
	}
	if p.SubnetRefreshInterval == 0 {
		p.SubnetRefreshInterval = DefaultRefreshInterval
	}
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	if p.KubeClientQPS == 0 {
		p.KubeClientQPS = DefaultKubeClientQPS
	}
	if p.KubeClientBurst == 0 {
		p.KubeClientBurst = DefaultKubeClientBurst
	}
	if p.Mode == "" {
		p.Mode = fnconfig.ModeActive
	}
	return p
}

// Continuous reports whether the watcher is deployed (responsiveness
// continuous).
func (p Props) Continuous() bool { return p.Responsiveness == fnconfig.ResponsivenessContinuous }

// Functions are the functions the stack deploys, in functions.Names()
// order: every one but the watcher in economy mode.
func (p Props) Functions() []string {
	var out []string
	for _, fn := range functions.Names() {
		if fn == Watcher && !p.Continuous() {
			continue
		}
		out = append(out, fn)
	}
	return out
}

// Shadow reports whether the functions only record what they would do
// (mode shadow).
func (p Props) Shadow() bool { return p.Mode == fnconfig.ModeShadow }

// InVPC reports whether the functions are placed in a VPC.
func (p Props) InVPC() bool { return len(p.SubnetIDs) > 0 }

// Validate reports every problem with p (after defaults), each naming the
// context key that sets the field.
func (p Props) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	switch {
	case p.ClusterName == "":
		bad("clusterName is required: pass -c clusterName=<name of the EKS cluster>")
	case !clusterNameRE.MatchString(p.ClusterName):
		bad("clusterName %q is not a valid EKS cluster name (1-100 letters, digits, '-' or '_', starting with a letter or digit)", p.ClusterName)
	}

	switch {
	case (p.Account == "") != (p.Region == ""):
		bad("account and region must be set together (got account %q, region %q)", p.Account, p.Region)
	case p.Account != "" && !accountRE.MatchString(p.Account):
		bad("account %q is not a 12-digit AWS account ID", p.Account)
	case p.Region != "" && !regionRE.MatchString(p.Region):
		bad("region %q is not an AWS region name such as eu-west-1", p.Region)
	}

	if p.AssetsDir == "" {
		bad("assetsDir is empty")
	} else {
		for _, fn := range p.Functions() {
			path := filepath.Join(p.AssetsDir, fn, "bootstrap")
			st, err := os.Stat(path)
			switch {
			case err != nil:
				bad("lambda binary %s is missing (build the functions with `make lambdas`, or pass -c assetsDir=<dir holding <fn>/bootstrap>): %v", path, err)
			case !st.Mode().IsRegular():
				bad("lambda binary %s is not a regular file", path)
			}
		}
	}

	if (p.NodeRoleName != "" || p.ClusterName != "") && !roleNameRE.MatchString(p.NodeRoleName) {
		if p.ClusterName != "" && p.NodeRoleName == DefaultNodeRolePrefix+p.ClusterName {
			bad("the default node role name %q is not a valid IAM role name (at most 64 characters); pass -c nodeRoleName=<name>", p.NodeRoleName)
		} else {
			bad("nodeRoleName %q is not a valid IAM role name (1-64 of letters, digits and +=,.@_-)", p.NodeRoleName)
		}
	}

	errs = append(errs, p.validateNodeRoles()...)
	if p.NodeRolePath != "" && (!rolePathRE.MatchString(p.NodeRolePath) || len(p.NodeRolePath) > 512) {
		bad("nodeRolePath %q is not an IAM path (/ or /segment/.../, at most 512 characters)", p.NodeRolePath)
	}
	for _, sp := range p.SSMParameterPaths {
		switch {
		case !ssmPathRE.MatchString(sp):
			bad("ssmParameterPaths: %q is not a prefix of SSM parameter names (/ then letters, digits and _.-/)", sp)
		case strings.HasPrefix(sp, "/aws/"):
			bad("ssmParameterPaths: %q is under /aws/, EKS's public parameters, which are always readable (/aws/service/*); list only your own", sp)
		}
	}

	if !crdHashRE.MatchString(p.CRDHash) {
		bad("crdHash %q must be 1-128 characters of letters, digits and ._:+-", p.CRDHash)
	}

	if !slices.Contains(retentionDays, p.LogRetentionDays) {
		bad("logRetentionDays %d is not a retention CloudWatch Logs accepts; use one of %s", p.LogRetentionDays, joinInts(retentionDays))
	}

	if p.MetricsLevel != fnconfig.MetricsMinimal && p.MetricsLevel != fnconfig.MetricsFull {
		bad("metricsLevel %q is not %s (the default: only the alarms' metrics) or %s (every metric)", p.MetricsLevel, fnconfig.MetricsMinimal, fnconfig.MetricsFull)
	}

	if p.Responsiveness != fnconfig.ResponsivenessContinuous && p.Responsiveness != fnconfig.ResponsivenessEconomy {
		bad("responsiveness %q is not %s (the default: a watcher function invokes the provisioner as soon as pods wait) or %s (no watcher: a pod that arrives while no tick watches waits for the next tick, up to a minute)",
			p.Responsiveness, fnconfig.ResponsivenessContinuous, fnconfig.ResponsivenessEconomy)
	}
	switch {
	case p.BatchIdleDuration < 0 || p.BatchMaxDuration < 0:
		bad("batchIdleDuration (%s) and batchMaxDuration (%s) must be positive durations such as 1s and 10s", p.BatchIdleDuration, p.BatchMaxDuration)
	case p.BatchIdleDuration > p.BatchMaxDuration:
		bad("batchIdleDuration (%s) must not exceed batchMaxDuration (%s)", p.BatchIdleDuration, p.BatchMaxDuration)
	case p.BatchMaxDuration > MaxBatchDuration:
		bad("batchMaxDuration (%s) must be at most %s: a batch must close within the minute a tick watches", p.BatchMaxDuration, MaxBatchDuration)
	}
	switch {
	case p.Mode != fnconfig.ModeActive && p.Mode != fnconfig.ModeShadow:
		bad("mode %q is not %s (the default: Karpless acts) or %s (beside a running Karpenter: Karpless only records the decisions it would make)",
			p.Mode, fnconfig.ModeActive, fnconfig.ModeShadow)
	case p.Shadow() && p.InstallDefaultNodePool:
		bad("mode shadow with installDefaultNodePool: a shadow deploy creates no NodePool (Karpenter would act on it); leave installDefaultNodePool out")
	case p.Shadow() && p.RemoveUserObjectsOnDelete:
		bad("mode shadow with removeUserObjectsOnDelete: the NodePools and NodeClaims are Karpenter's; a shadow stack never removes them")
	}
	if !slices.Contains(fnconfig.LogLevels, p.LogLevel) {
		bad("logLevel %q is not one of %s", p.LogLevel, strings.Join(fnconfig.LogLevels, ", "))
	}
	errs = append(errs, p.validateKarpenterSettings()...)
	if p.AlarmTopicARN != "" && !snsTopicRE.MatchString(p.AlarmTopicARN) {
		bad("alarmTopicArn %q is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)", p.AlarmTopicARN)
	}

	if p.ReservedConcurrency < 0 {
		bad("reservedConcurrency %d is not valid: pass a positive number of concurrent executions to reserve for each scheduled function, or none (the default) to reserve nothing", p.ReservedConcurrency)
	}

	if p.VpcID != "" && !vpcRE.MatchString(p.VpcID) {
		bad("vpcId %q is not a VPC ID (vpc-...)", p.VpcID)
	}
	for _, s := range p.SubnetIDs {
		if !subnetRE.MatchString(s) {
			bad("subnetIds: %q is not a subnet ID (subnet-...)", s)
		}
	}
	for _, s := range p.SecurityGroupIDs {
		if !sgRE.MatchString(s) {
			bad("securityGroupIds: %q is not a security group ID (sg-...)", s)
		}
	}
	switch {
	case len(p.SubnetIDs) == 0 && (p.VpcID != "" || len(p.SecurityGroupIDs) > 0):
		bad("subnetIds is required when vpcId or securityGroupIds is set (the functions are placed in those subnets)")
	case len(p.SubnetIDs) > 0 && len(p.SecurityGroupIDs) == 0 && p.VpcID == "":
		bad("with subnetIds, pass securityGroupIds, or vpcId so that the stack creates a security group for the functions")
	case len(p.SubnetIDs) > 16:
		bad("subnetIds: Lambda accepts at most 16 subnets, got %d", len(p.SubnetIDs))
	case len(p.SecurityGroupIDs) > 5:
		bad("securityGroupIds: Lambda accepts at most 5 security groups, got %d", len(p.SecurityGroupIDs))
	}

	return errors.Join(errs...)
}

// validateNodeRoles checks NodeRoles: valid names, none twice (IAM role
// names are unique regardless of case), not the node role again.
func (p Props) validateNodeRoles() []error {
	var errs []error
	if len(p.NodeRoles) > MaxNodeRoles {
		errs = append(errs, fmt.Errorf("nodeRoles: at most %d roles, got %d (each one widens the launch policy, which IAM limits to 6,144 characters)", MaxNodeRoles, len(p.NodeRoles)))
	}
	seen := map[string]bool{strings.ToLower(p.NodeRoleName): true}
	for _, r := range p.NodeRoles {
		switch {
		case r.Name == "":
			errs = append(errs, errors.New("nodeRoles: an entry has no role name"))
			continue
		case strings.HasPrefix(r.Name, "arn:") || strings.Contains(r.Name, "/"):
			errs = append(errs, fmt.Errorf("nodeRoles: %q: give the role's name, not an ARN or a path (a path goes in the %s/<path>/ modifier)", r.Name, nodeRolePathPrefix))
			continue
		case r.Path != "" && !rolePathRE.MatchString(r.Path):
			errs = append(errs, fmt.Errorf("nodeRoles: %q: path %q is not an IAM path (/ or /segment/.../)", r.Name, r.Path))
			continue
		case !roleNameRE.MatchString(r.Name):
			errs = append(errs, fmt.Errorf("nodeRoles: %q is not a valid IAM role name (1-64 of letters, digits and +=,.@_-)", r.Name))
			continue
		case strings.EqualFold(r.Name, p.NodeRoleName):
			errs = append(errs, fmt.Errorf("nodeRoles: %q is the node role (nodeRoleName) already; list only further roles", r.Name))
			continue
		case seen[strings.ToLower(r.Name)]:
			errs = append(errs, fmt.Errorf("nodeRoles: %q is listed twice (IAM role names are case-insensitive)", r.Name))
			continue
		case r.Create && r.SkipAccessEntry:
			errs = append(errs, fmt.Errorf("nodeRoles: %q: %s and %s together: a role the stack creates has no access entry yet", r.Name, nodeRoleCreate, nodeRoleSkipAccessEntry))
		}
		seen[strings.ToLower(r.Name)] = true
	}
	return errs
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// namespaceRE is a DNS-1123 label, what a namespace's name must be.
var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// validateKarpenterSettings checks the settings Karpenter's chart calls
// settings.* (and its feature gates), each error naming the context key,
// with Karpenter's bounds.
func (p Props) validateKarpenterSettings() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.PreferencePolicy != fnconfig.PreferencesRespect && p.PreferencePolicy != fnconfig.PreferencesIgnore {
		bad("preferencePolicy %q is not %s (the default: preferred affinities and ScheduleAnyway spreads are kept when they can be) or %s",
			p.PreferencePolicy, fnconfig.PreferencesRespect, fnconfig.PreferencesIgnore)
	}
	if p.MinValuesPolicy != fnconfig.MinValuesStrict && p.MinValuesPolicy != fnconfig.MinValuesBestEffort {
		bad("minValuesPolicy %q is not %s (the default: pods wait when minValues cannot be kept) or %s",
			p.MinValuesPolicy, fnconfig.MinValuesStrict, fnconfig.MinValuesBestEffort)
	}
	if p.ReservedENIs < 0 {
		bad("reservedENIs %d must not be negative", p.ReservedENIs)
	}
	if v := p.VMMemoryOverheadPercent; v != nil && (*v < 0 || *v >= 1) {
		bad("vmMemoryOverheadPercent %v is not a fraction from 0 to below 1 (0.075, the default, is 7.5%%)", *v)
	}
	if p.AMIRefreshInterval < fnconfig.MinRefreshInterval {
		bad("amiRefreshInterval %s must be at least %s, as in Karpenter", p.AMIRefreshInterval, fnconfig.MinRefreshInterval)
	}
	if p.SubnetRefreshInterval < fnconfig.MinRefreshInterval {
		bad("subnetRefreshInterval %s must be at least %s, as in Karpenter", p.SubnetRefreshInterval, fnconfig.MinRefreshInterval)
	}
	switch {
	case (p.ClusterEndpoint == "") != (p.ClusterCABundle == ""):
		bad("clusterEndpoint and clusterCABundle must be set together (or neither: the functions read both from EKS DescribeCluster)")
	case p.ClusterEndpoint != "":
		if u, err := url.Parse(p.ClusterEndpoint); err != nil || u.Scheme != "https" || u.Hostname() == "" {
			bad("clusterEndpoint %q is not an https:// URL of the cluster's API server", p.ClusterEndpoint)
		}
		if pem, err := base64.StdEncoding.DecodeString(p.ClusterCABundle); err != nil || !strings.Contains(string(pem), "-----BEGIN CERTIFICATE-----") {
			bad("clusterCABundle is not a base64-encoded PEM certificate bundle (the cluster's certificateAuthority.data)")
		} else if len(p.ClusterCABundle) > maxCABundle {
			bad("clusterCABundle is %d characters; Lambda holds at most 4 KB of environment per function, leaving it %d", len(p.ClusterCABundle), maxCABundle)
		}
	}
	if !namespaceRE.MatchString(p.Namespace) {
		bad("namespace %q is not a namespace name (lowercase letters, digits and '-', at most 63)", p.Namespace)
	}
	if p.KubeClientQPS <= 0 {
		bad("kubeClientQPS %d must be positive", p.KubeClientQPS)
	}
	if p.KubeClientBurst <= 0 {
		bad("kubeClientBurst %d must be positive", p.KubeClientBurst)
	}
	return errs
}

// maxCABundle bounds clusterCABundle: Lambda refuses a function whose
// environment (names and values) passes 4 KB, and the provisioner's other
// settings take about 700 bytes of it. EKS's own CA is about 1,500.
const maxCABundle = 3000
