package stack

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	fnconfig "github.com/karpless/karpless/shared/function/config"
	"github.com/karpless/karpless/shared/function/record"
)

// dashboardBody returns the stack's one dashboard's name and body, its
// Fn::Join parts put together with each reference written <LogicalID> (or
// <LogicalID.Attribute>), so the body parses as JSON.
func dashboardBody(t *testing.T, d map[string]any) (string, map[string]any) {
	t.Helper()
	dashboards := resourcesOfType(d, "AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("%d dashboards, want 1", len(dashboards))
	}
	var p map[string]any
	for _, r := range dashboards {
		p = props(r)
	}
	flat := func(v any) string {
		switch v := v.(type) {
		case string:
			return v
		case map[string]any:
			if join, ok := v["Fn::Join"].([]any); ok {
				var b strings.Builder
				for _, part := range join[1].([]any) {
					switch part := part.(type) {
					case string:
						b.WriteString(part)
					case map[string]any:
						if r, ok := part["Ref"].(string); ok {
							b.WriteString("<" + r + ">")
						} else if a, ok := part["Fn::GetAtt"].([]any); ok {
							b.WriteString("<" + a[0].(string) + "." + a[1].(string) + ">")
						} else {
							t.Fatalf("unexpected part %s", jsonString(part))
						}
					}
				}
				return b.String()
			}
		}
		t.Fatalf("unexpected value %s", jsonString(v))
		return ""
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(flat(p["DashboardBody"])), &body); err != nil {
		t.Fatalf("dashboard body: %v", err)
	}
	return flat(p["DashboardName"]), body
}

// widgets are a dashboard's widgets by type ("metric", "log", "text").
func widgets(body map[string]any) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, w := range body["widgets"].([]any) {
		w := w.(map[string]any)
		out[w["type"].(string)] = append(out[w["type"].(string)], w["properties"].(map[string]any))
	}
	return out
}

// selectMetric is the metric a Metrics Insights query reads.
var selectMetric = regexp.MustCompile(`^SELECT [A-Z]+\(([a-z_]+)\) FROM SCHEMA\(Karpless,`)

// karplessMetrics are the functions' metrics (namespace Karpless) the
// metric widgets read, and the AWS metrics as "namespace metric
// dimension=value".
func karplessMetrics(t *testing.T, metricWidgets []map[string]any) (karpless []string, aws []string) {
	t.Helper()
	for _, w := range metricWidgets {
		for _, m := range w["metrics"].([]any) {
			m := m.([]any)
			if e, ok := m[0].(map[string]any); ok {
				q, _ := e["expression"].(string)
				sm := selectMetric.FindStringSubmatch(q)
				if sm == nil {
					t.Errorf("%q: an expression that is not a Metrics Insights query of the Karpless namespace: %q", w["title"], q)
					continue
				}
				karpless = append(karpless, sm[1])
				continue
			}
			ns, name := m[0].(string), m[1].(string)
			if ns == metricsNamespace {
				karpless = append(karpless, name)
				continue
			}
			var dims []string
			for i := 2; i+1 < len(m); i += 2 {
				if k, ok := m[i].(string); ok {
					dims = append(dims, k+"="+m[i+1].(string))
				}
			}
			aws = append(aws, strings.Join(append([]string{ns, name}, dims...), " "))
		}
	}
	sort.Strings(karpless)
	return slices.Compact(karpless), aws
}

// sharedSource is the functions' code (shared/, no tests): the dashboard
// must name only metrics and log messages it writes.
func sharedSource(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(filepath.Join("..", "..", "shared"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, filepath.Join("shared", "local")) {
			return err
		}
		src, err := os.ReadFile(path)
		b.Write(src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var (
	queryMetric  = regexp.MustCompile(`metric (?:=|in) \[?((?:"[a-z_]+"(?:, )?)+)`)
	queryMessage = regexp.MustCompile(`msg = ("[^"]+")`)
	quoted       = regexp.MustCompile(`"[^"]+"`)
)

// checkDashboard holds a synthesized dashboard to its level: the metric
// widgets read only metrics the level publishes, and the others are Logs
// Insights queries of the functions' lines; each function's errors,
// duration and throttles are drawn.
func checkDashboard(t *testing.T, s *Stack, d map[string]any, wantLog []string) {
	t.Helper()
	level := record.Level(s.Props.MetricsLevel)
	name, body := dashboardBody(t, d)
	if name != "karpless-"+s.Props.ClusterName+"-"+s.Props.Region {
		t.Errorf("dashboard name %q", name)
	}
	w := widgets(body)

	karpless, aws := karplessMetrics(t, w["metric"])
	for _, m := range karpless {
		if !level.Extracts(m) {
			t.Errorf("a metric widget reads %s, which metrics level %s does not publish", m, level)
		}
	}
	if level == record.Full && len(karpless) < 9 {
		t.Errorf("at full the metric widgets read only %v", karpless)
	}
	if want := []string{launchFailuresMetric, queueDepthMetric}; level == record.Minimal && !slices.Equal(karpless, want) {
		// Of the metrics published at minimal for the alarms, the two a
		// view draws (the others flag a pause and the catalog fallback).
		t.Errorf("at minimal the metric widgets read %v, want %v", karpless, want)
	}
	for _, fn := range s.Props.Functions() {
		ref := "<" + logicalID(s, s.Functions[fn]) + ">"
		for _, m := range []string{"Errors", "Duration", "Throttles"} {
			if want := "AWS/Lambda " + m + " FunctionName=" + ref; !slices.Contains(aws, want) {
				t.Errorf("no widget draws %s of the %s function (%s)", m, fn, want)
			}
		}
	}
	if n := len(aws); n != 3*len(s.Props.Functions())+2 {
		t.Errorf("%d AWS metrics drawn, want 3 per function and the 2 of the queues: %v", n, aws)
	}
	if len(karpless)+len(aws) > 50 {
		t.Errorf("%d metrics: the free tier's dashboards reference at most 50", len(karpless)+len(aws))
	}

	src := sharedSource(t)
	var titles []string
	groups := map[string]bool{}
	for _, g := range s.LogGroups {
		groups["SOURCE '<"+logicalID(s, g)+">'"] = true
	}
	for _, l := range w["log"] {
		title := l["title"].(string)
		titles = append(titles, strings.TrimSuffix(title, logsInsightsTitleLabel))
		q := l["query"].(string)
		sources, query, _ := strings.Cut(q, " | filter ")
		for _, src := range strings.Split(sources, " | ") {
			if !groups[src] {
				t.Errorf("%q scans %s, not one of the stack's log groups", title, src)
			}
		}
		if l["view"] != "timeSeries" {
			t.Errorf("%q: view %v, want timeSeries", title, l["view"])
		}
		var names []string
		for _, m := range queryMetric.FindAllStringSubmatch(query, -1) {
			names = append(names, quoted.FindAllString(m[1], -1)...)
		}
		for _, m := range queryMessage.FindAllStringSubmatch(query, -1) {
			names = append(names, m[1])
		}
		if len(names) == 0 {
			t.Errorf("%q filters on no metric or message: %s", title, query)
		}
		for _, n := range names {
			if !strings.Contains(src, n) {
				t.Errorf("%q reads %s, which no function writes (shared/)", title, n)
			}
		}
	}
	sort.Strings(titles)
	sort.Strings(wantLog)
	if !slices.Equal(titles, wantLog) {
		t.Errorf("Logs Insights widgets:\n%s\nwant\n%s", strings.Join(titles, "\n"), strings.Join(wantLog, "\n"))
	}
	if len(w["text"]) != 1 || !strings.Contains(w["text"][0]["markdown"].(string), "Metrics level **"+string(level)+"**") {
		t.Errorf("header %v does not state the level %s", w["text"], level)
	}
}

// The two price views have no metric: Logs Insights at both levels.
var priceViews = []string{
	"$/hour of the NodeClaims created (cheapest offering)",
	"$/hour disrupted: candidates' price and their replacements'",
}

// minimalLogViews are the views minimal does not publish the metrics of,
// and the price views.
func minimalLogViews() []string {
	return append([]string{
		"Nodes per NodePool",
		"CPU cores per NodePool, and its limit",
		"Pod startup: creation to Ready (s)",
		"NodeClaims created per NodePool",
		"Disruption decisions by method (reason, consolidation type)",
		"NodeClaims disrupted per reason (interruptions included)",
		"Interruption messages per type",
	}, priceViews...)
}

// At minimal (the default) the views of metrics not published are Logs
// Insights queries; at full, metrics.
func TestDashboard(t *testing.T) {
	t.Run("minimal", func(t *testing.T) {
		checkDashboard(t, st, doc, minimalLogViews())
	})
	t.Run("full", func(t *testing.T) {
		p := defaultProps()
		p.MetricsLevel = fnconfig.MetricsFull
		s, _, d, err := synth(p, false)
		if err != nil {
			t.Fatal(err)
		}
		checkDashboard(t, s, d, slices.Clone(priceViews))
	})
	t.Run("economy names four functions", func(t *testing.T) {
		p := defaultProps()
		p.Responsiveness = fnconfig.ResponsivenessEconomy
		s, _, d, err := synth(p, false)
		if err != nil {
			t.Fatal(err)
		}
		checkDashboard(t, s, d, minimalLogViews())
	})
	t.Run("dashboard=false", func(t *testing.T) {
		p := defaultProps()
		p.NoDashboard = true
		_, tm, _, err := synth(p, false)
		if err != nil {
			t.Fatal(err)
		}
		check(t, "no dashboard", func() { tm.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(0)) })
	})
}
