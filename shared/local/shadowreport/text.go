package shadowreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report for people: a header, one line per row with
// both sides and their $/h, the totals, and what it cannot know.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Karpless shadow report, %s to %s (%s)", r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Until.Sub(r.Since).Round(time.Minute))
	if r.Source != "" {
		fmt.Fprintf(&b, ", %s", r.Source)
	}
	fmt.Fprintf(&b, "\n%d decision(s) of Karpless in the window (records read: %d from the stores, %d from Events, %d from log files)\n\n",
		r.Decisions, r.Records["store"], r.Records["events"], r.Records["logs"])
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tKIND\tNODEPOOL\tKARPLESS WOULD\tKARPLESS $/H\tKARPENTER DID\tKARPENTER $/H")
	for _, row := range r.Rows {
		when := row.First.UTC().Format("01-02 15:04")
		if row.Seen > 1 && row.Last.Sub(row.First) >= time.Minute {
			when += fmt.Sprintf(" (to %s, %dx)", row.Last.UTC().Format("15:04"), row.Seen)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", when, row.Kind, orDash(row.NodePool),
			row.Karpless.Action, money(row.Karpless), row.Karpenter.Action, money(row.Karpenter))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Rows) == 0 {
		b.WriteString("(no decision and no action of Karpenter's in the window)\n")
	}
	t := r.Totals
	fmt.Fprintf(&b, "\nLaunches for the same pods: Karpless $%.4f/h, Karpenter $%.4f/h\n", t.KarplessLaunches, t.KarpenterLaunches)
	fmt.Fprintf(&b, "Disruptions (what is left running of their nodes): Karpless $%.4f/h, Karpenter $%.4f/h\n", t.KarplessDisruptions, t.KarpenterDisruptions)
	fmt.Fprintf(&b, "Fleet now: Karpenter $%.4f/h; with Karpless's standing decisions $%.4f/h (%+.4f, an estimate)\n", t.Fleet, t.WithKarpless, t.WithKarpless-t.Fleet)
	b.WriteString("\nWhat this report cannot know:\n")
	for _, u := range r.Unknown {
		fmt.Fprintf(&b, "  - %s\n", u)
	}
	if len(r.Notes) > 0 {
		b.WriteString("Notes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func money(s Side) string {
	switch {
	case s.PerHour == 0 && s.Unpriced:
		return "?"
	case s.Unpriced:
		return fmt.Sprintf("%.4f+?", s.PerHour)
	}
	return fmt.Sprintf("%.4f", s.PerHour)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
