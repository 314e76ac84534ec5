package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/karpless/karpless/functions"
	"github.com/karpless/karpless/internal/cdktestenv"
)

// The default stack, synthesized once in TestMain.
const (
	testCluster = "demo"
	testAccount = "123456789012"
	testRegion  = "eu-west-1"
)

var (
	// assetsDir holds dummy <fn>/bootstrap files, so the tests do not
	// depend on built functions.
	assetsDir string
	// scratch is removed after the tests; synthesized apps write there.
	scratch string

	st   *Stack
	tmpl assertions.Template
	doc  map[string]any
)

func TestMain(m *testing.M) {
	cdktestenv.Setup()
	code := func() int {
		var err error
		scratch, err = os.MkdirTemp("", "karpless-infra-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(scratch)
		assetsDir = filepath.Join(scratch, "build")
		for _, fn := range functions.Names() {
			dir := filepath.Join(assetsDir, fn)
			if err := os.MkdirAll(dir, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n# dummy "+fn+"\n"), 0o755)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		st, tmpl, doc, err = synth(defaultProps(), false)
		if err != nil {
			fmt.Fprintln(os.Stderr, "synthesizing the default stack:", err)
			return 1
		}
		return m.Run()
	}()
	jsii.Close()
	os.Exit(code)
}

func defaultProps() Props {
	return Props{
		ClusterName: testCluster,
		Account:     testAccount,
		Region:      testRegion,
		AssetsDir:   assetsDir,
	}
}

var appSeq int

// newApp returns an app with cdk.json's context (feature flags included)
// writing into the scratch folder.
func newApp() awscdk.App {
	appSeq++
	ctx := map[string]interface{}{}
	// go test runs in the package's folder: the repository root is two up.
	if raw, err := os.ReadFile(filepath.Join("..", "..", "cdk.json")); err == nil {
		var cfg struct {
			Context map[string]interface{} `json:"context"`
		}
		if json.Unmarshal(raw, &cfg) == nil {
			ctx = cfg.Context
		}
	}
	if ctx["@aws-cdk/aws-iam:minimizePolicies"] != true {
		panic("tests must run with cdk.json's context (feature flags); ../../cdk.json not found or incomplete")
	}
	return awscdk.NewApp(&awscdk.AppProps{
		Outdir:  jsii.String(filepath.Join(scratch, fmt.Sprintf("cdk.out.%d", appSeq))),
		Context: &ctx,
	})
}

// synth builds a stack from props in a new app (with cdk-nag's
// AwsSolutions checks if nag) and returns it with its template.
func synth(props Props, nag bool) (*Stack, assertions.Template, map[string]any, error) {
	app := newApp()
	s, err := NewStack(app, "Karpless-"+props.ClusterName, props)
	if err != nil {
		return nil, nil, nil, err
	}
	if nag {
		AddAwsSolutionsChecks(app)
	}
	t := assertions.Template_FromStack(s.Stack, nil)
	return s, t, *t.ToJSON(), nil
}

// check runs an assertion and reports its panic (how the assertions
// module fails) as a test error.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// mustJSON parses a JSON object written in a test.
func mustJSON(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	return m
}

func logicalID(s *Stack, c constructs.IConstruct) string {
	return *s.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

func resources(d map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range d["Resources"].(map[string]any) {
		out[id] = r.(map[string]any)
	}
	return out
}

func resourcesOfType(d map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range resources(d) {
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// asList turns a CloudFormation "string or list" into a list.
func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		return []any{v}
	}
}

func asStrings(v any) []string {
	var out []string
	for _, e := range asList(v) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		} else {
			b, _ := json.Marshal(e)
			out = append(out, string(b))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) map[string]any {
	return map[string]any{"Fn::GetAtt": []any{id, attr}}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(list []any, v any) bool {
	want := jsonString(v)
	for _, e := range list {
		if jsonString(e) == want {
			return true
		}
	}
	return false
}

func TestTemplateSummary(t *testing.T) {
	counts := map[string]int{}
	for _, r := range resources(doc) {
		counts[r["Type"].(string)]++
	}
	var lines []string
	for _, k := range sortedKeys(counts) {
		lines = append(lines, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	t.Logf("%d resources: %s", len(resources(doc)), strings.Join(lines, " "))
	want := map[string]int{
		// Five functions with the watcher (responsiveness continuous).
		"AWS::Lambda::Function": 5,
		"AWS::Logs::LogGroup":   5,
		"AWS::SQS::Queue":       2,
		// Six interruption rules, three schedules.
		"AWS::Events::Rule":                   9,
		"AWS::Lambda::EventSourceMapping":     1,
		"AWS::EKS::AccessEntry":               6,
		"AWS::CloudFormation::CustomResource": 1,
		"AWS::IAM::Role":                      6,
		"AWS::IAM::ManagedPolicy":             4,
		// Throttles of 4 functions; dropped and schedule failures of 3.
		"AWS::CloudWatch::Alarm":     10,
		"AWS::CloudWatch::Dashboard": 1,
	}
	for typ, n := range want {
		check(t, typ, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}
}
