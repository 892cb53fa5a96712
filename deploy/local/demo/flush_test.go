package demo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// The flush deletes the run's trigger keys, hash-tagged ones included, and
// nothing else on the shared Redis; the due-room count reads what is left.
func TestFlushKeysDeletesOnlyTheRunsPrefix(t *testing.T) {
	c := stacktest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := fmt.Sprintf("chatguard:demo:flushtest-%d:", time.Now().UnixNano())
	other := run[:len(run)-1] + "x:"
	keys := []string{run + "{rt1}:r:room-1", run + "{rt1}:s:room-1", run + "{rt2}:r:room-2"}
	t.Cleanup(func() {
		c.Del(context.Background(), append(keys, other+"{rt1}:r:room-1", run+"{rt1}:due", other+"{rt1}:due")...)
	})
	for _, k := range keys {
		require.NoError(t, c.Set(ctx, k, "x", time.Hour).Err())
	}
	require.NoError(t, c.Set(ctx, other+"{rt1}:r:room-1", "x", time.Hour).Err())
	require.NoError(t, c.ZAdd(ctx, run+"{rt1}:due", redisZ("room-1"), redisZ("room-3")).Err())
	require.NoError(t, c.ZAdd(ctx, other+"{rt1}:due", redisZ("room-9")).Err())

	due, err := dueRooms(ctx, c, run)
	require.NoError(t, err)
	require.EqualValues(t, 2, due, "only this run's due set counts")

	n, err := flushKeys(ctx, c, run)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	left, err := c.Exists(ctx, append(keys, run+"{rt1}:due")...).Result()
	require.NoError(t, err)
	require.Zero(t, left)
	kept, err := c.Exists(ctx, other+"{rt1}:r:room-1", other+"{rt1}:due").Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, kept, "a prefix that merely starts like the run's is another run's")
	due, err = dueRooms(ctx, c, run)
	require.NoError(t, err)
	require.Zero(t, due)

	for _, bad := range []string{"", "chatguard:", "chatguard:demo:*:", "chatguard:demo:x"} {
		_, err := flushKeys(ctx, c, bad)
		require.Error(t, err, "%q", bad)
	}
}

// The flush fault is scheduled mid-replay, and its sweep reads the span
// the replay put the messages in (wall time, whole seconds), with the
// replayed messages as the lake's rows and no repeat among them.
func TestFlushFaultSweepsTheReplayedSpan(t *testing.T) {
	hour := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	begin := time.Date(2026, 12, 2, 11, 58, 30, 500_000_000, time.UTC)
	lake := map[string][]pipeline.ChatMessage{
		"r1": {{MessageID: "a", SentAt: hour.Add(time.Minute), Kind: pipeline.KindText, Text: "hello"}, {MessageID: "b", SentAt: hour.Add(59 * time.Minute)}},
		"r2": {{MessageID: "c", SentAt: hour.Add(30 * time.Minute)}, {MessageID: "late", SentAt: hour.Add(61 * time.Minute)}},
	}
	plan, err := chatreplay.Plan(lake, hour, hour.Add(time.Hour), begin, 30)
	require.NoError(t, err)
	replay := 2 * time.Minute
	f := &faultRun{name: "flush"}
	plan = f.shapePlan(plan, begin, replay)
	require.NotNil(t, f.flush)
	require.Equal(t, begin.Add(time.Minute), f.flush.at, "half-way through the replay")
	require.Contains(t, f.note(), "no sweep ran")

	start, end, err := sweepWindow(append(plan, chatreplay.Arrival{RoomID: "r1", Repeat: true, Message: pipeline.ChatMessage{SentAt: begin.Add(time.Hour)}}))
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 2, 11, 58, 32, 0, time.UTC), start, "a's replay second (2 s in), a repeat aside")
	require.Equal(t, time.Date(2026, 12, 2, 12, 0, 29, 0, time.UTC), end, "just after b's (1 min 58 s in), across the hour")

	rows := lakeRows(append(plan, chatreplay.Arrival{RoomID: "r1", Repeat: true, Message: plan[0].Message}))
	require.Len(t, rows, 3, "the late message is outside the hour; a repeat is not a message")
	require.Equal(t, "r1", rows[0].RoomID)
	require.Equal(t, plan[0].Message.SentAt, rows[0].SentAt, "the lake holds the replayed time")
	require.Equal(t, "hello", rows[0].Text)

	_, _, err = sweepWindow(nil)
	require.Error(t, err)
	slow, err := chatreplay.Plan(lake, hour, hour.Add(time.Hour), begin, 0.5)
	require.NoError(t, err)
	_, _, err = sweepWindow(slow)
	require.ErrorContains(t, err, "raise --speedup")
}

func redisZ(member string) redis.Z { return redis.Z{Member: member} }
