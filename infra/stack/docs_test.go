package stack

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/karpless/karpless/internal/docscheck"
	"github.com/karpless/karpless/shared/apis/crds"
	"github.com/karpless/karpless/shared/function/record"
	"github.com/karpless/karpless/shared/ticks/bootstrap"
)

// numberWords are the counts the docs spell out.
var numberWords = map[string]int{
	"one": 1, "two": 2, "both": 2, "three": 3, "four": 4, "five": 5, "six": 6,
	"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}

const countRE = `(\d+|one|two|both|three|four|five|six|seven|eight|nine|ten|eleven|twelve)`

// TestDocsCounts holds the counts the docs state to the code: the default
// stack's Lambda functions, interruption rules and alarms, the state
// ConfigMaps and CRDs the bootstrap installs, the metrics the alarms read
// at the minimal level. Each phrase names what it counts, so a new
// function, rule, ConfigMap, CRD or alarmed metric fails this test until
// the docs say so.
func TestDocsCounts(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	counts := []struct {
		what   string
		phrase *regexp.Regexp
		want   int
	}{
		{"Lambda functions of the default stack", regexp.MustCompile(`(?i)\b` + countRE + `\s+Lambda\s+functions\b`), len(st.Functions)},
		{"rules feeding the interruption queue", regexp.MustCompile(`(?i)\b` + countRE + `\s+(?:EventBridge\s+)?rules\b`), len(st.InterruptionRules)},
		{"alarms of the default stack", regexp.MustCompile(`(?i)(?:stack creates|stack's|the)\s+` + countRE + `\s+alarms\b`), len(st.Alarms)},
		{"state ConfigMaps the bootstrap creates", regexp.MustCompile(`(?i)\b` + countRE + `\s+(?:state\s+)?ConfigMaps\b`), len(bootstrap.StateConfigMaps())},
		{"CRDs the bootstrap installs", regexp.MustCompile(`(?i)\b` + countRE + `\s+CRDs\b`), len(all)},
		{"metrics the alarms read (record.AlarmedMetrics)", regexp.MustCompile(`(?i)\b` + countRE + `\s+(?:metrics\s+)?(?:the\s+alarms?\s+reads?|an\s+alarm\s+reads)\b`), len(record.AlarmedMetrics())},
	}
	seen := map[string]int{}
	for _, p := range docscheck.Pages(t) {
		if p.Path == "docs/conformance.md" {
			continue // generated from Karpenter's test names
		}
		for _, c := range counts {
			for _, m := range c.phrase.FindAllStringSubmatch(p.Text, -1) {
				seen[c.what]++
				n, ok := numberWords[strings.ToLower(m[1])]
				if !ok {
					n, _ = strconv.Atoi(m[1])
				}
				if n != c.want {
					t.Errorf("%s says %q: there are %d %s", p.Path, strings.Join(strings.Fields(m[0]), " "), c.want, c.what)
				}
			}
		}
	}
	// The phrases must keep matching something, or the test would pass on
	// docs that no longer state the counts it guards.
	for _, c := range counts {
		if seen[c.what] == 0 {
			t.Errorf("no page states the number of %s any more: update the phrase", c.what)
		}
	}
}
