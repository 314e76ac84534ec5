package config

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsAndOverrides(t *testing.T) {
	c, err := FromLookup(env(map[string]string{"CLUSTER_NAME": "demo", "AWS_REGION": "us-west-2", "WATCH_WINDOW": "0s", "BATCH_MAX_DURATION": "5s"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "kube-system" || c.BatchIdle != time.Second || c.BatchMax != 5*time.Second || c.WatchWindow != 0 || c.LeaseDuration != 30*time.Second || c.UnavailableOfferingsTTL != 3*time.Minute || c.NodeRepair {
		t.Errorf("unexpected config %+v", c)
	}
}

func TestInvalidSettingsNameTheVariable(t *testing.T) {
	_, err := FromLookup(env(map[string]string{"WATCH_WINDOW": "soon", "RESERVED_ENIS": "-1", "SPOT_TO_SPOT_CONSOLIDATION": "maybe", "NODE_REPAIR": "yes please"}))
	for _, want := range []string{"WATCH_WINDOW", "RESERVED_ENIS", "SPOT_TO_SPOT_CONSOLIDATION", "NODE_REPAIR"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	c, _ := FromLookup(env(map[string]string{"CLUSTER_ENDPOINT": "http://x", "BATCH_IDLE_DURATION": "20s"}))
	err = c.Validate()
	for _, want := range []string{"CLUSTER_NAME", "AWS_REGION", "CLUSTER_CA_DATA", "https://", "BATCH_IDLE_DURATION"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestMinValuesPolicy(t *testing.T) {
	for _, tc := range []struct {
		value      string
		bestEffort bool
		bad        bool
	}{
		{"", false, false},
		{"Strict", false, false},
		{"BestEffort", true, false},
		{"besteffort", false, true}, // Karpenter's values are case-sensitive
	} {
		c, err := FromLookup(env(map[string]string{"MIN_VALUES_POLICY": tc.value}))
		if (err != nil) != tc.bad || (err != nil && !strings.Contains(err.Error(), "MIN_VALUES_POLICY")) {
			t.Errorf("%q: error %v, want bad=%v naming MIN_VALUES_POLICY", tc.value, err, tc.bad)
		}
		if c.MinValuesBestEffortOn() != tc.bestEffort {
			t.Errorf("%q: BestEffort %v, want %v", tc.value, c.MinValuesBestEffortOn(), tc.bestEffort)
		}
	}
}

func TestMetricsLevel(t *testing.T) {
	for _, tc := range []struct {
		value, want string
		bad         bool
	}{
		{"", MetricsMinimal, false}, // the default keeps the idle bill small
		{"minimal", MetricsMinimal, false},
		{"full", MetricsFull, false},
		{"all", "all", true},
	} {
		c, err := FromLookup(env(map[string]string{"METRICS_LEVEL": tc.value}))
		if (err != nil) != tc.bad || (err != nil && !strings.Contains(err.Error(), "METRICS_LEVEL")) {
			t.Errorf("%q: error %v, want bad=%v naming METRICS_LEVEL", tc.value, err, tc.bad)
		}
		if c.MetricsLevel != tc.want {
			t.Errorf("%q: MetricsLevel %q, want %q", tc.value, c.MetricsLevel, tc.want)
		}
	}
}

func TestNodeRepair(t *testing.T) {
	c, err := FromLookup(env(map[string]string{"NODE_REPAIR": "true"}))
	if err != nil || !c.NodeRepair {
		t.Errorf("NODE_REPAIR=true: NodeRepair %v, error %v", c.NodeRepair, err)
	}
}

func TestResponsivenessAndLogLevel(t *testing.T) {
	c, err := FromLookup(env(map[string]string{}))
	if err != nil || c.Responsiveness != ResponsivenessContinuous || c.LogLevel != "info" {
		t.Errorf("defaults: responsiveness %q, log level %q, error %v", c.Responsiveness, c.LogLevel, err)
	}
	c, err = FromLookup(env(map[string]string{"RESPONSIVENESS": "economy", "LOG_LEVEL": "DEBUG"}))
	if err != nil || c.Responsiveness != ResponsivenessEconomy {
		t.Errorf("economy, DEBUG: responsiveness %q, error %v", c.Responsiveness, err)
	}
	_, err = FromLookup(env(map[string]string{"RESPONSIVENESS": "fast", "LOG_LEVEL": "verbose"}))
	for _, want := range []string{"RESPONSIVENESS", "LOG_LEVEL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func TestMode(t *testing.T) {
	for _, tc := range []struct {
		value, want string
		shadow, bad bool
	}{
		{"", ModeActive, false, false}, // a deploy without -c mode acts
		{"active", ModeActive, false, false},
		{"shadow", ModeShadow, true, false},
		{"dry-run", "dry-run", false, true},
	} {
		c, err := FromLookup(env(map[string]string{"MODE": tc.value}))
		if (err != nil) != tc.bad || (err != nil && !strings.Contains(err.Error(), "MODE")) {
			t.Errorf("%q: error %v, want bad=%v naming MODE", tc.value, err, tc.bad)
		}
		if c.Mode != tc.want || c.Shadow() != tc.shadow {
			t.Errorf("%q: Mode %q shadow %v, want %q %v", tc.value, c.Mode, c.Shadow(), tc.want, tc.shadow)
		}
	}
}

// The queue's account and ARN come from its URL and the function's
// region; a URL that is not a queue's is refused by Validate.
func TestInterruptionQueue(t *testing.T) {
	for _, tc := range []struct{ url, region, account, arn string }{
		{"https://sqs.us-west-2.amazonaws.com/123456789012/demo", "us-west-2", "123456789012", "arn:aws:sqs:us-west-2:123456789012:demo"},
		{"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/demo", "cn-north-1", "123456789012", "arn:aws-cn:sqs:cn-north-1:123456789012:demo"},
		{"https://sqs.us-gov-west-1.amazonaws.com/123456789012/q_1-x", "us-gov-west-1", "123456789012", "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q_1-x"},
		{"http://127.0.0.1:4566/123456789012/demo", "us-west-2", "123456789012", "arn:aws:sqs:us-west-2:123456789012:demo"},
		{"https://sqs.us-west-2.amazonaws.com/demo", "us-west-2", "", ""},
		{"https://sqs.us-west-2.amazonaws.com/12345/demo", "us-west-2", "", ""},
		{"", "us-west-2", "", ""},
	} {
		c := Config{InterruptionQueueURL: tc.url, Region: tc.region}
		account, arn := c.InterruptionQueue()
		if account != tc.account || arn != tc.arn {
			t.Errorf("%q: %q %q, want %q %q", tc.url, account, arn, tc.account, tc.arn)
		}
		c.ClusterName, c.BatchMax, c.LeaseDuration = "demo", time.Second, 30*time.Second
		err := c.Validate()
		if bad := tc.url != "" && tc.arn == ""; bad != (err != nil && strings.Contains(err.Error(), "INTERRUPTION_QUEUE_URL")) {
			t.Errorf("%q: Validate = %v", tc.url, err)
		}
	}
}

// The bootstrap needs its own stack's ID, of its own region.
func TestValidateBootstrap(t *testing.T) {
	const id = "arn:aws:cloudformation:us-west-2:123456789012:stack/Karpless-demo/0f5c0e30-8a1b-11ef-9d0c-0a1b2c3d4e5f"
	for _, tc := range []struct{ id, region, want string }{
		{id, "us-west-2", ""},
		{"", "us-west-2", "STACK_ID is required"},
		{"Karpless-demo", "us-west-2", "not a CloudFormation stack ARN"},
		{"arn:aws:lambda:us-west-2:123456789012:function:x", "us-west-2", "not a CloudFormation stack ARN"},
		{id, "eu-west-1", "not of AWS_REGION eu-west-1"},
		{strings.Replace(id, "arn:aws:", "arn:aws-cn:", 1), "us-west-2", ""},
	} {
		err := Config{StackID: tc.id, Region: tc.region}.ValidateBootstrap()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q in %s: %v, want %q", tc.id, tc.region, err, tc.want)
		}
	}
}

// Karpenter's settings the stack writes from its context keys: defaults,
// values and errors naming the variable.
func TestKarpenterSettings(t *testing.T) {
	c, err := FromLookup(env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if c.PreferencePolicy != PreferencesRespect || c.PreferencesIgnored() || c.VMMemoryOverheadPercent != nil || c.IsolatedVPC ||
		c.KubeClientQPS != 0 || c.KubeClientBurst != 0 || c.NodeClassRefresh() != time.Minute {
		t.Errorf("defaults %+v", c)
	}
	c, err = FromLookup(env(map[string]string{"PREFERENCE_POLICY": "Ignore", "VM_MEMORY_OVERHEAD_PERCENT": "0", "ISOLATED_VPC": "true",
		"KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "80", "AMI_REFRESH_INTERVAL": "10m", "SUBNET_REFRESH_INTERVAL": "3m"}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.PreferencesIgnored() || c.VMMemoryOverheadPercent == nil || *c.VMMemoryOverheadPercent != 0 || !c.IsolatedVPC ||
		c.KubeClientQPS != 50 || c.KubeClientBurst != 80 || c.NodeClassRefresh() != 3*time.Minute {
		t.Errorf("values %+v", c)
	}
	// A Config built in code, not read, resolves classes at the default.
	if (Config{}).NodeClassRefresh() != 0 {
		t.Error("zero Config's refresh is not 0 (timing.NodeClassRefresh)")
	}
	_, err = FromLookup(env(map[string]string{"PREFERENCE_POLICY": "respect", "VM_MEMORY_OVERHEAD_PERCENT": "1", "ISOLATED_VPC": "sometimes",
		"KUBE_CLIENT_QPS": "0", "KUBE_CLIENT_BURST": "x", "AMI_REFRESH_INTERVAL": "30s", "SUBNET_REFRESH_INTERVAL": "59s"}))
	for _, want := range []string{"PREFERENCE_POLICY", "VM_MEMORY_OVERHEAD_PERCENT", "ISOLATED_VPC", "KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST", "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func TestEnableZonalShift(t *testing.T) {
	base := map[string]string{"CLUSTER_NAME": "demo", "AWS_REGION": "us-west-2"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	const arn = "arn:aws:eks:us-west-2:123456789012:cluster/demo"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"off by default", base, false, ""},
		{"on, with the cluster's ARN", with("ENABLE_ZONAL_SHIFT", "true", "CLUSTER_ARN", arn), true, ""},
		{"on, in another partition", with("ENABLE_ZONAL_SHIFT", "true", "CLUSTER_ARN", "arn:aws-cn:eks:cn-north-1:123456789012:cluster/demo"), true, ""},
		{"on, without an ARN", with("ENABLE_ZONAL_SHIFT", "true"), true, "CLUSTER_ARN"},
		{"on, with a name for an ARN", with("ENABLE_ZONAL_SHIFT", "true", "CLUSTER_ARN", "demo"), true, "CLUSTER_ARN"},
		{"not a boolean", with("ENABLE_ZONAL_SHIFT", "yes please"), false, "ENABLE_ZONAL_SHIFT"},
		{"an ARN alone turns nothing on", with("CLUSTER_ARN", arn), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromLookup(env(tc.env))
			if err == nil {
				err = c.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.EnableZonalShift != tc.on {
				t.Errorf("EnableZonalShift = %v, want %v", c.EnableZonalShift, tc.on)
			}
		})
	}
}
