package reviewjob

import (
	"context"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// StopGuard registers a running review for stop signals (pipeline/stop.Guard
// implements it). Begin returns the job's context, cancelled with a
// *pipeline.StoppedError cause when a matching stop arrives, and a release
// to call when the review ends.
type StopGuard interface {
	Begin(ctx context.Context, ev pipeline.ReviewEvent) (context.Context, func())
}

// StopGuarded ties each review next runs to operator stop signals: the
// review runs under g's context, so a stopped review is cancelled at once
// with a *pipeline.StoppedError cause, which the Handler records as
// stopped and deletes; one stopped before it starts makes no lookups and
// no model calls. A message that does not decode goes to next untouched
// (it is poison there).
func StopGuarded(next jobloop.Handler, g StopGuard) jobloop.Handler {
	return jobloop.HandlerFunc(func(ctx context.Context, m jobloop.Message) jobloop.Outcome {
		ev, err := pipeline.DecodeReviewEvent(m.Body)
		if err != nil {
			return next.Handle(ctx, m)
		}
		ctx, release := g.Begin(ctx, ev)
		defer release()
		return next.Handle(ctx, m)
	})
}
