package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// OutboxVerdictStore is a verdict store that keeps an outbox: what the
// worker's save and its relay need of one database.
type OutboxVerdictStore interface {
	pipeline.VerdictStore
	pipeline.OutboxStore
}

// outboxT0 is the conformance suite's "now": a fixed instant, so that the
// store's clock never decides what is due.
var outboxT0 = time.Date(2026, 11, 3, 5, 0, 0, 0, time.UTC)

// OutboxMessage returns a lake-shaped outbox message with id n, for tests.
func OutboxMessage(dest pipeline.OutboxDestination, n int) pipeline.OutboxMessage {
	return pipeline.OutboxMessage{Destination: dest, EventID: fmt.Sprintf("event-%04d", n),
		Body: []byte(fmt.Sprintf(`{"event_id":"event-%04d","n":%d}`, n, n))}
}

// RunOutboxConformance checks that a pipeline.OutboxStore behaves as the
// relay relies on: messages round-trip (body, attributes), one event id
// per destination is kept once, a claim leases its rows (taken again only
// after the lease, attempts counted), oldest first within the limit and
// only the destinations asked for, concurrent claims take distinct rows,
// sent rows are never taken again and failed ones not before their
// retry, the backlog counts pending rows, and the purge deletes only sent
// rows; and, for the verdict store it also is, that a committed save
// writes the verdict's outbox messages in its transaction and a save the
// done-guard refuses writes none. newStore must return a store over
// empty, isolated storage.
func RunOutboxConformance(t *testing.T, newStore func(t *testing.T) OutboxVerdictStore) {
	t.Helper()
	t.Run("round trip and lease", func(t *testing.T) { t.Parallel(); outboxRoundTrip(t, newStore(t)) })
	t.Run("one row per event id", func(t *testing.T) { t.Parallel(); outboxDedup(t, newStore(t)) })
	t.Run("order, limit and destinations", func(t *testing.T) { t.Parallel(); outboxOrder(t, newStore(t)) })
	t.Run("concurrent claims take distinct rows", func(t *testing.T) { t.Parallel(); outboxConcurrent(t, newStore(t)) })
	t.Run("sent and failed", func(t *testing.T) { t.Parallel(); outboxMarks(t, newStore(t)) })
	t.Run("backlog and purge", func(t *testing.T) { t.Parallel(); outboxBacklogPurge(t, newStore(t)) })
	t.Run("verdict save writes its outbox", func(t *testing.T) { t.Parallel(); outboxVerdictSave(t, newStore(t)) })
	t.Run("invalid messages", func(t *testing.T) { t.Parallel(); outboxInvalid(t, newStore(t)) })
}

func outboxCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var feedbackOnly = []pipeline.OutboxDestination{pipeline.OutboxFeedback}

func claim(t *testing.T, s pipeline.OutboxStore, now time.Time, limit int) []pipeline.OutboxRow {
	t.Helper()
	rows, err := s.Claim(outboxCtx(t), feedbackOnly, now, time.Minute, limit)
	require.NoError(t, err)
	return rows
}

func eventIDs(rows []pipeline.OutboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.EventID
	}
	return out
}

func rowIDs(rows []pipeline.OutboxRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func outboxRoundTrip(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	m := OutboxMessage(pipeline.OutboxFeedback, 1)
	m.Attributes = map[string]pipeline.Attribute{"traceparent": pipeline.StringAttribute("00-abc-def-01"), "n": pipeline.NumberAttribute(7)}
	require.NoError(t, s.Enqueue(ctx, outboxT0.Add(123456789), []pipeline.OutboxMessage{m}))
	require.Empty(t, claim(t, s, outboxT0, 10), "not available before it was written")
	rows := claim(t, s, outboxT0.Add(time.Second), 10)
	require.Len(t, rows, 1)
	require.Equal(t, m, rows[0].OutboxMessage)
	require.Equal(t, 1, rows[0].Attempts)
	require.Equal(t, outboxT0.Add(123456000), rows[0].CreatedAt, "UTC, microseconds")
	require.Empty(t, claim(t, s, outboxT0.Add(time.Minute), 10), "leased until a minute after the claim")
	again := claim(t, s, outboxT0.Add(time.Second+time.Minute), 10)
	require.Len(t, again, 1, "a lease that ran out frees the row: its relay died")
	require.Equal(t, rows[0].ID, again[0].ID)
	require.Equal(t, 2, again[0].Attempts)
}

func outboxDedup(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	first := OutboxMessage(pipeline.OutboxFeedback, 1)
	second := first
	second.Body = []byte(`{"second":true}`)
	other := first
	other.Destination = "actions"
	require.NoError(t, s.Enqueue(ctx, outboxT0, []pipeline.OutboxMessage{first}))
	require.NoError(t, s.Enqueue(ctx, outboxT0, []pipeline.OutboxMessage{second, other}))
	rows := claim(t, s, outboxT0, 10)
	require.Len(t, rows, 1)
	require.Equal(t, first.Body, rows[0].Body, "the first copy is kept")
	require.NoError(t, s.MarkSent(ctx, outboxT0, rowIDs(rows)))
	require.NoError(t, s.Enqueue(ctx, outboxT0, []pipeline.OutboxMessage{second}))
	require.Empty(t, claim(t, s, outboxT0.Add(time.Hour), 10), "a sent event written again is not sent again")
	rows, err := s.Claim(ctx, []pipeline.OutboxDestination{"actions"}, outboxT0, time.Minute, 10)
	require.NoError(t, err)
	require.Equal(t, []string{first.EventID}, eventIDs(rows), "the same id on another destination is another message")
}

func outboxOrder(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	for i := 5; i >= 1; i-- { // written newest first: order is by time, not by id
		require.NoError(t, s.Enqueue(ctx, outboxT0.Add(time.Duration(i)*time.Second), []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, i)}))
	}
	require.NoError(t, s.Enqueue(ctx, outboxT0, []pipeline.OutboxMessage{OutboxMessage("actions", 9)}))
	rows := claim(t, s, outboxT0.Add(time.Hour), 2)
	require.ElementsMatch(t, []string{"event-0001", "event-0002"}, eventIDs(rows), "the oldest available first, at most the limit")
	rows = claim(t, s, outboxT0.Add(time.Hour), 10)
	require.ElementsMatch(t, []string{"event-0003", "event-0004", "event-0005"}, eventIDs(rows), "only the destinations asked for")
	rows, err := s.Claim(ctx, []pipeline.OutboxDestination{"actions", pipeline.OutboxFeedback}, outboxT0.Add(time.Hour), time.Minute, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"event-0009"}, eventIDs(rows))
}

func outboxConcurrent(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	var msgs []pipeline.OutboxMessage
	for i := range 60 {
		msgs = append(msgs, OutboxMessage(pipeline.OutboxFeedback, i))
	}
	require.NoError(t, s.Enqueue(ctx, outboxT0, msgs))
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				rows, err := s.Claim(ctx, feedbackOnly, outboxT0, time.Hour, 7)
				if err != nil || len(rows) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rows {
					seen[r.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 60, "every row claimed")
	for id, n := range seen {
		require.Equal(t, 1, n, "row %d claimed once within its lease", id)
	}
}

func outboxMarks(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	require.NoError(t, s.Enqueue(ctx, outboxT0, []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, 1), OutboxMessage(pipeline.OutboxFeedback, 2)}))
	rows := claim(t, s, outboxT0, 10)
	require.Len(t, rows, 2)
	require.NoError(t, s.MarkSent(ctx, outboxT0, []int64{rows[0].ID}))
	retry := outboxT0.Add(10 * time.Minute)
	require.NoError(t, s.MarkFailed(ctx, []pipeline.OutboxFailure{{ID: rows[1].ID, RetryAt: retry, Error: "ServiceUnavailable: try later"},
		{ID: rows[0].ID, RetryAt: outboxT0, Error: "late"}}))
	require.Empty(t, claim(t, s, retry.Add(-time.Microsecond), 10), "a failed row waits for its retry; a sent one is never taken")
	again := claim(t, s, retry, 10)
	require.Equal(t, []int64{rows[1].ID}, rowIDs(again))
	require.Equal(t, 2, again[0].Attempts)
	require.NoError(t, s.MarkSent(ctx, retry, []int64{rows[1].ID, 999999}), "an unknown id is ignored")
	require.Empty(t, claim(t, s, retry.Add(time.Hour), 10))
}

func outboxBacklogPurge(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	b, err := s.Backlog(ctx)
	require.NoError(t, err)
	require.Empty(t, b)
	for i := range 4 {
		require.NoError(t, s.Enqueue(ctx, outboxT0.Add(time.Duration(i)*time.Minute), []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, i)}))
	}
	require.NoError(t, s.Enqueue(ctx, outboxT0.Add(time.Hour), []pipeline.OutboxMessage{OutboxMessage("actions", 1)}))
	rows := claim(t, s, outboxT0.Add(time.Hour), 2) // the two oldest
	require.NoError(t, s.MarkSent(ctx, outboxT0.Add(time.Hour), rowIDs(rows)))
	require.NoError(t, s.MarkSent(ctx, outboxT0.Add(3*time.Hour), rowIDs(rows)), "a second mark keeps the first time")
	b, err = s.Backlog(ctx)
	require.NoError(t, err)
	require.Equal(t, map[pipeline.OutboxDestination]pipeline.OutboxBacklog{
		pipeline.OutboxFeedback: {Pending: 2, Oldest: outboxT0.Add(2 * time.Minute)},
		"actions":               {Pending: 1, Oldest: outboxT0.Add(time.Hour)},
	}, b)
	n, err := s.PurgeSent(ctx, outboxT0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Zero(t, n, "sent exactly at the cutoff: kept")
	n, err = s.PurgeSent(ctx, outboxT0.Add(2*time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n, "at most the limit")
	n, err = s.PurgeSent(ctx, outboxT0.Add(48*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n, "pending rows are never purged")
	b, err = s.Backlog(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, b[pipeline.OutboxFeedback].Pending)
}

func outboxVerdictSave(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	v := SampleVerdict("room-outbox")
	v.FinishedAt = outboxT0
	v.Outbox = []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, 1)}
	require.True(t, MustSave(t, ctx, s, v))
	got, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Empty(t, got.Outbox, "not read back")
	require.Empty(t, claim(t, s, outboxT0.Add(-time.Second), 10), "available at the verdict's finish")
	rows := claim(t, s, outboxT0, 10)
	require.Equal(t, []string{"event-0001"}, eventIDs(rows))
	require.NoError(t, s.MarkSent(ctx, outboxT0, rowIDs(rows)))

	failed := v
	failed.Status, failed.Label, failed.Error = pipeline.StatusFailed, "", "late failure"
	failed.Outbox = []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, 2)}
	require.False(t, MustSave(t, ctx, s, failed), "the done-guard keeps the done verdict")
	require.Empty(t, claim(t, s, outboxT0.Add(time.Hour), 10), "and its event is not written: nothing contradicts the store")

	other := SampleVerdict("room-outbox-2")
	other.Status, other.Label, other.Error = pipeline.StatusFailed, "", "boom"
	other.FinishedAt = outboxT0
	other.Outbox = []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, 3)}
	require.True(t, MustSave(t, ctx, s, other))
	other.Outbox = []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, 3), OutboxMessage(pipeline.OutboxFeedback, 4)}
	require.True(t, MustSave(t, ctx, s, other), "the same status again commits")
	require.ElementsMatch(t, []string{"event-0003", "event-0004"}, eventIDs(claim(t, s, outboxT0.Add(2*time.Hour), 10)))
}

func outboxInvalid(t *testing.T, s OutboxVerdictStore) {
	ctx := outboxCtx(t)
	bad := []pipeline.OutboxMessage{
		{Destination: pipeline.OutboxFeedback, EventID: "", Body: []byte("x")},
		{Destination: "", EventID: "e", Body: []byte("x")},
		{Destination: pipeline.OutboxFeedback, EventID: "e"},
		{Destination: pipeline.OutboxFeedback, EventID: string(slices.Repeat([]byte("e"), pipeline.MaxOutboxEventID+1)), Body: []byte("x")},
	}
	for _, m := range bad {
		err := s.Enqueue(ctx, outboxT0, []pipeline.OutboxMessage{OutboxMessage(pipeline.OutboxFeedback, 1), m})
		var pe *pipeline.PermanentError
		require.ErrorAs(t, err, &pe, "%+v", m)
		v := SampleVerdict("room-invalid")
		v.Outbox = []pipeline.OutboxMessage{m}
		_, err = s.Save(ctx, v)
		require.ErrorAs(t, err, &pe, "a save with an unwritable message fails whole")
		_, err = s.Get(ctx, v.Key)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
	}
	require.Empty(t, claim(t, s, outboxT0.Add(time.Hour), 10), "nothing written")
}
