package reviewjob

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/storage/storetest"
)

type fakeChat struct {
	calls atomic.Int32
	err   error
}

func (c *fakeChat) History(ctx context.Context, room string, from, to time.Time) ([]pipeline.ChatMessage, error) {
	c.calls.Add(1)
	if c.err != nil {
		return nil, c.err
	}
	return []pipeline.ChatMessage{{MessageID: "m1", SenderID: "u1", SenderRole: pipeline.RoleSeller, SentAt: from, Kind: pipeline.KindText, Text: "선입금 부탁드려요"}}, nil
}

type fakeReviewer struct {
	calls  atomic.Int32
	review func(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error)
}

func (r *fakeReviewer) PipelineVersion() string { return "pv-test" }

func (r *fakeReviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
	r.calls.Add(1)
	if r.review != nil {
		return r.review(ctx, ev, msgs, attempt)
	}
	return abusive(), nil
}

func abusive() pipeline.Verdict {
	return pipeline.Verdict{
		Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Confidence: 0.9, Action: pipeline.ActionRestrict, Rationale: "prepayment", EvidenceIDs: []string{"m1"},
		Stages: []pipeline.StageResult{
			{Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Model: "p", Attempts: 1, TTFT: 10 * time.Millisecond, Latency: 50 * time.Millisecond, TokensIn: 100, TokensOut: 10, Output: []byte(`{}`)},
			{Stage: pipeline.StageJudge, Pool: pipeline.PoolFallback, Model: "f", Attempts: 2, TTFT: 20 * time.Millisecond, Latency: 80 * time.Millisecond, TokensIn: 200, TokensOut: 20, Output: []byte(`{}`)},
		},
	}
}

type fakeSink struct {
	mu  sync.Mutex
	evs []pipeline.LakeEvent
}

func (s *fakeSink) Publish(ev pipeline.LakeEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
	return true
}

func (s *fakeSink) events() []pipeline.LakeEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pipeline.LakeEvent(nil), s.evs...)
}

type reviewRig struct {
	h      jobloop.Handler
	cfg    Config
	store  *storetest.Memory
	chat   *fakeChat
	rev    *fakeReviewer
	sink   *fakeSink
	m      *Metrics
	reg    *prometheus.Registry
	clk    *clock.Fake
	window time.Time
}

// setupReview is a handler over in-memory fakes on a fake clock that
// moves only when the test advances it.
func setupReview(t *testing.T) *reviewRig {
	t.Helper()
	r := &reviewRig{store: storetest.NewMemory(), chat: &fakeChat{}, rev: &fakeReviewer{}, sink: &fakeSink{}, reg: prometheus.NewRegistry()}
	r.m = NewMetrics(r.reg, jobloop.NewMetrics(r.reg))
	r.clk = clock.NewFake(time.Date(2026, 11, 3, 5, 10, 0, 0, time.UTC))
	r.window = time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)
	r.cfg = Config{MaxAge: 6 * time.Hour}
	r.build(r.deps())
	return r
}

// deps are the rig's fakes.
func (r *reviewRig) deps() Deps {
	return Deps{Store: r.store, Chat: r.chat, Reviewer: r.rev, Events: r.sink}
}

// build replaces the rig's handler with one over deps and r.cfg.
func (r *reviewRig) build(deps Deps) *Handler {
	h := New(r.cfg, deps, r.clk, r.m, nil)
	r.h = h
	return h
}

// now is the rig's clock.
func (r *reviewRig) now() time.Time { return r.clk.Now() }

func (r *reviewRig) body(t *testing.T, mut ...func(*pipeline.ReviewEvent)) []byte {
	t.Helper()
	ev := pipeline.ReviewEvent{RoomID: "room-1", WindowStart: r.window, WindowEnd: r.window.Add(time.Hour), RunID: "run-1",
		PublishedAt: r.window.Add(time.Hour + 5*time.Minute), SchemaVersion: pipeline.ReviewSchemaVersion}
	for _, f := range mut {
		f(&ev)
	}
	b, err := ev.Encode()
	require.NoError(t, err)
	return b
}

func (r *reviewRig) key() pipeline.ReviewKey {
	return pipeline.ReviewKey{RoomID: "room-1", WindowStart: r.window, WindowEnd: r.window.Add(time.Hour), PipelineVersion: "pv-test"}
}

func msg(body []byte, receive, maxReceive int) jobloop.Message {
	return jobloop.Message{ID: "mid", ReceiptHandle: "rh", Body: body, ReceiveCount: receive, Final: receive >= maxReceive}
}

func TestReviewDone(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	out := r.h.Handle(context.Background(), msg(r.body(t), 2, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, "done", out.Label)
	v, err := r.store.Get(context.Background(), r.key())
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	require.Equal(t, pipeline.LabelAbusive, v.Label)
	require.Equal(t, "run-1", v.RunID)
	require.Equal(t, 2, v.Attempts)
	require.Len(t, v.Stages, 2)
	require.Equal(t, r.now(), v.StartedAt)
	require.Equal(t, r.window.Add(time.Hour+5*time.Minute), v.PublishedAt)
	evs := r.outboxEvents(t)
	require.Len(t, evs, 1)
	require.Equal(t, pipeline.EventVerdict, evs[0].EventType)
	p := evs[0].Payload.(pipeline.VerdictEvent)
	require.True(t, p.FallbackUsed)
	require.Equal(t, pipeline.StatusDone, p.Status)
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.admissions.WithLabelValues("admitted")))
	require.Equal(t, 300.0, testutil.ToFloat64(r.m.tokens.WithLabelValues("triage", "in"))+testutil.ToFloat64(r.m.tokens.WithLabelValues("judge", "in")))
}

func TestReviewPoison(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   func(r *reviewRig, t *testing.T) []byte
		reason string
	}{
		{"not json", func(*reviewRig, *testing.T) []byte { return []byte("hello") }, "not a JSON review event"},
		{"unknown schema", func(r *reviewRig, t *testing.T) []byte {
			return r.body(t, func(e *pipeline.ReviewEvent) { e.SchemaVersion = 2 })
		}, "schema_version 2"},
		{"missing room", func(r *reviewRig, t *testing.T) []byte {
			return r.body(t, func(e *pipeline.ReviewEvent) { e.RoomID = "" })
		}, "room_id is missing"},
		{"window backwards", func(r *reviewRig, t *testing.T) []byte {
			return r.body(t, func(e *pipeline.ReviewEvent) { e.WindowEnd = e.WindowStart })
		}, "window_end is not after window_start"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setupReview(t)
			out := r.h.Handle(context.Background(), msg(tc.body(r, t), 1, 5))
			require.Equal(t, jobloop.Poison, out.Action)
			require.Contains(t, out.Reason, tc.reason)
			require.Zero(t, r.rev.calls.Load())
			require.Empty(t, r.store.All())
		})
	}
}

func TestReviewAdmission(t *testing.T) {
	t.Parallel()
	t.Run("duplicate", func(t *testing.T) {
		t.Parallel()
		r := setupReview(t)
		require.Equal(t, "done", r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Label)
		out := r.h.Handle(context.Background(), msg(r.body(t), 2, 5))
		require.Equal(t, jobloop.Delete, out.Action)
		require.Equal(t, "duplicate", out.Label)
		require.Equal(t, int32(1), r.rev.calls.Load())
		require.Equal(t, int32(1), r.chat.calls.Load())
		require.Len(t, r.store.All(), 1)
	})
	t.Run("duplicate sends the verdict event again, into the same partition", func(t *testing.T) {
		t.Parallel()
		// The first run's event may never have left (the pod was killed
		// between the commit and the send, or SQS was down for both the
		// send and the delete): the redelivery is the last chance.
		r := setupReview(t)
		require.Equal(t, "done", r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Label)
		r.clk.Advance(2 * time.Hour) // redelivered in a later hour
		require.Equal(t, "duplicate", r.h.Handle(context.Background(), msg(r.body(t), 2, 5)).Label)
		evs := append(r.outboxEvents(t), r.sink.events()...)
		require.Len(t, evs, 2, "the first with the verdict's save, the second from the duplicate")
		require.Equal(t, evs[0].EventID, evs[1].EventID, "one event id, which the _dedup views keep once")
		require.Equal(t, evs[0].OccurredAt, evs[1].OccurredAt, "one partition, where the _dedup views collapse the copies")
		require.Equal(t, evs[0].Payload, evs[1].Payload)
	})
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		r := setupReview(t)
		r.clk.Advance(7 * time.Hour)
		out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
		require.Equal(t, jobloop.Delete, out.Action)
		require.Equal(t, "expired", out.Label)
		require.Zero(t, r.rev.calls.Load())
		require.Zero(t, r.chat.calls.Load())
		v, err := r.store.Get(context.Background(), r.key())
		require.NoError(t, err)
		require.Equal(t, pipeline.StatusExpired, v.Status)
		require.Contains(t, v.Error, "over the 6h0m0s limit")
	})
	t.Run("failed row is retried, not a duplicate", func(t *testing.T) {
		t.Parallel()
		r := setupReview(t)
		storetest.MustSave(t, context.Background(), r.store, pipeline.Verdict{Key: r.key(), Status: pipeline.StatusFailed, PublishedAt: r.now()})
		out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
		require.Equal(t, "done", out.Label)
	})
	t.Run("same key already running here", func(t *testing.T) {
		t.Parallel()
		r := setupReview(t)
		entered, release := make(chan struct{}), make(chan struct{})
		r.rev.review = func(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
			close(entered)
			<-release
			return abusive(), nil
		}
		first := make(chan jobloop.Outcome, 1)
		go func() { first <- r.h.Handle(context.Background(), msg(r.body(t), 1, 5)) }()
		<-entered
		out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
		require.Equal(t, jobloop.Retry, out.Action)
		require.Equal(t, "busy", out.Label)
		require.Equal(t, 10*time.Second, out.After)
		close(release)
		require.Equal(t, "done", (<-first).Label)
		require.Equal(t, "duplicate", r.h.Handle(context.Background(), msg(r.body(t), 2, 5)).Label)
		require.Equal(t, int32(1), r.rev.calls.Load())
	})
	t.Run("store down", func(t *testing.T) {
		t.Parallel()
		r := setupReview(t)
		r.store.GetErr = func(pipeline.ReviewKey) error { return errors.New("connection refused") }
		out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
		require.Equal(t, jobloop.Retry, out.Action)
		require.Zero(t, r.rev.calls.Load())
	})
}

func TestReviewFailures(t *testing.T) {
	t.Parallel()
	retryable := pipeline.Retryable(errors.New("both pools failed"), 7*time.Second)
	tests := []struct {
		name       string
		chatErr    error
		reviewErr  error
		panics     bool
		saveErr    bool
		receive    int
		ctx        func() context.Context
		wantAction jobloop.Action
		wantLabel  string
		wantAfter  time.Duration
		wantStatus pipeline.Status // "" = no row
		wantErrIn  string
	}{
		{name: "retryable", reviewErr: retryable, receive: 1, wantAction: jobloop.Retry, wantLabel: "retry", wantAfter: 7 * time.Second},
		{name: "retryable on the final attempt", reviewErr: retryable, receive: 5, wantAction: jobloop.Retry, wantLabel: "failed_final", wantAfter: 7 * time.Second, wantStatus: pipeline.StatusFailed, wantErrIn: "both pools failed"},
		{name: "unknown error is retryable", reviewErr: errors.New("eof"), receive: 2, wantAction: jobloop.Retry, wantLabel: "retry"},
		{name: "room gone", chatErr: pipeline.Permanent(errors.New(`room "room-1" not found`)), receive: 1, wantAction: jobloop.Delete, wantLabel: "failed", wantStatus: pipeline.StatusFailed, wantErrIn: "not found"},
		{name: "stopped", reviewErr: &pipeline.StoppedError{Reason: "moderator took over"}, receive: 1, wantAction: jobloop.Delete, wantLabel: "stopped", wantStatus: pipeline.StatusStopped, wantErrIn: "moderator took over"},
		{name: "panic", panics: true, receive: 1, wantAction: jobloop.Retry, wantLabel: "retry", wantErrIn: "panicked"},
		{name: "panic on the final attempt", panics: true, receive: 5, wantAction: jobloop.Retry, wantLabel: "failed_final", wantStatus: pipeline.StatusFailed, wantErrIn: "panicked"},
		{name: "save fails", saveErr: true, receive: 1, wantAction: jobloop.Retry, wantLabel: "retry"},
		{name: "drain hands back", reviewErr: context.Canceled, receive: 5, ctx: func() context.Context {
			c, cancel := context.WithCancelCause(context.Background())
			cancel(jobloop.ErrDraining)
			return c
		}, wantAction: jobloop.Release, wantLabel: "released"},
		{name: "job timeout", reviewErr: context.DeadlineExceeded, receive: 1, ctx: func() context.Context {
			c, cancel := context.WithCancelCause(context.Background())
			cancel(jobloop.ErrJobTimeout)
			return c
		}, wantAction: jobloop.Retry, wantLabel: "retry"},
		{name: "job timeout on the final attempt is recorded", reviewErr: context.DeadlineExceeded, receive: 5, ctx: func() context.Context {
			c, cancel := context.WithCancelCause(context.Background())
			cancel(jobloop.ErrJobTimeout)
			return c
		}, wantAction: jobloop.Retry, wantLabel: "failed_final", wantStatus: pipeline.StatusFailed, wantErrIn: "job timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setupReview(t)
			r.chat.err = tc.chatErr
			r.rev.review = func(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
				require.Equal(t, tc.receive, attempt)
				if tc.panics {
					panic("index out of range")
				}
				if tc.reviewErr != nil {
					return pipeline.Verdict{Stages: abusive().Stages[:1]}, tc.reviewErr
				}
				return abusive(), nil
			}
			if tc.saveErr {
				r.store.SaveErr = func(pipeline.Verdict) error { return pipeline.Retryable(errors.New("deadlock"), 0) }
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			out := r.h.Handle(ctx, msg(r.body(t), tc.receive, 5))
			require.Equal(t, tc.wantAction, out.Action, "err: %v", out.Err)
			require.Equal(t, tc.wantLabel, out.Label)
			require.Equal(t, tc.wantAfter, out.After)
			v, err := r.store.Get(context.Background(), r.key())
			if tc.wantStatus == "" {
				require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, v.Status)
			require.Contains(t, v.Error, tc.wantErrIn)
			require.Equal(t, tc.receive, v.Attempts)
			if tc.reviewErr != nil && r.rev.calls.Load() > 0 {
				require.Len(t, v.Stages, 1, "stages that ran are kept with the failed row")
			}
			require.NotEmpty(t, r.outboxEvents(t), "a verdict event for the recorded row")
		})
	}
}
