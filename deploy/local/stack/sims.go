package stack

import (
	"context"
)

// startSims starts the in-process stand-ins on their bound listeners: the
// Athena stand-in and the chat API over the lake, and the two LLM
// simulators (primary like a local vLLM, fallback like a managed API with a
// key). Each publishes its variables.
func (s *Stack) startSims(ctx context.Context, listeners map[string]*lazyListener) error {
	// Slots, wired as the packages land: deploy/local/athenasim,
	// deploy/local/chatapi, deploy/local/llmsim.
	_ = ctx
	_ = listeners
	return nil
}
