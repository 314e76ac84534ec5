package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/karpless/karpless/internal/docscheck"
)

// contextKeyUse finds a context key where the docs pass one: -c key=value
// (on a command line, in CDK_ARGS or in prose).
var contextKeyUse = regexp.MustCompile(`(?:^|[\s"(` + "`" + `])-c ([A-Za-z][A-Za-z0-9]*)=`)

// globalCDK is a CDK CLI command with arguments run as a bare `cdk`: the
// global CLI deploy.md warns against (npm's latest cannot read this app's
// cloud assembly); the docs run the pinned one, or make.
var globalCDK = regexp.MustCompile(`(?m)^\s*(?:\$\s*)?(?:npx\s+(?:aws-)?)?cdk\s+(?:deploy|destroy|synth|bootstrap|diff|list|ls)\s+\S`)

// TestDocsRunThePinnedCDK: no page tells the reader to run a global cdk.
func TestDocsRunThePinnedCDK(t *testing.T) {
	for _, p := range docscheck.Pages(t) {
		for _, code := range docscheck.Code(p.Text) {
			if m := globalCDK.FindString(code); m != "" {
				t.Errorf("%s runs a global CDK CLI: %q (use .tools/cdk/node_modules/.bin/cdk or make)", p.Path, strings.TrimSpace(m))
			}
		}
	}
}

// TestContextKeysDocumented holds the docs to the keys the app reads: every
// key a page passes with -c, sets in a cdk.json example or lists in
// deploy.md's "Context keys" table exists, and every key the app reads is
// in that table.
func TestContextKeysDocumented(t *testing.T) {
	cfg, err := readConfig(t, map[string]interface{}{"clusterName": "prod"})
	if err != nil {
		t.Fatal(err)
	}
	known := cfg.keys
	if len(known) < 20 || !slices.Contains(known, "clusterName") {
		t.Fatalf("the app read only %v", known)
	}

	table := map[string]bool{}
	for _, row := range docscheck.Table(t, docscheck.Read(t, "docs/deploy.md"), "### Context keys") {
		for _, k := range docscheck.Backticked(row[0]) {
			table[k] = true
			if !slices.Contains(known, k) {
				t.Errorf("docs/deploy.md's Context keys table lists %s, which the app does not read", k)
			}
		}
	}
	for _, k := range known {
		if !table[k] {
			t.Errorf("context key %s is not in docs/deploy.md's Context keys table", k)
		}
	}

	for _, p := range docscheck.Pages(t) {
		for _, m := range contextKeyUse.FindAllStringSubmatch(p.Text, -1) {
			if m[1] != "key" && !slices.Contains(known, m[1]) { // -c key=value is the syntax
				t.Errorf("%s passes -c %s=, which is not a context key", p.Path, m[1])
			}
		}
		for _, code := range docscheck.Code(p.Text) {
			code = strings.TrimSpace(code)
			if !strings.HasPrefix(code, "{") || !strings.Contains(code, `"context"`) {
				continue
			}
			var doc struct {
				Context map[string]any `json:"context"`
			}
			if err := json.Unmarshal([]byte(code), &doc); err != nil {
				t.Errorf("%s: a cdk.json example does not parse: %v", p.Path, err)
				continue
			}
			for k := range doc.Context {
				if !slices.Contains(known, k) {
					t.Errorf("%s: a cdk.json example sets %s, which is not a context key", p.Path, k)
				}
			}
		}
	}
}
