// Package config reads the functions' settings from the environment once,
// validates them, and hands a plain Config value to everything else.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/karpless/karpless/shared/core/timing"
)

// Config is every setting the functions read. Zero durations mean "use the default".
type Config struct {
	// ClusterName is the EKS cluster; it scopes tags, IAM names and leases.
	ClusterName string
	// Region of the cluster and of every AWS call.
	Region string
	// ClusterEndpoint and ClusterCAData skip EKS DescribeCluster when set.
	ClusterEndpoint string
	ClusterCAData   string
	// Namespace holds Karpless's leases, its unavailable-offerings cache and
	// Events about cluster-scoped objects.
	Namespace string
	// InterruptionQueueURL is the SQS queue the interruption function drains.
	InterruptionQueueURL string

	// BatchIdle and BatchMax bound how long a tick gathers pending pods
	// before simulating, as Karpenter's batcher does (1 s idle, 10 s max).
	BatchIdle time.Duration
	BatchMax  time.Duration
	// WatchWindow is how long a tick that found work keeps watching pending
	// pods before handing over; 0 means one pass per tick.
	WatchWindow time.Duration
	// DeadlineMargin is kept free before the Lambda deadline for clean-up.
	DeadlineMargin time.Duration
	// LeaseDuration is how long a lease stays valid without renewal; a
	// killed tick's lease expires after it.
	LeaseDuration time.Duration

	// RegistrationTTL deletes NodeClaims whose node never registered.
	RegistrationTTL time.Duration
	// UnavailableOfferingsTTL is how long an offering stays out after an
	// insufficient-capacity error (Karpenter: 3 minutes).
	UnavailableOfferingsTTL time.Duration

	// SpotToSpotConsolidation is Karpenter's feature gate of that name.
	SpotToSpotConsolidation bool
	// NodeRepair is Karpenter's NodeRepair feature gate (off by default,
	// as Karpenter ships it): the disruption function replaces nodes
	// unhealthy past the AWS provider's tolerations (shared/core/repair).
	NodeRepair bool
	// MinValuesPolicy is Karpenter's MIN_VALUES_POLICY: Strict (default)
	// leaves pods pending when a NodePool's minValues cannot be kept;
	// BestEffort launches with the values there are, lowering minValues on
	// the NodeClaim and annotating it karpenter.sh/nodeclaim-min-values-relaxed.
	MinValuesPolicy string
	// PreferencePolicy is Karpenter's PREFERENCE_POLICY: Respect (the
	// default) treats preferred affinities and ScheduleAnyway spreads as
	// required, relaxing them one at a time when a pod does not fit;
	// Ignore drops them. Provisioning and disruption's simulations use the
	// one value, as Karpenter's single option does.
	PreferencePolicy string
	// ReservedENIs are ENIs kept out of the pod limit (--reserved-enis).
	ReservedENIs int
	// VMMemoryOverheadPercent is Karpenter's VM_MEMORY_OVERHEAD_PERCENT,
	// the share of an instance type's memory the hypervisor keeps; nil
	// when unset (Karpenter's 0.075, catalog.DefaultVMMemoryOverheadPercent).
	VMMemoryOverheadPercent *float64
	// KubeClientQPS and KubeClientBurst are Karpenter's KUBE_CLIENT_QPS and
	// KUBE_CLIENT_BURST, the Kubernetes client's rate limit; 0 when unset
	// (Karpenter's 200 and 300, eksauth.DefaultQPS and DefaultBurst).
	KubeClientQPS   int
	KubeClientBurst int
	// IsolatedVPC is Karpenter's ISOLATED_VPC: the functions do not call
	// the Price List API, which has no VPC endpoint in most regions, and
	// the build's on-demand prices stand in (as in GovCloud).
	IsolatedVPC bool
	// EnableZonalShift is Karpenter's ENABLE_ZONAL_SHIFT (off by
	// default): every pass reads the ARC zonal shifts on the cluster
	// (ClusterARN) and neither launches into nor calls EC2 about the
	// instances of a zone shifted away from, until the shift ends. A
	// cluster ARC does not know fails the pass (Karpenter does not start).
	EnableZonalShift bool
	// ClusterARN is CLUSTER_ARN, the EKS cluster's ARN, ARC's name for it
	// (the stack sets it with ENABLE_ZONAL_SHIFT).
	ClusterARN string
	// AMIRefreshInterval and SubnetRefreshInterval are Karpenter's
	// AMI_REFRESH_INTERVAL and SUBNET_REFRESH_INTERVAL (1m, their minimum).
	// Karpless resolves an EC2NodeClass's status whole, so it re-resolves
	// at the shorter of the two (NodeClassRefresh).
	AMIRefreshInterval    time.Duration
	SubnetRefreshInterval time.Duration
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// MetricsLevel is METRICS_LEVEL: minimal (default) writes every figure
	// as a JSON log field but extracts only the alarms' few as CloudWatch
	// metrics; full extracts every figure (record.Level).
	MetricsLevel string
	// Responsiveness is RESPONSIVENESS, the stack's choice of reaction
	// after a quiet period: continuous (default) deploys the watcher,
	// which invokes the provisioner as soon as work appears; economy
	// leaves it to the next scheduled tick.
	Responsiveness string
	// Mode is MODE: active (default) acts on the cluster and EC2; shadow
	// runs beside a running Karpenter and only records the decisions it
	// would have made (shared/function/shadow): every AWS mutation and
	// every write to nodes, pods and Karpenter's objects is skipped, and
	// refused by the clients' transports should a path miss the skip.
	Mode string

	// The bootstrap function's settings. The stack writes them into its
	// environment on every deploy; the CloudFormation event that starts
	// it carries only hashes, so nobody who can invoke the function can
	// choose what it installs or removes.
	//
	// StackID is STACK_ID, the ARN of the stack the function belongs
	// to: only that stack's requests are answered, and a Delete is acted
	// on only while CloudFormation shows that stack being deleted.
	StackID string
	// NodeRoleName is NODE_ROLE_NAME, the default EC2NodeClass's role.
	NodeRoleName string
	// InstallDefaultNodePool is INSTALL_DEFAULT_NODEPOOL.
	InstallDefaultNodePool bool
	// RemoveUserObjectsOnDelete is REMOVE_USER_OBJECTS_ON_DELETE: the
	// stack's deletion also deletes every NodePool, NodeClaim and
	// EC2NodeClass, and the CRDs Karpless created.
	RemoveUserObjectsOnDelete bool
	// Paused is PAUSED: every deploy turns the pause switch on.
	Paused bool
	// ControllersGroup is CONTROLLERS_GROUP, the Kubernetes group the
	// controllers' access entries map to.
	ControllersGroup string
}

// DefaultNamespace holds the functions' state (leases, ConfigMaps) and
// their Events, where Karpenter's controller runs.
const DefaultNamespace = "kube-system"

// The values of MIN_VALUES_POLICY, Karpenter's.
const (
	MinValuesStrict     = "Strict"
	MinValuesBestEffort = "BestEffort"
)

// The values of PREFERENCE_POLICY, Karpenter's.
const (
	PreferencesRespect = "Respect"
	PreferencesIgnore  = "Ignore"
)

// MinRefreshInterval is the shortest AMI_REFRESH_INTERVAL and
// SUBNET_REFRESH_INTERVAL, Karpenter's bound (and default).
const MinRefreshInterval = time.Minute

// The values of METRICS_LEVEL (record.Minimal and record.Full). Minimal is
// the default because CloudWatch bills every extracted series, $0.30 a
// month each, more than the rest of a small cluster's idle bill.
const (
	MetricsMinimal = "minimal"
	MetricsFull    = "full"
)

// The values of RESPONSIVENESS.
const (
	ResponsivenessContinuous = "continuous"
	ResponsivenessEconomy    = "economy"
)

// The values of MODE.
const (
	ModeActive = "active"
	ModeShadow = "shadow"
)

// Shadow reports whether MODE is shadow.
func (c Config) Shadow() bool { return c.Mode == ModeShadow }

// The values of LOG_LEVEL.
var LogLevels = []string{"debug", "info", "warn", "error"}

// PreferencesIgnored reports whether PREFERENCE_POLICY is Ignore.
func (c Config) PreferencesIgnored() bool { return c.PreferencePolicy == PreferencesIgnore }

// NodeClassRefresh is how long an EC2NodeClass's resolved status serves:
// the shorter of AMI_REFRESH_INTERVAL and SUBNET_REFRESH_INTERVAL, since
// Karpless resolves subnets, security groups and AMIs together. 0 (a
// Config not read from the environment) means timing.NodeClassRefresh.
func (c Config) NodeClassRefresh() time.Duration {
	return min(c.AMIRefreshInterval, c.SubnetRefreshInterval)
}

// MinValuesBestEffortOn reports whether MIN_VALUES_POLICY is BestEffort.
func (c Config) MinValuesBestEffortOn() bool { return c.MinValuesPolicy == MinValuesBestEffort }

// FromEnv reads the environment. It does not validate; call Validate.
func FromEnv() (Config, error) {
	return FromLookup(os.LookupEnv)
}

// FromLookup reads settings through lookup (os.LookupEnv in production).
func FromLookup(lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	c := Config{
		ClusterName:          get("CLUSTER_NAME"),
		Region:               firstNonEmpty(get("AWS_REGION"), get("AWS_DEFAULT_REGION")),
		ClusterEndpoint:      get("CLUSTER_ENDPOINT"),
		ClusterCAData:        get("CLUSTER_CA_DATA"),
		Namespace:            firstNonEmpty(get("KARPLESS_NAMESPACE"), DefaultNamespace),
		InterruptionQueueURL: get("INTERRUPTION_QUEUE_URL"),
		LogLevel:             firstNonEmpty(get("LOG_LEVEL"), "info"),
		StackID:              get("STACK_ID"),
		NodeRoleName:         get("NODE_ROLE_NAME"),
		ControllersGroup:     get("CONTROLLERS_GROUP"),
	}
	var errs []error
	dur := func(key string, def time.Duration, dst *time.Duration) {
		*dst = def
		if v := get(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				errs = append(errs, fmt.Errorf("%s=%q is not a non-negative duration", key, v))
				return
			}
			*dst = d
		}
	}
	dur("BATCH_IDLE_DURATION", timing.DefaultBatchIdle, &c.BatchIdle)
	dur("BATCH_MAX_DURATION", timing.DefaultBatchMax, &c.BatchMax)
	dur("WATCH_WINDOW", timing.DefaultWatchWindow, &c.WatchWindow)
	dur("DEADLINE_MARGIN", timing.DefaultDeadlineMargin, &c.DeadlineMargin)
	dur("LEASE_DURATION", timing.DefaultLeaseDuration, &c.LeaseDuration)
	dur("REGISTRATION_TTL", timing.DefaultRegistrationTTL, &c.RegistrationTTL)
	dur("UNAVAILABLE_OFFERINGS_TTL", timing.DefaultUnavailableOfferingsTTL, &c.UnavailableOfferingsTTL)
	dur("AMI_REFRESH_INTERVAL", MinRefreshInterval, &c.AMIRefreshInterval)
	dur("SUBNET_REFRESH_INTERVAL", MinRefreshInterval, &c.SubnetRefreshInterval)
	for key, d := range map[string]time.Duration{"AMI_REFRESH_INTERVAL": c.AMIRefreshInterval, "SUBNET_REFRESH_INTERVAL": c.SubnetRefreshInterval} {
		if d < MinRefreshInterval {
			errs = append(errs, fmt.Errorf("%s (%s) must be at least %s, as Karpenter requires", key, d, MinRefreshInterval))
		}
	}
	boolean := func(key string, dst *bool) {
		if v := get(key); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is not a boolean", key, v))
			}
			*dst = b
		}
	}
	boolean("SPOT_TO_SPOT_CONSOLIDATION", &c.SpotToSpotConsolidation)
	boolean("NODE_REPAIR", &c.NodeRepair)
	boolean("INSTALL_DEFAULT_NODEPOOL", &c.InstallDefaultNodePool)
	boolean("REMOVE_USER_OBJECTS_ON_DELETE", &c.RemoveUserObjectsOnDelete)
	boolean("PAUSED", &c.Paused)
	boolean("ISOLATED_VPC", &c.IsolatedVPC)
	boolean("ENABLE_ZONAL_SHIFT", &c.EnableZonalShift)
	c.ClusterARN = get("CLUSTER_ARN")
	c.PreferencePolicy = firstNonEmpty(get("PREFERENCE_POLICY"), PreferencesRespect)
	if c.PreferencePolicy != PreferencesRespect && c.PreferencePolicy != PreferencesIgnore {
		errs = append(errs, fmt.Errorf("PREFERENCE_POLICY=%q is not %s or %s", c.PreferencePolicy, PreferencesRespect, PreferencesIgnore))
	}
	if v := get("VM_MEMORY_OVERHEAD_PERCENT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f >= 1 {
			errs = append(errs, fmt.Errorf("VM_MEMORY_OVERHEAD_PERCENT=%q is not a fraction from 0 to below 1 (0.075 is 7.5%%)", v))
		} else {
			c.VMMemoryOverheadPercent = &f
		}
	}
	positive := func(key string, dst *int) {
		if v := get(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q is not a positive integer", key, v))
				return
			}
			*dst = n
		}
	}
	positive("KUBE_CLIENT_QPS", &c.KubeClientQPS)
	positive("KUBE_CLIENT_BURST", &c.KubeClientBurst)
	c.MinValuesPolicy = firstNonEmpty(get("MIN_VALUES_POLICY"), MinValuesStrict)
	if c.MinValuesPolicy != MinValuesStrict && c.MinValuesPolicy != MinValuesBestEffort {
		errs = append(errs, fmt.Errorf("MIN_VALUES_POLICY=%q is not %s or %s", c.MinValuesPolicy, MinValuesStrict, MinValuesBestEffort))
	}
	c.MetricsLevel = firstNonEmpty(get("METRICS_LEVEL"), MetricsMinimal)
	if c.MetricsLevel != MetricsMinimal && c.MetricsLevel != MetricsFull {
		errs = append(errs, fmt.Errorf("METRICS_LEVEL=%q is not %s or %s", c.MetricsLevel, MetricsMinimal, MetricsFull))
	}
	c.Responsiveness = firstNonEmpty(get("RESPONSIVENESS"), ResponsivenessContinuous)
	if c.Responsiveness != ResponsivenessContinuous && c.Responsiveness != ResponsivenessEconomy {
		errs = append(errs, fmt.Errorf("RESPONSIVENESS=%q is not %s or %s", c.Responsiveness, ResponsivenessContinuous, ResponsivenessEconomy))
	}
	c.Mode = firstNonEmpty(get("MODE"), ModeActive)
	if c.Mode != ModeActive && c.Mode != ModeShadow {
		errs = append(errs, fmt.Errorf("MODE=%q is not %s or %s", c.Mode, ModeActive, ModeShadow))
	}
	if !slices.Contains(LogLevels, strings.ToLower(c.LogLevel)) {
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q is not one of %s", c.LogLevel, strings.Join(LogLevels, ", ")))
	}
	if v := get("RESERVED_ENIS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("RESERVED_ENIS=%q is not a non-negative integer", v))
		}
		c.ReservedENIs = n
	}
	return c, errors.Join(errs...)
}

// Validate reports every problem at once, each naming the variable to fix.
func (c Config) Validate() error {
	var errs []error
	if c.ClusterName == "" {
		errs = append(errs, errors.New("CLUSTER_NAME is required"))
	}
	if c.Region == "" {
		errs = append(errs, errors.New("AWS_REGION is required"))
	}
	if (c.ClusterEndpoint == "") != (c.ClusterCAData == "") {
		errs = append(errs, errors.New("CLUSTER_ENDPOINT and CLUSTER_CA_DATA must be set together (or neither, to use EKS DescribeCluster)"))
	}
	if c.ClusterEndpoint != "" && !strings.HasPrefix(c.ClusterEndpoint, "https://") {
		errs = append(errs, fmt.Errorf("CLUSTER_ENDPOINT=%q must be an https:// URL", c.ClusterEndpoint))
	}
	if c.InterruptionQueueURL != "" {
		if _, arn := c.InterruptionQueue(); arn == "" {
			errs = append(errs, fmt.Errorf("INTERRUPTION_QUEUE_URL=%q is not an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)", c.InterruptionQueueURL))
		}
	}
	if c.EnableZonalShift && !clusterARN.MatchString(c.ClusterARN) {
		errs = append(errs, fmt.Errorf("ENABLE_ZONAL_SHIFT=true needs CLUSTER_ARN, the EKS cluster's ARN (arn:<partition>:eks:<region>:<account>:cluster/<name>); got %q", c.ClusterARN))
	}
	if c.BatchIdle > c.BatchMax {
		errs = append(errs, fmt.Errorf("BATCH_IDLE_DURATION (%s) must not exceed BATCH_MAX_DURATION (%s)", c.BatchIdle, c.BatchMax))
	}
	if c.LeaseDuration < 5*time.Second {
		errs = append(errs, fmt.Errorf("LEASE_DURATION (%s) must be at least 5s", c.LeaseDuration))
	}
	return errors.Join(errs...)
}

// clusterARN is an EKS cluster's ARN.
var clusterARN = regexp.MustCompile(`^arn:aws[a-z-]*:eks:[a-z0-9-]+:[0-9]{12}:cluster/[A-Za-z0-9][A-Za-z0-9_-]*$`)

// queuePath is the path of an SQS queue URL: /<account>/<name>.
var queuePath = regexp.MustCompile(`^/([0-9]{12})/([A-Za-z0-9_-]{1,80}(\.fifo)?)$`)

// InterruptionQueue is the account and ARN of INTERRUPTION_QUEUE_URL's
// queue: the account and name are the URL's path, the partition and
// region the function's own (the queue is the stack's, in the cluster's
// account and region). Empty when the URL is unset or not a queue URL
// (Validate reports that).
func (c Config) InterruptionQueue() (account, arn string) {
	u, err := url.Parse(c.InterruptionQueueURL)
	if err != nil {
		return "", ""
	}
	m := queuePath.FindStringSubmatch(u.Path)
	if m == nil {
		return "", ""
	}
	return m[1], fmt.Sprintf("arn:%s:sqs:%s:%s:%s", Partition(c.Region), c.Region, m[1], m[2])
}

// Partition is the AWS partition of a region.
func Partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	}
	return "aws"
}

// stackARN is a CloudFormation stack's ID: its ARN, with the stack's
// name and the UUID CloudFormation gave it.
var stackARN = regexp.MustCompile(`^arn:aws[a-z-]*:cloudformation:([a-z0-9-]+):[0-9]{12}:stack/[A-Za-z][A-Za-z0-9-]{0,127}/[0-9a-f-]{36}$`)

// ValidateBootstrap reports what the bootstrap function needs beyond
// Validate: the ID of its own stack, in its region.
func (c Config) ValidateBootstrap() error {
	m := stackARN.FindStringSubmatch(c.StackID)
	switch {
	case c.StackID == "":
		return errors.New("STACK_ID is required (the ARN of the stack the bootstrap belongs to)")
	case m == nil:
		return fmt.Errorf("STACK_ID=%q is not a CloudFormation stack ARN", c.StackID)
	case m[1] != c.Region:
		return fmt.Errorf("STACK_ID=%q is a stack of region %s, not of AWS_REGION %s", c.StackID, m[1], c.Region)
	}
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
