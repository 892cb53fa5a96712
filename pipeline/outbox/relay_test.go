package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

var t0 = time.Date(2026, 11, 3, 5, 0, 0, 0, time.UTC)

// queue is a pipeline.Sender that keeps what it accepted; fail, when set,
// decides each message's fate (nil: accepted).
type queue struct {
	mu   sync.Mutex
	got  []pipeline.OutMessage
	fail func(m pipeline.OutMessage) error
}

func (q *queue) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	errs := make([]error, len(msgs))
	failed := false
	for i, m := range msgs {
		if q.fail != nil {
			errs[i] = q.fail(m)
		}
		if errs[i] == nil {
			q.got = append(q.got, m)
		} else {
			failed = true
		}
	}
	if failed {
		return &pipeline.BatchError{Errs: errs}
	}
	return nil
}

func (q *queue) bodies() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, len(q.got))
	for i, m := range q.got {
		out[i] = string(m.Body)
	}
	return out
}

func (q *queue) setFail(f func(m pipeline.OutMessage) error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fail = f
}

type rig struct {
	store *storetest.Memory
	q     *queue
	clk   *clock.Fake
	r     *Relay
	m     *Metrics
}

func testConfig() Config {
	c := DefaultConfig()
	c.Batch = 10
	return c
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	g := &rig{store: storetest.NewMemory(), q: &queue{}, clk: clock.NewFake(t0), m: NewMetrics(prometheus.NewRegistry())}
	r, err := New(cfg, g.store, map[pipeline.OutboxDestination]pipeline.Sender{pipeline.OutboxFeedback: g.q}, g.clk, g.m, nil)
	require.NoError(t, err)
	g.r = r
	return g
}

func (g *rig) enqueue(t *testing.T, from, n int) {
	t.Helper()
	var msgs []pipeline.OutboxMessage
	for i := from; i < from+n; i++ {
		msgs = append(msgs, storetest.OutboxMessage(pipeline.OutboxFeedback, i))
	}
	require.NoError(t, g.store.Enqueue(context.Background(), g.clk.Now(), msgs))
}

func (g *rig) pending(t *testing.T) int {
	t.Helper()
	b, err := g.store.Backlog(context.Background())
	require.NoError(t, err)
	return b[pipeline.OutboxFeedback].Pending
}

func body(n int) string { return string(storetest.OutboxMessage(pipeline.OutboxFeedback, n).Body) }

func TestRelaySendsDueRowsInBatchesAndMarksThemSent(t *testing.T) {
	t.Parallel()
	g := newRig(t, testConfig())
	g.enqueue(t, 0, 25)
	msg := storetest.OutboxMessage(pipeline.OutboxFeedback, 99)
	msg.Attributes = map[string]pipeline.Attribute{"traceparent": pipeline.StringAttribute("00-1-2-01")}
	require.NoError(t, g.store.Enqueue(context.Background(), t0, []pipeline.OutboxMessage{msg}))
	require.True(t, g.r.pass(context.Background()), "a full claim")
	require.True(t, g.r.pass(context.Background()))
	require.False(t, g.r.pass(context.Background()), "the last six")
	require.False(t, g.r.pass(context.Background()), "nothing left")
	require.Len(t, g.q.bodies(), 26)
	require.Zero(t, g.pending(t))
	require.Equal(t, 26.0, testutil.ToFloat64(g.m.sent.WithLabelValues("feedback")))
	require.Equal(t, msg.Attributes, g.q.got[25].Attributes, "attributes ride along")
}

func TestRelayBacksOffFailedRowsAndSendsThemLater(t *testing.T) {
	t.Parallel()
	g := newRig(t, testConfig())
	g.enqueue(t, 0, 3)
	g.q.setFail(func(m pipeline.OutMessage) error {
		if string(m.Body) == body(1) {
			return errors.New("ServiceUnavailable")
		}
		return nil
	})
	g.r.pass(context.Background())
	require.ElementsMatch(t, []string{body(0), body(2)}, g.q.bodies())
	require.Equal(t, 1, g.pending(t))
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.failed.WithLabelValues("feedback", "retryable")))
	g.q.setFail(nil)
	g.clk.Advance(time.Second - time.Microsecond)
	g.r.pass(context.Background())
	require.Len(t, g.q.bodies(), 2, "not before RetryBase")
	g.clk.Advance(time.Microsecond)
	g.r.pass(context.Background())
	require.Equal(t, body(1), g.q.bodies()[2])
	require.Zero(t, g.pending(t))
}

func TestRelayKeepsARefusedMessagePendingAtTheLongestBackoff(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g := newRig(t, cfg)
	g.enqueue(t, 0, 2)
	g.q.setFail(func(m pipeline.OutMessage) error {
		if string(m.Body) == body(0) {
			return pipeline.Permanent(errors.New("InvalidMessageContents"))
		}
		return nil
	})
	g.r.pass(context.Background())
	require.Equal(t, []string{body(1)}, g.q.bodies())
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.failed.WithLabelValues("feedback", "permanent")))
	g.clk.Advance(cfg.RetryMax - time.Microsecond)
	g.r.pass(context.Background())
	require.Len(t, g.q.bodies(), 1, "never dropped, not retried before RetryMax")
	require.Equal(t, 1, g.pending(t))
	g.r.nextBacklog = time.Time{}
	g.r.housekeep(context.Background())
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.pending.WithLabelValues("feedback")))
	require.InDelta(t, (cfg.RetryMax - time.Microsecond).Seconds(), testutil.ToFloat64(g.m.oldest.WithLabelValues("feedback")), 0.001)
}

// A relay killed after the queue accepted its batch and before it marked
// the rows sent: another relay sends them again after the lease, with the
// same event ids, so the consumer's dedup keeps each once.
func TestRelayKilledBeforeItsMarkResendsAfterTheLease(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g := newRig(t, cfg)
	g.enqueue(t, 0, 3)
	dying := &markless{OutboxStore: g.store}
	r1, err := New(cfg, dying, map[pipeline.OutboxDestination]pipeline.Sender{pipeline.OutboxFeedback: g.q}, g.clk, nil, nil)
	require.NoError(t, err)
	r1.pass(context.Background()) // sends, then "dies" before the mark
	require.Len(t, g.q.bodies(), 3)
	g.r.pass(context.Background())
	require.Len(t, g.q.bodies(), 3, "leased: the second relay does not take them yet")
	g.clk.Advance(cfg.Lease)
	g.r.pass(context.Background())
	require.Len(t, g.q.bodies(), 6, "sent again after the lease")
	require.Zero(t, g.pending(t))
	distinct := map[string]int{}
	for _, b := range g.q.bodies() {
		distinct[b]++
	}
	require.Len(t, distinct, 3, "the same three events, each twice: one after dedup")
}

// markless is a store whose relay dies before marking: its marks never
// reach the store.
type markless struct{ pipeline.OutboxStore }

func (markless) MarkSent(context.Context, time.Time, []int64) error { return errors.New("killed") }

func TestConcurrentRelaysSendEachRowOnce(t *testing.T) {
	t.Parallel()
	g := newRig(t, testConfig())
	g.enqueue(t, 0, 200)
	var wg sync.WaitGroup
	for range 4 {
		r, err := New(testConfig(), g.store, map[pipeline.OutboxDestination]pipeline.Sender{pipeline.OutboxFeedback: g.q}, g.clk, nil, nil)
		require.NoError(t, err)
		wg.Go(func() {
			for r.pass(context.Background()) {
			}
		})
	}
	wg.Wait()
	got := g.q.bodies()
	require.Len(t, got, 200)
	seen := map[string]bool{}
	for _, b := range got {
		require.False(t, seen[b], "sent twice: %s", b)
		seen[b] = true
	}
}

func TestRelayBacksOffWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g := newRig(t, cfg)
	g.store.FailOutbox(errors.New("connection refused"))
	for i := 1; i <= 12; i++ {
		require.False(t, g.r.pass(context.Background()))
		require.Equal(t, min(cfg.Poll<<(i-1), cfg.RetryMax), g.r.wait(), "failure %d", i)
	}
	require.Equal(t, 12.0, testutil.ToFloat64(g.m.storeErrors.WithLabelValues("claim")))
	g.store.FailOutbox(nil)
	g.enqueue(t, 0, 1)
	g.r.pass(context.Background())
	require.Equal(t, cfg.Poll, g.r.wait(), "one success ends the backoff")
	require.Len(t, g.q.bodies(), 1)
}

func TestRelayPurgesSentRowsAfterTheRetention(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g := newRig(t, cfg)
	g.enqueue(t, 0, 3)
	g.r.pass(context.Background())
	g.enqueue(t, 3, 1) // pending: never purged
	g.clk.Advance(cfg.Retention)
	g.r.housekeep(context.Background())
	require.Len(t, g.store.OutboxMessages(), 4, "sent exactly a retention ago: kept")
	g.clk.Advance(purgeEvery)
	g.r.housekeep(context.Background())
	require.Len(t, g.store.OutboxMessages(), 1)
	require.Equal(t, 3.0, testutil.ToFloat64(g.m.purged))
}

// On stop the relay sends what is due before it returns: a verdict
// committed just before the stop leaves with this pod.
func TestRelayDrainsWhatIsDueOnStop(t *testing.T) {
	t.Parallel()
	g := newRig(t, testConfig())
	ctx, stop := context.WithCancel(context.Background())
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	done := make(chan error, 1)
	go func() { done <- g.r.Run(drain.WithHard(ctx, hard)) }()
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	require.NoError(t, g.clk.BlockUntilContext(bctx, 1), "the relay waits for its next poll")
	g.enqueue(t, 0, 25)
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-bctx.Done():
		t.Fatal("Run did not return after the stop")
	}
	require.Len(t, g.q.bodies(), 25)
}

// A drain that cannot finish (the queue is down) ends with the hard
// context; the rows stay for another relay.
func TestRelayDrainEndsWithTheHardContext(t *testing.T) {
	t.Parallel()
	g := newRig(t, testConfig())
	g.enqueue(t, 0, 25)
	g.q.setFail(func(pipeline.OutMessage) error { return errors.New("unreachable") })
	ctx, stop := context.WithCancel(context.Background())
	stop()
	hard, cancelHard := context.WithCancel(context.Background())
	cancelHard()
	require.NoError(t, g.r.Run(drain.WithHard(ctx, hard)))
	require.Equal(t, 25, g.pending(t))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultConfig().Validate())
	bad := Config{Batch: MaxBatch + 1, Lease: time.Second, SendTimeout: time.Second, RetryBase: 2 * time.Second, RetryMax: time.Second}
	err := bad.Validate()
	for _, want := range []string{"batch", "poll", "lease", "retry", "retention", "drain"} {
		require.ErrorContains(t, err, want)
	}
	_, err = New(DefaultConfig(), nil, nil, nil, nil, nil)
	require.Error(t, err)
	require.Equal(t, "outbox batch must be 1 to 1000", fmt.Sprint(Config{Batch: 0}.Validate().(interface{ Unwrap() []error }).Unwrap()[0]))
}
