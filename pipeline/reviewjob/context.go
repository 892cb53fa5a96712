package reviewjob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// Context defaults (DefaultConfig): an hour before the window, at most 30
// messages of it.
const (
	DefaultContextLookback = time.Hour
	DefaultContextMessages = 30
	// maxContextLookback and maxContextMessages bound what an operator
	// can ask for: context is read with every review, and every message
	// of it is prompt tokens.
	maxContextLookback = 24 * time.Hour
	maxContextMessages = 500
)

// contextEnabled reports whether reviews read the room's messages before
// their window.
func (c Config) contextEnabled() bool { return c.ContextLookback > 0 && c.ContextMessages > 0 }

// validateContext names the context settings' problems.
func (c Config) validateContext() error {
	var errs []error
	if c.ContextLookback < 0 || c.ContextLookback > maxContextLookback {
		errs = append(errs, fmt.Errorf("context lookback %s must be in [0, %s] (0 disables context)", c.ContextLookback, maxContextLookback))
	}
	if c.ContextMessages < 0 || c.ContextMessages > maxContextMessages {
		errs = append(errs, fmt.Errorf("context messages %d must be in [0, %d]", c.ContextMessages, maxContextMessages))
	}
	return errors.Join(errs...)
}

// newContextFetches is the counter of context fetches by outcome (ok,
// failed): a failed one costs the review its context, never the review.
func newContextFetches(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_context_fetches_total",
		Help: "Fetches of the room's messages before a review's window, by outcome (ok, failed); a failed one is reviewed without context.",
	}, []string{"outcome"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// history returns the window's messages and, when context is on, the
// room's newest ContextMessages messages of the ContextLookback before
// the window start, ahead of them (the reviewer tells them apart by
// their Context mark: pipeline.Reviewer). The two fetches run at once, through the same
// chat source and its bounds. The window's failure is the review's; the
// context's is counted and logged, and the window is reviewed without it.
func (h *Handler) history(ctx context.Context, ev pipeline.ReviewEvent) ([]pipeline.ChatMessage, error) {
	if !h.cfg.contextEnabled() {
		return h.chat.History(ctx, ev.RoomID, ev.WindowStart, ev.WindowEnd)
	}
	from := ev.WindowStart.Add(-h.cfg.ContextLookback)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		msgs []pipeline.ChatMessage
		err  error
	}
	before := make(chan fetched, 1)
	go func() {
		msgs, err := h.chat.History(cctx, ev.RoomID, from, ev.WindowStart)
		before <- fetched{msgs, err}
	}()
	msgs, err := h.chat.History(ctx, ev.RoomID, ev.WindowStart, ev.WindowEnd)
	if err != nil {
		cancel()
		<-before
		return nil, err
	}
	b := <-before
	if b.err != nil {
		h.m.contextFetches.WithLabelValues("failed").Inc()
		h.log.Warn("review: context fetch failed; the window is reviewed without it", "room_id", ev.RoomID, "err", b.err)
		return msgs, nil
	}
	h.m.contextFetches.WithLabelValues("ok").Inc()
	return append(newestContext(b.msgs, from, ev.WindowStart, h.cfg.ContextMessages), msgs...), nil
}

// newestContext keeps the n newest messages sent in [from, to), oldest
// first, marked Context: a chat source's trim notice and anything outside the span (a
// source that does not honour it) are left out, so nothing of the window
// is counted as context.
func newestContext(msgs []pipeline.ChatMessage, from, to time.Time, n int) []pipeline.ChatMessage {
	out := make([]pipeline.ChatMessage, 0, min(len(msgs), n))
	for _, m := range msgs {
		if m.MessageID == pipeline.TrimNoticeID || m.SentAt.Before(from) || !m.SentAt.Before(to) {
			continue
		}
		m.Context = true
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b pipeline.ChatMessage) int {
		if c := a.SentAt.Compare(b.SentAt); c != 0 {
			return c
		}
		return cmp.Compare(a.MessageID, b.MessageID)
	})
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
