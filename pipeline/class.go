package pipeline

import (
	"context"
)

// Class is a review's traffic class: how urgently its model calls are
// served when the fleet is short. From most to least urgent: interactive
// (a moderator waiting on an on-demand review), realtime (reviews whose
// value decays by the minute), batch (hourly and sweep work that can wait
// an hour) and shadow (mirrored evaluation traffic, idle capacity only).
// The zero value is batch: work that says nothing is work that can wait.
type Class uint8

// The traffic classes. Their numeric values are not an order; Rank is.
const (
	ClassBatch Class = iota
	ClassRealtime
	ClassInteractive
	ClassShadow
)

// Classes lists every class, most urgent first: the fixed label set of
// the per-class metrics.
var Classes = []Class{ClassInteractive, ClassRealtime, ClassBatch, ClassShadow}

// String names the class, as metric labels and logs show it.
func (c Class) String() string {
	switch c {
	case ClassRealtime:
		return "realtime"
	case ClassInteractive:
		return "interactive"
	case ClassShadow:
		return "shadow"
	}
	return "batch"
}

// Rank orders the classes: 0 is served first (interactive), 3 last
// (shadow). An unknown value ranks as batch.
func (c Class) Rank() int {
	switch c {
	case ClassInteractive:
		return 0
	case ClassRealtime:
		return 1
	case ClassShadow:
		return 3
	}
	return 2
}

// Class is the traffic class the event's source asks for: realtime for
// realtime, batch for everything else (absent, batch, sweep, or a source
// this build does not know).
func (e ReviewEvent) Class() Class {
	if e.Source == SourceRealtime {
		return ClassRealtime
	}
	return ClassBatch
}

type classKey struct{}

// WithClass returns ctx carrying class c to every model call made under
// it: the job loop sets it from the event, the console for its on-demand
// caller.
func WithClass(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// ClassFrom returns the class ctx carries, or def when it carries none.
func ClassFrom(ctx context.Context, def Class) Class {
	if c, ok := ctx.Value(classKey{}).(Class); ok {
		return c
	}
	return def
}
