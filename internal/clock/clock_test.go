package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func TestSleepEndsWhenTheFakeMovesPastIt(t *testing.T) {
	c := clock.NewFake(t0)
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), c, time.Minute) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("sleep returned %v a second early", err)
	default:
	}
	c.Advance(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sleep: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("sleep did not end once its minute passed")
	}
}

func TestSleepReturnsTheContextsCause(t *testing.T) {
	c := clock.NewFake(t0)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("draining")
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, c, time.Hour) }()
	wait, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if err := c.BlockUntilContext(wait, 1); err != nil {
		t.Fatal(err)
	}
	cancel(stop)
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Fatalf("sleep returned %v, want the cause %v", err, stop)
		}
	case <-wait.Done():
		t.Fatal("a cancelled context did not cut the sleep short")
	}
	if err := clock.Sleep(ctx, c, 0); !errors.Is(err, stop) {
		t.Fatalf("a zero sleep on a done context returned %v", err)
	}
}

func TestWithTimeoutFollowsTheFake(t *testing.T) {
	c := clock.NewFake(t0)
	ctx, cancel := clock.WithTimeout(context.Background(), c, 5*time.Second)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("deadline %v %v, want %v", dl, ok, t0.Add(5*time.Second))
	}
	c.Advance(4 * time.Second)
	if ctx.Err() != nil {
		t.Fatal("done before its deadline on the fake")
	}
	c.Advance(time.Second)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not done once the fake passed its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("err %v cause %v, want DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	parent, cancelParent := context.WithCancel(context.Background())
	child, cancelChild := clock.WithTimeout(parent, c, time.Hour)
	defer cancelChild()
	cancelParent()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("a cancelled parent left its child with %v", child.Err())
	}
	past, cancelPast := clock.WithDeadline(context.Background(), c, t0)
	defer cancelPast()
	if !errors.Is(past.Err(), context.DeadlineExceeded) {
		t.Fatalf("a deadline already passed left the context with %v", past.Err())
	}
}

func TestNilIsTheRealClock(t *testing.T) {
	if clock.Or(nil) != clock.Real() {
		t.Fatal("Or(nil) is not the real clock")
	}
	f := clock.NewFake(t0)
	if clock.Or(f) != clock.Clock(f) {
		t.Fatal("Or replaced a given clock")
	}
}
