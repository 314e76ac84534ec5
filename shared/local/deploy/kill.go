package deploy

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
)

// ErrKilled is what every call returns once a KillSwitch has fired.
var ErrKilled = errors.New("killed: the Lambda was stopped here")

// KillSwitch stands for the Lambda runtime stopping an invocation at one
// external call: before it is sent, or after it was applied but before its
// answer is seen. Every call after that fails, as in a dead process. A nil
// KillSwitch sends every call; one with At 0 only records them.
type KillSwitch struct {
	// At is the call, counted from 1, at which the invocation dies.
	At int
	// After makes it die once that call was applied, not before it is sent.
	After bool
	// On, when set, makes the invocation die at the first call whose
	// description starts with it ("aws CreateFleet"), instead of at call At.
	On string
	// Match and Nth, when Match is set, make the invocation die at the Nth
	// call (counted from 1) that Match accepts, instead of at call At: a
	// kill point named by what the call is, which still lands when a busy
	// world makes the invocation take another read or retry on the way.
	Match func(desc string) bool
	Nth   int

	mu      sync.Mutex
	dead    bool
	calls   []string
	matched int
}

// Do passes send through the switch; desc names the call in Calls.
func (k *KillSwitch) Do(desc string, send func() (*http.Response, error)) (*http.Response, error) {
	if k == nil {
		return send()
	}
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return nil, ErrKilled
	}
	k.calls = append(k.calls, desc)
	n := len(k.calls)
	if k.On != "" && k.At == 0 && strings.HasPrefix(desc, k.On) {
		k.At = n
	}
	if k.Match != nil && k.At == 0 && k.Match(desc) {
		if k.matched++; k.matched == k.Nth {
			k.At = n
		}
	}
	if n == k.At && !k.After {
		k.dead = true
		k.mu.Unlock()
		return nil, ErrKilled
	}
	k.mu.Unlock()
	resp, err := send()
	if n == k.At && k.After {
		k.mu.Lock()
		k.dead = true
		k.mu.Unlock()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, ErrKilled
	}
	return resp, err
}

// Kill fires the switch now, between calls: the Lambda runtime ending an
// invocation at its timeout.
func (k *KillSwitch) Kill() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
}

// Dead says whether the switch fired.
func (k *KillSwitch) Dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// Calls are the calls that went through the switch, in order, the fatal one
// included.
func (k *KillSwitch) Calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// Gap is one point between the calls of an invocation that makes its
// calls one at a time: before call At, or, with After, after it.
type Gap struct {
	At    int
	After bool
}

// Gaps are the distinct points at which an invocation making calls (as
// a KillSwitch records them: "aws <Action>", "kube <METHOD> <path>") one at
// a time can die. Two kills leave the same world when the same writes were
// sent, since the process's memory is lost either way: dying after call i
// is dying before call i+1, and a read changes nothing, so dying before or
// after it is dying before the run of reads it belongs to. The gaps are
// therefore: before the first call, after each write (taken as "before the
// next call", or "after" the last), each once. An enumeration that kills
// at these kills at every distinct point at a fraction of the cost of
// taking both sides of every call.
func Gaps(calls []string) []Gap {
	var gaps []Gap
	for at := 1; at <= len(calls); at++ {
		if at == 1 || !IsRead(calls[at-2]) {
			gaps = append(gaps, Gap{At: at})
		}
	}
	if n := len(calls); n > 0 && !IsRead(calls[n-1]) {
		gaps = append(gaps, Gap{At: n, After: true})
	}
	return gaps
}

// IsRead reports whether a call, as a KillSwitch records it, only reads:
// a Kubernetes GET, or an AWS Describe, Get or List action.
func IsRead(call string) bool {
	for _, p := range []string{"kube GET ", "aws Describe", "aws Get", "aws List"} {
		if strings.HasPrefix(call, p) {
			return true
		}
	}
	return false
}

// Switch is a KillSwitch that fires at the gap.
func (g Gap) Switch() *KillSwitch { return &KillSwitch{At: g.At, After: g.After} }

// Landmark is a gap named by its call rather than its position: the Nth
// call (counted from 1) of those that read as Call once normalized.
type Landmark struct {
	Call  string
	Nth   int
	After bool
}

// LandmarkOf names the gap of calls (normalized by norm, which may be
// nil) by its call and that call's occurrence.
func LandmarkOf(calls []string, g Gap, norm func(string) string) Landmark {
	norm = orSame(norm)
	l := Landmark{Call: norm(calls[g.At-1]), After: g.After}
	for _, c := range calls[:g.At] {
		if norm(c) == l.Call {
			l.Nth++
		}
	}
	return l
}

// Switch is a KillSwitch that fires at the landmark, skip of its calls
// having been made already (by earlier invocations, for a landmark of
// several invocations' calls); it fires at no call when skip >= Nth.
func (l Landmark) Switch(norm func(string) string, skip int) *KillSwitch {
	norm = orSame(norm)
	nth := l.Nth - skip
	if nth < 1 {
		return &KillSwitch{}
	}
	return &KillSwitch{After: l.After, Nth: nth, Match: func(desc string) bool { return norm(desc) == l.Call }}
}

// orSame is norm, or no normalization when norm is nil.
func orSame(norm func(string) string) func(string) string {
	if norm == nil {
		return func(s string) string { return s }
	}
	return norm
}

// Matched is how many calls the switch's Match accepted.
func (k *KillSwitch) Matched() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.matched
}

// Side is "before" or "after".
func (g Gap) Side() string {
	if g.After {
		return "after"
	}
	return "before"
}

// KillsEnv chooses how many kill points the kill tests run: with "all"
// (make test-kills, which CI runs) every gap of every enumeration; without
// it (make test) the first gap of each kind of write and side (Sample), so
// that every kind of state a kill can leave is met within make test's
// budget.
const KillsEnv = "KARPLESS_KILLS"

// AllKills reports whether KillsEnv asks for every kill point.
func AllKills() bool { return os.Getenv(KillsEnv) == "all" }

// Sample says which of a kill enumeration's points to run, given each
// point's key (its side and CallKind, "before aws CreateFleet"): every one
// with AllKills, else the first of each key whose call writes. A kill
// anywhere among the reads between two writes leaves the cloud and the
// cluster as a kill right after the first write or right before the
// second does, so the reads' gaps add only timing, which test-kills
// covers. An enumeration of reads alone runs its first point.
func Sample(keys []string) []bool {
	run := make([]bool, len(keys))
	seen := map[string]bool{}
	sampled := false
	for i, k := range keys {
		run[i] = AllKills() || !seen[k] && !readKey(k)
		seen[k] = true
		sampled = sampled || run[i]
	}
	if !sampled && len(run) > 0 {
		run[0] = true
	}
	return run
}

// readKey reports whether a Sample key's call only reads: an AWS
// Describe, Get or List action, or a Kubernetes GET, LIST or WATCH.
func readKey(key string) bool {
	f := strings.Fields(key)
	if len(f) < 3 {
		return false
	}
	switch f[1] {
	case "aws":
		return strings.HasPrefix(f[2], "Describe") || strings.HasPrefix(f[2], "Get") || strings.HasPrefix(f[2], "List")
	case "kube":
		return f[2] == "GET" || f[2] == "LIST" || f[2] == "WATCH"
	}
	return false
}

// CasesEnv chooses how many cases the whole-world ports of Karpenter's
// e2e suites run: with "all" (make test-cases, which CI runs) every case;
// without it (make test) a sample (SampleCases), since each case builds a
// world and takes most of a minute on a busy machine.
const CasesEnv = "KARPLESS_CASES"

// AllCases reports whether CasesEnv asks for every case.
func AllCases() bool { return os.Getenv(CasesEnv) == "all" }

// SampleCases says which of count cases to run: every one with AllCases,
// else every nth and the last.
func SampleCases(count, n int) []bool {
	run := make([]bool, count)
	for i := range run {
		run[i] = AllCases() || n <= 1 || i%n == 0 || i == count-1
	}
	return run
}

// SampleSteps says which of count kill points made of distinct steps
// (each step its own kind, as a bootstrap's install steps) to run: every
// one with AllKills, else every nth from offset (mod n) and the last, so
// that make test meets kills early, midway and at the end, and n runs
// with offsets 0..n-1 would meet them all.
func SampleSteps(count, n, offset int) []bool {
	run := make([]bool, count)
	for i := range run {
		run[i] = AllKills() || n <= 1 || (i+offset)%n == 0 || i == count-1
	}
	return run
}

// SampleGaps is Sample over gaps of calls, keyed by side and the kind of
// the call at the gap.
func SampleGaps(calls []string, gaps []Gap) []bool {
	keys := make([]string, len(gaps))
	for i, g := range gaps {
		keys[i] = g.Side() + " " + CallKind(calls[g.At-1])
	}
	return Sample(keys)
}

// CallKind is a call without the names in it: "aws CreateFleet", or
// "kube PATCH nodeclaims/status" for a Kubernetes call (its resource and
// subresource, not the object's name or namespace).
func CallKind(desc string) string {
	parts := strings.Fields(desc)
	if len(parts) < 3 || parts[0] != "kube" {
		return desc
	}
	path, _, _ := strings.Cut(parts[2], "?")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	switch {
	case len(segs) > 0 && segs[0] == "api":
		segs = segs[min(2, len(segs)):]
	case len(segs) > 0 && segs[0] == "apis":
		segs = segs[min(3, len(segs)):]
	}
	if len(segs) == 0 {
		return parts[0] + " " + parts[1] + " " + path // a group's or version's root
	}
	if len(segs) >= 2 && segs[0] == "namespaces" {
		if len(segs) == 2 {
			return parts[0] + " " + parts[1] + " namespaces"
		}
		segs = segs[2:]
	}
	kind := segs[0]
	if len(segs) >= 3 {
		kind += "/" + segs[2]
	}
	return parts[0] + " " + parts[1] + " " + kind
}
