// Package migrate judges whether a cluster that Karpenter runs can be
// switched to Karpless without losing its fleet: pure checks over what
// `karpless migrate check` read from the cluster and from AWS (Helm's
// stored releases, the CRDs, Karpenter's Deployment, finalizers, the node
// role's access entry, Karpenter's IAM policies and interruption queue).
// Each check says OK, WARN or FAIL and what to do; the bootstrap function
// uses UnservedStoredVersions to refuse an install that would fail half-way.
//
// Nothing here does I/O: the callers read, these functions judge.
package migrate

import (
	"fmt"
	"io"
	"strings"
)

// Status is a check's verdict.
type Status int

const (
	// OK: nothing to do.
	OK Status = iota
	// Warn: the switch is safe, but something needs doing before or after
	// it (scale Karpenter down, clean up once verified).
	Warn
	// Fail: switching now can lose nodes or fail half-way; fix it first.
	Fail
)

func (s Status) String() string {
	switch s {
	case OK:
		return "OK"
	case Warn:
		return "WARN"
	}
	return "FAIL"
}

// MarshalText writes the status as OK, WARN or FAIL (for -o json).
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Names of the checks, as printed.
const (
	NameHelmKeep       = "helm-keep"
	NameStoredVersions = "stored-versions"
	NameConversion     = "conversion"
	NameKarpenter      = "karpenter"
	NameFinalizers     = "finalizers"
	NameAccessEntry    = "access-entry"
	NameIAM            = "karpenter-iam"
	NameQueue          = "karpenter-queue"
)

// Result is one verdict on one subject.
type Result struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Subject string `json:"subject"`
	// Detail is what was found and what it means.
	Detail string `json:"detail"`
	// Do are the steps to take, in order (commands included).
	Do []string `json:"do,omitempty"`
}

// Report is every result of a run, in check order.
type Report struct {
	Source  string   `json:"source"`
	Results []Result `json:"results"`
}

// Count returns how many results have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, x := range r.Results {
		if x.Status == s {
			n++
		}
	}
	return n
}

// Failed reports whether any check failed.
func (r Report) Failed() bool { return r.Count(Fail) > 0 }

// WriteText prints one block per result: the status, the check and its
// subject, the detail, then what to do.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Source != "" {
		fmt.Fprintf(&b, "Switching %s from Karpenter to Karpless:\n\n", r.Source)
	}
	for _, x := range r.Results {
		fmt.Fprintf(&b, "%-4s  %-16s %s\n", x.Status, x.Check, x.Subject)
		writeIndented(&b, "      ", x.Detail)
		for _, d := range x.Do {
			writeIndented(&b, "      - ", d)
		}
	}
	fmt.Fprintf(&b, "\n%d FAIL, %d WARN, %d OK.", r.Count(Fail), r.Count(Warn), r.Count(OK))
	switch {
	case r.Failed():
		b.WriteString(" Fix every FAIL before you switch; run the check again (docs/migration.md).\n")
	case r.Count(Warn) > 0:
		b.WriteString(" Nothing blocks the switch; read each WARN (docs/migration.md).\n")
	default:
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeIndented writes text with prefix before its first line and as many
// spaces before the following ones.
func writeIndented(b *strings.Builder, prefix, text string) {
	if text == "" {
		return
	}
	pad := strings.Repeat(" ", len(prefix))
	for i, line := range strings.Split(text, "\n") {
		if i == 0 {
			b.WriteString(prefix)
		} else {
			b.WriteString(pad)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

// plural is "1 NodeClaim", "2 NodeClaims", "2 EC2NodeClasses".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %s", n, plurals(word))
}

// plurals is the plural of an English noun or kind.
func plurals(word string) string {
	switch {
	case strings.HasSuffix(word, "s"):
		return word + "es"
	case strings.HasSuffix(word, "y"):
		return strings.TrimSuffix(word, "y") + "ies"
	}
	return word + "s"
}
