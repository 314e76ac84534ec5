package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleReport is a run of the bundled scenario as the demo records it,
// made up so the page can be rendered without running the demo: steps
// close together, a drift rolling the nodes, the GPU node leaving during
// the roll, and log lines as long as the real ones.
func sampleReport() report {
	tl := fixedTimeline()
	// A second roll soon after the first, as the recorded run had: its
	// label finds little room right of it.
	tl.Bands = append(tl.Bands, band{Start: 470, End: 560, Method: "drift", Replacements: 6})
	steps := []StepResult{
		{Name: "A workload arrives", Start: 0, Took: 16 * time.Second, CostFrom: 0, CostTo: 0.826,
			CostCauses: []string{"+0.526: the gpu node gpu-dfwfj (g4dn.xlarge on-demand, $0.526/h) launched", "+0.300: 11 general nodes launched"}},
		{Name: "A spot node is interrupted", Start: 17 * time.Second, Took: 50 * time.Second, CostFrom: 0.826, CostTo: 0.828,
			Note:       "pods ran elsewhere 1m36s before the instance's two-minute deadline",
			CostCauses: []string{"+0.061: the general node general-x8wwf (c8i-flex.xlarge spot, $0.061/h) launched", "−0.059: the general node general-nqdj9 (c5ad.xlarge spot, $0.059/h) left, interrupted by EC2"}},
		{Name: "The workload shrinks", Start: 67 * time.Second, Took: 2 * time.Minute, CostFrom: 0.828, CostTo: 0.712,
			CostCauses: []string{"−0.092: 3 general nodes left, empty", "−0.029: the general node general-plw7w (m6a.large spot, $0.029/h) left, underutilized (consolidation)", "+0.005: spot prices moved"}},
		{Name: "A new AMI release is published", Start: 141 * time.Second, Took: 185 * time.Second, CostFrom: 0.712, CostTo: 0.219,
			CostCauses: []string{"−0.526: the gpu node gpu-krmjg (g4dn.xlarge on-demand, $0.526/h) left, empty", "+0.033: drift replaced 9 nodes with 9"}},
	}
	log := []string{
		"[00:00] step 1/4: A workload arrives",
		"[00:00] applied Deployment/web, PodDisruptionBudget/web, Deployment/api, Job/train",
		"[00:05] NodeClaim general-nqdj9 (nodepool general): requests 3050m cpu, 4352Mi memory; 290 instance types fit",
		"[00:05]   launched i-e5524686d63d0db9f as c5ad.xlarge spot in us-west-2a at $0.0588/h after 0s (price-capacity-optimized fleet over 290 candidate types, cheapest candidate $0.0492/h)",
		"[00:06] NodeClaim gpu-x7k2p (nodepool gpu): requests 2250m cpu, 8448Mi memory; 46 instance types fit",
		"[00:06]   launched i-0a1b2c3d4e5f60718 as g4dn.xlarge on-demand in us-west-2b at $0.5260/h after 0s (lowest-price fleet over 46 candidate types: the cheapest candidate)",
		"[00:16] nodes 12 | pods running 27, pending 4 | $0.826/h",
		"[00:17] EC2 sends spot-interruption for ip-10-0-20-124.us-west-2.compute.internal (c5ad.xlarge, 5 pods); the instance is reclaimed at 02:17",
		"[01:07] disruption: singlenodeconsolidation executed of general-55985 ($0.029/h -> $0.000/h): 1 node(s) can go, their pods fit on other nodes",
		"[03:12] disruption: drift executed of general-4hm7n -> general-tbqqk ($0.022/h -> $0.021/h): drifted (AMIDrift); 1 replacement(s)",
		"[03:40] NodeClaim gpu-x7k2p retiring (Empty): draining node ip-10-0-41-7.us-west-2.compute.internal",
		"[05:26] step done in 3m5s; $/hour 0.712 -> 0.219",
		"[05:26] $/hour −0.493, by cause: −0.526: the gpu node gpu-krmjg (g4dn.xlarge on-demand, $0.526/h) left, empty; +0.033: drift replaced 9 nodes with 9",
	}
	return report{
		Scenario: &Scenario{Name: "karpless-demo", Description: "A workload arrives and gets nodes; a spot node is interrupted and replaced before its deadline; the workload shrinks and consolidation removes what it no longer needs; a new AMI release rolls the nodes within the disruption budget."},
		Summary:  &Summary{Nodes: 9, PodsRunning: 18, CostPerHour: 0.219, Steps: steps},
		Timeline: tl,
		Log:      log,
		When:     time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
	}
}

// requireBrowserEnv makes a missing chromium or playwright-core a failure
// (make test sets it, as KARPLESS_REQUIRE_KUBE for the control plane);
// elsewhere the browser test skips.
const requireBrowserEnv = "KARPLESS_REQUIRE_BROWSER"

// minFontPx is the smallest text the report may show at any width.
const minFontPx = 10.0

// browserTools finds node, playwright-core (make browser installs it under
// .tools/playwright) and Debian's chromium.
func browserTools(t *testing.T) (node, playwright, chromium string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + " (make browser installs it)"
		if os.Getenv(requireBrowserEnv) == "1" {
			t.Fatalf("%s is set and %s", requireBrowserEnv, msg)
		}
		t.Skip(msg)
	}
	var err error
	if node, err = exec.LookPath("node"); err != nil {
		missing("node not found: %v", err)
	}
	// KARPLESS_CHROMIUM names another build of chromium than the one on PATH.
	if chromium = os.Getenv("KARPLESS_CHROMIUM"); chromium == "" {
		chromium = "chromium"
	}
	if chromium, err = exec.LookPath(chromium); err != nil {
		missing("chromium not found: %v", err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	playwright = filepath.Join(root, ".tools", "playwright", "node_modules", "playwright-core")
	if _, err := os.Stat(filepath.Join(playwright, "package.json")); err != nil {
		missing("playwright-core not installed: %v", err)
	}
	return node, playwright, chromium
}

// moduleRoot is the folder of go.mod above the test's folder.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the module root: no go.mod above the test")
		}
		dir = parent
	}
}

// pageFacts is what testdata/layout.cjs measures at one width.
type pageFacts struct {
	Width       int         `json:"width"`
	Viewport    int         `json:"viewport"`
	ScrollWidth float64     `json:"scrollWidth"`
	Errors      []string    `json:"errors"`
	Texts       []textFact  `json:"texts"`
	Charts      []chartFact `json:"charts"`
	Blocks      []boxFact   `json:"blocks"`
}

type textFact struct {
	Tag, Cls, Text string
	Size           float64
}

type boxFact struct {
	Tag, Cls, Text, Band string
	X, Y, W, H           float64
}

type chartFact struct {
	boxFact
	Texts  []boxFact `json:"texts"`
	Labels []boxFact `json:"labels"`
	Bands  []boxFact `json:"bands"`
}

func (a boxFact) overlaps(b boxFact, slack float64) bool {
	return a.X+slack < b.X+b.W && b.X+slack < a.X+a.W && a.Y+slack < b.Y+b.H && b.Y+slack < a.Y+a.H
}

func (a boxFact) String() string {
	return fmt.Sprintf("%q at (%.1f,%.1f) %.1fx%.1f", a.Text, a.X, a.Y, a.W, a.H)
}

// browserWidths are a desktop, a tablet and two phones.
var browserWidths = []int{1280, 800, 375, 320}

// TestReportInBrowser opens a rendered report in headless chromium at
// desktop, tablet and phone widths and checks that it reads there: no
// horizontal scroll, no text under minFontPx as drawn (an SVG's viewBox
// shrinks its text), no chart text over another, each band's label on its
// band, no console errors.
func TestReportInBrowser(t *testing.T) {
	node, playwright, chromium := browserTools(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "index.html")
	var html bytes.Buffer
	if err := sampleReport().render(&html); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, html.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join("testdata", "layout.cjs"), playwright, chromium, page}
	for _, w := range browserWidths {
		args = append(args, fmt.Sprint(w))
	}
	// Seconds on an idle machine; the bound is for a hung browser only.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir) // chromium writes its profile under HOME
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("measuring the report in chromium: %v\n%s", err, stderr.String())
	}
	var facts struct {
		Widths []pageFacts `json:"widths"`
	}
	if err := json.Unmarshal(out, &facts); err != nil {
		t.Fatalf("reading the measurements: %v\n%s", err, out)
	}
	if len(facts.Widths) != len(browserWidths) {
		t.Fatalf("measured %d widths, want %d", len(facts.Widths), len(browserWidths))
	}
	for _, f := range facts.Widths {
		t.Run(fmt.Sprintf("%dpx", f.Width), func(t *testing.T) {
			for _, p := range layoutProblems(f) {
				t.Error(p)
			}
		})
	}
}

// layoutProblems says what keeps a page measured at one width from reading
// well; none is what TestReportInBrowser wants.
func layoutProblems(f pageFacts) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if len(f.Errors) > 0 {
		add("console errors: %s", strings.Join(f.Errors, "; "))
	}
	if f.ScrollWidth > float64(f.Viewport) {
		add("the page is %.0f px wide in a %d px viewport: it scrolls sideways", f.ScrollWidth, f.Viewport)
	}
	for _, b := range f.Blocks {
		if b.X < 0 || b.X+b.W > float64(f.Viewport)+0.5 {
			add("<%s> spans x %.1f-%.1f, outside the %d px viewport", b.Tag, b.X, b.X+b.W, f.Viewport)
		}
	}
	small := 0
	for _, tx := range f.Texts {
		if tx.Size < minFontPx-0.05 {
			if small++; small <= 5 {
				add("<%s class=%q> %q drawn at %.1f px, under %.0f px", tx.Tag, tx.Cls, tx.Text, tx.Size, minFontPx)
			}
		}
	}
	if small > 5 {
		add("... %d texts under %.0f px in all", small, minFontPx)
	}
	if len(f.Texts) < 20 {
		add("only %d visible texts: the page did not render", len(f.Texts))
	}
	if len(f.Charts) != 1 {
		add("%d charts shown, want 1", len(f.Charts))
		return out
	}
	c := f.Charts[0]
	for i, a := range c.Texts {
		if a.X < c.X-0.5 || a.X+a.W > c.X+c.W+0.5 || a.Y < c.Y-0.5 || a.Y+a.H > c.Y+c.H+0.5 {
			add("chart text %s runs outside the chart %s", a, c.boxFact)
		}
		for _, b := range c.Texts[:i] {
			if a.overlaps(b, 0.5) {
				add("chart texts overlap: %s and %s", a, b)
			}
		}
	}
	for i, a := range c.Labels {
		for _, b := range c.Labels[:i] {
			if a.overlaps(b, 0.5) {
				add("chart labels overlap: %s and %s", a, b)
			}
		}
	}
	if len(c.Bands) == 0 {
		add("no band drawn")
	}
	for _, b := range c.Bands {
		var label *boxFact
		for i := range c.Labels {
			if c.Labels[i].Band != "" && c.Labels[i].Band == b.Band {
				label = &c.Labels[i]
			}
		}
		if label == nil {
			add("band %q has no label", b.Band)
			continue
		}
		// Next to its band: on the band's top edge, from the band's left end
		// (or, with no room there, ending at the chart's right edge) and
		// reaching over the band's span.
		clamped := label.X+label.W >= c.X+c.W-2
		if label.X >= b.X+b.W || label.X+label.W <= b.X || (label.X < b.X-2 && !clamped) {
			add("band %q spans x %.1f-%.1f, its label %.1f-%.1f", b.Band, b.X, b.X+b.W, label.X, label.X+label.W)
		}
		// On its top edge: touching it from above, or in its top strip.
		if label.Y+label.H < b.Y-2 || label.Y > b.Y+label.H {
			add("band %q starts at y %.1f, its label spans y %.1f-%.1f: not on the band's top", b.Band, b.Y, label.Y, label.Y+label.H)
		}
	}
	return out
}

// TestLayoutProblems: each check of layoutProblems finds what it is for in
// made-up measurements, so a browser run that passes has passed them.
func TestLayoutProblems(t *testing.T) {
	texts := make([]textFact, 20)
	for i := range texts {
		texts[i] = textFact{Tag: "p", Text: "ok", Size: 14}
	}
	good := func() pageFacts {
		return pageFacts{
			Width: 375, Viewport: 375, ScrollWidth: 375, Texts: append([]textFact(nil), texts...),
			Blocks: []boxFact{{Tag: "p", X: 16, W: 343}},
			Charts: []chartFact{{
				boxFact: boxFact{X: 16, Y: 100, W: 343, H: 600},
				Texts:   []boxFact{{Text: "Ready nodes", X: 60, Y: 200, W: 80, H: 14}, {Text: "6", X: 30, Y: 210, W: 8, H: 14}},
				Labels:  []boxFact{{Text: "1 A workload arrives", X: 16, Y: 106, W: 150, H: 16}, {Text: "drift", Band: "0", X: 222, Y: 130, W: 100, H: 16}},
				Bands:   []boxFact{{Band: "0", X: 220, Y: 130, W: 60, H: 400}},
			}},
		}
	}
	if p := layoutProblems(good()); len(p) != 0 {
		t.Fatalf("a page that reads well has problems: %q", p)
	}
	cases := []struct {
		name  string
		spoil func(f *pageFacts)
		want  string
	}{
		{"console error", func(f *pageFacts) { f.Errors = []string{"Uncaught TypeError"} }, "console errors"},
		{"sideways scroll", func(f *pageFacts) { f.ScrollWidth = 428 }, "scrolls sideways"},
		{"a cell past the edge", func(f *pageFacts) { f.Blocks[0].W = 420 }, "outside the 375 px viewport"},
		{"small text", func(f *pageFacts) { f.Texts[3].Size = 4.3 }, "drawn at 4.3 px"},
		{"nothing rendered", func(f *pageFacts) { f.Texts = f.Texts[:2] }, "did not render"},
		{"three charts", func(f *pageFacts) { f.Charts = append(f.Charts, f.Charts[0], f.Charts[0]) }, "3 charts shown"},
		{"texts overlap", func(f *pageFacts) { f.Charts[0].Texts[1].X = 70 }, "chart texts overlap"},
		{"text off the chart", func(f *pageFacts) { f.Charts[0].Texts[0].X = 300 }, "runs outside the chart"},
		{"labels overlap", func(f *pageFacts) { f.Charts[0].Labels[0].Y = 130; f.Charts[0].Labels[0].X = 200 }, "chart labels overlap"},
		{"band label far above", func(f *pageFacts) { f.Charts[0].Labels[1].Y = 106 }, "not on the band's top"},
		{"band label beside the band", func(f *pageFacts) { f.Charts[0].Labels[1].X = 290 }, "its label 290.0"},
		{"band label starts left of the band", func(f *pageFacts) { f.Charts[0].Labels[1].X = 120 }, "its label 120.0"},
		{"band without label", func(f *pageFacts) { f.Charts[0].Labels[1].Band = "" }, "has no label"},
	}
	for _, tc := range cases {
		f := good()
		tc.spoil(&f)
		if p := strings.Join(layoutProblems(f), "\n"); !strings.Contains(p, tc.want) {
			t.Errorf("%s: problems %q, want one saying %q", tc.name, p, tc.want)
		}
	}
}

// TestReportEscapes: what a scenario, a step or the log says is text on
// the page, never markup (the page is built without html/template).
func TestReportEscapes(t *testing.T) {
	rep := sampleReport()
	sc := *rep.Scenario
	sc.Name, sc.Description = `<script>alert("name")</script>`, `a & b <i>`
	rep.Scenario = &sc
	sum := *rep.Summary
	sum.Steps = append([]StepResult{{Name: `<b>step</b>`, Note: `"quoted" & <note>`, Failed: `<img src=x>`, CostCauses: []string{`<cause>`}}}, sum.Steps...)
	rep.Summary = &sum
	rep.Log = append([]string{`<script>log</script>`}, rep.Log...)
	var b strings.Builder
	if err := rep.render(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script>", "<b>step", "<i>", "<img", "<cause>", "<note>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page carries %q as markup", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(&#34;name&#34;)&lt;/script&gt;", "a &amp; b &lt;i&gt;", "&lt;b&gt;step&lt;/b&gt;", "&lt;img src=x&gt;", "&lt;cause&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
