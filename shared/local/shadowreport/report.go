package shadowreport

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/scheduling"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/function/shadow"
	"github.com/karpless/karpless/shared/local/whatif"
)

// Report is what Karpless would have done beside what Karpenter did in a
// window, row by row, with the $/h of each side.
type Report struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Source names the cluster read.
	Source string `json:"source,omitempty"`
	// Decisions counts the distinct decisions in the window; Records
	// where they were read (store, events, log lines).
	Decisions int            `json:"decisions"`
	Records   map[string]int `json:"records"`
	Rows      []Row          `json:"rows"`
	Totals    Totals         `json:"totals"`
	// Unknown says what the report cannot know, one sentence each.
	Unknown []string `json:"unknown"`
	Notes   []string `json:"notes,omitempty"`
}

// Row is one decision of Karpless's and what Karpenter did about the same
// pods or nodes, or one thing Karpenter did that Karpless did not decide.
type Row struct {
	// First and Last are when Karpless made the decision (first and last
	// time in the window), Seen by how many invocations; for a row of
	// Karpenter's alone, when it acted.
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Seen     int       `json:"seen,omitempty"`
	Kind     string    `json:"kind"`
	NodePool string    `json:"nodepool,omitempty"`
	// Pods the row is about (the first few), and how many.
	Pods      []string `json:"pods,omitempty"`
	PodCount  int      `json:"podCount,omitempty"`
	Karpless  Side     `json:"karpless"`
	Karpenter Side     `json:"karpenter"`
	// Standing: the decision still stands against what Karpenter runs
	// now (a launch whose pods all run on the NodeClaims Karpenter
	// launched for them; a disruption whose candidates Karpenter keeps),
	// so the fleet's estimate with Karpless counts it.
	Standing bool `json:"standing,omitempty"`
	// Decision is Karpless's record (nil on a row of Karpenter's alone).
	Decision *shadow.Decision `json:"decision,omitempty"`
}

// Side is what one of them did (or would have) and the $/h it runs for
// the row's pods or nodes afterwards: for a launch, the capacity launched;
// for a disruption, what is left of the candidates and their replacements.
type Side struct {
	Action     string   `json:"action"`
	PerHour    float64  `json:"perHour"`
	NodeClaims []string `json:"nodeclaims,omitempty"`
	// Unpriced: part of the $/h is unknown (a NodeClaim that is gone, an
	// offering the catalog does not price).
	Unpriced bool `json:"unpriced,omitempty"`
}

// Totals sum the rows, and the fleet.
type Totals struct {
	// Launches: the $/h of what each launched (would have) for the pods
	// of Karpless's launch decisions; Karpenter's counts each NodeClaim
	// once.
	KarplessLaunches  float64 `json:"karplessLaunches"`
	KarpenterLaunches float64 `json:"karpenterLaunches"`
	// Disruptions: the $/h the rows of disruptions leave running.
	KarplessDisruptions  float64 `json:"karplessDisruptions"`
	KarpenterDisruptions float64 `json:"karpenterDisruptions"`
	// Fleet is the $/h of Karpenter's NodeClaims now (not deleting), and
	// WithKarpless the same with Karpless's standing decisions (Row.
	// Standing) in their place, the latest first, each NodeClaim once: an
	// estimate, since each decision was made on the cluster Karpenter
	// shaped.
	Fleet        float64 `json:"fleet"`
	WithKarpless float64 `json:"withKarpless"`
}

// recent is how long before a decision a NodeClaim of Karpenter's may
// have been created and still count as its answer to the same pods (the
// two see the pods pending at about the same time).
const recent = 2 * time.Minute

// Build makes the report of the window from the sources.
func Build(src *Sources, win Window) (*Report, error) {
	w, err := whatif.New(src.File.Input())
	if err != nil {
		return nil, err
	}
	r := &Report{Since: win.Since, Until: win.Until, Source: src.File.Source,
		Records: map[string]int{"store": src.FromStore, "events": src.FromEvents, "logs": src.FromLogs}}
	snap := src.File.Snapshot()
	b := &builder{w: w, win: win, claims: map[string]*karpv1.NodeClaim{}, byNode: map[string]*karpv1.NodeClaim{},
		pods: map[string]*corev1.Pod{}, deleted: map[string]corev1.Event{}, matched: map[string]bool{}, scheduled: src.Scheduled,
		cpuOnNode: map[string]int64{}}
	for _, nc := range snap.NodeClaims {
		b.claims[nc.Name] = nc
		if nc.Status.NodeName != "" {
			b.byNode[nc.Status.NodeName] = nc
		}
	}
	byProvider := map[string]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		if nc.Status.ProviderID != "" {
			byProvider[nc.Status.ProviderID] = nc
		}
	}
	for _, n := range snap.Nodes {
		if nc := byProvider[n.Spec.ProviderID]; nc != nil && b.byNode[n.Name] == nil {
			b.byNode[n.Name] = nc
		}
	}
	for _, p := range snap.Pods {
		b.pods[p.Namespace+"/"+p.Name] = p
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			req := scheduling.PodRequests(p)
			b.cpuOnNode[p.Spec.NodeName] += req.Cpu().MilliValue()
		}
	}
	for _, e := range src.Events {
		if e.Reason == "DisruptionTerminating" {
			if prev, ok := b.deleted[e.InvolvedObject.Name]; !ok || eventTime(e).Before(eventTime(prev)) {
				b.deleted[e.InvolvedObject.Name] = e
			}
		}
	}

	decisions := merge(src.Stored, src.Recorded, win)
	r.Decisions = len(decisions)
	for _, d := range decisions {
		r.Rows = append(r.Rows, b.row(d))
	}
	r.Rows = append(r.Rows, b.karpenterAlone()...)
	sort.SliceStable(r.Rows, func(i, j int) bool { return r.Rows[i].First.Before(r.Rows[j].First) })
	r.Totals = b.totals(r.Rows)
	r.Unknown = unknowns(src, win)
	r.Notes = append(append(r.Notes, src.Notes...), w.Notes()...)
	return r, nil
}

// merged is a decision with when it was made in the window.
type merged struct {
	d           shadow.Decision
	first, last time.Time
	seen        int
}

// merge folds the records of each decision (its key) from every source
// into one, keeping those made in the window.
func merge(stored []shadow.Entry, recorded []shadow.Decision, win Window) []merged {
	byKey := map[string]*merged{}
	var order []string
	add := func(d shadow.Decision, first, last time.Time, seen int) {
		k := d.Key()
		m, ok := byKey[k]
		if !ok {
			m = &merged{d: d, first: first, last: last}
			byKey[k] = m
			order = append(order, k)
		}
		if first.Before(m.first) {
			m.first = first
		}
		if last.After(m.last) {
			m.last, m.d = last, d
		}
		m.seen = max(m.seen, seen)
	}
	for _, e := range stored {
		add(e.Decision, e.First, e.Last, e.Seen)
	}
	at := map[string]map[time.Time]bool{}
	for _, d := range recorded {
		add(d, d.At, d.At, 0)
		if at[d.Key()] == nil {
			at[d.Key()] = map[time.Time]bool{}
		}
		at[d.Key()][d.At] = true
	}
	var out []merged
	for _, k := range order {
		m := byKey[k]
		m.seen = max(m.seen, len(at[k]))
		if m.last.Before(win.Since) || m.first.After(win.Until) {
			continue
		}
		if m.first.Before(win.Since) {
			m.first = win.Since
		}
		out = append(out, *m)
	}
	return out
}

type builder struct {
	w       *whatif.World
	win     Window
	claims  map[string]*karpv1.NodeClaim
	byNode  map[string]*karpv1.NodeClaim
	pods    map[string]*corev1.Pod
	deleted map[string]corev1.Event // DisruptionTerminating by NodeClaim
	// matched are Karpenter's NodeClaims some row already accounts for.
	matched map[string]bool
	// scheduled: the node kube-scheduler bound a pod to, by its Events.
	scheduled map[string]string
	// cpuOnNode is the CPU (millicores) the pods bound to each node
	// request, DaemonSets' included: what prices a burstable node's credits.
	cpuOnNode map[string]int64
}

func (b *builder) row(m merged) Row {
	d := m.d
	r := Row{First: m.first, Last: m.last, Seen: m.seen, Kind: d.Kind, NodePool: d.NodePool, Pods: d.Pods, PodCount: d.PodCount, Decision: &d}
	if d.Kind == shadow.KindLaunch {
		r.Karpless = Side{Action: launchText(d), PerHour: launchPrice(d)}
		r.Karpenter, r.Standing = b.launchedFor(d, m.first)
		return r
	}
	if len(d.Candidates) == 0 && d.NodeClaim != "" {
		// A record written by hand or by an older version: the one
		// NodeClaim it is about.
		d.Candidates = []shadow.Node{{NodeClaim: d.NodeClaim, Node: d.Node, NodePool: d.NodePool, Price: d.PriceBefore}}
	}
	r.Karpless = Side{Action: disruptionText(d), PerHour: d.PriceAfter}
	r.Karpenter, r.Standing = b.candidates(d)
	return r
}

// launchedFor is what Karpenter did with the pods of a launch decision:
// the NodeClaims they run on (or are bound to) now, those created around
// or after the decision counted as its launches.
func (b *builder) launchedFor(d shadow.Decision, first time.Time) (Side, bool) {
	var s Side
	var existing, pending, gone []string
	claims := map[string]bool{}
	for _, name := range d.Pods {
		p := b.pods[name]
		node := ""
		if p != nil {
			node = p.Spec.NodeName
		} else if n, ok := b.scheduled[name]; ok && b.byNode[n] != nil {
			// Deleted since; kube-scheduler's Event says where it ran.
			node = n
		}
		switch {
		case p == nil && node == "":
			gone = append(gone, name)
		case node == "":
			pending = append(pending, name)
		default:
			nc := b.byNode[node]
			switch {
			case nc == nil:
				existing = append(existing, node+" (not a NodeClaim's)")
			case nc.CreationTimestamp.Time.Before(first.Add(-recent)):
				existing = append(existing, nc.Name)
			default:
				claims[nc.Name] = true
			}
		}
	}
	var parts []string
	for _, name := range sortedKeys(claims) {
		nc := b.claims[name]
		price, ok := b.claimPrice(nc)
		s.PerHour += price
		s.Unpriced = s.Unpriced || !ok
		s.NodeClaims = append(s.NodeClaims, name)
		b.matched[name] = true
		parts = append(parts, "launched "+claimText(nc, price, ok))
	}
	if len(existing) > 0 {
		parts = append(parts, "placed on existing "+strings.Join(uniq(existing), ", "))
	}
	if len(pending) > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) still pending", len(pending)))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) gone (cannot tell where they ran)", len(gone)))
		s.Unpriced = true
	}
	if d.PodCount > len(d.Pods) {
		parts = append(parts, fmt.Sprintf("%d more pod(s) not recorded", d.PodCount-len(d.Pods)))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing for these pods")
	}
	s.Action = strings.Join(parts, "; ")
	standing := len(claims) > 0 && len(existing)+len(pending)+len(gone) == 0 && d.PodCount == len(d.Pods) && !s.Unpriced
	return s, standing
}

// candidates is what Karpenter did with the nodes of a disruption
// decision: kept (their $/h still paid), deleting, or gone.
func (b *builder) candidates(d shadow.Decision) (Side, bool) {
	var s Side
	var parts []string
	kept := 0
	for _, c := range d.Candidates {
		nc := b.claims[c.NodeClaim]
		switch {
		case nc == nil:
			if e, ok := b.deleted[c.NodeClaim]; ok {
				parts = append(parts, fmt.Sprintf("deleted %s at %s (%s)", c.NodeClaim, eventTime(e).UTC().Format("15:04"), e.Message))
			} else {
				parts = append(parts, fmt.Sprintf("%s is gone (deleted; when and why are not in the cluster any more)", c.NodeClaim))
			}
		case nc.DeletionTimestamp != nil:
			parts = append(parts, fmt.Sprintf("deleting %s since %s", c.NodeClaim, nc.DeletionTimestamp.UTC().Format("15:04")))
		default:
			price, ok := b.claimPrice(nc)
			if !ok {
				price, s.Unpriced = c.Price, true
			}
			s.PerHour += price
			s.NodeClaims = append(s.NodeClaims, nc.Name)
			parts = append(parts, "kept "+claimText(nc, price, ok || c.Price > 0))
			kept++
		}
		b.matched[c.NodeClaim] = true
	}
	s.Action = strings.Join(parts, "; ")
	return s, kept > 0 && kept == len(d.Candidates)
}

// karpenterAlone are what Karpenter did in the window that no decision
// of Karpless's accounts for: NodeClaims it created and ones it deleted.
func (b *builder) karpenterAlone() []Row {
	var out []Row
	for _, name := range sortedKeys(b.claims) {
		nc := b.claims[name]
		if b.matched[name] {
			continue
		}
		if created := nc.CreationTimestamp.Time; b.win.Contains(created) {
			price, ok := b.claimPrice(nc)
			out = append(out, Row{First: created, Last: created, Kind: shadow.KindLaunch, NodePool: nc.Labels[wellknown.NodePoolLabel],
				Karpless:  Side{Action: "no decision: Karpless did not launch for these pods (placed them elsewhere, or decided before the window)"},
				Karpenter: Side{Action: "launched " + claimText(nc, price, ok), PerHour: price, NodeClaims: []string{name}, Unpriced: !ok}})
		}
		if nc.DeletionTimestamp != nil && b.win.Contains(nc.DeletionTimestamp.Time) {
			price, ok := b.claimPrice(nc)
			why := "deleted"
			if e, found := b.deleted[name]; found {
				why = e.Message
			}
			out = append(out, Row{First: nc.DeletionTimestamp.Time, Last: nc.DeletionTimestamp.Time, Kind: "delete", NodePool: nc.Labels[wellknown.NodePoolLabel],
				Karpless:  Side{Action: "no decision: Karpless would have kept " + claimText(nc, price, ok), PerHour: price, Unpriced: !ok},
				Karpenter: Side{Action: fmt.Sprintf("deleting %s: %s", name, why), NodeClaims: []string{name}}})
		}
	}
	for _, name := range sortedKeys(b.deleted) {
		e := b.deleted[name]
		if b.claims[name] != nil || b.matched[name] || !b.win.Contains(eventTime(e)) {
			continue
		}
		out = append(out, Row{First: eventTime(e), Last: eventTime(e), Kind: "delete",
			Karpless:  Side{Action: "no decision: Karpless would have kept " + name + " (its type and price are gone with it)", Unpriced: true},
			Karpenter: Side{Action: fmt.Sprintf("deleted %s: %s", name, e.Message), NodeClaims: []string{name}}})
	}
	return out
}

func (b *builder) totals(rows []Row) Totals {
	var t Totals
	seen := map[string]bool{}
	for _, r := range rows {
		switch {
		case r.Kind == shadow.KindLaunch && r.Decision != nil:
			t.KarplessLaunches += r.Karpless.PerHour
			for _, name := range r.Karpenter.NodeClaims {
				if !seen[name] {
					seen[name] = true
					if p, ok := b.claimPrice(b.claims[name]); ok {
						t.KarpenterLaunches += p
					}
				}
			}
		case r.Decision != nil:
			t.KarplessDisruptions += r.Karpless.PerHour
			t.KarpenterDisruptions += r.Karpenter.PerHour
		}
	}
	for _, nc := range b.claims {
		if nc.DeletionTimestamp == nil {
			p, _ := b.claimPrice(nc)
			t.Fleet += p
		}
	}
	// Karpless's standing decisions, the latest first, each NodeClaim of
	// Karpenter's counted once: a launch whose pods all still run on
	// Karpenter's claims, a disruption whose candidates Karpenter keeps.
	t.WithKarpless = t.Fleet
	counted := map[string]bool{}
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if !r.Standing {
			continue
		}
		dup := false
		for _, name := range r.Karpenter.NodeClaims {
			dup = dup || counted[name]
		}
		if dup {
			continue
		}
		for _, name := range r.Karpenter.NodeClaims {
			counted[name] = true
		}
		t.WithKarpless += r.Karpless.PerHour - r.Karpenter.PerHour
	}
	return t
}

// claimPrice is a NodeClaim's $/h as Karpless prices it (false: unknown):
// its offering, and the surplus CPU credits of a burstable type above its
// baseline.
func (b *builder) claimPrice(nc *karpv1.NodeClaim) (float64, bool) {
	if nc == nil {
		return 0, false
	}
	class := ""
	if nc.Spec.NodeClassRef != nil {
		class = nc.Spec.NodeClassRef.Name
	}
	price, ok := b.w.Price(class, nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.ZoneLabel], nc.Labels[wellknown.CapacityTypeLabel])
	if !ok {
		return 0, false
	}
	// A burstable node above its baseline also pays surplus CPU credits:
	// its labels name the family and size, its capacity the vCPUs.
	it := &scheduling.InstanceType{Name: nc.Labels[wellknown.InstanceTypeLabel], Labels: nc.Labels, Capacity: nc.Status.Capacity}
	return price + scheduling.CreditHourly(it, b.cpuOnNode[nc.Status.NodeName]), true
}

func claimText(nc *karpv1.NodeClaim, price float64, priced bool) string {
	t, ct, z := nc.Labels[wellknown.InstanceTypeLabel], nc.Labels[wellknown.CapacityTypeLabel], nc.Labels[wellknown.ZoneLabel]
	if t == "" {
		t = "type not chosen yet"
	}
	s := fmt.Sprintf("%s (%s %s %s)", nc.Name, t, ct, z)
	if priced {
		s += fmt.Sprintf(" $%.4f/h", price)
	}
	return strings.Join(strings.Fields(s), " ")
}

func launchText(d shadow.Decision) string {
	what := fmt.Sprintf("%d nodeclaim(s)", d.Claims())
	if d.Offering != nil {
		what = fmt.Sprintf("%d× %s %s %s", d.Claims(), d.Offering.InstanceType, d.Offering.CapacityType, d.Offering.Zone)
	}
	return fmt.Sprintf("launch %s for %s", what, podsText(d))
}

// podsText names a decision's pods, short: "web-0", "3 pods (web-0,
// web-1, +1)".
func podsText(d shadow.Decision) string {
	var short []string
	for _, p := range d.Pods {
		_, name, _ := strings.Cut(p, "/")
		short = append(short, name)
	}
	switch {
	case d.PodCount == 0:
		return "no pod"
	case d.PodCount == 1 && len(short) == 1:
		return short[0]
	case len(short) > 2:
		return fmt.Sprintf("%d pods (%s, +%d)", d.PodCount, strings.Join(short[:2], ", "), d.PodCount-2)
	}
	return fmt.Sprintf("%d pods (%s)", d.PodCount, strings.Join(short, ", "))
}

func launchPrice(d shadow.Decision) float64 {
	if d.Offering == nil {
		return 0
	}
	return (d.Offering.Price + d.Offering.Credits) * float64(d.Claims())
}

func disruptionText(d shadow.Decision) string {
	names := make([]string, 0, len(d.Candidates))
	for _, c := range d.Candidates {
		names = append(names, c.NodeClaim)
	}
	what := d.Kind
	if d.Method != "" {
		what = d.Method
	}
	s := fmt.Sprintf("delete %s (%s, $%.4f/h)", strings.Join(names, ", "), what, d.PriceBefore)
	if len(d.Replacements) > 0 {
		var rs []string
		for _, r := range d.Replacements {
			if r.Offering != nil {
				rs = append(rs, fmt.Sprintf("%s %s", r.Offering.InstanceType, r.Offering.CapacityType))
			}
		}
		s += " for " + strings.Join(rs, ", ")
	}
	if d.Reason != "" && d.Kind != shadow.KindConsolidate {
		s += ": " + d.Reason // a consolidation's method says it
	}
	return s
}

// unknowns say what the report cannot know.
func unknowns(src *Sources, win Window) []string {
	out := []string{
		"Karpless's decisions were each made on the cluster as Karpenter shaped it: after a decision it did not carry out, it decides again on what Karpenter did, so the rows are not one alternative history but Karpless's answer at each moment.",
		"NodeClaims Karpenter created and deleted are known only while they exist: one deleted and gone since is seen only through Karpenter's Events about it, which the API server keeps an hour (--event-ttl); its type and price are gone with it.",
		"Decision Events also live an hour; older decisions come from the functions' ConfigMap stores (kept 8 days) and from log files given with --logs (CloudWatch Logs is not read).",
		"Pods deleted since a decision are matched to where they ran only through kube-scheduler's Scheduled Events, which also live an hour.",
		"Prices are today's (the pricing book and the catalog), not those at the time of each decision; a spot price is the book's, else an estimate.",
	}
	if src.FromStore == 0 && src.FromEvents == 0 && src.FromLogs == 0 {
		out = append(out, "No decision record was found: is Karpless deployed with -c mode=shadow, in this namespace, and has it run?")
	}
	if win.Until.Sub(win.Since) > shadow.StoreRetention {
		out = append(out, fmt.Sprintf("The window starts more than %s ago, before what the stores keep.", shadow.StoreRetention))
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
