// Package drain carries a service's hard context: the context its
// in-flight work runs under during a two-phase stop. The first phase
// cancels the service's ordinary context (stop taking work); the work
// already taken goes on under the hard context until whoever runs the
// service cancels it, when the service's drain deadline passes.
//
// It is its own package so that the one who times the drain
// (cmd/internal/lifecycle) and the services that honour it (the job loop
// in pipeline/, the consumer, the console) share the concept without the
// engine importing the binaries' wiring: the deadline is kept in one
// place, and a service never times its own drain.
package drain

import "context"

type hardKey struct{}

// WithHard returns a child of ctx that carries hard as the hard context
// of the work started under it. hard should outlive ctx's cancellation:
// cancelling hard is what ends the drain.
func WithHard(ctx, hard context.Context) context.Context {
	return context.WithValue(ctx, hardKey{}, hard)
}

// Hard returns the hard context carried by ctx (see WithHard). When none
// is set, ctx is its own hard context: a service run that way (a test, a
// tool) has no drain, and its in-flight work is cancelled together with
// the taking of work.
func Hard(ctx context.Context) context.Context {
	if h, ok := Lookup(ctx); ok {
		return h
	}
	return ctx
}

// Lookup returns the hard context carried by ctx and true, or ctx and
// false when none is set: for a service that picks a drain bound of its
// own outside a group (an HTTP server's graceful shutdown).
func Lookup(ctx context.Context) (context.Context, bool) {
	h, ok := ctx.Value(hardKey{}).(context.Context)
	if !ok {
		return ctx, false
	}
	return h, true
}
