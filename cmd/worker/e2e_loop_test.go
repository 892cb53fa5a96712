package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// These tests run the worker in-process against the stack's SQS (fauxqs)
// and MariaDB, with a private chat API process (the stand-in) and a fake stage engine:
// they are about the queue, the admission and the store.

func TestE2EDoneAndAdmin(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(nil)
	r := startRig(t, rigOpts{reviewer: rev})
	code, _ := r.get(t, "/healthz")
	require.Equal(t, 200, code)
	code, _ = r.get(t, "/readyz")
	require.Equal(t, 200, code)
	code, _ = r.get(t, "/debug/pprof/")
	require.Equal(t, 404, code, "no profiles unless --pprof-addr turns them on, and never on the admin port")

	r.sendEvents(t, event("room-01"))
	require.Eventually(t, func() bool { _, err := r.verdict(t, "room-01", "e2e-fake"); return err == nil }, 30*time.Second, 50*time.Millisecond)
	v, err := r.verdict(t, "room-01", "e2e-fake")
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	require.Equal(t, "run-e2e", v.RunID)
	require.Equal(t, 1, v.Attempts)
	require.Len(t, v.Stages, 1)
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 10*time.Second, 50*time.Millisecond, "message deleted")
	require.Equal(t, 1.0, r.metric(t, `chatguard_worker_jobs_total{outcome="done"}`))
	require.Equal(t, 1.0, r.metric(t, `chatguard_worker_messages_deleted_total`))
	require.Positive(t, r.metric(t, `chatguard_worker_sqs_calls_total{op="receive",outcome="ok"}`))
	require.Equal(t, 1.0, r.metric(t, `chatguard_worker_event_age_seconds_count`))
	require.Equal(t, 2.0, r.metric(t, `chatguard_chatapi_requests_total{outcome="ok"}`), "the window and its context (--context-lookback)")

	// The verdict event reaches the feedback queue.
	evs := r.receiveAll(t, r.feedback.URL, 1, 10*time.Second)
	require.Len(t, evs, 1)
	require.Contains(t, aws.ToString(evs[0].Body), `"event_type":"verdict"`)
	require.Contains(t, aws.ToString(evs[0].Body), `"room_id":"room-01"`)
	require.NoError(t, r.stop())
}

func TestE2EPoisonToDLQWhileWorking(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(nil)
	r := startRig(t, rigOpts{reviewer: rev})
	poison := map[string]string{
		"not json":       "this is not json",
		"unknown schema": mustEncode(t, event("room-02", func(e *pipeline.ReviewEvent) { e.SchemaVersion = 9 })),
		"missing fields": `{"room_id":"room-03","schema_version":1}`,
		"window order":   mustEncode(t, event("room-04", func(e *pipeline.ReviewEvent) { e.WindowEnd = e.WindowStart })),
	}
	wantReason := map[string]string{
		"this is not json":       "not a JSON review event",
		poison["unknown schema"]: "schema_version 9",
		poison["missing fields"]: "window_start is missing",
		poison["window order"]:   "window_end is not after window_start",
	}
	var bodies []string
	for _, b := range poison {
		bodies = append(bodies, b)
	}
	r.send(t, bodies...)
	r.sendEvents(t, event("room-05"))
	dlq := r.receiveAll(t, r.queue.DLQURL, 4, 30*time.Second)
	require.Len(t, dlq, 4)
	for _, m := range dlq {
		body := aws.ToString(m.Body)
		reason := aws.ToString(m.MessageAttributes[jobloop.AttrErrorReason].StringValue)
		require.Contains(t, reason, wantReason[body], "body %q", body)
		require.NotEmpty(t, aws.ToString(m.MessageAttributes[jobloop.AttrSourceMessageID].StringValue))
		require.Equal(t, "1", aws.ToString(m.MessageAttributes[jobloop.AttrReceiveCount].StringValue))
	}
	require.Eventually(t, func() bool { _, err := r.verdict(t, "room-05", "e2e-fake"); return err == nil }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 4.0, r.metric(t, `chatguard_worker_poison_messages_total`))
	require.Zero(t, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE room_id <> 'room-05'"))
}

func TestE2EDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
		time.Sleep(300 * time.Millisecond)
		return cleanVerdict(), nil
	})
	r := startRig(t, rigOpts{reviewer: rev})
	// Two copies in one batch (a republished run), then a third later.
	r.sendEvents(t, event("room-06"), event("room-06"))
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 30*time.Second, 50*time.Millisecond)
	r.sendEvents(t, event("room-06"))
	require.Eventually(t, func() bool { return r.metric(t, `chatguard_worker_jobs_total{outcome="duplicate"}`) == 2 }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, rev.callsFor("room-06"), "one set of model calls")
	require.Equal(t, 1, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE room_id = 'room-06'"))
	require.Equal(t, 1, r.countRows(t, "SELECT COUNT(*) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id WHERE v.room_id = 'room-06'"))
}

func TestE2EExpired(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(nil)
	r := startRig(t, rigOpts{reviewer: rev, mut: func(c *Config) { c.Review.MaxAge = time.Hour }})
	r.sendEvents(t, event("room-07", func(e *pipeline.ReviewEvent) { e.PublishedAt = time.Now().Add(-3 * time.Hour) }))
	require.Eventually(t, func() bool { _, err := r.verdict(t, "room-07", "e2e-fake"); return err == nil }, 30*time.Second, 50*time.Millisecond)
	v, err := r.verdict(t, "room-07", "e2e-fake")
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusExpired, v.Status)
	require.Empty(t, v.Stages)
	require.Zero(t, rev.callsFor("room-07"))
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1.0, r.metric(t, `chatguard_worker_jobs_total{outcome="expired"}`))
}

func TestE2ESlowJobIsNotRedelivered(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
		select {
		case <-time.After(7 * time.Second):
			return cleanVerdict(), nil
		case <-ctx.Done():
			return pipeline.Verdict{}, context.Cause(ctx)
		}
	})
	// The queue's and the worker's visibility is 3 s; the job takes 7 s.
	r := startRig(t, rigOpts{reviewer: rev, visibility: 3 * time.Second})
	r.sendEvents(t, event("room-08"))
	require.Eventually(t, func() bool { _, err := r.verdict(t, "room-08", "e2e-fake"); return err == nil }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, rev.callsFor("room-08"), "redelivered while running")
	v, err := r.verdict(t, "room-08", "e2e-fake")
	require.NoError(t, err)
	require.Equal(t, 1, v.Attempts)
	require.GreaterOrEqual(t, r.metric(t, `chatguard_worker_visibility_extensions_total`), 2.0)
}

func TestE2ELastingFailureEndsInDLQ(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
		return pipeline.Verdict{}, pipeline.Retryable(fmt.Errorf("llm: both pools failed (attempt %d)", attempt), 0)
	})
	r := startRig(t, rigOpts{reviewer: rev, maxReceive: 3, mut: func(c *Config) { c.Loop.RetryBase, c.Loop.RetryMax = time.Second, time.Second }})
	r.sendEvents(t, event("room-09"))
	dlq := r.receiveAll(t, r.queue.DLQURL, 1, 60*time.Second)
	require.Len(t, dlq, 1, "message not in the DLQ after maxReceiveCount")
	require.Contains(t, aws.ToString(dlq[0].Body), `"room_id":"room-09"`)
	require.Equal(t, 3, rev.callsFor("room-09"))
	v, err := r.verdict(t, "room-09", "e2e-fake")
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusFailed, v.Status)
	require.Contains(t, v.Error, "both pools failed (attempt 3)")
	require.Equal(t, 3, v.Attempts)
	require.Equal(t, 1.0, r.metric(t, `chatguard_worker_jobs_total{outcome="failed_final"}`))
	require.Equal(t, 2.0, r.metric(t, `chatguard_worker_jobs_total{outcome="retry"}`))
}

func TestE2EDrainOnShutdown(t *testing.T) {
	t.Parallel()
	started := make(chan string, 10)
	rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
		started <- ev.RoomID
		switch ev.RoomID {
		case "room-10":
			return cleanVerdict(), nil
		case "room-11":
			// Finishes within the drain timeout.
			time.Sleep(time.Second)
			return cleanVerdict(), nil
		}
		<-ctx.Done()
		return pipeline.Verdict{}, fmt.Errorf("fake: %w", context.Cause(ctx))
	})
	r := startRig(t, rigOpts{reviewer: rev, mut: func(c *Config) { c.Loop.DrainTimeout = 2 * time.Second }})
	r.sendEvents(t, event("room-10"), event("room-11"), event("room-12"), event("room-13"))
	for range 4 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("jobs did not start")
		}
	}
	begin := time.Now()
	require.NoError(t, r.stop(), "Run returns nil (exit 0) after the drain")
	took := time.Since(begin)
	require.Less(t, took, r.cfg.Loop.DrainTimeout+lifecycle.DefaultDrain+3*time.Second)
	for _, room := range []string{"room-10", "room-11"} {
		v, err := r.verdict(t, room, "e2e-fake")
		require.NoError(t, err)
		require.Equal(t, pipeline.StatusDone, v.Status)
	}
	for _, room := range []string{"room-12", "room-13"} {
		_, err := r.verdict(t, room, "e2e-fake")
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
	}
	// The unfinished ones are visible at once, the finished ones are gone.
	got := r.receiveAll(t, r.queue.URL, 2, 3*time.Second)
	require.Len(t, got, 2)
	for _, m := range got {
		body := aws.ToString(m.Body)
		require.True(t, strings.Contains(body, "room-12") || strings.Contains(body, "room-13"), body)
	}
}

func mustEncode(t *testing.T, ev pipeline.ReviewEvent) string {
	t.Helper()
	b, err := ev.Encode()
	require.NoError(t, err)
	return string(b)
}
