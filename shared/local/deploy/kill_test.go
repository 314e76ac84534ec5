package deploy

import (
	"net/http"
	"slices"
	"testing"
)

func TestGaps(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []Gap
	}{
		{0, nil},
		{1, []Gap{{At: 1}, {At: 1, After: true}}},
		{3, []Gap{{At: 1}, {At: 2}, {At: 3}, {At: 3, After: true}}},
	} {
		if got := Gaps(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Gaps(%d) = %v, want %v", tc.n, got, tc.want)
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
	for _, g := range Gaps(n) {
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
