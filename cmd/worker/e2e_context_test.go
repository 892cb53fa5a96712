package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestE2EAWindowIsReadWithItsContext cuts sample conversations in the
// middle, as a real-time window or an hour boundary does: the worker
// fetches the first half from the chat API as context beside the window,
// and no verdict cites a message from before its window, even where the
// simulator, shown the whole chat, would cite the first half.
func TestE2EAWindowIsReadWithItsContext(t *testing.T) {
	t.Parallel()
	prim, fb := stacktest.Primary(t), stacktest.Fallback(t)
	chatURL := stacktest.ChatAPIURL(t)
	r := startRig(t, rigOpts{chatURL: chatURL, mut: withSims(prim.BaseURL, prim.Model, fb.BaseURL, fb.Model, fb.APIKey)})
	require.Equal(t, time.Hour, r.cfg.Review.Context.Lookback, "context is on by default")

	var evs []pipeline.ReviewEvent
	before := map[string][]string{} // room -> ids of its context
	citedBefore := 0                // rooms whose whole chat cites the first half
	for _, ev := range truthReviews(t, 40, func(row truthRow) bool { return row.Label != "clean" && row.Images == 0 }) {
		ev.WindowEnd = ev.WindowStart.Add(2 * time.Hour)
		whole := history(t, chatURL, ev)
		if len(whole) < 4 || len(evs) == 8 {
			continue
		}
		slices.SortFunc(whole, func(a, b pipeline.ChatMessage) int { return a.SentAt.Compare(b.SentAt) })
		cut := whole[len(whole)/2].SentAt
		if !cut.After(whole[0].SentAt) {
			continue
		}
		ev.WindowStart, ev.WindowEnd = cut, cut.Add(time.Hour)
		for _, m := range whole {
			if m.SentAt.Before(cut) {
				before[ev.RoomID] = append(before[ev.RoomID], m.MessageID)
			}
		}
		for _, id := range oracleJudge(t, prim.BaseURL, prim.Model, "", whole).EvidenceIDs {
			if slices.Contains(before[ev.RoomID], id) {
				citedBefore++
				break
			}
		}
		evs = append(evs, ev)
	}
	require.Len(t, evs, 8)
	require.Positive(t, citedBefore, "some first halves hold evidence, or the test proves nothing")

	r.sendEvents(t, evs...)
	waitDone(t, r, len(evs), 2*time.Minute)
	for _, ev := range evs {
		var version string
		require.NoError(t, r.db.QueryRow("SELECT pipeline_version FROM verdicts WHERE room_id = ?", ev.RoomID).Scan(&version))
		v, err := r.store.Get(context.Background(), ev.Key(version))
		require.NoError(t, err)
		for _, id := range v.EvidenceIDs {
			require.NotContains(t, before[ev.RoomID], id, "room %s cites a message from before its window", ev.RoomID)
		}
	}
	require.InDelta(t, float64(len(evs)), r.metric(t, `chatguard_worker_context_fetches_total{outcome="ok"}`), 0)
	require.Positive(t, r.metric(t, "chatguard_review_context_messages_total"))
	t.Logf("%d windows cut mid-conversation; %d whose whole chat the simulator cites in the first half", len(evs), citedBefore)
}
