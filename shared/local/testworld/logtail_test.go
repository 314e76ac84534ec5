package testworld

import (
	"fmt"
	"strings"
	"testing"
)

// TestLogTail keeps the last lines, oldest first, across writes that hold
// several lines or wrap the ring.
func TestLogTail(t *testing.T) {
	for _, n := range []int{0, 1, logTailLines - 1, logTailLines, logTailLines + 1, 3*logTailLines + 7} {
		l := &logTail{}
		for i := 0; i < n; i += 2 {
			chunk := fmt.Sprintf("line %d\n", i)
			if i+1 < n {
				chunk += fmt.Sprintf("line %d\n", i+1)
			}
			if _, err := l.Write([]byte(chunk)); err != nil {
				t.Fatal(err)
			}
		}
		var want []string
		for i := max(0, n-logTailLines); i < n; i++ {
			want = append(want, fmt.Sprintf("line %d", i))
		}
		if got := l.String(); got != strings.Join(want, "\n") {
			t.Errorf("%d lines written: kept %d lines, first %q", n, strings.Count(got, "\n")+1, strings.SplitN(got, "\n", 2)[0])
		}
	}
}
