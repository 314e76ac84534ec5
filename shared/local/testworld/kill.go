package testworld

import (
	"fmt"
	"testing"

	"github.com/karpless/karpless/shared/local/deploy"
)

// KillSwitch and ErrKilled are deploy's, named here for the crash tests.
type KillSwitch = deploy.KillSwitch

// ErrKilled is what every call returns once a KillSwitch has fired.
var ErrKilled = deploy.ErrKilled

// KillCase runs one case of a kill-point enumeration as a subtest. The
// world stays hostile (throttle bursts past the retries, answers that lag),
// so an invocation can take another path before its kill point than the
// undisturbed one did, and never reach the call the case is meant to kill.
// The body calls diverged then; the case is tried again in a fresh world,
// at most tries times in all, and fails only if no world reached the point.
func KillCase(t *testing.T, name string, tries int, body func(t *testing.T, diverged func(format string, args ...any))) {
	t.Helper()
	var why string
	for try := 1; try <= tries; try++ {
		why = ""
		sub := name
		if try > 1 {
			sub = fmt.Sprintf("%s, try %d", name, try)
		}
		t.Run(sub, func(t *testing.T) {
			body(t, func(format string, args ...any) {
				why = fmt.Sprintf(format, args...)
				t.Skip("the world took another path before the kill point: " + why)
			})
		})
		if why == "" {
			return
		}
	}
	t.Errorf("%s: no world in %d reached the kill point; last: %s", name, tries, why)
}
