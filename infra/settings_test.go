package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/infra/stack"
	"github.com/karpless/karpless/internal/docscheck"
)

// settingRow is one row of docs/deploy.md's "Karpenter's settings".
type settingRow struct {
	setting, key, def, variable string
	functions                   []string // nil: the row writes no variable
}

// settingsTable parses the table between its markers.
func settingsTable(t *testing.T) []settingRow {
	t.Helper()
	rows := docscheck.Table(t, docscheck.Read(t, "docs/deploy.md"), "<!-- settings-table:begin -->")
	controllers := []string{stack.Provisioner, stack.Disruption, stack.Interruption}
	var out []settingRow
	for _, cells := range rows {
		if len(cells) != 7 {
			t.Fatalf("settings table: row %q has %d cells, want 7", cells, len(cells))
		}
		r := settingRow{setting: cells[0]}
		if k := docscheck.Backticked(cells[2]); len(k) == 1 {
			r.key = k[0]
		} else if cells[2] != "—" {
			t.Errorf("settings table: row %s: context key %q is neither one key nor —", r.setting, cells[2])
		}
		r.def = cells[3]
		if v := docscheck.Backticked(cells[4]); len(v) == 1 {
			r.variable = v[0]
		} else if cells[4] != "—" {
			t.Errorf("settings table: row %s: variable %q is neither one variable nor —", r.setting, cells[4])
		}
		switch fns := cells[5]; fns {
		case "—":
		case "all":
			r.functions = functions.Names()
		case "controllers":
			r.functions = controllers
		default:
			for _, f := range strings.Split(fns, ",") {
				f = strings.TrimSpace(f)
				if !slices.Contains(functions.Names(), f) {
					t.Errorf("settings table: row %s: %q is not a function (%s, all or controllers)", r.setting, f, strings.Join(functions.Names(), ", "))
				}
				r.functions = append(r.functions, f)
			}
		}
		if (r.variable == "") != (r.functions == nil) {
			t.Errorf("settings table: row %s: a variable needs its functions, and functions a variable", r.setting)
		}
		if r.key == "" && r.variable == "" && !strings.Contains(cells[6], "does not apply") && !strings.Contains(cells[6], "not implemented") {
			t.Errorf("settings table: row %s has no context key and does not say why it does not apply", r.setting)
		}
		out = append(out, r)
	}
	return out
}

// testCA is a base64 PEM bundle such as EKS's certificateAuthority.data.
var testCA = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))

// settingSamples are a value other than the default for each context key
// of the settings table, and what the functions' environment then holds.
var settingSamples = map[string][2]string{
	"clusterName":             {"other", "other"},
	"clusterEndpoint":         {"https://ABCD.gr7.eu-west-1.eks.amazonaws.com", "https://ABCD.gr7.eu-west-1.eks.amazonaws.com"},
	"clusterCABundle":         {testCA, testCA},
	"isolatedVPC":             {"true", "true"},
	"enableZonalShift":        {"true", "true"},
	"vmMemoryOverheadPercent": {"0.05", "0.05"},
	"reservedENIs":            {"1", "1"},
	"amiRefreshInterval":      {"5m", "5m"},
	"subnetRefreshInterval":   {"2m", "2m"},
	"batchIdleDuration":       {"500ms", "500ms"},
	"batchMaxDuration":        {"5s", "5s"},
	"preferencePolicy":        {"Ignore", "Ignore"},
	"minValuesPolicy":         {"BestEffort", "BestEffort"},
	"spotToSpotConsolidation": {"true", "true"},
	"nodeRepair":              {"true", "true"},
	"logLevel":                {"debug", "debug"},
	"namespace":               {"karpless", "karpless"},
	"kubeClientQPS":           {"50", "50"},
	"kubeClientBurst":         {"100", "100"},
}

// settingErrors are a bad value for each context key of the table: the
// error at synth must name the key.
var settingErrors = map[string]string{
	"clusterName":             "-bad-",
	"clusterEndpoint":         "http://plain",
	"clusterCABundle":         "not base64",
	"isolatedVPC":             "maybe",
	"enableZonalShift":        "sometimes",
	"vmMemoryOverheadPercent": "1.5",
	"reservedENIs":            "-1",
	"amiRefreshInterval":      "30s",
	"subnetRefreshInterval":   "10s",
	"batchIdleDuration":       "soon",
	"batchMaxDuration":        "2m",
	"preferencePolicy":        "Prefer",
	"minValuesPolicy":         "Lenient",
	"spotToSpotConsolidation": "yes please",
	"nodeRepair":              "on",
	"logLevel":                "loud",
	"namespace":               "Kube_System",
	"kubeClientQPS":           "0",
	"kubeClientBurst":         "-5",
}

// synthEnv synthesizes the stack from context (as -c passes it) and
// returns each function's environment, by function name; a value that is
// a CloudFormation reference reads "<ref>".
func synthEnv(t *testing.T, context map[string]interface{}) map[string]map[string]string {
	t.Helper()
	assets := t.TempDir()
	for _, fn := range functions.Names() {
		if err := os.MkdirAll(filepath.Join(assets, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(assets, fn, "bootstrap"), []byte("#!/bin/sh\n# "+fn+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	context["assetsDir"] = assets
	t.Setenv("CDK_DEFAULT_ACCOUNT", "")
	t.Setenv("CDK_DEFAULT_REGION", "")
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(t.TempDir())})
	cfg, err := configFromContext(app)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.NewStack(app, cfg.stackName, cfg.props)
	if err != nil {
		t.Fatal(err)
	}
	doc := *assertions.Template_FromStack(s.Stack, nil).ToJSON()
	resources, _ := doc["Resources"].(map[string]any)
	out := map[string]map[string]string{}
	for name, fn := range s.Functions {
		id := *s.Stack.GetLogicalId(fn.Node().DefaultChild().(awscdk.CfnElement))
		res, _ := resources[id].(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		envBlock, _ := props["Environment"].(map[string]any)
		vars, _ := envBlock["Variables"].(map[string]any)
		env := map[string]string{}
		for k, v := range vars {
			if s, ok := v.(string); ok {
				env[k] = s
			} else {
				env[k] = "<ref>"
			}
		}
		out[name] = env
	}
	return out
}

// sameValue compares a documented value with an environment value:
// equal strings, or equal durations (1m and 1m0s).
func sameValue(doc, env string) bool {
	if doc == env {
		return true
	}
	a, errA := time.ParseDuration(doc)
	b, errB := time.ParseDuration(env)
	return errA == nil && errB == nil && a == b
}

// TestSettingsTable holds docs/deploy.md's "Karpenter's settings" and
// "Functions" tables to the stack: each context key of the table is one
// the app reads, written on every deploy to exactly the functions named,
// with the default shown, and carries a value set in the context; a bad
// value fails the synth with an error naming the key; and every variable
// of every function is documented in one of the two tables.
func TestSettingsTable(t *testing.T) {
	rows := settingsTable(t)
	cfg, err := readConfig(t, map[string]interface{}{"clusterName": "prod"})
	if err != nil {
		t.Fatal(err)
	}
	known := cfg.keys

	defaults := synthEnv(t, map[string]interface{}{"clusterName": "prod"})
	sampleContext := map[string]interface{}{}
	for _, r := range rows {
		if r.key != "" {
			if s, ok := settingSamples[r.key]; ok {
				sampleContext[r.key] = s[0]
			}
		}
	}
	samples := synthEnv(t, sampleContext)

	documented := map[string][]string{} // function -> variables of the settings table
	for _, r := range rows {
		for _, fn := range r.functions {
			documented[fn] = append(documented[fn], r.variable)
		}
		if r.key == "" {
			// No context key: the variable, if any, is the stack's own.
			for _, fn := range functions.Names() {
				_, has := defaults[fn][r.variable]
				if r.variable != "" && has != slices.Contains(r.functions, fn) {
					t.Errorf("%s: %s on %s is %v, the table says %v", r.setting, r.variable, fn, has, !has)
				}
			}
			continue
		}
		if !slices.Contains(known, r.key) {
			t.Errorf("%s: context key %s is not one the app reads (infra/main.go)", r.setting, r.key)
			continue
		}
		sample, ok := settingSamples[r.key]
		if !ok {
			t.Errorf("%s: no sample value for %s in settingSamples", r.setting, r.key)
		}
		bad, ok := settingErrors[r.key]
		if !ok {
			t.Errorf("%s: no bad value for %s in settingErrors", r.setting, r.key)
		} else {
			context := map[string]interface{}{"clusterName": "prod", r.key: bad}
			if r.key == "clusterName" {
				context = map[string]interface{}{r.key: bad}
			}
			if r.key == "clusterEndpoint" || r.key == "clusterCABundle" {
				// Both or neither: give the other a good value.
				context["clusterEndpoint"], context["clusterCABundle"] = settingSamples["clusterEndpoint"][0], settingSamples["clusterCABundle"][0]
				context[r.key] = bad
			}
			cfg, err := readConfig(t, context)
			if err == nil {
				err = cfg.props.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), r.key) {
				t.Errorf("%s=%q: error %v does not name %s", r.key, bad, err, r.key)
			}
		}
		def := strings.Trim(r.def, "`")
		for _, fn := range functions.Names() {
			want := slices.Contains(r.functions, fn)
			got, has := defaults[fn][r.variable]
			switch {
			case want && def == "none":
				if has {
					t.Errorf("%s: %s on %s is %q by default, the table says none", r.key, r.variable, fn, got)
				}
			case want && def == "required":
				if got != "prod" {
					t.Errorf("%s: %s on %s is %q, want the clusterName given", r.key, r.variable, fn, got)
				}
			case want && !sameValue(def, got):
				t.Errorf("%s: %s on %s is %q by default (present %v), the table says %s", r.key, r.variable, fn, got, has, r.def)
			case !want && has:
				t.Errorf("%s: %s is on %s too, which the table does not list", r.key, r.variable, fn)
			}
			if got, has := samples[fn][r.variable]; want && (!has || !sameValue(sample[1], got)) {
				t.Errorf("%s=%s: %s on %s is %q (present %v), want %q", r.key, sample[0], r.variable, fn, got, has, sample[1])
			}
		}
	}

	// Every variable of every function is in the settings table or, for
	// those of Karpless's own, in the Functions table.
	own := map[string][]string{}
	for _, cells := range docscheck.Table(t, docscheck.Read(t, "docs/deploy.md"), "### Functions") {
		fn := strings.Fields(cells[0])[0]
		own[fn] = docscheck.Backticked(cells[len(cells)-1])
	}
	for _, env := range []map[string]map[string]string{defaults, samples} {
		for _, fn := range functions.Names() {
			var want []string
			for _, v := range append(append([]string{}, own[fn]...), documented[fn]...) {
				// CLUSTER_ENDPOINT and CLUSTER_CA_DATA come with
				// clusterEndpoint, CLUSTER_ARN with enableZonalShift.
				if _, has := env[fn][v]; has || (v != "CLUSTER_ENDPOINT" && v != "CLUSTER_CA_DATA" && v != "CLUSTER_ARN") {
					want = append(want, v)
				}
			}
			var got []string
			for v := range env[fn] {
				got = append(got, v)
			}
			sort.Strings(want)
			sort.Strings(got)
			want = slices.Compact(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s's environment is %s;\nthe Functions and settings tables of docs/deploy.md say %s", fn, strings.Join(got, " "), strings.Join(want, " "))
			}
		}
	}
}

// TestEnvironmentSize: Lambda refuses a function whose environment passes
// 4 KB; the longest CA bundle Props.Validate lets through must fit.
func TestEnvironmentSize(t *testing.T) {
	head, foot := "-----BEGIN CERTIFICATE-----\n", "\n-----END CERTIFICATE-----\n"
	// 2,250 bytes are 3,000 characters of base64: the most Validate takes.
	ca := base64.StdEncoding.EncodeToString([]byte(head + strings.Repeat("A", 2250-len(head)-len(foot)) + foot))
	env := synthEnv(t, map[string]interface{}{"clusterName": strings.Repeat("c", 90), "nodeRoleName": strings.Repeat("r", 64), "clusterEndpoint": settingSamples["clusterEndpoint"][0], "clusterCABundle": ca})
	for fn, vars := range env {
		size := 0
		for k, v := range vars {
			size += len(k) + len(v)
			if v == "<ref>" {
				size += 200 // an ARN or URL resolved at deploy
			}
		}
		if size > 4096 {
			t.Errorf("%s: environment of %d bytes passes Lambda's 4 KB", fn, size)
		}
	}
}
