// Package lease makes one function invocation at a time the actor for a
// concern, through a coordination.k8s.io/v1 Lease that a killed holder cannot keep.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/karpless/karpless/shared/core/timing"
)

// HandoverAnnotation asks the holder to release the lease at its next safe
// point; the value names who asked.
const HandoverAnnotation = "karpless.dev/handover-requested"

// ErrLost means the lease is held by someone else now; stop acting.
var ErrLost = errors.New("lease lost")

// Lease is one holder's view of a named lease.
type Lease struct {
	client   coordinationclient.LeasesGetter
	ns, name string
	holder   string
	duration time.Duration
	clock    clock.PassiveClock

	// mu serialises the holder's own calls: a pass checks the lease from
	// the goroutines that launch in parallel.
	mu      sync.Mutex
	current *coordinationv1.Lease
}

// New describes the lease ns/name for holder (unique per invocation, e.g. the
// Lambda request id).
func New(client coordinationclient.LeasesGetter, ns, name, holder string, duration time.Duration, clk clock.PassiveClock) *Lease {
	return &Lease{client: client, ns: ns, name: name, holder: holder, duration: duration, clock: clk}
}

// Holder is this lease's holder identity.
func (l *Lease) Holder() string { return l.holder }

// TryAcquire takes the lease if it is free, expired or already ours. It
// returns false (no error) when another live holder has it. Two callers
// racing are serialised by the API server's optimistic concurrency: a
// conflict means someone wrote the lease since it was read (a rival's take,
// or the old holder's release), so it is read again and judged afresh.
func (l *Lease) TryAcquire(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	taken := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		taken, err = l.take(ctx)
		return err
	})
	if apierrors.IsConflict(err) {
		return false, nil // written again at every read: someone else acts
	}
	if err != nil {
		return false, err
	}
	return taken, nil
}

// take is one read and one write of TryAcquire; a conflict is returned as
// is, for the caller to read again.
func (l *Lease) take(ctx context.Context) (bool, error) {
	leases := l.client.Leases(l.ns)
	now := metav1.NewMicroTime(l.clock.Now())
	cur, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.ns},
			Spec:       l.spec(now, now, 0),
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("creating lease %s/%s: %w", l.ns, l.name, err)
		}
		l.current = created
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading lease %s/%s: %w", l.ns, l.name, err)
	}
	if holder := ptrStr(cur.Spec.HolderIdentity); holder != "" && holder != l.holder && !l.expired(cur) {
		return false, nil
	}
	transitions := int32(0)
	if cur.Spec.LeaseTransitions != nil {
		transitions = *cur.Spec.LeaseTransitions
	}
	if ptrStr(cur.Spec.HolderIdentity) != l.holder {
		transitions++
	}
	next := cur.DeepCopy()
	next.Spec = l.spec(now, now, transitions)
	delete(next.Annotations, HandoverAnnotation)
	updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, err
	}
	if err != nil {
		return false, fmt.Errorf("taking lease %s/%s: %w", l.ns, l.name, err)
	}
	l.current = updated
	return true, nil
}

// Renew extends the lease. It returns ErrLost if someone else took it, and
// reports whether a hand-over was requested.
func (l *Lease) Renew(ctx context.Context) (handover bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renew(ctx)
}

func (l *Lease) renew(ctx context.Context) (handover bool, err error) {
	if l.current == nil {
		return false, ErrLost
	}
	next := l.current.DeepCopy()
	next.Spec.RenewTime = new(metav1.NewMicroTime(l.clock.Now()))
	updated, err := l.client.Leases(l.ns).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Someone wrote the lease (a hand-over request, or a takeover after
		// we stalled past expiry): re-read to see which.
		cur, gerr := l.client.Leases(l.ns).Get(ctx, l.name, metav1.GetOptions{})
		if gerr != nil {
			return false, fmt.Errorf("re-reading lease %s/%s: %w", l.ns, l.name, gerr)
		}
		if ptrStr(cur.Spec.HolderIdentity) != l.holder {
			l.current = nil
			return false, ErrLost
		}
		l.current = cur
		return l.renew(ctx)
	}
	if err != nil {
		return false, fmt.Errorf("renewing lease %s/%s: %w", l.ns, l.name, err)
	}
	l.current = updated
	_, asked := updated.Annotations[HandoverAnnotation]
	return asked, nil
}

// Release gives the lease up so the next invocation can take it at once.
// Releasing a lease we no longer hold is a no-op. A conflict means someone
// wrote the lease since we last did (typically a hand-over request): the
// lease is read again and, if still ours, released from that copy, or the
// next tick would find it held until it expires.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current == nil {
		return nil
	}
	leases := l.client.Leases(l.ns)
	cur := l.current
	l.current = nil
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		next := cur.DeepCopy()
		next.Spec.HolderIdentity = new("")
		next.Spec.RenewTime = nil
		delete(next.Annotations, HandoverAnnotation)
		_, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh, gerr := leases.Get(ctx, l.name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if ptrStr(fresh.Spec.HolderIdentity) != l.holder {
			return nil // taken over meanwhile: nothing of ours to release
		}
		cur = fresh
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("releasing lease %s/%s: %w", l.ns, l.name, err)
	}
	return nil
}

// Hold makes sure the lease is still ours before an action that only the
// holder may take (a NodeClaim created, an instance launched): it renews
// the lease when a third of its duration (timing.LeaseRenewEvery) has
// passed since the last renewal,
// so a long pass never outlives it, and returns ErrLost when another
// invocation holds it now.
func (l *Lease) Hold(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current == nil {
		return ErrLost
	}
	if rt := l.current.Spec.RenewTime; rt != nil && l.clock.Since(rt.Time) < timing.LeaseRenewEvery(l.duration) {
		return nil
	}
	_, err := l.renew(ctx)
	return err
}

// Guard is the check code acting for a lease holder makes before each
// action only the holder may take: typically the holder's Hold. A nil Guard
// means the caller acts under no lease.
type Guard func(context.Context) error

// Check runs g before the action named by before ("creating a nodeclaim");
// its error says which action it stopped.
func (g Guard) Check(ctx context.Context, before string) error {
	if g == nil {
		return nil
	}
	if err := g(ctx); err != nil {
		return fmt.Errorf("before %s: %w", before, err)
	}
	return nil
}

// RequestHandover asks the current holder to release soon. It does nothing
// when the lease is free or missing.
func (l *Lease) RequestHandover(ctx context.Context) error {
	leases := l.client.Leases(l.ns)
	cur, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading lease %s/%s: %w", l.ns, l.name, err)
	}
	if ptrStr(cur.Spec.HolderIdentity) == "" || cur.Annotations[HandoverAnnotation] != "" {
		return nil
	}
	next := cur.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[HandoverAnnotation] = l.holder
	_, err = leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Acquire waits up to wait for the lease, asking the holder to hand over.
func (l *Lease) Acquire(ctx context.Context, wait, poll time.Duration, sleep func(context.Context, time.Duration) error) (bool, error) {
	deadline := l.clock.Now().Add(wait)
	asked := false
	for {
		ok, err := l.TryAcquire(ctx)
		if ok || err != nil {
			return ok, err
		}
		if !asked {
			if err := l.RequestHandover(ctx); err != nil {
				return false, err
			}
			asked = true
		}
		if !l.clock.Now().Before(deadline) {
			return false, nil
		}
		if err := sleep(ctx, poll); err != nil {
			return false, err
		}
	}
}

func (l *Lease) spec(acquire, renew metav1.MicroTime, transitions int32) coordinationv1.LeaseSpec {
	secs := int32(l.duration / time.Second)
	return coordinationv1.LeaseSpec{
		HolderIdentity:       new(l.holder),
		LeaseDurationSeconds: &secs,
		AcquireTime:          &acquire,
		RenewTime:            &renew,
		LeaseTransitions:     &transitions,
	}
}

func (l *Lease) expired(cur *coordinationv1.Lease) bool {
	return Expired(cur, l.clock.Now(), l.duration)
}

// Expired reports whether a lease read as cur no longer binds at now: never
// renewed, or its duration (fallback when it states none) passed since its
// last renewal. A reader that only watches the lease judges it this way.
func Expired(cur *coordinationv1.Lease, now time.Time, fallback time.Duration) bool {
	if cur.Spec.RenewTime == nil {
		return true
	}
	d := fallback
	if cur.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*cur.Spec.LeaseDurationSeconds) * time.Second
	}
	return !now.Before(cur.Spec.RenewTime.Add(d))
}

func ptrStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
