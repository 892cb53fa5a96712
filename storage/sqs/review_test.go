package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func reviewPublisher(t *testing.T, api SendAPI, mutate func(*Config)) *ReviewPublisher {
	t.Helper()
	cfg := DefaultReviewConfig()
	cfg.URL = "http://queue.local/review"
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewReviewPublisher(api, cfg, (&waits{}).record())
	require.NoError(t, err)
	return p
}

func reviewEvents(n int) <-chan pipeline.ReviewEvent {
	ch := make(chan pipeline.ReviewEvent, 64)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	go func() {
		defer close(ch)
		for i := range n {
			ch <- pipeline.ReviewEvent{RoomID: "room-" + strconv.Itoa(i), WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "run-1", SchemaVersion: pipeline.ReviewSchemaVersion}
		}
	}()
	return ch
}

func TestReviewPublishAllInFullBatches(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.delay = 2 * time.Millisecond
	p := reviewPublisher(t, api, func(c *Config) { c.Concurrency = 4 })
	require.NoError(t, p.Run(context.Background(), reviewEvents(1005)))
	st := p.Stats()
	require.Equal(t, int64(1005), st.Published)
	require.Zero(t, st.Failed)
	require.Equal(t, int64(101), st.Calls, "every call but the last carries ten")
	require.Equal(t, 1005.0/101, st.MessagesPerCall())
	require.Len(t, api.accepted, 1005)
	require.LessOrEqual(t, api.maxSeen.Load(), int32(4), "never more calls in flight than the limit")
	require.Greater(t, api.maxSeen.Load(), int32(1), "calls overlap")
	for body, n := range api.accepted {
		require.Equal(t, 1, n)
		ev, err := pipeline.DecodeReviewEvent([]byte(body))
		require.NoError(t, err)
		require.Equal(t, "run-1", ev.RunID)
		require.False(t, ev.PublishedAt.IsZero())
		a := api.attrs[body]
		require.Equal(t, "run-1", aws.ToString(a[AttrRunID].StringValue))
		require.Equal(t, "1", aws.ToString(a[AttrSchemaVersion].StringValue))
		require.Equal(t, "Number", aws.ToString(a[AttrSchemaVersion].DataType))
	}
}

func containsRoom(body, room string) bool {
	ev, err := pipeline.DecodeReviewEvent([]byte(body))
	return err == nil && ev.RoomID == room
}

func TestReviewPartialFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		fail          func(body string, seen int) (bool, bool)
		maxAttempts   int
		wantPublished int64
		wantFailed    int64
		wantErr       string
	}{
		{
			name:          "every third entry fails twice then succeeds",
			fail:          func(body string, seen int) (bool, bool) { return len(body)%3 == 0 && seen <= 2, false },
			maxAttempts:   3,
			wantPublished: 200,
		},
		{
			name:          "an entry that keeps failing fails the run",
			fail:          func(body string, _ int) (bool, bool) { return containsRoom(body, "room-7"), false },
			maxAttempts:   4,
			wantPublished: 199,
			wantFailed:    1,
			wantErr:       "after 4 attempts",
		},
		{
			name:          "sender faults are not retried",
			fail:          func(body string, _ int) (bool, bool) { return containsRoom(body, "room-9"), true },
			maxAttempts:   4,
			wantPublished: 199,
			wantFailed:    1,
			wantErr:       "1 of 200 messages not published",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newScriptAPI()
			api.fail = func(_ Op, body string, seen int) (bool, bool) { return tc.fail(body, seen) }
			p := reviewPublisher(t, api, func(c *Config) { c.Retry.Attempts = tc.maxAttempts })
			err := p.Run(context.Background(), reviewEvents(200))
			st := p.Stats()
			require.Equal(t, tc.wantPublished, st.Published)
			require.Equal(t, tc.wantFailed, st.Failed)
			require.Len(t, api.accepted, int(tc.wantPublished))
			for _, n := range api.accepted {
				require.Equal(t, 1, n, "a retry never re-sends an accepted entry")
			}
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Positive(t, st.Retried)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestReviewInvalidEventCountsAsFailed(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	p := reviewPublisher(t, api, nil)
	ch := make(chan pipeline.ReviewEvent, 2)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ch <- pipeline.ReviewEvent{RoomID: "bad/room", WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "r", SchemaVersion: 1}
	ch <- pipeline.ReviewEvent{RoomID: "good", WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "r", SchemaVersion: 1}
	close(ch)
	err := p.Run(context.Background(), ch)
	require.ErrorContains(t, err, "reserved character")
	require.Equal(t, ReviewStats{Published: 1, Failed: 1, Calls: 1}, p.Stats())
}

func TestReviewCallErrorFailsBatchAfterRetries(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.callErr = func(Op, int, []string) error { return errors.New("connection refused") }
	p := reviewPublisher(t, api, nil)
	err := p.Run(context.Background(), reviewEvents(25))
	require.ErrorContains(t, err, "25 of 25 messages not published")
	require.ErrorContains(t, err, "connection refused")
	require.ErrorContains(t, err, "after 6 attempts")
	require.Equal(t, int64(3*6), p.Stats().Calls, "a whole-call error is retried like a failed entry")
}

func TestReviewCancelStopsAndCountsUnsent(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.block = make(chan struct{}) // every call hangs until cancelled
	p := reviewPublisher(t, api, func(c *Config) { c.Concurrency = 2 })
	ctx, cancel := context.WithCancelCause(context.Background())
	in := make(chan pipeline.ReviewEvent)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, in) }()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 25 {
		in <- pipeline.ReviewEvent{RoomID: fmt.Sprint("r", i), WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "r", SchemaVersion: 1}
	}
	cancel(errors.New("sigterm"))
	select {
	case err := <-done:
		require.ErrorContains(t, err, "sigterm")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	st := p.Stats()
	require.Zero(t, st.Published)
	require.Equal(t, int64(25), st.Failed)
}

func TestReviewConfigDefaults(t *testing.T) {
	t.Parallel()
	c := DefaultReviewConfig()
	require.ErrorContains(t, c.Validate(), "review queue url is required")
	c.URL = "q"
	require.NoError(t, c.Validate())
	require.Equal(t, MaxBatch, c.BatchSize)
	require.Equal(t, 8, c.Concurrency)
	require.Equal(t, 6, c.Retry.Attempts)
	_, err := NewReviewPublisher(newScriptAPI(), Config{BatchSize: 11})
	require.ErrorContains(t, err, "batch size 11")
}
