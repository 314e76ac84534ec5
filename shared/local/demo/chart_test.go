package demo

import (
	"encoding/xml"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// fixedTimeline is a demo's timeline as the default scenario draws it:
// three steps within 5 s of each other, two more 2 s apart, a drift that
// rolls four nodes two at a time with a cost spike while replacements run
// beside the old nodes.
func fixedTimeline() timeline {
	tl := timeline{Marks: []mark{
		{T: 0, Name: "A workload arrives"},
		{T: 3, Name: "A spot node is interrupted"},
		{T: 5, Name: "The workload shrinks"},
		{T: 312, Name: "A new AMI release is published"},
		{T: 314, Name: "Another step right after it"},
		{T: 598, Name: "A step at the very end of the run"},
	}}
	for t := 0.0; t <= 600; t += 2 {
		s := sample{T: t, Nodes: 4, Cost: 0.2}
		if t < 30 {
			s.Pending = 9 - int(t/4)
		}
		if t >= 320 && t < 450 {
			s.Nodes, s.Cost = 6, 0.3+float64(int(t)%7)/100
		}
		if t == 380 {
			s.Cost = 0.412
		}
		tl.Samples = append(tl.Samples, s)
	}
	var b bands
	b.executed(320, "Drift", []string{"general-a", "general-b"}, 2)
	b.executed(330, "SingleNodeConsolidation", []string{"general-z"}, 0) // a delete: no band
	b.gone(380, "general-a")
	b.gone(390, "general-b")
	b.executed(392, "Drift", []string{"general-c", "general-d"}, 2)
	b.gone(440, "general-c")
	b.gone(450, "general-d")
	tl.Bands = b.all(600)
	return tl
}

type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []svgNode  `xml:",any"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n svgNode) num(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attr(name), 64)
	if err != nil {
		t.Fatalf("<%s> %s=%q: %v", n.XMLName.Local, name, n.attr(name), err)
	}
	return v
}

func (n svgNode) text() string {
	s := n.Text
	for _, c := range n.Nodes {
		s += c.text()
	}
	return s
}

func (n svgNode) walk(f func(svgNode)) {
	f(n)
	for _, c := range n.Nodes {
		c.walk(f)
	}
}

func hasClass(n svgNode, class string) bool {
	return strings.Contains(" "+n.attr("class")+" ", " "+class+" ")
}

// TestTimelineChart renders a fixed timeline in each of the chart's sizes
// and checks what a reader needs at a glance: no two labels overlap, each
// label's box holds its text, the time axis has labelled ticks at a
// regular interval, and the drift's replacement span is shaded, labelled on
// its top edge and explained.
func TestTimelineChart(t *testing.T) {
	tl := fixedTimeline()
	if path := os.Getenv("KARPLESS_CHART_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(renderTimeline(tl)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantTicks := map[string][]string{
		"wide":   {"00:00", "01:00", "02:00", "03:00", "04:00", "05:00", "06:00", "07:00", "08:00", "09:00", "10:00"},
		"medium": {"00:00", "01:00", "02:00", "03:00", "04:00", "05:00", "06:00", "07:00", "08:00", "09:00", "10:00"},
		"narrow": {"00:00", "02:00", "04:00", "06:00", "08:00", "10:00"},
	}
	// The longest wording that fits right of the band's start.
	wantBandLabels := map[string]string{
		"wide":   "drift 05:20-07:30: replacements run beside the old nodes",
		"medium": "drift 05:20-07:30",
		"narrow": "drift 05:20-07:30",
	}
	for _, c := range chartSizes() {
		t.Run(c.Name, func(t *testing.T) { checkChart(t, tl, c, wantTicks[c.Name], wantBandLabels[c.Name]) })
	}
}

func checkChart(t *testing.T, tl timeline, c chartSize, wantTicks []string, wantBandLabel string) {
	out := string(renderChart(tl, c))
	var root svgNode
	if err := xml.Unmarshal([]byte(out), &root); err != nil {
		t.Fatalf("the chart is not well-formed SVG: %v", err)
	}
	if !hasClass(root, c.Name) {
		t.Errorf("the chart's class %q lacks %q, which the page's CSS shows it by", root.attr("class"), c.Name)
	}
	vb := strings.Fields(root.attr("viewBox"))
	if len(vb) != 4 {
		t.Fatalf("viewBox %q", root.attr("viewBox"))
	}
	width, _ := strconv.ParseFloat(vb[2], 64)
	height, _ := strconv.ParseFloat(vb[3], 64)
	if width != c.W {
		t.Errorf("viewBox width %g, want %g", width, c.W)
	}

	type box struct {
		x, y, w, h float64
		class      string
		band       string
	}
	var boxes []box
	var texts []svgNode
	var ticks []svgNode
	var bandsDrawn []svgNode
	var notes []string
	root.walk(func(n svgNode) {
		switch {
		case n.XMLName.Local == "rect" && hasClass(n, "label"):
			boxes = append(boxes, box{n.num(t, "x"), n.num(t, "y"), n.num(t, "width"), n.num(t, "height"), n.attr("class"), n.attr("data-band")})
		case n.XMLName.Local == "text" && hasClass(n, "label-text"):
			texts = append(texts, n)
		case n.XMLName.Local == "text" && hasClass(n, "tick"):
			ticks = append(ticks, n)
		case n.XMLName.Local == "rect" && hasClass(n, "band"):
			bandsDrawn = append(bandsDrawn, n)
		case n.XMLName.Local == "text" && hasClass(n, "band-note"):
			var lines []string
			for _, l := range n.Nodes {
				lines = append(lines, l.text())
				if w := textWidth(l.text(), c.Font); l.num(t, "x")+w > width {
					t.Errorf("note line %q runs to %.1f, past the chart's %g", l.text(), l.num(t, "x")+w, width)
				}
			}
			notes = append(notes, strings.Join(lines, " "))
		}
	})

	// Labels: one per step and per band, none overlapping another, each
	// inside the chart and wide enough for its text.
	if want := len(tl.Marks) + len(tl.Bands); len(boxes) != want || len(texts) != want {
		t.Fatalf("%d label boxes and %d label texts, want %d", len(boxes), len(texts), want)
	}
	for i, a := range boxes {
		if a.x < 0 || a.y < 0 || a.x+a.w > width || a.y+a.h > height {
			t.Errorf("label %d (%s) at %+v lies outside the %gx%g chart", i, texts[i].text(), a, width, height)
		}
		for j, b := range boxes[:i] {
			if a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h {
				t.Errorf("labels overlap: %q at %+v and %q at %+v", texts[i].text(), a, texts[j].text(), b)
			}
		}
		txt := texts[i]
		font := txt.num(t, "font-size")
		// 0.6 em is a monospace character's advance.
		if need := float64(utf8.RuneCountInString(txt.text()))*font*0.6 + 2*labelPad; a.w < need {
			t.Errorf("label %q: box %.1f wide, its text needs %.1f", txt.text(), a.w, need)
		}
		if tx := txt.num(t, "x"); tx < a.x || tx > a.x+a.w {
			t.Errorf("label %q starts at %.1f, outside its box %+v", txt.text(), tx, a)
		}
	}
	for i, m := range tl.Marks {
		if want := fmt.Sprintf("%d %s", i+1, m.Name); !strings.Contains(out, want) {
			t.Errorf("no label %q", want)
		}
	}
	// The three steps within 5 s of each other stack in three rows.
	rows := map[float64]bool{}
	for i := range boxes {
		if strings.HasPrefix(texts[i].text(), "1 ") || strings.HasPrefix(texts[i].text(), "2 ") || strings.HasPrefix(texts[i].text(), "3 ") {
			rows[boxes[i].y] = true
		}
	}
	if len(rows) != 3 {
		t.Errorf("the first three steps' labels are in %d rows, want 3", len(rows))
	}

	// The time axis: labelled ticks at a regular interval over ten minutes,
	// each inside the chart.
	var got []string
	var xs []float64
	for _, tk := range ticks {
		got = append(got, tk.text())
		xs = append(xs, tk.num(t, "x"))
		w := textWidth(tk.text(), c.Font)
		left := map[string]float64{"start": 0, "middle": w / 2, "end": w}[tk.attr("text-anchor")]
		if x := tk.num(t, "x"); x-left < 0 || x-left+w > width {
			t.Errorf("tick %q (anchor %s at %.1f) runs outside the chart", tk.text(), tk.attr("text-anchor"), x)
		}
	}
	if strings.Join(got, " ") != strings.Join(wantTicks, " ") {
		t.Errorf("time axis ticks %v, want %v", got, wantTicks)
	}
	for i := 2; i < len(xs); i++ {
		if d, d0 := xs[i]-xs[i-1], xs[1]-xs[0]; d-d0 > 0.2 || d0-d > 0.2 {
			t.Errorf("ticks not evenly spaced: %v", xs)
			break
		}
	}

	// The drift: its two commands are one shaded span, from the first
	// execution to the last old node's going, labelled on its top edge and
	// explained under the axis.
	if len(tl.Bands) != 1 || tl.Bands[0].Start != 320 || tl.Bands[0].End != 450 || tl.Bands[0].Replacements != 4 {
		t.Fatalf("bands %+v, want one drift band 320-450 with 4 replacements", tl.Bands)
	}
	if len(bandsDrawn) != 1 {
		t.Fatalf("%d shaded bands, want 1", len(bandsDrawn))
	}
	bd := bandsDrawn[0]
	plotW := c.W - c.Left - c.Right
	if x, w := bd.num(t, "x"), bd.num(t, "width"); abs(x-(c.Left+plotW*320/600)) > 0.2 || abs(w-plotW*130/600) > 0.2 {
		t.Errorf("band drawn at x=%.1f width %.1f, want %.1f and %.1f", x, w, c.Left+plotW*320/600, plotW*130/600)
	}
	var label *box
	for i := range boxes {
		if hasClass(svgNode{Attrs: []xml.Attr{{Name: xml.Name{Local: "class"}, Value: boxes[i].class}}}, "band") {
			label = &boxes[i]
		}
	}
	switch {
	case label == nil:
		t.Error("the band has no label")
	case label.band != bd.attr("data-band"):
		t.Errorf("the band label names band %q, the band is %q", label.band, bd.attr("data-band"))
	case label.y != bd.num(t, "y") || label.x < bd.num(t, "x") || label.x > bd.num(t, "x")+4:
		t.Errorf("the band's label at %+v is not on the band's top edge from its left end (x %.1f, y %.1f, width %.1f)", *label, bd.num(t, "x"), bd.num(t, "y"), bd.num(t, "width"))
	}
	for _, txt := range texts {
		if strings.HasPrefix(txt.text(), "drift") && txt.text() != wantBandLabel {
			t.Errorf("band label %q, want %q", txt.text(), wantBandLabel)
		}
	}
	if len(notes) != 1 {
		t.Fatalf("%d band notes, want 1", len(notes))
	}
	for _, want := range []string{"drift 05:20-07:30", "4 replacement nodes ran beside the nodes they replace until those drained", "both are paid for meanwhile", "peaked at 0.412 at 06:20 (circled)"} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("band note lacks %q:\n%s", want, notes[0])
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestBandsFollowCommands: a band opens when a command with replacements
// executes and closes when its last candidate is gone; deletes open none;
// bands still open end at the report's time; another method is its own band.
func TestBandsFollowCommands(t *testing.T) {
	var b bands
	b.executed(10, "Drift", []string{"a", "b"}, 2)
	b.executed(12, "Emptiness", []string{"e"}, 0)
	b.gone(20, "a")
	if got := b.all(25); len(got) != 1 || got[0].End != 25 {
		t.Fatalf("open band: %+v", got)
	}
	b.gone(30, "b")
	b.executed(100, "MultiNodeConsolidation", []string{"c", "d"}, 1)
	b.executed(105, "Drift", []string{"f"}, 1)
	got := b.all(200)
	want := []band{{10, 30, "drift", 2}, {100, 200, "consolidation", 1}, {105, 200, "drift", 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("bands %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		maxT float64
		most int
		want float64
	}{{40, 10, 5}, {100, 10, 10}, {600, 10, 60}, {3000, 10, 300}, {600, 5, 120}, {600, 19, 60}, {600, 1, 300}} {
		if got := tickStep(c.maxT, c.most); got != c.want {
			t.Errorf("tickStep(%g, %d) = %g, want %g", c.maxT, c.most, got, c.want)
		}
	}
}

// TestLongLabelIsCut: a step name longer than the chart is cut to fit.
func TestLongLabelIsCut(t *testing.T) {
	c := chartSizes()[0]
	boxes, rows := layoutLabels([]labelBox{{At: 500, Text: strings.Repeat("a long step name ", 20)}}, 0, c.W, laneTop, c)
	if rows != 1 || boxes[0].X < 0 || boxes[0].X+boxes[0].W > c.W || !strings.HasSuffix(boxes[0].Text, "…") {
		t.Errorf("long label laid out at x=%.1f width %.1f: %q", boxes[0].X, boxes[0].W, boxes[0].Text)
	}
}
