// Package docscheck reads the repository's documentation for tests that
// hold it to the code: its pages, their tables and their code.
package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Root is the repository's root: the nearest folder above the test's
// working directory that holds go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}

// Page is one Markdown file, by its path from the root.
type Page struct {
	Path string
	Text string
}

// Pages are README.md and docs/*.md, sorted by path.
func Pages(t testing.TB) []Page {
	t.Helper()
	root := Root(t)
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(root, "README.md"))
	sort.Strings(paths)
	var out []Page
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, Page{Path: filepath.ToSlash(rel), Text: string(b)})
	}
	return out
}

// Read is one page's text, by its path from the root.
func Read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Table is the first Markdown table after the line that starts with
// from (a heading or a marker comment): its rows without the header and
// the separator, each cell trimmed. It fails the test if there is none.
func Table(t testing.TB, text, from string) [][]string {
	t.Helper()
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, from) {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("no line starting %q", from)
	}
	var rows [][]string
	in := false
	for _, l := range lines[start+1:] {
		if !strings.HasPrefix(l, "|") {
			if in {
				break
			}
			continue
		}
		if !in {
			in = true
			continue // the header
		}
		cells := splitRow(l)
		if len(cells) > 0 && strings.Trim(cells[0], "-: ") == "" {
			continue // the separator
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("no table after %q", from)
	}
	return rows
}

// splitRow splits a table row on the pipes outside code spans.
func splitRow(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range l {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// Backticked are the code spans of s, without their backticks.
func Backticked(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// Code is the code of a page: each fenced block's text and each code span
// outside them, in order.
func Code(text string) []string {
	var out []string
	var block []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if fenced {
				out = append(out, strings.Join(block, "\n"))
				block = nil
			}
			fenced = !fenced
			continue
		}
		if fenced {
			block = append(block, l)
			continue
		}
		out = append(out, Backticked(l)...)
	}
	return out
}
