package trigger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/redisdebounce"
)

var t0 = time.Date(2026, 12, 2, 4, 10, 0, 0, time.UTC)

// flaky is the real room store with an outage switch: while down, every
// call fails as a refused connection would.
type flaky struct {
	*redisdebounce.Store
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (f *flaky) Record(ctx context.Context, evs []pipeline.ChatEvent) ([]pipeline.RecordOutcome, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.Record(ctx, evs)
}

type harness struct {
	e                    *Engine
	clk                  *clock.Fake
	events, dlq, reviews *queuetest.Fake
	rooms                *flaky
	reg                  *prometheus.Registry
	rdb                  redis.UniversalClient
}

func setup(t *testing.T) *harness {
	t.Helper()
	rdb := stacktest.Redis(t)
	clk := clock.NewFake(t0)
	scfg := redisdebounce.DefaultConfig()
	scfg.Prefix = stacktest.Unique("test:trigger") + ":"
	scfg.Shards = 4
	store, err := redisdebounce.New(rdb, scfg, clk)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, scfg.Prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})
	h := &harness{clk: clk, rooms: &flaky{Store: store}, reg: prometheus.NewRegistry(), rdb: rdb,
		events: queuetest.NewFake(queuetest.Config{Clock: clk}), dlq: queuetest.NewFake(queuetest.Config{Clock: clk}),
		reviews: queuetest.NewFake(queuetest.Config{Clock: clk})}
	cfg := DefaultConfig()
	cfg.StaleAfter = scfg.MaxWindow - scfg.MaxDelay - scfg.Slack
	h.e, err = New(cfg, Deps{Events: h.events, DLQ: h.dlq, Reviews: h.reviews, Rooms: h.rooms, Clock: clk, Registerer: h.reg})
	require.NoError(t, err)
	return h
}

func chatBody(room, msg string, sent time.Time) []byte {
	return fmt.Appendf(nil, `{"schema_version":1,"room_id":%q,"message_id":%q,"sender_id":"u1","sender_role":"seller","kind":"text","sent_at":%q}`,
		room, msg, sent.Format(time.RFC3339Nano))
}

// drain receives and records until the events queue shows nothing.
func (h *harness) drain(t *testing.T) {
	t.Helper()
	for range 100 {
		msgs, err := h.events.Receive(context.Background(), pipeline.ReceiveRequest{Max: 10, Visibility: time.Minute})
		require.NoError(t, err)
		if len(msgs) == 0 {
			return
		}
		h.e.intake(context.Background(), msgs)
	}
	t.Fatal("the events queue did not drain")
}

func (h *harness) count(c *prometheus.CounterVec, label string) float64 {
	return testutil.ToFloat64(c.WithLabelValues(label))
}

func TestEventsInOneReviewPerRoomOut(t *testing.T) {
	h := setup(t)
	var bodies [][]byte
	for r := range 3 {
		for i := range 5 {
			b := chatBody(fmt.Sprintf("room-%d", r), fmt.Sprintf("m%d", i), t0.Add(time.Duration(i)*time.Second))
			bodies = append(bodies, b, b) // every event twice
		}
	}
	bodies = append(bodies, []byte(`{"schema_version":1,"room_id":"../x"}`), []byte(`not json`))
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	h.events.Enqueue(bodies...)
	h.drain(t)

	require.Zero(t, h.events.Stats().Held, "every event is settled: recorded and deleted, or dead-lettered")
	dead := h.dlq.Messages()
	require.Len(t, dead, 2)
	for _, d := range dead {
		require.Contains(t, d.Attributes[AttrErrorReason].Value, "invalid chat event: ")
	}
	require.Equal(t, 15.0, h.count(h.e.m.events, "new"))
	require.Equal(t, 15.0, h.count(h.e.m.events, "duplicate"))
	require.Equal(t, 2.0, h.count(h.e.m.events, "invalid"))

	h.e.refreshPending(context.Background())
	require.Equal(t, 3.0, testutil.ToFloat64(h.e.m.pending))
	require.Zero(t, h.e.FireDue(context.Background()), "not quiet yet")
	h.clk.Advance(time.Minute)
	require.Equal(t, 3, h.e.FireDue(context.Background()))
	require.Zero(t, h.e.FireDue(context.Background()), "each window fires once")
	out := h.reviews.Messages()
	require.Len(t, out, 3)
	rooms := map[string]bool{}
	for _, m := range out {
		ev, err := pipeline.DecodeReviewEvent(m.Body)
		require.NoError(t, err)
		require.Equal(t, pipeline.SourceRealtime, ev.Source)
		require.Equal(t, "rt-20261202T040000Z", ev.RunID)
		require.Equal(t, h.clk.Now(), ev.WindowEnd, "the window ends at the trigger's fire time")
		require.Equal(t, ev.RunID, m.Attributes[attrRunID].Value)
		require.NoError(t, pipeline.DefaultEventLimits().Check(ev, h.clk.Now()), "the worker accepts the window")
		rooms[ev.RoomID] = true
	}
	require.Len(t, rooms, 3)
	require.Equal(t, 3.0, h.count(h.e.m.fires, "quiet"))
	require.Zero(t, testutil.ToFloat64(h.e.m.pending))
}

func TestARedisOutageHoldsEventsAndDeadLettersNothing(t *testing.T) {
	h := setup(t)
	h.events.Enqueue(chatBody("room-a", "m1", t0), chatBody("room-b", "m1", t0))
	msgs, err := h.events.Receive(context.Background(), pipeline.ReceiveRequest{Max: 10, Visibility: time.Minute})
	require.NoError(t, err)
	require.Len(t, msgs, 2)

	h.rooms.down.Store(true)
	h.e.running.Store(true)
	done := make(chan struct{})
	go func() { defer close(done); h.e.intake(context.Background(), msgs) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Ten minutes of outage: the batch is held and kept hidden.
	for h.clk.Since(t0) < 10*time.Minute {
		require.NoError(t, h.clk.BlockUntilContext(ctx, 1))
		require.False(t, h.e.Ready(), "not ready while holding")
		h.clk.Advance(5 * time.Second)
	}
	require.NotEmpty(t, h.events.VisibilityChanges(), "the held events' visibility was extended")
	require.Zero(t, h.events.Stats().Visible, "no held event became visible to be redelivered")
	require.Zero(t, h.dlq.Stats().Held, "an outage dead-letters nothing")

	require.NoError(t, h.clk.BlockUntilContext(ctx, 1), "still holding, asleep between attempts")
	h.rooms.down.Store(false)
	h.clk.Advance(DefaultConfig().Retry.Max) // the longest backoff
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the held batch was not recorded once Redis answered")
	}
	require.True(t, h.e.Ready())
	require.Zero(t, h.events.Stats().Held, "recorded and deleted once Redis answers")
	require.Equal(t, 2.0, h.count(h.e.m.events, "new"))
	require.Positive(t, testutil.ToFloat64(h.e.m.redisErrors.WithLabelValues("record")))
}

func TestShutdownWhileHoldingHandsTheEventsBack(t *testing.T) {
	h := setup(t)
	h.events.Enqueue(chatBody("room-a", "m1", t0))
	msgs, err := h.events.Receive(context.Background(), pipeline.ReceiveRequest{Max: 10, Visibility: time.Minute})
	require.NoError(t, err)
	h.rooms.down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.e.intake(ctx, msgs) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, h.clk.BlockUntilContext(wctx, 1))
	cancel()
	<-done
	require.Equal(t, 1, h.events.Stats().Visible, "handed back at once for another replica")
	require.Zero(t, h.dlq.Stats().Held)
}

func TestAFailedPublishIsRepublishedUnchanged(t *testing.T) {
	h := setup(t)
	h.events.Enqueue(chatBody("room-a", "m1", t0))
	h.drain(t)
	h.clk.Advance(time.Minute)
	h.reviews.SetFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpSend {
			return errors.New("ServiceUnavailable")
		}
		return nil
	})
	require.Zero(t, h.e.FireDue(context.Background()))
	require.Equal(t, 1.0, testutil.ToFloat64(h.e.m.publishFailures))
	h.reviews.SetFault(nil)
	require.Zero(t, h.e.FireDue(context.Background()), "the claim holds the window until it lapses")
	h.clk.Advance(redisdebounce.DefaultLease)
	require.Equal(t, 1, h.e.FireDue(context.Background()))
	require.Equal(t, 1.0, testutil.ToFloat64(h.e.m.republished))
	out := h.reviews.Messages()
	require.Len(t, out, 1)
	ev, err := pipeline.DecodeReviewEvent(out[0].Body)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute), ev.WindowEnd, "the window recorded before the failed publish, unchanged")
}

func TestRunStopsWhenCancelled(t *testing.T) {
	h := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.e.Run(ctx) }()
	h.events.Enqueue(chatBody("room-r", "m1", t0))
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	for h.events.Stats().Held > 0 {
		require.NoError(t, wctx.Err(), "the running engine records the event")
		require.NoError(t, h.clk.BlockUntilContext(wctx, 1)) // the fire loop's ticker
		h.events.Received()
	}
	require.True(t, h.e.Ready())
	cancel()
	require.NoError(t, <-done)
	require.False(t, h.e.Ready())
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	err := Config{WaitTime: time.Minute}.Validate()
	for _, w := range []string{"pollers 0", "wait time 1m0s", "visibility 0s", "initial backoff", "fire interval", "fire batch 0", "call timeout"} {
		require.ErrorContains(t, err, w)
	}
}

// reviewWindows decodes the review events published so far.
func (h *harness) reviewWindows(t *testing.T) []pipeline.ReviewEvent {
	t.Helper()
	var out []pipeline.ReviewEvent
	for _, m := range h.reviews.Messages() {
		ev, err := pipeline.DecodeReviewEvent(m.Body)
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

func failSends(q *queuetest.Fake) {
	q.SetFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpSend {
			return errors.New("ServiceUnavailable")
		}
		return nil
	})
}

func TestALateEventGetsAWindowOfItsOwnAndNothingIsCoveredTwice(t *testing.T) {
	h := setup(t)
	h.events.Enqueue(chatBody("room-l", "m1", t0), chatBody("room-l", "m2", t0.Add(10*time.Second)))
	h.drain(t)
	h.clk.Advance(time.Minute)
	require.Equal(t, 1, h.e.FireDue(context.Background()))
	first := h.reviewWindows(t)[0]

	// A late event whose own window fails to publish is not deleted: it
	// comes back, is late again, and its window (the same) is published.
	late := t0.Add(5 * time.Second)
	failSends(h.reviews)
	h.events.Enqueue(chatBody("room-l", "m0", late))
	h.drain(t)
	require.Equal(t, 1.0, testutil.ToFloat64(h.e.m.publishFailures))
	require.Equal(t, 1, h.events.Stats().Held, "not settled while its window is not published")
	h.reviews.SetFault(nil)
	h.clk.Advance(time.Minute) // its visibility ends
	h.events.Advance(0)
	h.drain(t)
	require.Zero(t, h.events.Stats().Held)
	require.Equal(t, 2.0, h.count(h.e.m.events, "late"), "the redelivery is late again, not a duplicate")
	require.Equal(t, 1.0, testutil.ToFloat64(h.e.m.ownWindows))
	got := h.reviewWindows(t)
	require.Len(t, got, 2)
	require.Equal(t, late, got[1].WindowStart, "a window of its own at the late message")
	require.Equal(t, late.Add(OwnWindowWidth), got[1].WindowEnd)
	require.NoError(t, pipeline.DefaultEventLimits().Check(got[1], h.clk.Now()), "the worker accepts it")

	// The room's next window starts where the first ended: nothing it
	// covered is reviewed again.
	h.events.Enqueue(chatBody("room-l", "m3", h.clk.Now()))
	h.drain(t)
	h.clk.Advance(time.Minute)
	require.Equal(t, 1, h.e.FireDue(context.Background()))
	got = h.reviewWindows(t)
	require.Len(t, got, 3)
	require.Equal(t, first.WindowEnd, got[2].WindowStart)
	require.Zero(t, testutil.ToFloat64(h.e.m.doubleCovered))
	require.Equal(t, 4.0, testutil.ToFloat64(h.e.m.publishes), "every review event sent counts, refused or not: two room windows, the own window twice")
}

func TestAFarFutureSentAtIsClampedAndItsRoomFiresOnce(t *testing.T) {
	h := setup(t)
	h.events.Enqueue(chatBody("room-f", "m1", t0.Add(3*time.Hour)))
	h.drain(t)
	require.Equal(t, 1.0, testutil.ToFloat64(h.e.m.skewClamped))
	require.Equal(t, 1.0, h.count(h.e.m.events, "new"))
	for range 60 { // half an hour of fire passes
		h.clk.Advance(30 * time.Second)
		h.e.FireDue(context.Background())
	}
	got := h.reviewWindows(t)
	require.Len(t, got, 1, "one window, not one per max delay until the clock reaches 3h ahead")
	require.Equal(t, 1.0, h.count(h.e.m.fires, "quiet"))
	ttl, err := h.rdb.PTTL(context.Background(), h.rooms.RoomKey("room-f")).Result()
	require.NoError(t, err)
	require.Positive(t, ttl, "the room's state expires")
	require.LessOrEqual(t, ttl, redisdebounce.DefaultRetention)

	// Within the skew, and any time before arrival (a delivery delay), the
	// sent_at is kept.
	h.events.Enqueue(chatBody("room-g", "m1", h.clk.Now().Add(time.Minute)), chatBody("room-g", "m2", h.clk.Now().Add(-2*time.Hour)))
	h.drain(t)
	require.Equal(t, 1.0, testutil.ToFloat64(h.e.m.skewClamped))
}

func TestAStaleEventGetsAWindowOfItsOwnAndIsCounted(t *testing.T) {
	h := setup(t)
	sent := t0.Add(-25 * time.Hour)
	h.events.Enqueue(chatBody("room-s", "m1", sent))
	h.drain(t)
	require.Zero(t, h.events.Stats().Held, "settled")
	require.Equal(t, 1.0, h.count(h.e.m.events, outcomeStale))
	require.Zero(t, h.count(h.e.m.events, "new"), "not recorded in its room, whose window would reach a whole max window back")
	got := h.reviewWindows(t)
	require.Len(t, got, 1)
	require.Equal(t, sent, got[0].WindowStart)
	require.Equal(t, sent.Add(OwnWindowWidth), got[0].WindowEnd)
	h.e.refreshPending(context.Background())
	require.Zero(t, testutil.ToFloat64(h.e.m.pending))
}

func TestLiveFailsWhenAReceiveLoopStopsAdvancing(t *testing.T) {
	h := setup(t)
	stuck := make(chan struct{})
	var blocking atomic.Bool
	blocking.Store(true)
	h.events.SetFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpReceive && blocking.Load() {
			<-stuck // a receive that never answers
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.e.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, h.clk.BlockUntilContext(wctx, 1)) // the fire loop's ticker: Run is up
	require.NoError(t, h.e.Live())
	h.clk.Advance(h.e.cfg.LiveAfter() + time.Second)
	require.ErrorContains(t, h.e.Live(), "has not advanced")
	blocking.Store(false)
	close(stuck)
	require.Eventually(t, func() bool { return h.e.Live() == nil }, 10*time.Second, 5*time.Millisecond, "live again once the loop advances")
	cancel()
	require.NoError(t, <-done)
}

func TestAnActionNoticeNeverOpensAWindow(t *testing.T) {
	h := setup(t)
	notice := fmt.Appendf(nil, `{"schema_version":1,"room_id":"room-n","message_id":%q,"sender_id":"chatguard","sender_role":"system","kind":"system","sent_at":%q}`,
		pipeline.ActionNoticeID("k1"), t0.Format(time.RFC3339Nano))
	h.events.Enqueue(notice, notice, chatBody("room-m", "m1", t0))
	h.drain(t)

	require.Zero(t, h.events.Stats().Held, "notices are deleted, not left to redeliver")
	require.Empty(t, h.dlq.Messages(), "a notice is not malformed")
	require.Equal(t, 2.0, h.count(h.e.m.events, outcomeNotice))
	require.Equal(t, 1.0, h.count(h.e.m.events, "new"))
	h.clk.Advance(time.Minute)
	require.Equal(t, 1, h.e.FireDue(context.Background()), "only the buyer's or seller's message opens a window")
	ev, err := pipeline.DecodeReviewEvent(h.reviews.Messages()[0].Body)
	require.NoError(t, err)
	require.Equal(t, "room-m", ev.RoomID)
}
