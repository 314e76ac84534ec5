package deploy

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestGaps(t *testing.T) {
	w, r := "kube PATCH /apis/karpenter.sh/v1/nodeclaims/a", "aws DescribeInstances"
	for _, tc := range []struct {
		name  string
		calls []string
		want  []Gap
	}{
		{"none", nil, nil},
		{"one write", []string{w}, []Gap{{At: 1}, {At: 1, After: true}}},
		{"writes", []string{w, w, w}, []Gap{{At: 1}, {At: 2}, {At: 3}, {At: 3, After: true}}},
		{"reads only", []string{r, "kube GET /api/v1/nodes"}, []Gap{{At: 1}}},
		// Before the reads, after each write; the reads after a write
		// and the trailing ones add nothing.
		{"mixed", []string{r, r, w, r, "aws GetProducts", w, "aws CreateFleet", r},
			[]Gap{{At: 1}, {At: 4}, {At: 7}, {At: 8}}},
	} {
		if got := Gaps(tc.calls); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Gaps = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsRead(t *testing.T) {
	for call, want := range map[string]bool{
		"kube GET /api/v1/pods": true, "kube LIST": false, "kube POST /api/v1/namespaces/default/events": false,
		"kube PUT /api/v1/nodes/n": false, "kube DELETE /apis/karpenter.sh/v1/nodeclaims/a": false,
		"aws DescribeInstanceStatus": true, "aws GetProducts": true, "aws ListInstanceProfiles": true,
		"aws CreateFleet": false, "aws TerminateInstances": false, "aws ReceiveMessage": false,
	} {
		if got := IsRead(call); got != want {
			t.Errorf("IsRead(%q) = %v, want %v", call, got, want)
		}
	}
}

// TestGapsCoverBothSides checks the claim Gaps rests on: for sequential
// calls, dying after call i sends the same calls as dying before call
// i+1, and every gap sends a different number of calls.
func TestGapsCoverBothSides(t *testing.T) {
	const n = 4
	sent := func(k *KillSwitch) int {
		count := 0
		for range n {
			_, err := k.Do("call", func() (*http.Response, error) { count++; return nil, nil })
			if err != nil {
				break
			}
		}
		return count
	}
	seen := map[int]bool{}
	calls := slices.Repeat([]string{"aws CreateTags"}, n)
	for _, g := range Gaps(calls) {
		c := sent(g.Switch())
		if seen[c] {
			t.Errorf("gap %+v sends %d calls, as another gap does", g, c)
		}
		seen[c] = true
	}
	for i := 1; i < n; i++ {
		if a, b := sent(&KillSwitch{At: i, After: true}), sent(&KillSwitch{At: i + 1}); a != b {
			t.Errorf("after call %d sends %d calls, before call %d sends %d", i, a, i+1, b)
		}
	}
	if len(seen) != n+1 {
		t.Errorf("%d distinct gaps, want %d", len(seen), n+1)
	}
}

// A switch with On dies at the first call of that kind, before or after
// it, whatever came first; one whose call never comes never fires.
func TestKillSwitchOn(t *testing.T) {
	ok := func() (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(""))}, nil
	}
	for _, after := range []bool{false, true} {
		k := &KillSwitch{On: "aws CreateFleet", After: after}
		var sent []string
		for _, call := range []string{"kube GET /x", "aws CreateLaunchTemplate", "aws CreateFleet", "kube PATCH /y"} {
			if _, err := k.Do(call, func() (*http.Response, error) { sent = append(sent, call); return ok() }); err != nil {
				break
			}
		}
		want := []string{"kube GET /x", "aws CreateLaunchTemplate"}
		if after {
			want = append(want, "aws CreateFleet")
		}
		if !k.Dead() || strings.Join(sent, ",") != strings.Join(want, ",") || k.At != 3 {
			t.Errorf("after=%v: dead %v, sent %v (at %d), want %v", after, k.Dead(), sent, k.At, want)
		}
	}
	k := &KillSwitch{On: "aws CreateFleet", After: true}
	if _, err := k.Do("kube GET /x", ok); err != nil || k.Dead() {
		t.Errorf("fired without its call: %v", err)
	}
}

// TestLandmark: a kill named by its call lands at that call even when the
// killed invocation takes an extra read or a retry on the way, and a
// landmark of several invocations skips the calls earlier ones made.
func TestLandmark(t *testing.T) {
	norm := func(s string) string { return strings.TrimSuffix(s, "!") }
	baseline := []string{"aws DescribeInstances", "kube PATCH /x", "kube POST /evict", "kube POST /evict", "aws TerminateInstances"}
	send := func() (*http.Response, error) {
		return &http.Response{Body: io.NopCloser(strings.NewReader(""))}, nil
	}
	for _, tc := range []struct {
		name  string
		gap   Gap
		made  []string // the killed invocation's calls, an extra read among them
		want  int      // calls made when it dies (the fatal one included)
		after bool
	}{
		{"the second eviction", Gap{At: 4}, []string{"aws DescribeInstances", "aws DescribeInstances", "kube PATCH /x!", "kube POST /evict", "kube POST /evict", "aws TerminateInstances"}, 5, false},
		{"after the termination", Gap{At: 5, After: true}, []string{"kube PATCH /x", "kube POST /evict", "kube GET /y", "kube POST /evict", "aws TerminateInstances"}, 5, true},
	} {
		l := LandmarkOf(baseline, tc.gap, norm)
		k := l.Switch(norm, 0)
		n := 0 // calls sent
		counted := func() (*http.Response, error) { n++; return send() }
		for _, c := range tc.made {
			if _, err := k.Do(c, counted); err == ErrKilled {
				break
			}
		}
		if !k.Dead() || len(k.Calls()) != tc.want {
			t.Errorf("%s: dead %v after %d calls (%v), want dead after %d", tc.name, k.Dead(), len(k.Calls()), k.Calls(), tc.want)
		}
		if tc.after != (n == tc.want) {
			t.Errorf("%s: the fatal call was applied: %v, want %v", tc.name, n == tc.want, tc.after)
		}
	}
	// Across invocations: the first made one eviction, the second dies at
	// the baseline's second.
	l := LandmarkOf(baseline, Gap{At: 4}, norm)
	first := l.Switch(norm, 0)
	for _, c := range baseline[:3] {
		_, _ = first.Do(c, send)
	}
	if first.Dead() || first.Matched() != 1 {
		t.Fatalf("first invocation: dead %v, matched %d; want alive, 1", first.Dead(), first.Matched())
	}
	second := l.Switch(norm, first.Matched())
	_, err := second.Do("kube POST /evict", send)
	if err != ErrKilled {
		t.Errorf("the second invocation's eviction went through: %v", err)
	}
	if done := l.Switch(norm, 2); done.Match != nil {
		t.Error("a landmark already passed still has a kill point")
	}
}

func TestCallKindAndSample(t *testing.T) {
	for in, want := range map[string]string{
		"aws CreateFleet": "aws CreateFleet",
		"kube PATCH /apis/karpenter.sh/v1/nodeclaims/default-abcde/status":      "kube PATCH nodeclaims/status",
		"kube POST /api/v1/namespaces/web-1/pods/web-5689954fdf-brgsm/eviction": "kube POST pods/eviction",
		"kube POST /api/v1/namespaces/default/events":                           "kube POST events",
		"kube GET /api/v1/nodes?limit=500":                                      "kube GET nodes",
		"kube DELETE /apis/karpenter.sh/v1/nodeclaims/default-x":                "kube DELETE nodeclaims",
		"kube GET /api/v1": "kube GET /api/v1",
	} {
		if got := CallKind(in); got != want {
			t.Errorf("CallKind(%q) = %q, want %q", in, got, want)
		}
	}
	t.Setenv(KillsEnv, "")
	calls := []string{"kube POST /api/v1/namespaces/a/pods/p1/eviction", "kube POST /api/v1/namespaces/a/pods/p2/eviction", "aws TerminateInstances"}
	gaps := []Gap{{At: 1}, {At: 2}, {At: 3}, {At: 3, After: true}}
	if got, want := SampleGaps(calls, gaps), []bool{true, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("sampled %v, want %v (the second eviction is the first's kind)", got, want)
	}
	reads := []string{"kube GET /api/v1/nodes?limit=500", "aws DescribeInstances", "kube PATCH /apis/karpenter.sh/v1/nodeclaims/x", "aws GetQueueAttributes"}
	readGaps := []Gap{{At: 1}, {At: 1, After: true}, {At: 2}, {At: 3}, {At: 3, After: true}, {At: 4}}
	if got, want := SampleGaps(reads, readGaps), []bool{false, false, false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("sampled %v, want %v (only the write's gaps: a kill among reads leaves the state a kill next to a write does)", got, want)
	}
	if got, want := SampleGaps(reads[:2], readGaps[:3]), []bool{true, false, false}; !slices.Equal(got, want) {
		t.Errorf("sampled %v, want %v (an enumeration of reads alone runs its first point)", got, want)
	}
	t.Setenv(KillsEnv, "all")
	if got := SampleGaps(calls, gaps); slices.Contains(got, false) {
		t.Errorf("%s=all sampled %v, want every gap", KillsEnv, got)
	}
}
