package llm

import (
	"context"

	"github.com/chatguard/chatguard/pipeline"
)

// Observer watches a review's model calls as they stream: an on-demand
// review shows a moderator each attempt and each token as it arrives.
// Both methods are called on the caller's goroutine while the answer
// streams, so they must not block (hand the value to a bounded buffer).
// Delta text is model output: untrusted, and it may quote the chat.
type Observer interface {
	// Attempt is called when attempt n of stage starts on pool.
	Attempt(stage pipeline.StageName, n int, pool pipeline.Pool)
	// Delta is called with each piece of streamed answer text.
	Delta(stage pipeline.StageName, text string)
}

type observerKey struct{}

// WithObserver returns a context whose model calls report to o. The
// context carries it through the stage runner unchanged, so batch callers
// (no observer) pay one context lookup per attempt.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// ObserverFrom returns the observer WithObserver put in ctx, nil when none
// (fakes of the stage runner use it to stream like the router).
func ObserverFrom(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}
