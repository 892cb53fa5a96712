package drain_test

import (
	"context"
	"errors"
	"testing"

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
