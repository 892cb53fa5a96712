package trigger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/batchrun"
)

// TestALostRoomStateIsCountedAndSwept: a room whose state is deleted under
// the trigger while it is due (an eviction, or an asynchronous failover
// that lost the writes) is counted as lost state, leaves the due set
// without a window, and the hour's sweep publishes a window over its
// messages, while the room the trigger fired is left alone.
func TestALostRoomStateIsCountedAndSwept(t *testing.T) {
	h := setup(t)
	ctx := context.Background()
	h.events.Enqueue(chatBody("room-lost", "m1", t0.Add(time.Second)), chatBody("room-lost", "m2", t0.Add(2*time.Second)),
		chatBody("room-kept", "m1", t0.Add(3*time.Second)))
	h.drain(t)
	require.NoError(t, h.rdb.Del(ctx, h.rooms.RoomKey("room-lost")).Err())

	h.clk.Advance(time.Minute)
	require.Equal(t, 1, h.e.FireDue(ctx), "only the room with state fires")
	require.Equal(t, 1.0, h.count(h.e.m.stateLost, "claim"), "the due room found gone is counted")
	require.Zero(t, h.count(h.e.m.redisErrors, "claim"), "Redis answered: not a failed call")
	require.Zero(t, h.e.FireDue(ctx), "the lost room left the due set")
	out := h.reviews.Messages()
	require.Len(t, out, 1)
	fired, err := pipeline.DecodeReviewEvent(out[0].Body)
	require.NoError(t, err)
	require.Equal(t, "room-kept", fired.RoomID)

	// The sweep of the hour: the lake lists both rooms, done verdicts
	// cover the fired window only.
	start := t0.Truncate(time.Hour)
	room := func(id string, msgs ...time.Time) pipeline.ActiveRoom {
		var secs []int32
		for _, m := range msgs {
			secs = append(secs, int32(m.Sub(start)/time.Second))
		}
		return pipeline.ActiveRoom{RoomID: id, FirstMessageAt: msgs[0], LastMessageAt: msgs[len(msgs)-1], MessageCount: int64(len(msgs)), ActiveSeconds: secs}
	}
	src := roomList{room("room-lost", t0.Add(time.Second), t0.Add(2*time.Second)), room("room-kept", t0.Add(3*time.Second))}
	cov := coverage{{RoomID: fired.RoomID, Start: fired.WindowStart, End: fired.WindowEnd, PipelineVersion: "v1"}}
	pub := &publisher{}
	r := &batchrun.Runner{Config: batchrun.Config{WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "sweep-1", ProgressInterval: time.Hour,
		Sweep: true, PipelineVersion: "v1", RoomBuffer: 4, EventBuffer: 4}, Source: src, Publisher: pub, Store: &runs{}, Coverage: cov}
	_, err = r.Run(ctx)
	require.NoError(t, err)
	require.Len(t, pub.events, 1, "the sweep publishes the lost room only")
	ev := pub.events[0]
	require.Equal(t, "room-lost", ev.RoomID)
	require.Equal(t, pipeline.SourceSweep, ev.Source)
	for _, m := range []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)} {
		require.False(t, m.Before(ev.WindowStart), "message at %s", m)
		require.True(t, m.Before(ev.WindowEnd), "message at %s", m)
	}
}

// TestAnAckThatFindsItsRoomGoneIsCounted: the state deleted between the
// claim and the ack (a failover after the publish) is counted under ack;
// the published window stands.
func TestAnAckThatFindsItsRoomGoneIsCounted(t *testing.T) {
	h := setup(t)
	ctx := context.Background()
	h.events.Enqueue(chatBody("room-a", "m1", t0.Add(time.Second)))
	h.drain(t)
	h.clk.Advance(time.Minute)
	w, ok, err := h.rooms.Claim(ctx, "room-a")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, h.rdb.Del(ctx, h.rooms.RoomKey("room-a")).Err())
	require.False(t, h.e.ack(ctx, w))
	require.Equal(t, 1.0, h.count(h.e.m.stateLost, "ack"))
	require.Zero(t, h.count(h.e.m.redisErrors, "ack"))
}

type roomList []pipeline.ActiveRoom

func (l roomList) Rooms(ctx context.Context, _, _ time.Time, onStart func(string), out chan<- pipeline.ActiveRoom) (pipeline.RoomQuery, error) {
	onStart("q")
	for _, r := range l {
		select {
		case out <- r:
		case <-ctx.Done():
			return pipeline.RoomQuery{}, context.Cause(ctx)
		}
	}
	return pipeline.RoomQuery{QueryExecutionID: "q", Rows: int64(len(l))}, nil
}

type coverage []pipeline.CoveredWindow

func (c coverage) Covered(_ context.Context, rooms []string, _, _ time.Time) ([]pipeline.CoveredWindow, error) {
	var out []pipeline.CoveredWindow
	for _, w := range c {
		for _, r := range rooms {
			if w.RoomID == r {
				out = append(out, w)
			}
		}
	}
	return out, nil
}

type publisher struct {
	mu     sync.Mutex
	events []pipeline.ReviewEvent
}

func (p *publisher) Run(_ context.Context, in <-chan pipeline.ReviewEvent) error {
	for ev := range in {
		p.mu.Lock()
		p.events = append(p.events, ev)
		p.mu.Unlock()
	}
	return nil
}

func (p *publisher) Stats() pipeline.PublishStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pipeline.PublishStats{Published: int64(len(p.events))}
}

type runs struct{}

func (runs) Begin(_ context.Context, runID string, start, end time.Time) (pipeline.BatchRun, error) {
	return pipeline.BatchRun{ID: 1, RunID: runID, Attempt: 1, WindowStart: start, WindowEnd: end, Status: pipeline.BatchRunRunning}, nil
}
func (runs) Finish(context.Context, pipeline.BatchRun) error { return nil }
