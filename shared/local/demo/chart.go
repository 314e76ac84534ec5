package demo

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// timeline is what the report's chart draws: the samples, the steps'
// starts and the spans in which replacements ran beside the nodes they
// replace. Times are seconds since the demo began.
type timeline struct {
	Samples []sample
	Marks   []mark
	Bands   []band
}

// band is a span in which disruption's replacement nodes run beside the
// nodes they replace: from the command's execution until the last of
// those nodes is gone. Both are paid for meanwhile, so $/hour rises and
// then falls.
type band struct {
	Start, End   float64
	Method       string // drift, consolidation
	Replacements int
}

// bands follows disruption commands with replacements until their
// candidates are gone.
type bands struct {
	open []*openBand
	done []band
}

type openBand struct {
	band
	waiting map[string]bool // candidate NodeClaims not gone yet
}

// executed notes a command carried out at t: it replaces candidates
// (NodeClaim names) with replacements new ones.
func (b *bands) executed(t float64, method string, candidates []string, replacements int) {
	if replacements == 0 || len(candidates) == 0 {
		return
	}
	o := &openBand{band: band{Start: t, End: t, Method: methodName(method), Replacements: replacements}, waiting: map[string]bool{}}
	for _, c := range candidates {
		o.waiting[c] = true
	}
	b.open = append(b.open, o)
}

// gone notes that a NodeClaim disappeared at t; a band ends with the last
// of its candidates.
func (b *bands) gone(t float64, claim string) {
	kept := b.open[:0]
	for _, o := range b.open {
		delete(o.waiting, claim)
		if len(o.waiting) == 0 {
			o.End = t
			b.done = append(b.done, o.band)
			continue
		}
		kept = append(kept, o)
	}
	b.open = kept
}

// all is every band, those still open ending at now; bands of one method
// that overlap or follow within bandGap are one (a rolling drift is many
// commands, as budgets allow).
func (b *bands) all(now float64) []band {
	list := append([]band(nil), b.done...)
	for _, o := range b.open {
		x := o.band
		x.End = now
		list = append(list, x)
	}
	return mergeBands(list)
}

const bandGap = 10.0 // seconds

func mergeBands(list []band) []band {
	sort.SliceStable(list, func(i, j int) bool { return list[i].Start < list[j].Start })
	var out []band
	for _, x := range list {
		if n := len(out); n > 0 && out[n-1].Method == x.Method && x.Start <= out[n-1].End+bandGap {
			out[n-1].End = max(out[n-1].End, x.End)
			out[n-1].Replacements += x.Replacements
			continue
		}
		out = append(out, x)
	}
	return out
}

func methodName(m string) string {
	m = strings.ToLower(m)
	if strings.HasSuffix(m, "consolidation") {
		return "consolidation"
	}
	return m
}

// chartSize is one layout of the chart. A viewBox scales its text with
// the drawing, so one chart 960 units wide would draw 11-unit labels at 4 px
// on a phone: the report draws the chart once per size and its CSS shows
// the size that keeps every text at 10 px or more on the screen's width
// (reportCSS). Lengths are SVG user units.
type chartSize struct {
	Name        string  // the SVG's class, which reportCSS shows or hides
	W           float64 // width
	Left, Right float64 // margins of the plots (the left one holds the values)
	Font        float64 // labels, axes and notes
	TitleFont   float64 // the panels' titles
	NoteLeft    float64 // where the band notes start
}

// chartSizes are the chart's layouts, widest first. Each is shown where
// the page's column is at least about its width, so it is scaled by 0.85
// (a 320 px phone) or more: the smallest fonts are chosen for that.
func chartSizes() []chartSize {
	return []chartSize{
		{Name: "wide", W: 960, Left: 64, Right: 20, Font: 11, TitleFont: 12, NoteLeft: 64},
		{Name: "medium", W: 640, Left: 56, Right: 18, Font: 11, TitleFont: 12, NoteLeft: 56},
		{Name: "narrow", W: 340, Left: 40, Right: 14, Font: 12, TitleFont: 13, NoteLeft: 4},
	}
}

// Derived geometry.
func (c chartSize) labelH() float64 { return c.Font + 4 }
func (c chartSize) rowH() float64   { return c.Font + 8 }

const (
	laneTop     = 6.0
	labelPad    = 3.0
	labelGap    = 6.0
	panelTitleH = 20.0
	panelPlotH  = 96.0
	panelGap    = 16.0
	// charWidth bounds a character of the labels' monospace font (0.60 em
	// in DejaVu Sans Mono, Menlo, SF Mono; 0.55 em in Consolas), so a
	// label's box holds its text; it is also the estimate for the notes'
	// proportional font, whose characters average less.
	charWidth = 0.62
)

// labelBox is a label laid out in the lane above the panels.
type labelBox struct {
	X, Y, W, H float64
	At         float64 // the x its line starts from
	Text       string
	Class      string // step or band
	Band       int    // the band's index, for a band's label
}

// layoutLabels places each label just right of its x in the first row
// where it overlaps no other label, so labels of steps that start close
// together stack instead of printing over each other. A step's label that
// would run off the chart goes left of its line; a band's is pushed left
// only as far as needed, so it still reaches over its band. A label longer
// than the chart is cut. It returns the boxes, their rows' tops starting
// at top, and the number of rows.
func layoutLabels(items []labelBox, minX, maxX, top float64, c chartSize) ([]labelBox, int) {
	sort.SliceStable(items, func(i, j int) bool { return items[i].At < items[j].At })
	var rows [][]labelBox
	out := make([]labelBox, 0, len(items))
	limit := int((maxX - minX - 2*labelPad) / (c.Font * charWidth))
	for _, it := range items {
		if utf8.RuneCountInString(it.Text) > limit {
			it.Text = string([]rune(it.Text)[:limit-1]) + "…"
		}
		it.W = textWidth(it.Text, c.Font) + 2*labelPad
		it.H = c.labelH()
		it.X = it.At + 2
		if it.X+it.W > maxX {
			if it.Class == "band" {
				it.X = maxX - it.W
			} else {
				it.X = it.At - 2 - it.W
			}
		}
		it.X = max(it.X, minX)
		r := 0
		for ; r < len(rows); r++ {
			free := true
			for _, o := range rows[r] {
				if it.X < o.X+o.W+labelGap && o.X < it.X+it.W+labelGap {
					free = false
					break
				}
			}
			if free {
				break
			}
		}
		if r == len(rows) {
			rows = append(rows, nil)
		}
		it.Y = top + float64(r)*c.rowH()
		rows[r] = append(rows[r], it)
		out = append(out, it)
	}
	return out, len(rows)
}

func textWidth(s string, font float64) float64 {
	return float64(utf8.RuneCountInString(s)) * font * charWidth
}

// tickStep is the interval of the time axis's ticks: the smallest of the
// usual clock intervals that gives at most most ticks over maxT seconds.
func tickStep(maxT float64, most int) float64 {
	most = max(most, 2)
	for _, s := range []float64{5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200} {
		if maxT/s <= float64(most) {
			return s
		}
	}
	return math.Ceil(maxT/float64(most)/3600) * 3600
}

// wrap breaks text into lines of at most width units at font size font.
func wrap(text string, width, font float64) []string {
	limit := max(int(width/(font*charWidth)), 10)
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > limit {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// bandNote explains a band on the chart; the peak is circled on the cost panel.
func bandNote(b band, peak, peakT float64) string {
	what := fmt.Sprintf("%s %s-%s: ", b.Method, clockAt(b.Start), clockAt(b.End))
	n := "a replacement node"
	if b.Replacements > 1 {
		n = fmt.Sprintf("%d replacement nodes", b.Replacements)
	}
	what += fmt.Sprintf("%s ran beside the nodes they replace until those drained. ", n)
	what += "Karpless launches a replacement first and removes the old node only once the replacement is ready and the pods have moved, so both are paid for meanwhile"
	if peak > 0 {
		what += fmt.Sprintf(": $/hour peaked at %.3f at %s (circled), then fell as the old nodes went", peak, clockAt(peakT))
	}
	return what + "."
}

// bandLabel names a band on its top edge, from its left end: the longest
// wording that fits between there and the chart's right edge (room), so
// the label starts where its band does; the span's times tie it to its
// note under the axis.
func bandLabel(b band, room, font float64) string {
	span := fmt.Sprintf("%s %s-%s", b.Method, clockAt(b.Start), clockAt(b.End))
	for _, s := range []string{span + ": replacements run beside the old nodes", span + ": replacements beside old nodes", span, b.Method} {
		if textWidth(s, font)+2*labelPad <= room {
			return s
		}
	}
	return b.Method
}

func clockAt(sec float64) string { return clockString(time.Duration(sec * float64(time.Second))) }

// renderTimeline draws the chart in each of its sizes (chartSizes).
func renderTimeline(tl timeline) string {
	var b strings.Builder
	for _, c := range chartSizes() {
		b.WriteString(renderChart(tl, c))
	}
	return b.String()
}

// renderChart draws the nodes, pending pods and $/hour panels on one time
// axis, the steps' labels in a lane above them, each replacement band
// shaded across the panels with its label on its top edge and a note under
// the axis.
func renderChart(tl timeline, c chartSize) string {
	type series struct {
		title, color, format string
		value                func(sample) float64
	}
	panels := []series{
		{"Ready nodes", "#1f77b4", "%.0f", func(s sample) float64 { return float64(s.Nodes) }},
		{"Pending pods", "#d62728", "%.0f", func(s sample) float64 { return float64(s.Pending) }},
		{"Cost ($/hour)", "#2ca02c", "%.3f", func(s sample) float64 { return s.Cost }},
	}
	maxT := 1.0
	for _, s := range tl.Samples {
		maxT = max(maxT, s.T)
	}
	for _, m := range tl.Marks {
		maxT = max(maxT, m.T)
	}
	plotL, plotR := c.Left, c.W-c.Right
	x := func(t float64) float64 { return plotL + (plotR-plotL)*min(max(t, 0), maxT)/maxT }

	// The lane: the steps' labels.
	var items []labelBox
	for i, m := range tl.Marks {
		items = append(items, labelBox{At: x(m.T), Text: fmt.Sprintf("%d %s", i+1, m.Name), Class: "step"})
	}
	labels, rows := layoutLabels(items, 0, c.W, laneTop, c)
	// Under it, the bands' labels, each on its band's top edge: the band's
	// shading starts at its label's row.
	bandTop := laneTop + float64(rows)*c.rowH() + 4
	items = items[:0]
	for i, bd := range tl.Bands {
		items = append(items, labelBox{At: x(bd.Start), Text: bandLabel(bd, c.W-x(bd.Start)-2, c.Font), Class: "band", Band: i})
	}
	bandLabels, bandRows := layoutLabels(items, 0, c.W, bandTop, c)
	top := bandTop + float64(bandRows)*c.rowH()
	panelH := panelTitleH + panelPlotH + panelGap
	plotTop := func(i int) float64 { return top + float64(i)*panelH + panelTitleH }
	bottom := plotTop(len(panels)-1) + panelPlotH
	// Ticks far enough apart for their labels (mm:ss, with a gap).
	step := tickStep(maxT, int((plotR-plotL)/(textWidth("00:00", c.Font)+c.Font)))
	tickY := bottom + c.Font + 5
	captionY := tickY + c.Font + 8

	// The notes under the axis, one per band.
	var notes [][]string
	type peak struct{ t, cost float64 }
	var peaks []peak
	noteX := c.NoteLeft + 22
	for _, b := range tl.Bands {
		pk := peak{t: b.Start}
		for _, s := range tl.Samples {
			if s.T >= b.Start && s.T <= b.End && s.Cost > pk.cost {
				pk = peak{s.T, s.Cost}
			}
		}
		peaks = append(peaks, pk)
		notes = append(notes, wrap(bandNote(b, pk.cost, pk.t), c.W-c.Right-noteX, c.Font))
	}
	lineH := c.Font + 5
	noteTop := captionY + 12
	height := noteTop
	for _, n := range notes {
		height += float64(len(n))*lineH + 8
	}

	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg class="timeline %s" viewBox="0 0 %.0f %.0f" width="100%%" role="img" aria-label="Ready nodes, pending pods and cost over time" font-family="system-ui,-apple-system,'Segoe UI',Roboto,sans-serif" xmlns="http://www.w3.org/2000/svg">`, c.Name, c.W, math.Ceil(height))
	b.WriteString(`<rect x="0" y="0" width="100%" height="100%" fill="#fff"/>`)
	// Replacement bands, under everything else, each from its label's row.
	for _, l := range bandLabels {
		bd := tl.Bands[l.Band]
		x0, x1 := x(bd.Start), x(bd.End)
		fmt.Fprintf(&b, `<rect class="band" data-band="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#ff7f0e" fill-opacity="0.14"><title>%s</title></rect>`,
			l.Band, x0, l.Y, max(x1-x0, 2), bottom-l.Y, esc(bd.Method+": replacements run beside the old nodes until they drain"))
	}
	for i, p := range panels {
		pt := plotTop(i)
		maxV := 0.0
		for _, s := range tl.Samples {
			maxV = max(maxV, p.value(s))
		}
		if maxV == 0 {
			maxV = 1
		}
		y := func(v float64) float64 { return pt + panelPlotH*(1-v/maxV) }
		// A white halo keeps the steps' lines from crossing the title.
		fmt.Fprintf(&b, `<text class="panel-title" x="%.0f" y="%.1f" font-size="%.0f" font-weight="bold" fill="#222" stroke="#fff" stroke-width="4" paint-order="stroke">%s</text>`, plotL+3, pt-6, c.TitleFont, esc(p.title))
		// Grid: the maximum and about half of it (a whole number for the
		// counts), the time ticks.
		mid := maxV / 2
		if p.format == "%.0f" {
			mid = math.Floor(mid)
		}
		for _, v := range []float64{mid, maxV} {
			if v <= 0 {
				continue
			}
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, plotL, y(v), plotR, y(v))
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="%.0f" text-anchor="end" fill="#444">%s</text>`, plotL-4, y(v)+4, c.Font, fmt.Sprintf(p.format, v))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="%.0f" text-anchor="end" fill="#444">0</text>`, plotL-4, pt+panelPlotH+4, c.Font)
		for t := 0.0; t <= maxT+1e-9; t += step {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`, x(t), pt, x(t), pt+panelPlotH)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`, x(t), pt+panelPlotH, x(t), pt+panelPlotH+4)
		}
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#999"/>`, plotL, pt+panelPlotH, plotR, pt+panelPlotH)
		var pts []string
		for j, s := range tl.Samples {
			if j > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.T), y(p.value(tl.Samples[j-1]))))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.T), y(p.value(s))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, p.color, strings.Join(pts, " "))
		if i == len(panels)-1 {
			for _, pk := range peaks {
				if pk.cost > 0 {
					fmt.Fprintf(&b, `<circle class="peak" cx="%.1f" cy="%.1f" r="3.5" fill="none" stroke="#e07b00" stroke-width="1.5"/>`, x(pk.t), y(pk.cost))
				}
			}
		}
	}
	// The time axis's labels, under the last panel; the first and the last
	// are kept inside the chart.
	for t := 0.0; t <= maxT+1e-9; t += step {
		anchor := "middle"
		switch {
		case t == 0:
			anchor = "start"
		case x(t)+textWidth("00:00", c.Font)/2 > c.W:
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" font-size="%.0f" text-anchor="%s" fill="#444">%s</text>`, x(t), tickY, c.Font, anchor, clockAt(t))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="%.0f" text-anchor="end" fill="#666">mm:ss since the demo began (virtual clock)</text>`, plotR, captionY, c.Font)
	// Each step label's line runs from its box down through the panels;
	// the boxes are drawn over the lines so no line crosses a label's text.
	for _, l := range labels {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#aaa" stroke-dasharray="4 3"/>`, l.At, l.Y+l.H, l.At, bottom)
	}
	for _, l := range append(labels, bandLabels...) {
		fill, stroke, color, data := "#fff", "#ccc", "#333", ""
		if l.Class == "band" {
			fill, stroke, color, data = "#fff3e0", "#e07b00", "#8a4b00", fmt.Sprintf(` data-band="%d"`, l.Band)
		}
		fmt.Fprintf(&b, `<rect class="label %s"%s x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="%s" stroke="%s"/>`, l.Class, data, l.X, l.Y, l.W, l.H, fill, stroke)
		fmt.Fprintf(&b, `<text class="label-text" x="%.1f" y="%.1f" font-size="%.0f" font-family="ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace" fill="%s">%s</text>`,
			l.X+labelPad, l.Y+l.H-4, c.Font, color, esc(l.Text))
	}
	// The notes: what a shaded band is, and the cost's peak in it.
	ny := noteTop
	for _, n := range notes {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="14" height="12" fill="#ff7f0e" fill-opacity="0.3" stroke="#e07b00"/>`, c.NoteLeft, ny)
		fmt.Fprintf(&b, `<text class="band-note" font-size="%.0f" fill="#333">`, c.Font)
		for k, line := range n {
			fmt.Fprintf(&b, `<tspan x="%.0f" y="%.1f">%s</tspan>`, noteX, ny+c.Font-1+float64(k)*lineH, esc(line))
		}
		b.WriteString(`</text>`)
		ny += float64(len(n))*lineH + 8
	}
	b.WriteString(`</svg>`)
	return b.String()
}
