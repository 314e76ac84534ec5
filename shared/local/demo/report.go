package demo

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"
)

// writeReport writes a self-contained HTML page (inline SVG, no external
// assets): a timeline of nodes, pending pods and $/hour with the steps
// marked (chart.go), the step table and the full event log.
func (r *runner) writeReport(sum *Summary) (string, error) {
	if err := os.MkdirAll(r.o.ReportDir, 0o755); err != nil {
		return "", fmt.Errorf("creating the report folder: %w", err)
	}
	path := filepath.Join(r.o.ReportDir, "index.html")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("writing the report: %w", err)
	}
	defer f.Close()
	data := struct {
		Scenario *Scenario
		Summary  *Summary
		Timeline template.HTML
		Log      []string
		When     string
	}{Scenario: r.s, Summary: sum, Log: r.log, When: time.Now().UTC().Format(time.RFC1123)}
	data.Timeline = renderTimeline(timeline{Samples: r.timeline, Marks: r.marks, Bands: r.bands.all(r.since().Seconds())})
	abs, _ := filepath.Abs(path)
	if err := reportTemplate.Execute(f, data); err != nil {
		return "", fmt.Errorf("rendering the report: %w", err)
	}
	return abs, nil
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"clock": func(d time.Duration) string { return clockString(d) },
	"round": func(d time.Duration) time.Duration { return d.Round(time.Second) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Karpless demo: {{.Scenario.Name}}</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:960px;color:#222}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;font-size:14px}
pre{background:#f6f8fa;padding:1em;font-size:12px;overflow-x:auto;max-height:40em}
.summary{font-family:ui-monospace,monospace;background:#eef6ee;padding:.6em 1em;border-radius:4px}
.failed{color:#b00}
</style></head><body>
<h1>Karpless demo: {{.Scenario.Name}}</h1>
<p>{{.Scenario.Description}}</p>
<p class="summary">{{.Summary.Line}}</p>
<h2>Timeline</h2>
{{.Timeline}}
<h2>Steps</h2>
<table><tr><th>at</th><th>step</th><th>took</th><th>$/hour before</th><th>$/hour after</th><th>note</th></tr>
{{range .Summary.Steps}}<tr><td>{{clock .Start}}</td><td>{{.Name}}</td><td>{{round .Took}}</td><td>{{printf "%.3f" .CostFrom}}</td><td>{{printf "%.3f" .CostTo}}</td><td>{{.Note}}{{if .Failed}}<span class="failed">{{.Failed}}</span>{{end}}</td></tr>
{{end}}</table>
<h2>Event log</h2>
<pre>{{range .Log}}{{.}}
{{end}}</pre>
<p><small>Generated {{.When}} by karpless demo. Times are on the demo's virtual clock.</small></p>
</body></html>
`))
