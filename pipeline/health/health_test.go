package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func setup(t *testing.T) (*Monitor, *clock.Fake, *prometheus.Registry, *syncBuf) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncBuf{}
	c := clock.NewFake(time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC))
	m, err := New(Config{Failures: 3, OpenFor: 5 * time.Second}, reg, slog.New(slog.NewJSONHandler(logs, nil)), WithClock(c))
	require.NoError(t, err)
	return m, c, reg, logs
}

var errDown = errors.New("connection refused")

func fail(context.Context) error { return errDown }
func ok(context.Context) error   { return nil }

func TestBreakerOpensProbesAndRecovers(t *testing.T) {
	t.Parallel()
	m, c, _, logs := setup(t)
	ctx := context.Background()
	for i := range 2 {
		err := m.Call(ctx, pipeline.DepMySQL, fail)
		var de *pipeline.DependencyError
		require.ErrorAs(t, err, &de)
		require.False(t, de.Down, "failure %d: not yet down", i+1)
		d, _ := pipeline.Classify(err)
		require.Equal(t, pipeline.RetryLater, d)
	}
	err := m.Call(ctx, pipeline.DepMySQL, fail)
	d, _ := pipeline.Classify(err)
	require.Equal(t, pipeline.Hold, d, "the third failure opens the breaker: hold")
	require.Equal(t, Open, m.State(pipeline.DepMySQL))
	require.Equal(t, []pipeline.Dependency{pipeline.DepMySQL}, m.Down())
	require.Equal(t, Closed, m.State(pipeline.DepChatAPI), "dependencies are independent")

	// Open: calls are refused without running.
	ran := false
	err = m.Call(ctx, pipeline.DepMySQL, func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, ErrOpen)
	require.False(t, ran)

	// After OpenFor: one probe; a failed probe opens it again.
	c.Advance(5 * time.Second)
	require.Equal(t, HalfOpen, m.State(pipeline.DepMySQL))
	require.Error(t, m.Call(ctx, pipeline.DepMySQL, fail))
	require.Equal(t, Open, m.State(pipeline.DepMySQL))
	c.Advance(5 * time.Second)
	require.NoError(t, m.Call(ctx, pipeline.DepMySQL, ok))
	require.Equal(t, Closed, m.State(pipeline.DepMySQL))
	require.Empty(t, m.Down())

	// One log line per transition.
	lines := strings.Count(logs.String(), "\n")
	require.Equal(t, 5, lines, logs.String()) // open, half-open, open, half-open, closed
	require.Equal(t, 1, strings.Count(logs.String(), `"msg":"health: dependency recovered"`))
}

func TestJobSpecificErrorsAndCancellationDoNotOpen(t *testing.T) {
	t.Parallel()
	m, _, _, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	for range 10 {
		err := m.Call(ctx, pipeline.DepChatAPI, func(context.Context) error { return pipeline.Permanent(errors.New("room not found")) })
		var perm *pipeline.PermanentError
		require.ErrorAs(t, err, &perm, "returned as is")
	}
	cancel()
	for range 10 {
		require.Error(t, m.Call(ctx, pipeline.DepChatAPI, func(ctx context.Context) error { return ctx.Err() }))
	}
	require.Equal(t, Closed, m.State(pipeline.DepChatAPI))
}

// Answers unusable on every attempt are the chat's doing: however many
// jobs end that way, the models' breaker stays closed, while a run of
// server errors (5xx, transport, timeouts) still opens it.
func TestUnusableAnswersDoNotOpenTheModelsBreaker(t *testing.T) {
	t.Parallel()
	m, _, _, _ := setup(t)
	ctx := context.Background()
	unusable := func(context.Context) error {
		return fmt.Errorf("review: triage: llm: %w", &pipeline.UnusableAnswerError{Stage: pipeline.StageTriage, Attempts: 4, Err: errors.New("risk is not none, low or high")})
	}
	for range 10 {
		err := m.Call(ctx, pipeline.DepModels, unusable)
		require.ErrorAs(t, err, new(*pipeline.UnusableAnswerError), "returned as is")
		require.NotErrorAs(t, err, new(*pipeline.DependencyError))
	}
	require.Equal(t, Closed, m.State(pipeline.DepModels))
	for range 3 {
		_ = m.Call(ctx, pipeline.DepModels, func(context.Context) error {
			return pipeline.Retryable(errors.New("llm: triage: 4 attempts failed, last: status 503"), 0)
		})
	}
	require.Equal(t, Open, m.State(pipeline.DepModels))
}

func TestOneProbeAtATime(t *testing.T) {
	t.Parallel()
	m, c, _, _ := setup(t)
	ctx := context.Background()
	for range 3 {
		_ = m.Call(ctx, pipeline.DepModels, fail)
	}
	c.Advance(5 * time.Second)
	probing, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- m.Call(ctx, pipeline.DepModels, func(context.Context) error { close(probing); <-finish; return nil })
	}()
	<-probing
	require.ErrorIs(t, m.Call(ctx, pipeline.DepModels, ok), ErrOpen, "a second call waits for the probe's answer")
	close(finish)
	require.NoError(t, <-done)
	require.Equal(t, Closed, m.State(pipeline.DepModels))
}

func TestWaitNotOpenWakesWhenTheBreakerMayProbe(t *testing.T) {
	t.Parallel()
	m, c, reg, _ := setup(t)
	ctx := context.Background()
	require.NoError(t, m.WaitNotOpen(ctx), "nothing open: no wait")
	for range 3 {
		_ = m.Call(ctx, pipeline.DepChatAPI, fail)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(m.gauge.WithLabelValues("chat_api", "open")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.gauge.WithLabelValues("chat_api", "closed")))
	done := make(chan error, 1)
	go func() { done <- m.WaitNotOpen(ctx) }()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.BlockUntilContext(wait, 1), "waits on the clock for the end of the open time")
	c.Advance(5*time.Second - time.Nanosecond)
	select {
	case <-done:
		t.Fatal("returned while open")
	default:
	}
	c.Advance(time.Nanosecond)
	require.NoError(t, <-done)
	require.Equal(t, 1.0, testutil.ToFloat64(m.gauge.WithLabelValues("chat_api", "half_open")))
	n, err := testutil.GatherAndCount(reg, "chatguard_worker_dependency_state")
	require.NoError(t, err)
	require.Equal(t, 9, n, "three states of three dependencies")

	// A cancelled wait returns the cause.
	for range 3 {
		_ = m.Call(ctx, pipeline.DepMySQL, fail)
	}
	cctx, cancelCause := context.WithCancelCause(ctx)
	cancelCause(errors.New("draining"))
	require.EqualError(t, m.WaitProbe(cctx, pipeline.DepMySQL), "draining")
}
