package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// startPeer runs a second worker process-alike (its own Main, its own claim
// owner) on r's queue and database: another pod.
func startPeer(t *testing.T, r *rig, rev pipeline.Reviewer) {
	t.Helper()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	m := &Main{Config: r.cfg, Reviewer: rev, OnReady: func(a string) { ready <- a },
		Log: slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- m.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("peer did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("peer did not start in 60s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(r.cfg.Loop.DrainTimeout + 30*time.Second):
			t.Error("peer did not stop")
		}
	})
}

// Every event sent twice, two pods on the queue: the review claim in MySQL
// makes the second copy wait for the first and acknowledge its verdict, so
// each review gets one set of model calls.
func TestE2EDuplicateDeliveryOnTwoPods(t *testing.T) {
	t.Parallel()
	rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
		select { // long enough for the copy to arrive on the other pod meanwhile
		case <-time.After(400 * time.Millisecond):
		case <-ctx.Done():
			return pipeline.Verdict{}, ctx.Err()
		}
		return cleanVerdict(), nil
	})
	r := startRig(t, rigOpts{reviewer: rev})
	startPeer(t, r, rev)
	const rooms = 20
	var evs []pipeline.ReviewEvent
	for i := range rooms {
		evs = append(evs, event(fmt.Sprintf("room-%02d", i)))
	}
	r.sendEvents(t, evs...)
	r.sendEvents(t, evs...)
	require.Eventually(t, func() bool {
		return r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE status = 'done'") == rooms
	}, 60*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 60*time.Second, 50*time.Millisecond)
	for _, ev := range evs {
		require.Equal(t, 1, rev.callsFor(ev.RoomID), "one set of model calls for %s", ev.RoomID)
	}
	require.Zero(t, r.countRows(t, "SELECT COUNT(*) FROM review_claims"), "every claim released")
	vis, inf := r.queueCounts(t, r.queue.DLQURL)
	require.Zero(t, vis+inf, "nothing in the DLQ")
}
