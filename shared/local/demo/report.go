package demo

import (
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeReport writes the run's report to ReportDir/index.html.
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
	rep := report{Scenario: r.s, Summary: sum, Log: r.log, When: time.Now().UTC(),
		Timeline: timeline{Samples: r.timeline, Marks: r.marks, Bands: r.bands.all(r.since().Seconds())}}
	if err := rep.render(f); err != nil {
		return "", err
	}
	abs, _ := filepath.Abs(path)
	return abs, nil
}

// report is what the page shows; a test renders one from a made-up run.
type report struct {
	Scenario *Scenario
	Summary  *Summary
	Timeline timeline
	Log      []string
	When     time.Time
}

// render writes a self-contained HTML page (inline SVG, no external
// assets): a timeline of nodes, pending pods and $/hour with the steps
// marked (chart.go), the step table and the full event log. It is built
// with html.EscapeString rather than html/template: the template
// package's reflection makes the linker keep every exported method of
// every package the CLI links (the AWS SDK's clients): 159 MB, not 67.
func (rep report) render(w io.Writer) error {
	esc := html.EscapeString
	var b strings.Builder
	name := esc(rep.Scenario.Name)
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(&b, "<title>Karpless demo: %s</title>\n<style>%s</style></head><body>\n", name, reportCSS)
	fmt.Fprintf(&b, "<h1>Karpless demo: %s</h1>\n<p>%s</p>\n<p class=\"summary\">%s</p>\n", name, esc(rep.Scenario.Description), esc(rep.Summary.Line()))
	fmt.Fprintf(&b, "<h2>Timeline</h2>\n%s\n<h2>Steps</h2>\n", renderTimeline(rep.Timeline))
	b.WriteString(`<table class="steps"><tr class="head"><th>at</th><th>step</th><th>took</th><th>$/hour</th><th>what changed $/hour</th><th>note</th></tr>` + "\n")
	for _, st := range rep.Summary.Steps {
		fmt.Fprintf(&b, `<tr><td data-label="at" class="num">%s</td><td data-label="step">%s</td><td data-label="took" class="num">%s</td>`,
			esc(clockString(st.Start)), esc(st.Name), esc(st.Took.Round(time.Second).String()))
		fmt.Fprintf(&b, `<td data-label="$/hour" class="num">%.3f → %.3f (%s)</td><td data-label="why" class="why">`, st.CostFrom, st.CostTo, esc(signed(st.CostTo-st.CostFrom)))
		for _, c := range st.CostCauses {
			fmt.Fprintf(&b, "<div>%s</div>", esc(c))
		}
		fmt.Fprintf(&b, `</td><td data-label="note">%s`, esc(st.Note))
		if st.Failed != "" {
			fmt.Fprintf(&b, `<span class="failed">%s</span>`, esc(st.Failed))
		}
		b.WriteString("</td></tr>\n")
	}
	b.WriteString("</table>\n<h2>Event log</h2>\n<div class=\"log\">")
	for _, l := range rep.Log {
		fmt.Fprintf(&b, "<div>%s</div>", esc(l))
	}
	fmt.Fprintf(&b, "</div>\n<p><small>Generated %s by karpless demo. Times are on the demo's virtual clock.</small></p>\n</body></html>\n", esc(rep.When.Format(time.RFC1123)))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// reportCSS lays the page out for any width. The chart is drawn in three
// sizes (chartSizes) and each width shows the one that keeps its text at
// 10 px or more: the page's column is the viewport less 2 em, at most
// 960 px, and each size is shown where the column is within 0.85 of its
// width or more (TestReportInBrowser checks 1280, 800, 375 and 320 px in chromium).
// On a phone the step table becomes one block per step and the event log
// wraps its lines, indented under their time.
const reportCSS = `*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;padding:1em;max-width:992px;color:#222;line-height:1.4}
h1{font-size:1.6em;overflow-wrap:anywhere}
p,td{overflow-wrap:anywhere}
svg.timeline{display:none;width:100%;height:auto}
@media (min-width:1000px){svg.timeline.wide{display:block}}
@media (min-width:680px) and (max-width:999.98px){svg.timeline.medium{display:block}}
@media (max-width:679.98px){svg.timeline.narrow{display:block;max-width:520px;margin:0 auto}}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;font-size:14px;vertical-align:top}
td.num{white-space:nowrap}
td.why div+div{margin-top:2px}
.log{background:#f6f8fa;padding:.8em;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;max-height:40em;overflow-y:auto}
.log div{white-space:pre-wrap;overflow-wrap:anywhere;padding-left:8ch;text-indent:-8ch}
.summary{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef6ee;padding:.6em 1em;border-radius:4px}
.failed{color:#b00}
@media (max-width:679.98px){
table.steps,table.steps tbody,table.steps tr,table.steps td{display:block;width:100%}
table.steps tr.head{display:none}
table.steps tr{border-bottom:1px solid #ddd;padding:.5em 0}
table.steps td{border:0;padding:1px 0}
table.steps td:empty{display:none}
table.steps td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:#555}
}`
