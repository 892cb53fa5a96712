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

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
)

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

// ErrDeadline is the cause of a hard context that After ended.
var ErrDeadline = errors.New("drain: deadline passed")

// After returns ctx carrying a hard context that ends, with ErrDeadline,
// d after ctx does, timed on c (nil: the wall clock): a service run on
// its own, outside a lifecycle group (a test, a benchmark, a tool), gets
// the drain a group would give it. cancel ends the hard context and
// releases its timer; call it once the service has returned.
func After(ctx context.Context, c clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	hard, end := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := clock.Or(c).AfterFunc(d, func() { end(fmt.Errorf("%w after %v", ErrDeadline, d)) })
		context.AfterFunc(hard, func() { t.Stop() })
	})
	return WithHard(ctx, hard), func() {
		stop()
		end(context.Canceled)
	}
}
