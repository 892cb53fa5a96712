package drain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
)

func TestHardWithoutOneIsTheContextItself(t *testing.T) {
	ctx := context.Background()
	if drain.Hard(ctx) != ctx {
		t.Fatal("Hard without a hard context is not its argument")
	}
	if _, ok := drain.Lookup(ctx); ok {
		t.Fatal("Lookup found a hard context where none was set")
	}
}

// The hard context outlives the ordinary one: cancelling the taking of
// work leaves the work running until the hard context itself ends.
func TestHardOutlivesTheStopOfTakingWork(t *testing.T) {
	hard, end := context.WithCancelCause(context.Background())
	ctx, stop := context.WithCancel(drain.WithHard(context.Background(), hard))
	child, cancelChild := context.WithCancel(ctx) // values pass to children
	defer cancelChild()
	stop()
	got := drain.Hard(child)
	if got != hard {
		t.Fatal("the child does not carry the hard context")
	}
	if got.Err() != nil {
		t.Fatal("the hard context ended with the ordinary one")
	}
	deadline := errors.New("drain deadline passed")
	end(deadline)
	if !errors.Is(context.Cause(drain.Hard(child)), deadline) {
		t.Fatalf("cause %v, want the deadline", context.Cause(got))
	}
	if h, ok := drain.Lookup(child); !ok || h != hard {
		t.Fatal("Lookup did not find the hard context")
	}
}

// After gives a service run on its own the drain a group would: the hard
// context ends d after ctx, on the clock, not before.
func TestAfterEndsTheHardContextDAfterTheStop(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := drain.After(parent, c, 30*time.Second)
	defer cancel()
	hard := drain.Hard(ctx)
	c.Advance(time.Hour)
	if hard.Err() != nil {
		t.Fatal("the hard context ended before the stop")
	}
	stop()
	wait, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	if err := c.BlockUntilContext(wait, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(30*time.Second - time.Nanosecond)
	if hard.Err() != nil {
		t.Fatal("the hard context ended before its deadline")
	}
	c.Advance(time.Nanosecond)
	select {
	case <-hard.Done():
	case <-wait.Done():
		t.Fatal("the hard context did not end at its deadline")
	}
	if !errors.Is(context.Cause(hard), drain.ErrDeadline) {
		t.Fatalf("cause %v", context.Cause(hard))
	}
}

// cancel ends the hard context (a service that returned before the
// deadline), whether or not the deadline's timer was armed.
func TestAfterCancelEndsTheHardContext(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := drain.After(parent, c, time.Minute)
	stop()
	wait, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	if err := c.BlockUntilContext(wait, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if !errors.Is(context.Cause(drain.Hard(ctx)), context.Canceled) {
		t.Fatalf("cause %v", context.Cause(drain.Hard(ctx)))
	}
}
