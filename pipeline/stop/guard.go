package stop

import (
	"context"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Guard ties running reviews to stop signals: it registers each job with
// the Holder, checks the shared store once at start, and installs the
// per-chunk check the engine runs (pipeline.CheckStop).
type Guard struct {
	Holder *Holder
	// Store may be nil (no shared store); then only signals that reach
	// the holder stop a job.
	Store pipeline.StopLookup
	// CheckTimeout bounds the start-up check, so a slow Redis delays no
	// review by more than this (default 250 ms).
	CheckTimeout time.Duration
	// OnCheckError, when set, is told about a failed start-up check; the
	// review goes on (stop signals are then best effort).
	OnCheckError func(error)
}

// Begin returns a context for one review that is cancelled, with a
// *pipeline.StoppedError cause, the moment a matching signal arrives (or at
// once if one is already live), and that carries the holder lookup as the
// per-chunk stop check. release unregisters the job; call it when the
// review ends. Begin never fails: a failed store check is reported through
// OnCheckError and otherwise ignored.
func (g *Guard) Begin(ctx context.Context, ev pipeline.ReviewEvent) (jobCtx context.Context, release func()) {
	t := pipeline.StopTargetOf(ev)
	jobCtx, cancel := context.WithCancelCause(ctx)
	unwatch := g.Holder.Watch(t, cancel)
	if g.Store != nil && jobCtx.Err() == nil {
		timeout := g.CheckTimeout
		if timeout <= 0 {
			timeout = 250 * time.Millisecond
		}
		cctx, ccancel := context.WithTimeout(jobCtx, timeout)
		found, err := g.Store.Lookup(cctx, t)
		ccancel()
		if err != nil && g.OnCheckError != nil && jobCtx.Err() == nil {
			g.OnCheckError(err)
		}
		// A live signal lands in the holder, whose watch cancels jobCtx.
		for _, s := range found {
			g.Holder.Add(s)
		}
	}
	h := g.Holder
	jobCtx = pipeline.WithStopCheck(jobCtx, func() error {
		if s, ok := h.Check(t); ok {
			return s.Err()
		}
		return nil
	})
	return jobCtx, func() {
		unwatch()
		cancel(nil)
	}
}
