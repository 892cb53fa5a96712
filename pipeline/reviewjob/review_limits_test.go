package reviewjob

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

func TestReviewEventLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		limits pipeline.EventLimits
		mut    func(*pipeline.ReviewEvent)
		reason string // "" admitted
	}{
		{"ten-year window", pipeline.EventLimits{}, func(e *pipeline.ReviewEvent) { e.WindowStart = e.WindowEnd.AddDate(-10, 0, 0) }, "longer than 24h0m0s"},
		{"configured longer window", pipeline.EventLimits{MaxWindow: 30 * 24 * time.Hour}, func(e *pipeline.ReviewEvent) { e.WindowStart = e.WindowEnd.AddDate(0, 0, -7) }, ""},
		{"published in the future dodges expiry", pipeline.EventLimits{}, func(e *pipeline.ReviewEvent) { e.PublishedAt = e.PublishedAt.AddDate(1, 0, 0) }, "in the future"},
		{"published a little ahead", pipeline.EventLimits{}, func(e *pipeline.ReviewEvent) { e.PublishedAt = time.Date(2026, 11, 3, 5, 13, 0, 0, time.UTC) }, ""},
		{"run id over the column", pipeline.EventLimits{}, func(e *pipeline.ReviewEvent) { e.RunID = strings.Repeat("r", 129) }, "run_id must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setupReview(t)
			r.cfg.Limits = tc.limits
			r.build(r.deps())
			out := r.h.Handle(context.Background(), msg(r.body(t, tc.mut), 1, 5))
			if tc.reason == "" {
				require.Equal(t, jobloop.Delete, out.Action)
				require.Equal(t, "done", out.Label)
				require.EqualValues(t, 1, r.rev.calls.Load())
				return
			}
			require.Equal(t, jobloop.Poison, out.Action)
			require.Contains(t, out.Reason, tc.reason)
			require.Zero(t, r.rev.calls.Load(), "no model call for an event beyond the limits")
			require.Empty(t, r.store.All())
		})
	}
}

func TestReviewToleratesUnknownFields(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	body := strings.Replace(string(r.body(t)), "{", `{"trace_id":"4bf9","producer":{"version":2},`, 1)
	out := r.h.Handle(context.Background(), msg([]byte(body), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "done", out.Label)
}

func TestTruncateKeepsRunes(t *testing.T) {
	t.Parallel()
	s := truncate(strings.Repeat("가", 10), 4)
	require.Equal(t, "가가가가", s)
}
