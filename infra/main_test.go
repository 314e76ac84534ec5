package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/karpless/karpless/infra/stack"
	"github.com/karpless/karpless/internal/cdktestenv"
)

func TestMain(m *testing.M) {
	cdktestenv.Setup()
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

func readConfig(t *testing.T, context map[string]interface{}) (config, error) {
	t.Helper()
	t.Setenv("CDK_DEFAULT_ACCOUNT", "")
	t.Setenv("CDK_DEFAULT_REGION", "")
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(t.TempDir())})
	return configFromContext(app)
}

func TestConfigFromContext(t *testing.T) {
	defaultOverhead := 0.075
	// As the CLI passes -c values: strings.
	cfg, err := readConfig(t, map[string]interface{}{
		"clusterName":            "prod",
		"installDefaultNodePool": "true",
		"logRetentionDays":       "14",
		"metricsLevel":           "full",
		"subnetIds":              "subnet-0123456789abcdef0, subnet-0123456789abcdef1",
		"securityGroupIds":       "sg-0123456789abcdef0",
		"nag":                    "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := stack.Props{
		ClusterName:            "prod",
		Account:                dummyAccount,
		Region:                 dummyRegion,
		AssetsDir:              "build",
		InstallDefaultNodePool: true,
		CRDHash:                "dev",
		LogRetentionDays:       14,
		MetricsLevel:           "full",
		SubnetIDs:              []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"},
		SecurityGroupIDs:       []string{"sg-0123456789abcdef0"},
		// The settings' defaults, explicit.
		Responsiveness:    "continuous",
		BatchIdleDuration: time.Second,
		BatchMaxDuration:  10 * time.Second,
		LogLevel:          "info",
		Mode:              "active",
		// Karpenter's settings' defaults.
		PreferencePolicy:        "Respect",
		MinValuesPolicy:         "Strict",
		VMMemoryOverheadPercent: &defaultOverhead,
		AMIRefreshInterval:      time.Minute,
		SubnetRefreshInterval:   time.Minute,
		Namespace:               "kube-system",
		KubeClientQPS:           200,
		KubeClientBurst:         300,
	}
	if !reflect.DeepEqual(cfg.props, want) {
		t.Errorf("props\n got %+v\nwant %+v", cfg.props, want)
	}
	if cfg.stackName != "Karpless-prod" || !cfg.nag {
		t.Errorf("stackName %q nag %v", cfg.stackName, cfg.nag)
	}

	// As cdk.json may hold them: JSON values.
	cfg, err = readConfig(t, map[string]interface{}{
		"clusterName": "prod", "account": "210987654321", "region": "eu-west-1",
		"importNodeRole": true, "logRetentionDays": 90, "subnetIds": []interface{}{"subnet-0123456789abcdef0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.props.ImportNodeRole || cfg.props.LogRetentionDays != 90 || cfg.props.Account != "210987654321" ||
		!reflect.DeepEqual(cfg.props.SubnetIDs, []string{"subnet-0123456789abcdef0"}) {
		t.Errorf("props %+v", cfg.props)
	}
}

func TestNodeRolesFromContext(t *testing.T) {
	want := []stack.NodeRole{{Name: "TeamB"}, {Name: "KarpenterWindowsNodeRole-prod", Windows: true, Create: true}, {Name: "Old", SkipAccessEntry: true}}
	for name, v := range map[string]interface{}{
		"-c string":      "TeamB, KarpenterWindowsNodeRole-prod:windows:create ,Old:skipAccessEntry",
		"cdk.json array": []interface{}{"TeamB", "KarpenterWindowsNodeRole-prod:windows:create", "Old:skipAccessEntry"},
	} {
		cfg, err := readConfig(t, map[string]interface{}{"clusterName": "prod", "nodeRoles": v})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(cfg.props.NodeRoles, want) {
			t.Errorf("%s: node roles %+v, want %+v", name, cfg.props.NodeRoles, want)
		}
	}
	_, err := readConfig(t, map[string]interface{}{"clusterName": "prod", "nodeRoles": "A:win"})
	if err == nil || !strings.Contains(err.Error(), `context nodeRoles: "A:win": unknown modifier "win"`) {
		t.Errorf("error: %v", err)
	}
}

func TestConfigFromContextErrors(t *testing.T) {
	_, err := readConfig(t, map[string]interface{}{"clusterName": "prod", "nag": "maybe", "logRetentionDays": "a week"})
	if err == nil || !strings.Contains(err.Error(), "nag: want true or false") || !strings.Contains(err.Error(), "logRetentionDays: want a whole number") {
		t.Errorf("error: %v", err)
	}
}

func TestReservedConcurrencyContext(t *testing.T) {
	cases := []struct {
		name  string
		value any // nil: key absent
		want  int
		err   string // substring of the error; "": none
	}{
		{"absent", nil, 0, ""},
		{"none", "none", 0, ""},
		{"NONE", " NONE ", 0, ""},
		{"empty", "", 0, ""},
		{"0", "0", 0, ""},
		{"string", "2", 2, ""},
		{"cdk.json number", float64(3), 3, ""},
		{"word", "two", 0, "reservedConcurrency: want none or a whole number, got two"},
		{"fraction", "1.5", 0, "reservedConcurrency: want none or a whole number"},
		{"cdk.json fraction", 1.5, 0, "reservedConcurrency: want none or a whole number"},
		{"cdk.json bool", true, 0, "reservedConcurrency: want none or a whole number"},
		// Parsed here; the range is Props.Validate's (next test).
		{"negative", "-1", -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			context := map[string]interface{}{"clusterName": "prod"}
			if c.value != nil {
				context["reservedConcurrency"] = c.value
			}
			cfg, err := readConfig(t, context)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.props.ReservedConcurrency != c.want {
				t.Errorf("ReservedConcurrency = %d, want %d", cfg.props.ReservedConcurrency, c.want)
			}
		})
	}
}

// A negative value read from context is rejected by the stack's validation,
// which names the key.
func TestReservedConcurrencyNegative(t *testing.T) {
	cfg, err := readConfig(t, map[string]interface{}{"clusterName": "prod", "reservedConcurrency": "-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.props.Validate(); err == nil || !strings.Contains(err.Error(), "reservedConcurrency -1 is not valid") {
		t.Errorf("Validate: %v", err)
	}
}

// The settings kept as context: as -c passes them (strings) and as
// cdk.json may hold them (JSON values); a bad value names its key.
func TestSettingsFromContext(t *testing.T) {
	cfg, err := readConfig(t, map[string]interface{}{
		"clusterName": "prod", "responsiveness": "economy", "batchIdleDuration": "500ms", "batchMaxDuration": "5s",
		"spotToSpotConsolidation": "true", "logLevel": "debug", "paused": "true", "alarms": "false",
		"alarmTopicArn": "arn:aws:sns:us-east-1:123456789012:oncall", "dashboard": "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.props
	if p.Responsiveness != "economy" || p.BatchIdleDuration != 500*time.Millisecond || p.BatchMaxDuration != 5*time.Second ||
		!p.SpotToSpotConsolidation || p.LogLevel != "debug" || !p.Paused || !p.NoAlarms || p.AlarmTopicARN != "arn:aws:sns:us-east-1:123456789012:oncall" ||
		!p.NoDashboard {
		t.Errorf("props %+v", p)
	}
	cfg, err = readConfig(t, map[string]interface{}{"clusterName": "prod", "spotToSpotConsolidation": true, "paused": false, "alarms": true})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.props.SpotToSpotConsolidation || cfg.props.Paused || cfg.props.NoAlarms || cfg.props.NoDashboard {
		t.Errorf("cdk.json booleans: %+v", cfg.props)
	}
	_, err = readConfig(t, map[string]interface{}{"clusterName": "prod", "batchIdleDuration": "soon", "batchMaxDuration": 10, "paused": "perhaps", "alarms": "on", "dashboard": "maybe"})
	for _, want := range []string{"batchIdleDuration: want a duration such as 1s", "batchMaxDuration: want a duration", "paused: want true or false", "alarms: want true or false", "dashboard: want true or false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// -c mode=shadow reaches the props; a bad mode names the key.
func TestModeFromContext(t *testing.T) {
	cfg, err := readConfig(t, map[string]interface{}{"clusterName": "prod", "mode": "shadow"})
	if err != nil || cfg.props.Mode != "shadow" {
		t.Fatalf("mode shadow: props.Mode %q, error %v", cfg.props.Mode, err)
	}
	cfg, err = readConfig(t, map[string]interface{}{"clusterName": "prod"})
	if err != nil || cfg.props.Mode != "active" {
		t.Fatalf("no mode: props.Mode %q, error %v", cfg.props.Mode, err)
	}
	cfg, err = readConfig(t, map[string]interface{}{"clusterName": "prod", "mode": "dry-run"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.props.Validate(); err == nil || !strings.Contains(err.Error(), `mode "dry-run"`) {
		t.Errorf("Validate: %v", err)
	}
}
