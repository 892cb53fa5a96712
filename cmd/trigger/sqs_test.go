package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestMainOnSQSAndRedis runs the trigger as deployed, on the real SQS
// protocol (fauxqs) and the real Redis, on the wall clock with a one-second
// quiet: chat events in, duplicates and a malformed one among them; one
// real-time review event per room out; the malformed event in the DLQ with
// its reason; every chat event settled.
func TestMainOnSQSAndRedis(t *testing.T) {
	events := stacktest.NewQueue(t, "trigger-chat-events", 5, 30*time.Second)
	reviews := stacktest.NewQueue(t, "trigger-review-realtime", 5, 30*time.Second)
	rdb := stacktest.Redis(t)
	c := stacktest.SQS(t)

	cfg := DefaultConfig()
	cfg.Events.URL, cfg.EventsDLQ.URL, cfg.Reviews.URL = events.URL, events.DLQURL, reviews.URL
	cfg.RedisAddr, cfg.AdminAddr = stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), "127.0.0.1:0"
	cfg.Rooms.Prefix = stacktest.Unique("test:trigger-sqs") + ":"
	cfg.Rooms.Shards, cfg.Rooms.Quiet = 4, time.Second
	cfg.Engine.WaitTime = time.Second
	t.Cleanup(func() {
		iter := rdb.Scan(context.Background(), 0, cfg.Rooms.Prefix+"*", 1000).Iterator()
		for iter.Next(context.Background()) {
			rdb.Del(context.Background(), iter.Val())
		}
	})
	ready := make(chan string, 1)
	m := &Main{Config: cfg, OnReady: func(a string) { ready <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	wait, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("trigger stopped before it was ready: %v", err)
	case <-wait.Done():
		t.Fatal("trigger not ready")
	}

	sent := time.Now().UTC()
	var bodies []string
	for _, room := range []string{"room-a", "room-b"} {
		for i := range 3 {
			body := fmt.Sprintf(`{"schema_version":1,"room_id":%q,"message_id":"m%d","sender_id":"u","sender_role":"buyer","kind":"text","sent_at":%q,"extra":"ignored"}`,
				room, i, sent.Format(time.RFC3339Nano))
			bodies = append(bodies, body, body) // each delivered twice
		}
	}
	bodies = append(bodies, `{"schema_version":1,"room_id":"","message_id":"x"}`)
	for _, b := range bodies {
		_, err := c.SendMessage(wait, &awssqs.SendMessageInput{QueueUrl: aws.String(events.URL), MessageBody: aws.String(b)})
		require.NoError(t, err)
	}

	got := map[string]pipeline.ReviewEvent{}
	for len(got) < 2 {
		require.NoError(t, wait.Err(), "review events so far: %v", got)
		out, err := c.ReceiveMessage(wait, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(reviews.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		for _, msg := range out.Messages {
			ev, err := pipeline.DecodeReviewEvent([]byte(aws.ToString(msg.Body)))
			require.NoError(t, err)
			require.NotContains(t, got, ev.RoomID, "one window per room")
			got[ev.RoomID] = ev
		}
	}
	for room, ev := range got {
		require.Equal(t, pipeline.SourceRealtime, ev.Source, room)
		require.Equal(t, pipeline.RealtimeRunID(ev.WindowEnd), ev.RunID, room)
		require.False(t, ev.WindowStart.After(sent), "%s: the window covers the messages", room)
		require.True(t, ev.WindowEnd.After(sent), room)
	}
	dead, err := c.ReceiveMessage(wait, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(events.DLQURL), WaitTimeSeconds: 5,
		MessageAttributeNames: []string{"All"}})
	require.NoError(t, err)
	require.Len(t, dead.Messages, 1, "the malformed event, and only it, is dead-lettered")
	require.Contains(t, aws.ToString(dead.Messages[0].MessageAttributes["chatguard_error_reason"].StringValue), "room_id")
	for {
		attrs, err := c.GetQueueAttributes(wait, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(events.URL),
			AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
		require.NoError(t, err)
		if attrs.Attributes["ApproximateNumberOfMessages"] == "0" && attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			break
		}
		require.NoError(t, wait.Err(), "chat events left on the queue: %v", attrs.Attributes)
		time.Sleep(200 * time.Millisecond) // polling a real queue's depth
	}
}
