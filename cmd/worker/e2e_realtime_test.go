package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestE2ERealtimeQueueIsServedBeforeABatchBacklog runs the worker with
// both queues on fauxqs: with a batch backlog already waiting on review
// and one real-time event on review-realtime, one slot and one poller, the
// real-time room is reviewed no later than second (after at most the one
// job in flight), in the realtime class, and every
// message of both queues is settled on its own queue.
func TestE2ERealtimeQueueIsServedBeforeABatchBacklog(t *testing.T) {
	realtime := stacktest.NewQueue(t, "review-realtime", 5, 30*time.Second)
	var mu sync.Mutex
	var order []string
	classes := map[string]pipeline.Class{}
	rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, _ int) (pipeline.Verdict, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, ev.RoomID)
		classes[ev.RoomID] = pipeline.ClassFrom(ctx, pipeline.ClassBatch)
		return cleanVerdict(), nil
	})
	backlog := []string{"room-01", "room-02", "room-03", "room-04", "room-05", "room-06", "room-07", "room-08", "room-09", "room-10", "room-11", "room-12"}
	r := startRig(t, rigOpts{reviewer: rev,
		mut: func(c *Config) {
			c.RealtimeQueue.URL = realtime.URL
			c.Loop.Concurrency, c.Loop.Pollers, c.Loop.Prefetch = 1, 1, 0
		},
		beforeStart: func(r *rig) {
			var evs []pipeline.ReviewEvent
			for _, room := range backlog {
				evs = append(evs, event(room))
			}
			r.sendEvents(t, evs...)
			rt := event("room-20", func(ev *pipeline.ReviewEvent) {
				ev.Source, ev.RunID = pipeline.SourceRealtime, pipeline.RealtimeRunID(ev.WindowEnd)
			})
			body, err := rt.Encode()
			require.NoError(t, err)
			_, err = r.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(realtime.URL), MessageBody: aws.String(string(body))})
			require.NoError(t, err)
		}})

	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == len(backlog)+1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "reviewed %d of %d", n, len(backlog)+1)
		time.Sleep(100 * time.Millisecond) // watching a worker on a real queue
	}
	mu.Lock()
	// Each queue has its own poller sharing the one slot: the batch poller
	// may win the very first slot at start, but a freed slot goes to real
	// time first, so the real-time room waits behind at most the one job
	// in flight, never behind the backlog.
	require.Contains(t, order[:2], "room-20", "the real-time room before the batch backlog: %v", order)
	require.Equal(t, pipeline.ClassRealtime, classes["room-20"])
	require.Equal(t, pipeline.ClassBatch, classes["room-01"])
	mu.Unlock()
	for _, url := range []string{r.queue.URL, realtime.URL, r.queue.DLQURL, realtime.DLQURL} {
		for {
			visible, inflight := r.queueCounts(t, url)
			if visible == 0 && inflight == 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s still holds %d+%d", url, visible, inflight)
			time.Sleep(100 * time.Millisecond) // polling a real queue's depth
		}
	}
}
