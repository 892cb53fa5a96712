package reviewjob

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
)

// newContextFetches is the counter of context fetches by outcome (ok,
// failed): a failed one costs the review its context, never the review.
func newContextFetches(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatguard_worker_context_fetches_total",
		Help: chatcontext.FetchesHelp,
	}, []string{"outcome"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// history returns the window's messages and, when context is on, the
// room's newest messages of the lookback before the window start, ahead
// of them (package chatcontext; the reviewer tells them apart by their
// Context mark). The window's failure is the review's; the context's is
// counted, and the window is reviewed without it.
func (h *Handler) history(ctx context.Context, ev pipeline.ReviewEvent) ([]pipeline.ChatMessage, error) {
	return h.window.History(ctx, ev.RoomID, ev.WindowStart, ev.WindowEnd)
}
