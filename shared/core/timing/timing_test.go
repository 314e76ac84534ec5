package timing

import (
	"testing"
	"time"
)

// A lease is renewed well inside its duration at every duration the
// configuration accepts, and an interruption batch waits past the
// provisioner's renewal for its hand-over.
func TestLeaseRenewalDerivesFromDuration(t *testing.T) {
	for _, tc := range []struct{ d, renew time.Duration }{
		{5 * time.Second, 5 * time.Second / 3},
		{DefaultLeaseDuration, 10 * time.Second},
		{2 * time.Minute, 40 * time.Second},
		{0, 10 * time.Second}, // unset: the default duration's
	} {
		got := LeaseRenewEvery(tc.d)
		if got != tc.renew {
			t.Errorf("LeaseRenewEvery(%s) = %s, want %s", tc.d, got, tc.renew)
		}
		if tc.d > 0 && 2*got >= tc.d {
			t.Errorf("LeaseRenewEvery(%s) = %s: two late renewals would let the lease lapse", tc.d, got)
		}
		if w := LeaseWait(tc.d); w <= got {
			t.Errorf("LeaseWait(%s) = %s, not past the renewal interval %s", tc.d, w, got)
		}
	}
}
