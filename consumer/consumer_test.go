package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

var t0 = time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Hour)

type env struct {
	q     *queuetest.Fake
	store *memStore
	c     *consumer.Consumer
	reg   *prometheus.Registry
	stop  func() error
}

func testConfig() consumer.Config {
	cfg := consumer.DefaultConfig()
	cfg.FlushAge = 200 * time.Millisecond
	cfg.FlushRows = 1000
	cfg.FlushBytes = 1 << 20
	cfg.MaxBufferedBytes = 8 << 20
	cfg.MaxBufferedEvents = 5000
	cfg.VisibilityTimeout = 3 * time.Second
	cfg.ReceiveConcurrency = 2
	cfg.FlushConcurrency = 2
	cfg.DrainTimeout = 5 * time.Second
	cfg.RetryInitial = 10 * time.Millisecond
	cfg.RetryMax = 100 * time.Millisecond
	return cfg
}

// setup starts a consumer over a fake queue and an in-memory store; stop
// ends it as SIGTERM would and returns Run's error.
func setup(t *testing.T, mutate func(*consumer.Config)) *env {
	t.Helper()
	return setupWith(t, mutate, consumer.Options{})
}

// setupWith is setup with the consumer's options (its clock).
func setupWith(t *testing.T, mutate func(*consumer.Config), opt consumer.Options) *env {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	e := &env{q: newQueue(), store: newMemStore(), reg: prometheus.NewRegistry()}
	cfg.Registerer = e.reg
	c, err := consumer.New(cfg, e.q, newLake(e.store), opt)
	require.NoError(t, err)
	e.c = c
	ctx, cancel := context.WithCancel(context.Background())
	// The drain a lifecycle group would give it, on the consumer's clock.
	ctx, release := drain.After(ctx, opt.Clock, cfg.DrainTimeout)
	t.Cleanup(release)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var stopped atomic.Bool
	e.stop = func() error {
		stopped.Store(true)
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of cancel")
			return nil
		}
	}
	t.Cleanup(func() {
		if !stopped.Load() {
			_ = e.stop()
		}
	})
	return e
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) sendEvents(t *testing.T, evs []pipeline.LakeEvent) map[string]pipeline.LakeEvent {
	t.Helper()
	want := map[string]pipeline.LakeEvent{}
	for _, ev := range evs {
		enqueue(e.q, s3laketest.Body(t, ev))
		want[ev.EventID] = ev
	}
	return want
}

// requireLake checks that the lake holds exactly want, each once.
func (e *env) requireLake(t *testing.T, want map[string]pipeline.LakeEvent) s3laketest.Contents {
	t.Helper()
	got, err := s3laketest.ReadLake(context.Background(), e.store, "events/", "errors/")
	require.NoError(t, err)
	byID, copies := got.ByID()
	require.Equal(t, want, byID)
	for id, n := range copies {
		require.Equal(t, 1, n, "event %s written %d times", id, n)
	}
	return got
}

func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

func TestEveryEventLandsOnceInItsPartition(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	want := e.sendEvents(t, s3laketest.Events(600, 1, t0, 3))
	bad := [][]byte{
		[]byte(`not json`),
		[]byte(`{"event_id":"x","event_type":"verdict","occurred_at":"2025-01-01T00:00:00Z","schema_version":1,"payload":{}}`),
		[]byte(`{"event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","event_type":"click","occurred_at":"2025-01-01T00:00:00Z","schema_version":1,"payload":{}}`),
		[]byte("\xff\xfe"),
	}
	enqueue(e.q, bad...)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())

	got := e.requireLake(t, want)
	require.Greater(t, got.Objects, 8, "three types over three or four hours make at least nine partitions")
	require.Len(t, got.Errors, len(bad))
	reasons := map[string]string{}
	for _, l := range got.Errors {
		require.NotEmpty(t, l.Reason)
		reasons[l.Body] = l.Reason
	}
	require.Contains(t, reasons["not json"], "not a JSON lake event")
	require.Contains(t, reasons[string(bad[1])], "event_id is not a UUID")
	require.Contains(t, reasons[string(bad[2])], `event_type "click" is unknown`)
	require.Contains(t, reasons["\uFFFD"], "not a JSON lake event", "invalid UTF-8 is replaced, the line stays JSON")

	require.Equal(t, 200.0, metric(t, e.reg, "chatguard_consumer_events_total", map[string]string{"event_type": "verdict", "outcome": "written"}))
	require.Equal(t, 4.0, metric(t, e.reg, "chatguard_consumer_errors_written_total", nil))
	require.Equal(t, 1.0, metric(t, e.reg, "chatguard_consumer_events_total", map[string]string{"event_type": "verdict", "outcome": "invalid"}))
	require.Equal(t, 0.0, metric(t, e.reg, "chatguard_consumer_buffered_bytes", nil))
	require.Equal(t, float64(got.Objects+1), metric(t, e.reg, "chatguard_consumer_object_bytes", nil), "one observation per object, errors included")
	require.Equal(t, 604, int(received(e.q)), "no message was redelivered")
}

func TestStoreOutageDeletesNothingAndLosesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.store.failing.Store(true)
	want := e.sendEvents(t, s3laketest.Events(200, 2, t0, 2))
	start := time.Now()
	// Outlast the 3s visibility timeout so that renewals are exercised.
	waitFor(t, "the outage to outlast the visibility timeout", func() bool {
		_, deleted := queueStats(e.q)
		require.Zero(t, deleted, "nothing is deleted while nothing is written")
		return time.Since(start) > 4500*time.Millisecond && e.store.fails.Load() > 10
	})
	require.Zero(t, e.q.Stats().Visible, "buffered messages are kept invisible")
	require.Equal(t, 200.0, metric(t, e.reg, "chatguard_consumer_buffered_events", nil))
	require.Greater(t, metric(t, e.reg, "chatguard_consumer_oldest_buffered_age_seconds", nil), 4.0)
	require.Greater(t, metric(t, e.reg, "chatguard_consumer_flushes_total", map[string]string{"outcome": "retry"}), 0.0)
	require.GreaterOrEqual(t, metric(t, e.reg, "chatguard_consumer_visibility_extended_total", nil), 200.0, "every held message renewed")

	e.store.failing.Store(false)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())
	e.requireLake(t, want)
	require.Equal(t, 200, int(received(e.q)), "renewed visibility: no redelivery")
}

func TestBackpressureStopsReceivingNeverDrops(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *consumer.Config) { c.MaxBufferedEvents = 50 })
	e.store.failing.Store(true)
	want := e.sendEvents(t, s3laketest.Events(300, 3, t0, 1))
	waitFor(t, "failed writes", func() bool { return e.store.fails.Load() > 20 })
	require.LessOrEqual(t, received(e.q), int64(50+10*2), "receiving stops at the bound (one receive per receiver may overshoot)")
	require.LessOrEqual(t, metric(t, e.reg, "chatguard_consumer_buffered_events", nil), 70.0)

	e.store.failing.Store(false)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())
	e.requireLake(t, want)
}

func TestShutdownFlushesEveryPartition(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *consumer.Config) { c.FlushAge = time.Hour })
	want := e.sendEvents(t, s3laketest.Events(100, 4, t0, 2))
	waitFor(t, "every message to be received", func() bool { return received(e.q) == 100 })
	require.Zero(t, e.store.count(), "nothing is due before shutdown")
	require.True(t, e.c.Ready())
	require.NoError(t, e.stop())
	require.False(t, e.c.Ready())
	left, deleted := queueStats(e.q)
	require.Zero(t, left)
	require.Equal(t, 100, deleted)
	e.requireLake(t, want)
}

func TestDrainDeadlineHandsMessagesBack(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *consumer.Config) { c.DrainTimeout = 300 * time.Millisecond; c.FlushAge = time.Hour })
	e.store.failing.Store(true)
	e.sendEvents(t, s3laketest.Events(50, 5, t0, 1))
	waitFor(t, "every message to be received", func() bool { return received(e.q) == 50 })
	err := e.stop()
	require.ErrorContains(t, err, "50 messages not written")
	left, deleted := queueStats(e.q)
	require.Equal(t, 50, left)
	require.Zero(t, deleted)
	require.Equal(t, 50, e.q.Stats().Visible, "unwritten messages are visible again at once")
	require.Equal(t, 3.0, metric(t, e.reg, "chatguard_consumer_flushes_total", map[string]string{"outcome": "abandoned"}))
}

func TestFlushBySizeAndRowsBeforeAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*consumer.Config)
	}{
		{"rows", func(c *consumer.Config) { c.FlushRows = 40 }},
		{"bytes", func(c *consumer.Config) { c.FlushBytes = 20 << 10; c.MaxBufferedBytes = 1 << 20 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(c *consumer.Config) { c.FlushAge = time.Hour; tc.mutate(c) })
			var evs []pipeline.LakeEvent
			for _, ev := range s3laketest.Events(600, 6, t0, 1) {
				if ev.EventType == pipeline.EventVerdict {
					evs = append(evs, ev)
				}
			}
			// Waves, each enough to make the partition due, so that each
			// gives at least one object however fast receiving is.
			want := map[string]pipeline.LakeEvent{}
			for wave := range 3 {
				maps.Copy(want, e.sendEvents(t, evs[wave*60:(wave+1)*60]))
				waitFor(t, "a size-triggered flush", func() bool { return e.store.count() > wave })
			}
			require.NoError(t, e.stop())
			e.requireLake(t, want)
		})
	}
}

// lossyStore writes objects but reports failure for the first n puts, as
// when the response to a successful PUT is lost: the retry must overwrite
// the same key, not add a second copy.
type lossyStore struct {
	*memStore
	n atomic.Int64
}

func (s *lossyStore) Put(ctx context.Context, key string, body []byte, ct string) error {
	err := s.memStore.Put(ctx, key, body, ct)
	if err == nil && s.n.Add(-1) >= 0 {
		return context.DeadlineExceeded
	}
	return err
}

func TestRetriedFlushOverwritesItsObject(t *testing.T) {
	t.Parallel()
	q, mem := newQueue(), newMemStore()
	st := &lossyStore{memStore: mem}
	st.n.Store(5)
	cfg := testConfig()
	c, err := consumer.New(cfg, q, newLake(st), consumer.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ctx, release := drain.After(ctx, nil, cfg.DrainTimeout)
	defer release()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	want := map[string]pipeline.LakeEvent{}
	for _, ev := range s3laketest.Events(90, 7, t0, 1) {
		enqueue(q, s3laketest.Body(t, ev))
		want[ev.EventID] = ev
	}
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(q); return left == 0 })
	cancel()
	require.NoError(t, <-done)
	e := &env{store: mem}
	e.requireLake(t, want)
	retried := 0
	for _, n := range mem.puts {
		if n > 1 {
			retried++
		}
	}
	require.Positive(t, retried, "some key was written more than once")
}

func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := consumer.DefaultConfig()
	cfg.FlushRows = 0
	cfg.VisibilityTimeout = 1500 * time.Millisecond
	cfg.MaxBufferedEvents = 200_000
	err := cfg.Validate()
	for _, want := range []string{"flush-rows", "visibility-timeout", "max-buffered-events"} {
		require.ErrorContains(t, err, want)
	}
	require.NoError(t, consumer.DefaultConfig().Validate())
}

func TestInvalidBodyKeepsItsBytes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	body := map[string]any{"event_id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "event_type": "verdict", "occurred_at": "2025-01-01T00:00:00Z", "schema_version": 2, "payload": map[string]any{"room_id": "r"}}
	b, err := json.Marshal(body)
	require.NoError(t, err)
	enqueue(e.q, b)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())
	got := e.requireLake(t, map[string]pipeline.LakeEvent{})
	require.Len(t, got.Errors, 1)
	require.Equal(t, string(b), got.Errors[0].Body)
	require.Equal(t, pipeline.EventVerdict, got.Errors[0].EventType)
	require.Contains(t, got.Errors[0].Reason, "schema_version 2 of verdict is not supported")
}

func TestRedeliveredWhileHeldIsWrittenOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	failExtend(e.q)
	e.store.failing.Store(true)
	want := e.sendEvents(t, s3laketest.Events(60, 8, t0, 1))
	waitFor(t, "redeliveries of held messages", func() bool { return received(e.q) >= 120 })
	require.Positive(t, metric(t, e.reg, "chatguard_consumer_events_total", map[string]string{"event_type": "verdict", "outcome": "duplicate"}))
	require.Equal(t, 60.0, metric(t, e.reg, "chatguard_consumer_buffered_events", nil), "a redelivery is not buffered twice")
	require.Zero(t, metric(t, e.reg, "chatguard_consumer_visibility_extended_total", nil), "refused renewals are not counted")
	e.store.failing.Store(false)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())
	// Extensions keep failing, so on a loaded machine a message's
	// visibility can also run out between its write and its delete; that
	// delete then fails (counted) and the message is written again, the
	// at-least-once copy the views remove. Every other event is written
	// exactly once, and the latest receipt is what deletes use.
	failedDeletes := int(metric(t, e.reg, "chatguard_consumer_queue_errors_total", map[string]string{"op": "delete"}))
	got, err := s3laketest.ReadLake(context.Background(), e.store, "events/", "errors/")
	require.NoError(t, err)
	byID, copies := got.ByID()
	require.Equal(t, want, byID)
	extra := 0
	for _, n := range copies {
		extra += n - 1
	}
	require.LessOrEqual(t, extra, failedDeletes, "a copy beyond the first only for a delete that failed (%d)", failedDeletes)
}

func TestReceiveErrorsBackOffAndRecover(t *testing.T) {
	t.Parallel()
	backoff := &instantTimers{Clock: clock.Real()}
	e := setupWith(t, nil, consumer.Options{Clock: backoff})
	faults := 4
	e.q.SetFault(func(op queuetest.Op, _ queuetest.Entry) error {
		if op == queuetest.OpReceive && faults > 0 {
			faults--
			return errors.New("unavailable")
		}
		return nil
	})
	want := e.sendEvents(t, s3laketest.Events(50, 9, t0, 1))
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())
	e.requireLake(t, want)
	require.Equal(t, 4.0, metric(t, e.reg, "chatguard_consumer_queue_errors_total", map[string]string{"op": "receive"}))
	waits := backoff.all()
	require.Len(t, waits, 4, "one backoff per failed receive, never a real wait")
	for _, w := range waits {
		require.LessOrEqual(t, w, time.Second, "the first backoff ceiling of a second")
	}
}

func TestFailedDeletesAreCountedAndWrittenAgain(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	failing := map[string]bool{"msg-2": true, "msg-5": true, "msg-7": true}
	e.q.SetFault(func(op queuetest.Op, en queuetest.Entry) error {
		// Called under the fake's lock. Each fails its first delete only.
		if op == queuetest.OpDelete && failing[en.ID] {
			delete(failing, en.ID)
			return errors.New("InternalError")
		}
		return nil
	})
	evs := s3laketest.Events(30, 10, t0, 1)
	want := e.sendEvents(t, evs)
	failedDeletes := func() float64 {
		return metric(t, e.reg, "chatguard_consumer_queue_errors_total", map[string]string{"op": "delete"})
	}
	// Only the three whose delete failed may still be held when the clock
	// moves on: a message whose write or delete is still under way would
	// also come back, and be written twice for no fault of its own.
	waitFor(t, "the failed deletes", func() bool {
		held, _ := queueStats(e.q)
		return failedDeletes() == 3 && held == 3
	})
	// Their visibility runs out, they come back and are written again.
	e.q.Advance(testConfig().VisibilityTimeout)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())
	got, err := s3laketest.ReadLake(context.Background(), e.store, "events/", "errors/")
	require.NoError(t, err)
	byID, copies := got.ByID()
	require.Equal(t, want, byID)
	twice := 0
	for _, n := range copies {
		require.LessOrEqual(t, n, 2)
		if n == 2 {
			twice++
		}
	}
	require.Equal(t, 3, twice, "a message whose delete failed is written again, once")
	require.Equal(t, 3.0, failedDeletes())
}

// instantTimers is the wall clock except that its timers, the backoff
// waits' only source, fire at once; it records what each was set for.
// Tickers and the time of day stay real, so flushes by age still happen.
type instantTimers struct {
	clock.Clock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *instantTimers) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.Clock.NewTimer(0)
}

func (c *instantTimers) all() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// Run on its own, with no hard context, the consumer has no drain: ctx is
// its own hard context, so what is buffered at the stop is handed back at
// once rather than written.
func TestWithoutAHardContextTheBufferIsHandedBack(t *testing.T) {
	t.Parallel()
	q, st := newQueue(), newMemStore()
	cfg := testConfig()
	cfg.FlushAge = time.Hour
	c, err := consumer.New(cfg, q, newLake(st), consumer.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e := &env{q: q}
	e.sendEvents(t, s3laketest.Events(20, 3, t0, 1))
	waitFor(t, "every message to be received", func() bool { return received(q) == 20 })
	cancel()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "20 messages not written")
	case <-time.After(30 * time.Second):
		t.Fatal("Run waited for a drain with no hard context")
	}
	require.Zero(t, st.count(), "nothing written after the stop")
	require.Equal(t, 20, q.Stats().Visible, "handed back at once")
}

func TestShadowVerdictsLandBesideTheOtherTypes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	evs := append(s3laketest.Events(90, 4, t0, 2), s3laketest.ShadowEvents(60, 4, t0, 2)...)
	want := e.sendEvents(t, evs)
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())

	got := e.requireLake(t, want)
	require.Empty(t, got.Errors)
	shadowObjects := map[string]bool{}
	for i, ev := range got.Events {
		if ev.EventType == pipeline.EventShadowVerdict {
			shadowObjects[got.Keys[i]] = true
		}
	}
	for key := range shadowObjects {
		require.Contains(t, key, "events/event_type=shadow_verdict/dt=")
	}
	require.NotEmpty(t, shadowObjects)
	require.Equal(t, 60.0, metric(t, e.reg, "chatguard_consumer_events_total", map[string]string{"event_type": "shadow_verdict", "outcome": "written"}))
}

// TestActionEventsLandInTheirOwnTable: protective_action events, written
// and published, go to their own partitions beside the other types and
// read back unchanged.
func TestActionEventsLandInTheirOwnTable(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	acts := s3laketest.ActionEvents(60, 5, t0, 2)
	want := e.sendEvents(t, append(s3laketest.Events(30, 5, t0, 2), acts...))
	waitFor(t, "the queue to empty", func() bool { left, _ := queueStats(e.q); return left == 0 })
	require.NoError(t, e.stop())

	got := e.requireLake(t, want)
	require.Empty(t, got.Errors)
	n := 0
	for i, ev := range got.Events {
		if ev.EventType == pipeline.EventProtectiveAction {
			n++
			require.Contains(t, got.Keys[i], "events/event_type=protective_action/dt=")
		}
	}
	require.Equal(t, len(acts), n)
	require.Equal(t, float64(len(acts)), metric(t, e.reg, "chatguard_consumer_events_total", map[string]string{"event_type": "protective_action", "outcome": "written"}))
}
