package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEcho: go test's own text comes out of its -json stream: package
// lines and build output always, a test's output only when it fails
// (or never ends), everything with all.
func TestEcho(t *testing.T) {
	ev := func(action, pkg, test, out string) string {
		b, err := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	stream := strings.Join([]string{
		ev("start", "p", "", ""),
		ev("output", "p", "TestOK", "=== RUN   TestOK\n"),
		ev("output", "p", "TestOK", "ok-noise\n"),
		ev("pass", "p", "TestOK", ""),
		ev("output", "p", "TestBad", "=== RUN   TestBad\n"),
		ev("output", "p", "TestBad", "    x_test.go:9: boom\n"),
		ev("output", "p", "TestBad", "--- FAIL: TestBad (0.01s)\n"),
		ev("fail", "p", "TestBad", ""),
		ev("output", "p", "", "FAIL\n"),
		ev("output", "q", "TestHung", "=== RUN   TestHung\n"),
		ev("output", "q", "TestHung", "panic: test timed out\n"),
		ev("output", "q", "", "FAIL\tq\t60.0s\n"),
		ev("fail", "q", "", ""),
		`# github.com/x/r`,
		ev("output", "r", "TestLeft", "left running\n"),
		ev("output", "s", "", "ok  \ts\t0.1s\n"),
	}, "\n") + "\n"
	for _, tc := range []struct {
		all       bool
		want, not []string
	}{
		{all: false,
			want: []string{"    x_test.go:9: boom\n--- FAIL: TestBad (0.01s)\nFAIL\n", "panic: test timed out\nFAIL\tq\t60.0s\n", "# github.com/x/r\n", "left running\n", "ok  \ts\t0.1s\n"},
			not:  []string{"ok-noise", "=== RUN   TestOK"}},
		{all: true, want: []string{"=== RUN   TestOK\nok-noise\n", "boom", "left running", "ok  \ts\t0.1s"}},
	} {
		var out strings.Builder
		e := &echoer{w: &out, all: tc.all, held: map[string][]string{}}
		if _, _, _, err := read(strings.NewReader(stream), e); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("all=%v: output lacks %q:\n%s", tc.all, w, out.String())
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("all=%v: output has %q:\n%s", tc.all, n, out.String())
			}
		}
	}
}

// TestNoEcho: without -echo (a nil echoer) nothing is printed and the
// stream is still read.
func TestNoEcho(t *testing.T) {
	in := `{"Action":"pass","Package":"p","Test":"TestConformanceX/Suite:a.b/case one"}` + "\n"
	var e *echoer
	e.line(nil, event{}, false)
	e.flush("")
	if _, _, _, err := read(strings.NewReader(in), nil); err != nil {
		t.Fatal(err)
	}
}
