package demo

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeReport writes a self-contained HTML page (inline SVG, no external
// assets): a timeline of nodes, pending pods and $/hour with the steps
// marked, the step table and the full event log.
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
		Charts   []template.HTML
		Log      []string
		When     string
	}{Scenario: r.s, Summary: sum, Log: r.log, When: time.Now().UTC().Format(time.RFC1123)}
	for _, c := range []struct {
		title, color string
		value        func(sample) float64
		format       string
	}{
		{"Ready nodes", "#1f77b4", func(s sample) float64 { return float64(s.Nodes) }, "%.0f"},
		{"Pending pods", "#d62728", func(s sample) float64 { return float64(s.Pending) }, "%.0f"},
		{"Cost ($/hour)", "#2ca02c", func(s sample) float64 { return s.Cost }, "%.3f"},
	} {
		data.Charts = append(data.Charts, r.chart(c.title, c.color, c.value, c.format))
	}
	abs, _ := filepath.Abs(path)
	if err := reportTemplate.Execute(f, data); err != nil {
		return "", fmt.Errorf("rendering the report: %w", err)
	}
	return abs, nil
}

// chart draws one series as an SVG step line with the step marks.
func (r *runner) chart(title, color string, value func(sample) float64, format string) template.HTML {
	const w, h, left, top, bottom = 900.0, 170.0, 60.0, 25.0, 25.0
	maxT, maxV := 1.0, 0.0
	for _, s := range r.timeline {
		maxT = max(maxT, s.T)
		maxV = max(maxV, value(s))
	}
	if maxV == 0 {
		maxV = 1
	}
	x := func(t float64) float64 { return left + (w-left-10)*t/maxT }
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/maxV) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" width="100%%" role="img" aria-label="%s">`, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="13" font-weight="bold">%s</text>`, left, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/>`, left, h-bottom, w-10, h-bottom)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%s</text>`, left-4, y(maxV)+4, fmt.Sprintf(format, maxV))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">0</text>`, left-4, h-bottom+4)
	for _, m := range r.marks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#bbb" stroke-dasharray="4 3"/>`, x(m.T), top, x(m.T), h-bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" fill="#666">%s</text>`, x(m.T)+3, top+10, template.HTMLEscapeString(m.Name))
	}
	var pts []string
	for i, s := range r.timeline {
		if i > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.T), y(value(r.timeline[i-1]))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.T), y(value(s))))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%s</text>`, w-10, h-6, clockString(time.Duration(maxT*float64(time.Second))))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
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
{{range .Charts}}{{.}}{{end}}
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
