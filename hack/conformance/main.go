// Command conformance tallies the ported Karpenter cases from `go test -json`
// on stdin, per source suite, and checks or writes docs/conformance.md's table.
//
//	go test -json -run Conformance ./... | go run ./hack/conformance [-doc docs/conformance.md] [-write]
//
// It prints `conformance <suite>: passed=P differs=D total=T` per suite and
// last `conformance: passed=P differs=D total=T`, and exits 1 when a case
// failed or did not run, or when the document's table or its list of
// deliberate differences (each case's Differs text) is not this run's.
//
// With -echo it also prints the run's text as go test would without
// -json: the packages' lines and build output, and each failed test's
// output (-echo all: every test's, as -v). make test runs the packages of
// the ported cases this way, once, rather than again for the table.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/karpless/karpless/shared/core/conformance"
)

// event is a line of `go test -json`.
type event struct {
	Action, Package, Test, Output string
}

// echoer prints a go test -json stream as go test's own text: package
// lines and build output at once, a test's output when it fails (all of
// it at once with all).
type echoer struct {
	w    io.Writer
	all  bool
	held map[string][]string // a running test's output, by package and test
}

// flush prints the output held for tests whose key starts with prefix
// ("" for every one): tests a package's failure or the stream's end left
// without an outcome.
func (e *echoer) flush(prefix string) {
	if e == nil {
		return
	}
	keys := make([]string, 0, len(e.held))
	for k := range e.held {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprint(e.w, strings.Join(e.held[k], ""))
		delete(e.held, k)
	}
}

// line takes one line of the stream: an event, or (ok false) text that is
// not one, printed as it is.
func (e *echoer) line(raw []byte, ev event, ok bool) {
	if e == nil {
		return
	}
	switch {
	case !ok:
		fmt.Fprintln(e.w, string(raw))
	case ev.Test == "" || e.all:
		if ev.Test == "" && (ev.Action == "fail" || strings.HasPrefix(ev.Output, "FAIL")) {
			e.flush(ev.Package + " ") // tests that never ended: a panic, a timeout
		}
		// go test prints a package's PASS line only with -v.
		if ev.Output != "" && (e.all || ev.Output != "PASS\n") {
			fmt.Fprint(e.w, ev.Output)
		}
	default:
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			e.held[key] = append(e.held[key], ev.Output)
		case "fail":
			fmt.Fprint(e.w, strings.Join(e.held[key], ""))
			delete(e.held, key)
		case "pass", "skip":
			delete(e.held, key)
		}
	}
}

type tally struct{ passed, differs, failed, other int }

func (t tally) total() int { return t.passed + t.differs + t.failed + t.other }

// The document's generated parts: the table, and the list of deliberate
// differences.
var (
	tableMarks   = [2]string{"<!-- conformance-table:begin -->\n", "<!-- conformance-table:end -->"}
	differsMarks = [2]string{"<!-- conformance-differs:begin -->\n", "<!-- conformance-differs:end -->"}
)

// difference is a case Karpless deliberately does otherwise, and why.
type difference struct{ suite, spec, why string }

func main() {
	doc := flag.String("doc", "", "the document whose table must be this run's (docs/conformance.md)")
	write := flag.Bool("write", false, "write the table into -doc instead of checking it")
	echo := flag.String("echo", "", "also print the run's text: failures (the packages' lines and failed tests' output) or all")
	flag.Parse()
	var e *echoer
	switch *echo {
	case "":
	case "failures", "all":
		e = &echoer{w: os.Stdout, all: *echo == "all", held: map[string][]string{}}
	default:
		fmt.Fprintf(os.Stderr, "conformance: -echo %q: want failures or all\n", *echo)
		os.Exit(2)
	}
	suites, diffs, problems, err := read(os.Stdin, e)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(suites))
	for s := range suites {
		names = append(names, s)
	}
	sort.Strings(names)
	var all tally
	for _, s := range names {
		t := suites[s]
		fmt.Printf("conformance %s: passed=%d differs=%d total=%d\n", s, t.passed, t.differs, t.total())
		all.passed, all.differs, all.failed, all.other = all.passed+t.passed, all.differs+t.differs, all.failed+t.failed, all.other+t.other
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	rc := 0
	if len(problems) > 0 {
		rc = 1
	}
	if *doc != "" {
		for _, part := range []struct {
			marks [2]string
			text  string
		}{{tableMarks, render(names, suites, all)}, {differsMarks, renderDiffers(diffs)}} {
			if err := syncDoc(*doc, part.marks, part.text, *write); err != nil {
				fmt.Fprintln(os.Stderr, err)
				rc = 1
			}
		}
	}
	fmt.Printf("conformance: passed=%d differs=%d total=%d\n", all.passed, all.differs, all.total())
	os.Exit(rc)
}

// read tallies the cases' outcomes: a case is the subtest under a
// SuitePrefix subtest (deeper subtests belong to it).
func read(r io.Reader, e *echoer) (map[string]tally, []difference, []string, error) {
	suites := map[string]tally{}
	differs := map[string]string{}
	var diffs []difference
	var problems []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.line(sc.Bytes(), ev, false)
			continue // a build error or a line not of go test -json
		}
		e.line(sc.Bytes(), ev, true)
		suite, spec, ok := split(ev.Test)
		if !ok {
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			if _, msg, ok := strings.Cut(ev.Output, conformance.DiffersPrefix); ok {
				differs[key] = strings.TrimSpace(msg)
			}
		case "pass", "fail", "skip":
			t := suites[suite]
			switch {
			case ev.Action == "pass":
				t.passed++
			case ev.Action == "fail":
				t.failed++
				problems = append(problems, fmt.Sprintf("conformance %s: FAILED %s (%s)", suite, spec, ev.Test))
			case differs[key] != "":
				t.differs++
				title, why, ok := strings.Cut(differs[key], conformance.SpecSep)
				if !ok {
					title, why = spec, differs[key]
				}
				diffs = append(diffs, difference{suite, title, why})
			default:
				t.other++
				problems = append(problems, fmt.Sprintf("conformance %s: did not run %s (%s)", suite, spec, ev.Test))
			}
			suites[suite] = t
		}
	}
	e.flush("")
	return suites, diffs, problems, sc.Err()
}

// split finds the suite and the case in a test name, or reports that the
// test is not a ported case (or is a subtest inside one).
func split(test string) (suite, spec string, ok bool) {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, conformance.SuitePrefix) && i+2 == len(parts) {
			// go test numbers a repeated subtest name: suite#01.
			p, _, _ = strings.Cut(p, "#")
			return strings.ReplaceAll(strings.TrimPrefix(p, conformance.SuitePrefix), ".", "/"), parts[i+1], true
		}
	}
	return "", "", false
}

func render(names []string, suites map[string]tally, all tally) string {
	var b strings.Builder
	b.WriteString("| source suite | passed | differs | total |\n|---|---|---|---|\n")
	for _, s := range names {
		t := suites[s]
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d |\n", s, t.passed, t.differs, t.total())
	}
	fmt.Fprintf(&b, "| **all** | **%d** | **%d** | **%d** |\n", all.passed, all.differs, all.total())
	return b.String()
}

// renderDiffers lists the deliberate differences by suite and case.
func renderDiffers(diffs []difference) string {
	if len(diffs) == 0 {
		return "None.\n"
	}
	sort.Slice(diffs, func(i, j int) bool {
		if diffs[i].suite != diffs[j].suite {
			return diffs[i].suite < diffs[j].suite
		}
		return diffs[i].spec < diffs[j].spec
	})
	var b strings.Builder
	for i, d := range diffs {
		if i == 0 || diffs[i-1].suite != d.suite {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "### `%s`\n\n", d.suite)
		}
		fmt.Fprintf(&b, "- *%s*: %s\n", d.spec, d.why)
	}
	return b.String()
}

// syncDoc checks (or writes) the text between the marks of path.
func syncDoc(path string, marks [2]string, table string, write bool) error {
	begin, end := marks[0], marks[1]
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the %q ... %q markers", path, strings.TrimSpace(begin), end)
	}
	got := doc[i+len(begin) : j]
	if got == table {
		return nil
	}
	if write {
		return os.WriteFile(path, []byte(doc[:i+len(begin)]+table+doc[j:]), 0o644)
	}
	return fmt.Errorf("%s is stale between %s and %s: run make conformance-doc; this run's:\n%s", path, strings.TrimSpace(begin), end, table)
}
