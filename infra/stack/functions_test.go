package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/karpless/karpless/functions"
	fnconfig "github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

func TestFunctions(t *testing.T) {
	queue := ref(logicalID(st, st.Queue))
	// Every function's settings, and the controllers' Karpenter settings,
	// at their defaults.
	common := map[string]any{"KARPLESS_NAMESPACE": "kube-system", "KUBE_CLIENT_QPS": "200", "KUBE_CLIENT_BURST": "300"}
	controller := map[string]any{"PREFERENCE_POLICY": "Respect", "MIN_VALUES_POLICY": "Strict", "RESERVED_ENIS": "0",
		"VM_MEMORY_OVERHEAD_PERCENT": "0.075", "ISOLATED_VPC": "false", "AMI_REFRESH_INTERVAL": "1m0s", "SUBNET_REFRESH_INTERVAL": "1m0s",
		"ENABLE_ZONAL_SHIFT": "false"}
	with := func(env map[string]any, more ...map[string]any) map[string]any {
		for _, m := range more {
			for k, v := range m {
				env[k] = v
			}
		}
		return env
	}
	cases := []struct {
		name     string
		memory   int
		timeout  int
		reserved any // nil: unreserved
		env      map[string]any
	}{
		// The settings kept as context are written with their defaults.
		{Provisioner, 512, 70, nil, with(map[string]any{"GOMEMLIMIT": "409MiB", "CLUSTER_NAME": testCluster, "NODE_ROLE_NAME": "KarpenterNodeRole-demo", "METRICS_LEVEL": "minimal",
			"BATCH_IDLE_DURATION": "1s", "BATCH_MAX_DURATION": "10s", "RESPONSIVENESS": "continuous", "LOG_LEVEL": "info", "MODE": "active"}, common, controller)},
		{Disruption, 1024, 70, nil, with(map[string]any{"GOMEMLIMIT": "819MiB", "CLUSTER_NAME": testCluster, "NODE_ROLE_NAME": "KarpenterNodeRole-demo", "METRICS_LEVEL": "minimal",
			"SPOT_TO_SPOT_CONSOLIDATION": "false", "NODE_REPAIR": "false", "LOG_LEVEL": "info", "MODE": "active"}, common, controller)},
		{Interruption, 1024, 60, nil, with(map[string]any{"GOMEMLIMIT": "819MiB", "CLUSTER_NAME": testCluster, "NODE_ROLE_NAME": "KarpenterNodeRole-demo", "INTERRUPTION_QUEUE_URL": queue, "METRICS_LEVEL": "minimal",
			"LOG_LEVEL": "info", "MODE": "active"}, common, controller)},
		{Bootstrap, 256, 300, nil, with(map[string]any{"GOMEMLIMIT": "204MiB", "CLUSTER_NAME": testCluster, "LOG_LEVEL": "info", "MODE": "active",
			"STACK_ID": map[string]any{"Ref": "AWS::StackId"}, "NODE_ROLE_NAME": "KarpenterNodeRole-demo", "INSTALL_DEFAULT_NODEPOOL": "false",
			"REMOVE_USER_OBJECTS_ON_DELETE": "false", "PAUSED": "false", "CONTROLLERS_GROUP": "karpless:controllers"}, common)},
		{Watcher, 128, 75, nil, with(map[string]any{"GOMEMLIMIT": "102MiB", "CLUSTER_NAME": testCluster, "LOG_LEVEL": "info", "MODE": "active",
			"PROVISIONER_FUNCTION_NAME": ref(logicalID(st, st.Functions[Provisioner])), "BATCH_IDLE_DURATION": "1s", "BATCH_MAX_DURATION": "10s"}, common)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fn := resources(doc)[logicalID(st, st.Functions[c.name])]
			if fn == nil {
				t.Fatalf("no function %s", c.name)
			}
			want := map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"MemorySize":    c.memory,
				"Timeout":       c.timeout,
				"Role":          getAtt(logicalID(st, st.Roles[c.name]), "Arn"),
				"LoggingConfig": map[string]any{"LogGroup": ref(logicalID(st, st.LogGroups[c.name]))},
				"Environment":   map[string]any{"Variables": c.env},
				// No reserved concurrency by default (see
				// TestReservedConcurrency).
				"ReservedConcurrentExecutions": c.reserved,
				"VpcConfig":                    nil,
			}
			p := props(fn)
			for k, v := range want {
				if jsonString(p[k]) != jsonString(v) {
					t.Errorf("%s: %s = %s, want %s", c.name, k, jsonString(p[k]), jsonString(v))
				}
			}
			code, _ := p["Code"].(map[string]any)
			if code["S3Key"] == nil {
				t.Errorf("%s: code is not an S3 asset: %v", c.name, code)
			}
		})
	}
}

// By default no function reserves concurrency: a reservation fails the
// deploy on accounts with a low concurrency quota, and the leases already
// serialize the ticks. With reservedConcurrency set, both scheduled
// functions reserve that many, and no other function does.
func TestReservedConcurrency(t *testing.T) {
	cases := []struct {
		name     string
		reserved int
		want     any // ReservedConcurrentExecutions of the ticks; nil: absent
	}{
		{"default (none)", 0, nil},
		{"1", 1, 1},
		{"20", 20, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := defaultProps()
			p.ReservedConcurrency = c.reserved
			s, _, d, err := synth(p, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range functions.Names() {
				want := c.want
				if name != Provisioner && name != Disruption {
					want = nil
				}
				got := props(resources(d)[logicalID(s, s.Functions[name])])["ReservedConcurrentExecutions"]
				if jsonString(got) != jsonString(want) {
					t.Errorf("%s: ReservedConcurrentExecutions = %s, want %s", name, jsonString(got), jsonString(want))
				}
			}
		})
	}

	// The default template of TestMain, too.
	check(t, "no function reserves concurrency by default", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), &map[string]interface{}{
			"ReservedConcurrentExecutions": assertions.Match_AnyValue(),
		}, jsii.Number(0))
	})

	// An invalid value defines nothing and names the key.
	p := defaultProps()
	p.ReservedConcurrency = -2
	if s, err := NewStack(newApp(), "Karpless-bad", p); err == nil || s != nil {
		t.Errorf("NewStack with reservedConcurrency -2 = %v, %v; want an error", s, err)
	} else if !strings.Contains(err.Error(), "reservedConcurrency -2 is not valid") {
		t.Errorf("error: %v", err)
	}
}

func TestNoOtherFunctions(t *testing.T) {
	// The bootstrap custom resource must not bring the Provider
	// framework's Node.js function along.
	check(t, "5 functions", func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(5)) })
	check(t, "all provided.al2023", func() {
		tmpl.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), &map[string]interface{}{
			"Runtime": "provided.al2023", "Architectures": []interface{}{"arm64"},
		})
	})
}

func TestLogGroups(t *testing.T) {
	check(t, "5 log groups with 30 days", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), &map[string]interface{}{"RetentionInDays": 30}, jsii.Number(5))
	})
	for _, name := range functions.Names() {
		lg := logicalID(st, st.LogGroups[name])
		r := resources(doc)[lg]
		if r["DeletionPolicy"] != "Delete" {
			t.Errorf("%s log group: DeletionPolicy %v, want Delete", name, r["DeletionPolicy"])
		}
		// The function's role may write to its own log group and no other.
		check(t, name+" writes its own logs", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), &map[string]interface{}{
				"Roles": []interface{}{ref(logicalID(st, st.Roles[name]))},
				"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
					"Statement": assertions.Match_ArrayWith(&[]interface{}{map[string]interface{}{
						"Sid":      "AllowWritingOwnLogs",
						"Effect":   "Allow",
						"Action":   []interface{}{"logs:CreateLogStream", "logs:PutLogEvents"},
						"Resource": getAtt(lg, "Arn"),
					}}),
				}),
			})
		})
	}

	// A different retention from context.
	p := defaultProps()
	p.LogRetentionDays = 7
	_, tm, _, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "retention 7", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), &map[string]interface{}{"RetentionInDays": 7}, jsii.Number(5))
	})
}

func TestScheduleRules(t *testing.T) {
	for _, name := range []string{Provisioner, Disruption, Watcher} {
		fn := logicalID(st, st.Functions[name])
		check(t, name+" schedule", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), &map[string]interface{}{
				"ScheduleExpression": "rate(1 minute)",
				"State":              "ENABLED",
				"Targets": []interface{}{assertions.Match_ObjectLike(&map[string]interface{}{
					"Arn":         getAtt(fn, "Arn"),
					"RetryPolicy": map[string]interface{}{"MaximumEventAgeInSeconds": 60, "MaximumRetryAttempts": 0},
				})},
			})
		})
		check(t, name+" invoke permission from its rule", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), &map[string]interface{}{
				"Action":       "lambda:InvokeFunction",
				"FunctionName": getAtt(fn, "Arn"),
				"Principal":    "events.amazonaws.com",
				"SourceArn":    assertions.Match_ObjectLike(&map[string]interface{}{"Fn::GetAtt": assertions.Match_AnyValue()}),
			})
		})
		check(t, name+" async: no retries, events dropped after 60 s", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), &map[string]interface{}{
				"FunctionName":             ref(fn),
				"MaximumRetryAttempts":     0,
				"MaximumEventAgeInSeconds": 60,
			})
		})
	}
	check(t, "3 scheduled rules", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::Events::Rule"), &map[string]interface{}{
			"ScheduleExpression": assertions.Match_AnyValue(),
		}, jsii.Number(3))
	})
}

// bootstrapSettings reads the bootstrap function's environment in a
// synthesized template (the stack ID is a reference there) and returns it
// with the options the function reads from it and the custom resource's
// SettingsHash property.
func bootstrapSettings(t *testing.T, s *Stack, d map[string]any) (env map[string]any, opts bootstrap.Options, hash any) {
	t.Helper()
	fn := props(resources(d)[logicalID(s, s.Functions[Bootstrap])])
	e, _ := fn["Environment"].(map[string]any)
	env, _ = e["Variables"].(map[string]any)
	cfg, err := fnconfig.FromLookup(func(k string) (string, bool) { v, ok := env[k].(string); return v, ok })
	if err != nil {
		t.Fatalf("the bootstrap's environment: %v", err)
	}
	return env, bootstrap.OptionsFrom(cfg), props(resources(d)[logicalID(s, s.Bootstrap)])[bootstrap.SettingsHashProperty]
}

// The custom resource carries hashes only: every setting the bootstrap
// acts on is in its function's environment, and SettingsHash is the hash
// of what the function reads there.
func TestBootstrapCustomResource(t *testing.T) {
	fn := logicalID(st, st.Functions[Bootstrap])
	env, opts, hash := bootstrapSettings(t, st, doc)
	check(t, "custom resource", func() {
		tmpl.HasResource(jsii.String("AWS::CloudFormation::CustomResource"), &map[string]interface{}{
			"Properties": assertions.Match_ObjectEquals(&map[string]interface{}{
				"ServiceToken":                 getAtt(fn, "Arn"),
				"ServiceTimeout":               1200,
				bootstrap.SettingsHashProperty: opts.SettingsHash(),
				"CRDHash":                      "dev",
				"BootstrapSHA256":              bootstrapSHA256(t),
			}),
			"DependsOn": assertions.Match_ArrayWith(&[]interface{}{"BootstrapAccessEntry", "NodeAccessEntry"}),
		})
	})
	if hash != opts.SettingsHash() {
		t.Errorf("SettingsHash %v, the function's settings hash %s", hash, opts.SettingsHash())
	}
	want := map[string]any{
		"CLUSTER_NAME": testCluster, "NODE_ROLE_NAME": "KarpenterNodeRole-demo", "INSTALL_DEFAULT_NODEPOOL": "false",
		"REMOVE_USER_OBJECTS_ON_DELETE": "false", "PAUSED": "false", "CONTROLLERS_GROUP": "karpless:controllers", "MODE": "active",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("bootstrap %s = %v, want %v", k, env[k], v)
		}
	}
	if ref, _ := env["STACK_ID"].(map[string]any); ref["Ref"] != "AWS::StackId" {
		t.Errorf("bootstrap STACK_ID = %v, want the stack's own ID", env["STACK_ID"])
	}
	if opts.ClusterName != testCluster || opts.ControllersGroup != ControllersGroup || opts.Shadow || opts.DefaultNodePool || opts.RemoveUserObjects {
		t.Errorf("the function reads %+v", opts)
	}

	// A new bootstrap binary changes BootstrapSHA256 (an Update).
	other := t.TempDir()
	for _, fn := range functions.Names() {
		if err := os.MkdirAll(filepath.Join(other, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, fn, "bootstrap"), []byte("new "+fn), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p0 := defaultProps()
	p0.AssetsDir = other
	_, tm0, _, err := synth(p0, false)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("new bootstrap"))
	check(t, "binary hash", func() {
		tm0.HasResourceProperties(jsii.String("AWS::CloudFormation::CustomResource"), &map[string]interface{}{
			"BootstrapSHA256": hex.EncodeToString(sum[:]),
		})
	})

	// Context changes reach the function's settings and the hash: a
	// change makes CloudFormation send an Update.
	p := defaultProps()
	p.InstallDefaultNodePool = true
	p.RemoveUserObjectsOnDelete = true
	p.CRDHash = "sha256-abc"
	s2, _, d2, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	env2, opts2, hash2 := bootstrapSettings(t, s2, d2)
	if env2["INSTALL_DEFAULT_NODEPOOL"] != "true" || env2["REMOVE_USER_OBJECTS_ON_DELETE"] != "true" || !opts2.DefaultNodePool || !opts2.RemoveUserObjects {
		t.Errorf("context did not reach the bootstrap's settings: %v %+v", env2, opts2)
	}
	if hash2 != opts2.SettingsHash() || hash2 == hash {
		t.Errorf("SettingsHash %v after a change (was %v; the function's %s)", hash2, hash, opts2.SettingsHash())
	}
	if got := props(resources(d2)[logicalID(s2, s2.Bootstrap)])["CRDHash"]; got != "sha256-abc" {
		t.Errorf("CRDHash %v", got)
	}
}

func bootstrapSHA256(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(assetsDir, Bootstrap, "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// metricsLevel reaches the three functions that emit metrics, and only them.
func TestMetricsLevelEnv(t *testing.T) {
	p := defaultProps()
	p.MetricsLevel = "full"
	s, tm, d, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "METRICS_LEVEL full", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), &map[string]interface{}{
			"Environment": assertions.Match_ObjectLike(&map[string]interface{}{
				"Variables": assertions.Match_ObjectLike(&map[string]interface{}{"METRICS_LEVEL": "full"}),
			}),
		}, jsii.Number(3))
	})
	for _, name := range []string{Provisioner, Disruption, Interruption} {
		env, _ := props(resources(d)[logicalID(s, s.Functions[name])])["Environment"].(map[string]any)
		if vars, _ := env["Variables"].(map[string]any); vars["METRICS_LEVEL"] != "full" {
			t.Errorf("%s: METRICS_LEVEL = %v, want full", name, vars["METRICS_LEVEL"])
		}
	}
}
