package clockctx

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestDeadlineFollowsTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	ctx, cancel := WithTimeout(context.Background(), clk, time.Minute)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	clk.Step(59 * time.Second)
	select {
	case <-ctx.Done():
		t.Fatal("ended before the clock reached the deadline")
	case <-time.After(20 * time.Millisecond):
	}
	clk.Step(time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("did not end when the clock reached the deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v", ctx.Err())
	}
}

func TestCancelAndParent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := WithTimeout(context.Background(), clk, time.Hour)
	cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("cancel: err %v", ctx.Err())
	}
	parent, pcancel := context.WithCancel(context.Background())
	child, ccancel := WithTimeout(parent, clk, time.Hour)
	defer ccancel()
	pcancel()
	select {
	case <-child.Done():
	case <-time.After(time.Second):
		t.Fatal("parent cancellation did not reach the child")
	}
	// A deadline of a parent on the same clock that comes first wins.
	outer, ocancel := WithTimeout(context.Background(), clk, time.Minute)
	defer ocancel()
	inner, icancel := WithTimeout(outer, clk, time.Hour)
	defer icancel()
	if d, _ := inner.Deadline(); !d.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("inner deadline %v, want the parent's", d)
	}
	// Derived contexts of the standard library see the end too.
	derived, dcancel := context.WithCancel(outer)
	defer dcancel()
	clk.Step(time.Minute)
	select {
	case <-derived.Done():
	case <-time.After(time.Second):
		t.Fatal("a context derived with the standard library did not end")
	}
}

func TestRealClockIsTheStandardLibrary(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), clock.RealClock{}, 10*time.Millisecond)
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("real deadline did not fire")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v", ctx.Err())
	}
}
