package watch

import "time"

// trigger decides when to invoke the provisioner, from what the watches
// saw: pure state, fed events and the clock. Work observed starts a batch
// (Karpenter's batching: it closes after BatchIdle without more work, or
// BatchMax after it began); a closed batch is sent once the provisioning
// lease is free, since a holder is a provisioner already at work whose
// snapshot may predate the batch. After an invocation nothing more is sent
// until a new holder takes the lease (the invoked provisioner, or another
// that was first and whose snapshot, taken at least a batch's wait after
// the work appeared, includes it), or, if none does within awaitAcquire
// (the event lost, the function throttled), the batch is sent again.
// Work seen while the lease is held, or after the invocation, starts the
// next batch, sent once the lease is free again; so nothing observed is
// left to the next scheduled tick, at the price of one short pass after a
// busy one.
type trigger struct {
	batchIdle, batchMax, awaitAcquire time.Duration

	// first and last are the batch's first and latest work (zero: none).
	first, last time.Time
	// holder is the lease's holder as last seen ("" when free or expired).
	holder string
	// sent is when the last invocation went out, awaiting a new holder
	// (zero: none awaited); sentHolder the holder seen then.
	sent       time.Time
	sentHolder string
}

// work records work observed at now.
func (t *trigger) work(now time.Time) {
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
}

// lease records the lease's holder as seen at now ("" when it is free or
// expired). A new holder after an invocation ends the wait for it.
func (t *trigger) lease(holder string) {
	if !t.sent.IsZero() && holder != "" && holder != t.sentHolder {
		t.sent = time.Time{}
	}
	t.holder = holder
}

// due reports whether to invoke the provisioner now; when it does, the
// batch counts as sent.
func (t *trigger) due(now time.Time) bool {
	if !t.sent.IsZero() {
		if now.Sub(t.sent) < t.awaitAcquire {
			return false
		}
		// Nobody took the lease: the invocation was lost. Send again,
		// with whatever work came since, as soon as the lease is free.
		t.sent = time.Time{}
		if t.holder == "" {
			t.first, t.last = time.Time{}, time.Time{}
			t.sent, t.sentHolder = now, t.holder
			return true
		}
		t.work(now)
	}
	if t.first.IsZero() || t.holder != "" {
		return false
	}
	if now.Sub(t.last) < t.batchIdle && now.Sub(t.first) < t.batchMax {
		return false
	}
	t.first, t.last = time.Time{}, time.Time{}
	t.sent, t.sentHolder = now, t.holder
	return true
}

// failed records that the invocation due at now could not be sent: the
// batch stays, to be sent at the next check.
func (t *trigger) failed(now time.Time) {
	t.sent = time.Time{}
	t.work(now)
}
