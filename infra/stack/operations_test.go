package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// The watcher is deployed with responsiveness continuous (the default):
// 128 MiB on arm64, 75 s, every minute (TestFunctions, TestScheduleRules),
// its provisioner's name in its environment, and IAM that lets it invoke
// that function and nothing else, find the cluster's endpoint, and write
// its own logs. Its access entry maps it to its own group, with no access
// policy (TestAccessEntries).
func TestWatcherIAM(t *testing.T) {
	role := logicalID(st, st.Roles[Watcher])
	stmts, awsManaged := roleGrants(doc, role)
	if len(awsManaged) != 0 {
		t.Errorf("watcher has AWS managed policies %v", awsManaged)
	}
	want := map[string]string{
		"lambda:InvokeFunction": jsonString(getAtt(logicalID(st, st.Functions[Provisioner]), "Arn")),
		"eks:DescribeCluster":   jsonString(map[string]any{"Fn::Sub": "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/" + testCluster}),
		"logs:CreateLogStream":  jsonString(getAtt(logicalID(st, st.LogGroups[Watcher]), "Arn")),
		"logs:PutLogEvents":     jsonString(getAtt(logicalID(st, st.LogGroups[Watcher]), "Arn")),
	}
	got := map[string]string{}
	for _, s := range stmts {
		if s["Effect"] != "Allow" || s["Condition"] != nil {
			t.Errorf("watcher statement %s", jsonString(s))
		}
		for _, a := range asStrings(s["Action"]) {
			if _, dup := got[a]; dup {
				t.Errorf("watcher: %s granted twice", a)
			}
			got[a] = jsonString(s["Resource"])
		}
	}
	if jsonString(got) != jsonString(want) {
		t.Errorf("watcher grants (action: resource)\n got %v\nwant %v", got, want)
	}
	// Only the watcher may invoke a function.
	for _, name := range functions.Names() {
		if name == Watcher {
			continue
		}
		stmts, _ := roleGrants(doc, logicalID(st, st.Roles[name]))
		for _, s := range stmts {
			for _, a := range asStrings(s["Action"]) {
				if strings.HasPrefix(a, "lambda:") {
					t.Errorf("%s may %s", name, a)
				}
			}
		}
	}
}

// With responsiveness economy there is no watcher: no function, role,
// schedule, access entry or alarm of it, and its binary need not exist;
// the provisioner is told economy. With continuous, a missing watcher
// binary is named.
func TestEconomyHasNoWatcher(t *testing.T) {
	noWatcher := t.TempDir()
	for _, fn := range functions.Names() {
		if fn == Watcher {
			continue
		}
		if err := os.MkdirAll(filepath.Join(noWatcher, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(noWatcher, fn, "bootstrap"), []byte("dummy "+fn), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := defaultProps()
	p.AssetsDir = noWatcher
	if _, err := NewStack(newApp(), "Karpless-continuous", p); err == nil || !strings.Contains(err.Error(), filepath.Join(noWatcher, "watcher", "bootstrap")+" is missing") {
		t.Errorf("continuous without the watcher's binary: %v", err)
	}

	p.Responsiveness = "economy"
	s, tm, d, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Functions[Watcher] != nil || s.Roles[Watcher] != nil || s.AccessEntries[Watcher] != nil || s.Schedules[Watcher] != nil {
		t.Error("economy defines watcher constructs")
	}
	check(t, "4 functions", func() { tm.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(4)) })
	check(t, "2 schedules", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::Events::Rule"), &map[string]interface{}{"ScheduleExpression": assertions.Match_AnyValue()}, jsii.Number(2))
	})
	check(t, "no watcher access entry", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::EKS::AccessEntry"), &map[string]interface{}{"Username": "karpless:watcher"}, jsii.Number(0))
	})
	check(t, "7 alarms", func() { tm.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(7)) })
	for id, r := range resources(d) {
		if strings.Contains(jsonString(r), "lambda:InvokeFunction") && r["Type"] != "AWS::Lambda::Permission" {
			t.Errorf("%s grants lambda:InvokeFunction in economy", id)
		}
	}
	env, _ := props(resources(d)[logicalID(s, s.Functions[Provisioner])])["Environment"].(map[string]any)
	if vars, _ := env["Variables"].(map[string]any); vars["RESPONSIVENESS"] != "economy" {
		t.Errorf("provisioner RESPONSIVENESS = %v", vars["RESPONSIVENESS"])
	}
}

// The settings kept as context reach the functions that read them, and a
// deploy writes them whatever their value (TestFunctions has the
// defaults).
func TestSettingsReachTheFunctions(t *testing.T) {
	p := defaultProps()
	p.BatchIdleDuration, p.BatchMaxDuration = 500*time.Millisecond, 5*time.Second
	p.SpotToSpotConsolidation = true
	p.LogLevel = "debug"
	s, _, d, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	env := func(name string) map[string]any {
		e, _ := props(resources(d)[logicalID(s, s.Functions[name])])["Environment"].(map[string]any)
		vars, _ := e["Variables"].(map[string]any)
		return vars
	}
	for _, name := range []string{Provisioner, Watcher} {
		if v := env(name); v["BATCH_IDLE_DURATION"] != "500ms" || v["BATCH_MAX_DURATION"] != "5s" {
			t.Errorf("%s batching: %v, %v", name, v["BATCH_IDLE_DURATION"], v["BATCH_MAX_DURATION"])
		}
	}
	if v := env(Disruption); v["SPOT_TO_SPOT_CONSOLIDATION"] != "true" {
		t.Errorf("disruption SPOT_TO_SPOT_CONSOLIDATION = %v", v["SPOT_TO_SPOT_CONSOLIDATION"])
	}
	for _, name := range functions.Names() {
		if v := env(name); v["LOG_LEVEL"] != "debug" {
			t.Errorf("%s LOG_LEVEL = %v", name, v["LOG_LEVEL"])
		}
	}
	// Only the disruption function reads the feature gate, only the
	// provisioner and the watcher batch, only the provisioner is told the
	// responsiveness.
	for _, name := range functions.Names() {
		v := env(name)
		if _, ok := v["SPOT_TO_SPOT_CONSOLIDATION"]; ok != (name == Disruption) {
			t.Errorf("%s has SPOT_TO_SPOT_CONSOLIDATION: %v", name, ok)
		}
		if _, ok := v["BATCH_MAX_DURATION"]; ok != (name == Provisioner || name == Watcher) {
			t.Errorf("%s has BATCH_MAX_DURATION: %v", name, ok)
		}
		if _, ok := v["RESPONSIVENESS"]; ok != (name == Provisioner) {
			t.Errorf("%s has RESPONSIVENESS: %v", name, ok)
		}
	}
	// An invalid setting defines nothing and names its key.
	p = defaultProps()
	p.Responsiveness, p.LogLevel = "eager", "loud"
	if s, err := NewStack(newApp(), "Karpless-bad", p); err == nil || s != nil ||
		!strings.Contains(err.Error(), `responsiveness "eager"`) || !strings.Contains(err.Error(), `logLevel "loud"`) {
		t.Errorf("NewStack with bad settings: %v", err)
	}
}

// -c paused=true gives the bootstrap PAUSED "true" (and a new settings
// hash, so CloudFormation sends an Update); without it "false", and the
// bootstrap leaves the switch as it is.
func TestPausedDeploy(t *testing.T) {
	env, _, hash := bootstrapSettings(t, st, doc)
	if env["PAUSED"] != "false" {
		t.Errorf("PAUSED by default = %v", env["PAUSED"])
	}
	p := defaultProps()
	p.Paused = true
	s, _, d, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	env2, opts, hash2 := bootstrapSettings(t, s, d)
	if env2["PAUSED"] != "true" || !opts.Pause || hash2 == hash {
		t.Errorf("paused deploy: PAUSED %v, options %+v, hash %v (was %v)", env2["PAUSED"], opts, hash2, hash)
	}
}

// The alarms on throttled and dropped invocations: Throttles of each
// function but the bootstrap, AsyncEventsDropped of each scheduled one,
// FailedInvocations of each schedule rule; at least one in 3 of 5
// minutes, missing data not breaching; an SNS action when a topic is
// given; none with alarms=false.
func TestAlarms(t *testing.T) {
	fn := func(name string) map[string]any { return ref(logicalID(st, st.Functions[name])) }
	rule := func(name string) map[string]any { return ref(logicalID(st, st.Schedules[name])) }
	type want struct {
		name, namespace, metric, dimension string
		value                              map[string]any
	}
	var wants []want
	for _, name := range []string{Provisioner, Disruption, Interruption, Watcher} {
		wants = append(wants, want{"karpless-demo-" + name + "-throttled", "AWS/Lambda", "Throttles", "FunctionName", fn(name)})
	}
	for _, name := range []string{Provisioner, Disruption, Watcher} {
		wants = append(wants,
			want{"karpless-demo-" + name + "-dropped", "AWS/Lambda", "AsyncEventsDropped", "FunctionName", fn(name)},
			want{"karpless-demo-" + name + "-schedule-failed", "AWS/Events", "FailedInvocations", "RuleName", rule(name)})
	}
	for _, w := range wants {
		check(t, w.name, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), &map[string]interface{}{
				"AlarmName":          w.name,
				"Namespace":          w.namespace,
				"MetricName":         w.metric,
				"Dimensions":         []interface{}{map[string]interface{}{"Name": w.dimension, "Value": w.value}},
				"Statistic":          "Sum",
				"Period":             60,
				"Threshold":          1,
				"ComparisonOperator": "GreaterThanOrEqualToThreshold",
				"EvaluationPeriods":  5,
				"DatapointsToAlarm":  3,
				"TreatMissingData":   "notBreaching",
				"AlarmActions":       assertions.Match_Absent(),
			})
		})
	}
	check(t, "10 alarms", func() { tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(len(wants))) })
	check(t, "no alarm on the bootstrap", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::CloudWatch::Alarm"), &map[string]interface{}{
			"Dimensions": []interface{}{map[string]interface{}{"Name": "FunctionName", "Value": fn(Bootstrap)}},
		}, jsii.Number(0))
	})

	p := defaultProps()
	p.AlarmTopicARN = "arn:aws:sns:eu-west-1:123456789012:oncall"
	_, tm, _, err := synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "every alarm notifies the topic", func() {
		tm.ResourcePropertiesCountIs(jsii.String("AWS::CloudWatch::Alarm"), &map[string]interface{}{
			"AlarmActions": []interface{}{p.AlarmTopicARN},
		}, jsii.Number(len(wants)))
	})

	p = defaultProps()
	p.NoAlarms = true
	_, tm, _, err = synth(p, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "alarms=false", func() { tm.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(0)) })
}

// The groups the access entries map to are the ones the bootstrap binds
// RBAC and FlowSchemas to.
func TestGroupsAreTheBootstraps(t *testing.T) {
	if ControllersGroup != bootstrap.DefaultControllersGroup || WatcherGroup != bootstrap.WatcherGroup {
		t.Errorf("stack groups %s, %s; bootstrap %s, %s", ControllersGroup, WatcherGroup, bootstrap.DefaultControllersGroup, bootstrap.WatcherGroup)
	}
}
