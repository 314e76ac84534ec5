package testworld

import "time"

// Backoff paces a loop of rounds that waits on the real-time actors
// (kube-scheduler, kube-controller-manager, the emulator's kubelets):
// First at first, twice as long each round after, up to Max. Every round
// of a world's passes lists the whole cluster; a world that keeps waiting
// gains nothing from polling ten times a second, and on two cores the
// parallel worlds' passes were most of the suite's CPU (and of its API
// server's). Nothing a test asserts is measured in these pauses: what is
// measured on the clock is moved on instead.
type Backoff struct {
	First, Max time.Duration
	d          time.Duration
}

// Wait sleeps the round's pause.
func (b *Backoff) Wait() {
	if b.d == 0 {
		b.d = b.First
	}
	time.Sleep(b.d)
	b.d = min(2*b.d, b.Max)
}
