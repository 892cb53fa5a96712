package jobloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// ReviewConfig configures a ReviewHandler.
type ReviewConfig struct {
	// MaxAge is the oldest event (by published_at) worth spending model
	// calls on; older ones are recorded expired. A verdict already
	// produced (a held job whose save failed) is saved whatever its age.
	// Zero disables the check.
	MaxAge time.Duration
	// SaveTimeout bounds writing a failed or expired verdict when the job's
	// own context is already over.
	SaveTimeout time.Duration
	// BusyRetry is the delay before a message whose review is already
	// running in this process is seen again (by then the verdict exists
	// and it is acknowledged as a duplicate, without model calls).
	BusyRetry time.Duration
	// Stops, when set, ties each review to operator stop signals: a
	// stopped review is cancelled at once, recorded stopped and deleted.
	Stops StopGuard
	// Limits bound an event's window and clock skew (zero fields take
	// pipeline's defaults); an event beyond them is poison.
	Limits pipeline.EventLimits
	// Claims, when set, is the cross-pod claim taken before a review's
	// first model call (see claimReview); Owner names this process in it
	// (each delivery adds its message id and receive count). ClaimTTL (DefaultClaimTTL when
	// zero) is how long a dead holder blocks a review; ClaimPoll
	// (DefaultClaimPoll when zero) how often a duplicate looks again.
	Claims              pipeline.ReviewClaims
	Owner               string
	ClaimTTL, ClaimPoll time.Duration
	// ClaimsInStore says that Claims live in the store's database: when
	// the store is a pipeline.ReleasingSaver, a review's verdict and the
	// release of its claim are then one transaction (a statement and a
	// commit fewer per review, and no release phase on the slot).
	ClaimsInStore bool
	// Health, when set, feeds every call to MySQL, the chat API and the
	// models to that dependency's breaker; a job that fails while one is
	// down is held (Outcome Hold) instead of retried.
	Health DependencyGate
}

// StopGuard registers a running review for stop signals (pipeline/stop.Guard
// implements it). Begin returns the job's context, cancelled with a
// *pipeline.StoppedError cause when a matching stop arrives, and a release
// to call when the review ends.
type StopGuard interface {
	Begin(ctx context.Context, ev pipeline.ReviewEvent) (context.Context, func())
}

// ReviewHandler is the Handler for review messages: decode, admission
// (expired, duplicate), chat history, the Reviewer's stages, the verdict
// upsert, and the verdict event. It is safe for concurrent use.
type ReviewHandler struct {
	cfg      ReviewConfig
	store    pipeline.VerdictStore
	chat     pipeline.ChatSource
	reviewer pipeline.Reviewer
	events   pipeline.EventSink
	m        *Metrics
	log      *slog.Logger
	now      func() time.Time
	// wait paces a duplicate waiting for another worker's claim;
	// renewWait the claim's renewals. Tests replace both.
	wait, renewWait retry.SleepFunc
	unsaved         unsavedVerdicts
	// releasing: save verdicts with SaveReleasing (ClaimsInStore and a
	// store that can).
	releasing bool

	mu     sync.Mutex
	active map[pipeline.ReviewKey]struct{}
}

// NewReviewHandler wires a handler. events may be nil (no verdict events);
// m and log may be nil.
func NewReviewHandler(cfg ReviewConfig, store pipeline.VerdictStore, chat pipeline.ChatSource, reviewer pipeline.Reviewer, events pipeline.EventSink, m *Metrics, log *slog.Logger) *ReviewHandler {
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.SaveTimeout <= 0 {
		cfg.SaveTimeout = 10 * time.Second
	}
	if cfg.BusyRetry <= 0 {
		cfg.BusyRetry = 10 * time.Second
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = DefaultClaimTTL
	}
	if cfg.ClaimPoll <= 0 {
		cfg.ClaimPoll = DefaultClaimPoll
	}
	h := &ReviewHandler{cfg: cfg, store: store, chat: chat, reviewer: reviewer, events: events, m: m, log: log, now: time.Now,
		wait: retry.Sleep, renewWait: retry.Sleep, active: map[pipeline.ReviewKey]struct{}{}}
	h.releasing = cfg.Claims != nil && cfg.ClaimsInStore && releasingStore(store)
	h.gate(cfg.Health)
	return h
}

// Handle runs one review message to an Outcome. It never panics out of a
// Reviewer (a panic is a failed attempt) and logs one line per outcome with
// the room, window, run id and duration, never chat text.
func (h *ReviewHandler) Handle(ctx context.Context, m Message) Outcome {
	start := h.now()
	ev, err := pipeline.DecodeReviewEvent(m.Body)
	if err == nil {
		err = h.cfg.Limits.Check(ev, start)
	}
	if err != nil {
		h.m.admissions.WithLabelValues("invalid").Inc()
		var inv *pipeline.InvalidEventError
		reason := err.Error()
		if errors.As(err, &inv) {
			reason = inv.Reason
		}
		h.log.Warn("review: poison message", "message_id", m.ID, "reason", reason)
		return Outcome{Action: Poison, Label: "poison", Reason: reason, Err: err}
	}
	out := h.review(ctx, m, ev, start)
	if out.Action != Hold {
		h.unsaved.take(m) // a kept verdict ends with its delivery's hold
	}
	attrs := []any{
		"room_id", ev.RoomID, "window_start", ev.WindowStart.Format(time.RFC3339), "window_end", ev.WindowEnd.Format(time.RFC3339),
		"run_id", ev.RunID, "message_id", m.ID, "attempt", m.ReceiveCount, "outcome", out.Label,
		"duration_ms", h.now().Sub(start).Milliseconds(),
	}
	level := slog.LevelInfo
	if out.Err != nil {
		attrs = append(attrs, "err", out.Err.Error())
		if out.Action == Retry {
			level = slog.LevelWarn
		}
	}
	h.log.Log(context.WithoutCancel(ctx), level, "review: job", attrs...)
	return out
}

func (h *ReviewHandler) review(ctx context.Context, m Message, ev pipeline.ReviewEvent, start time.Time) Outcome {
	age := max(start.Sub(ev.PublishedAt), 0)
	h.m.eventAge.Observe(age.Seconds())
	key := ev.Key(h.reviewer.PipelineVersion())
	base := pipeline.Verdict{Key: key, RunID: ev.RunID, PublishedAt: ev.PublishedAt, StartedAt: start.UTC(), Attempts: m.ReceiveCount}

	// Two copies of one event in one receive batch (a republished run)
	// would both miss the duplicate check and pay twice for the models.
	// With cross-pod claims the second copy waits for the first instead
	// (claimReview), which spends no receive count.
	if h.cfg.Claims == nil {
		if !h.claim(key) {
			h.m.admissions.WithLabelValues("busy").Inc()
			return Outcome{Action: Retry, Label: "busy", After: h.cfg.BusyRetry}
		}
		defer h.unclaim(key)
	}

	if h.cfg.Stops != nil {
		var release func()
		ctx, release = h.cfg.Stops.Begin(ctx, ev)
		defer release()
		if ctx.Err() != nil { // stopped before it started: no lookups, no model calls
			return h.fail(ctx, m, base, fmt.Errorf("review: %w", context.Cause(ctx)))
		}
	}

	phase := h.now()
	var claim *heldClaim
	released := false // the verdict's save released the claim
	if h.cfg.Claims != nil {
		claimed, c, stop := h.claimReview(ctx, m, key, base)
		if stop != nil {
			return *stop
		}
		claim = c
		defer func() {
			t := h.now()
			claim.end(released)
			h.observePhase("release", t)
		}()
		ctx = claimed
	}

	old, err := h.store.Get(ctx, key)
	phase = h.observePhase("admit", phase)
	switch {
	case err == nil && old.Status == pipeline.StatusDone:
		h.m.admissions.WithLabelValues("duplicate").Inc()
		// The first run's verdict event may never have left: its pod was
		// killed between the commit and the send, or SQS refused both the
		// send and the delete. This redelivery is the event's last chance;
		// a copy that did leave shares its id and partition, and the
		// lake's _dedup views keep one.
		h.publish(old)
		return Outcome{Action: Delete, Label: "duplicate"}
	case err != nil && !errors.Is(err, pipeline.ErrVerdictNotFound):
		return h.fail(ctx, m, base, fmt.Errorf("review: look up verdict: %w", err))
	}
	// A job held because its verdict could not be saved (MySQL down)
	// saves the verdict it already paid for when it runs again, however
	// old the event has grown meanwhile.
	v, kept := h.unsaved.take(m)
	if !kept && h.cfg.MaxAge > 0 && age > h.cfg.MaxAge {
		h.m.admissions.WithLabelValues("expired").Inc()
		v := base
		v.Status = pipeline.StatusExpired
		v.Error = fmt.Sprintf("event is %s old, over the %s limit", age.Round(time.Second), h.cfg.MaxAge)
		v.FinishedAt = h.now().UTC()
		if err := h.save(ctx, v); err != nil {
			return Outcome{Action: Retry, Label: "retry", Err: err}
		}
		return Outcome{Action: Delete, Label: "expired"}
	}
	h.m.admissions.WithLabelValues("admitted").Inc()
	if !kept {
		msgs, err := h.chat.History(ctx, ev.RoomID, ev.WindowStart, ev.WindowEnd)
		phase = h.observePhase("chat", phase)
		if err != nil {
			return h.fail(ctx, m, base, fmt.Errorf("review: chat history: %w", err))
		}
		v, err = h.runReviewer(ctx, ev, msgs, m.ReceiveCount)
		phase = h.observePhase("review", phase)
		if err != nil {
			base.Stages = v.Stages
			return h.fail(ctx, m, base, fmt.Errorf("review: %w", err))
		}
		v.Key, v.RunID, v.PublishedAt, v.StartedAt, v.Attempts = key, ev.RunID, ev.PublishedAt, start.UTC(), m.ReceiveCount
		v.Status, v.Error = pipeline.StatusDone, ""
	}
	v.FinishedAt = h.now().UTC()
	var committed bool
	if h.releasing && claim != nil {
		// No renewal may write the claim back once the save dropped it;
		// renewals keep it at least a third of its TTL from expiry.
		claim.stopRenewals()
		committed, err = h.store.(pipeline.ReleasingSaver).SaveReleasing(ctx, v, claim.owner)
		released = err == nil
	} else {
		committed, err = h.store.Save(ctx, v)
	}
	h.observePhase("save", phase)
	if err != nil {
		out := h.fail(ctx, m, base, fmt.Errorf("review: save verdict: %w", err))
		if out.Action == Hold {
			h.unsaved.put(m, v)
		}
		return out
	}
	h.observeStages(v)
	if committed {
		h.publish(v)
	}
	return Outcome{Action: Delete, Label: "done"}
}

// observePhase records the time since start under phase and returns now,
// the start of the next phase.
func (h *ReviewHandler) observePhase(phase string, start time.Time) time.Time {
	now := h.now()
	h.m.phase.WithLabelValues(phase).Observe(now.Sub(start).Seconds())
	return now
}

func (h *ReviewHandler) claim(k pipeline.ReviewKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, busy := h.active[k]; busy {
		return false
	}
	h.active[k] = struct{}{}
	return true
}

func (h *ReviewHandler) unclaim(k pipeline.ReviewKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.active, k)
}

// runReviewer calls the Reviewer, turning a panic into an error so that it
// counts as a failed attempt like any other.
func (h *ReviewHandler) runReviewer(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (v pipeline.Verdict, err error) {
	defer func() {
		if r := recover(); r != nil {
			h.m.panics.Inc()
			err = fmt.Errorf("reviewer panicked: %v", r)
		}
	}()
	return h.reviewer.Review(ctx, ev, msgs, attempt)
}

// fail decides what a failed attempt means: a stopped review and a
// permanent failure are recorded and deleted; a retryable one is handed
// back with a backoff, and on the last delivery before the DLQ it is
// recorded as failed first. A drain hands the message back untouched.
func (h *ReviewHandler) fail(ctx context.Context, m Message, v pipeline.Verdict, err error) Outcome {
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrDraining) {
		return Outcome{Action: Release, Label: "released", Err: err}
	}
	if errors.Is(cause, ErrLeaseLost) {
		// Another pod may run the review now: record nothing, and leave
		// the message to its visibility.
		return Outcome{Action: Leave, Label: "lease_lost", Err: err}
	}
	if errors.Is(cause, ErrJobTimeout) {
		err = pipeline.Retryable(fmt.Errorf("%w: %w", ErrJobTimeout, err), 0)
	}
	disp, after := pipeline.Classify(err)
	if disp == pipeline.RetryLater {
		var stopped *pipeline.StoppedError
		if errors.As(cause, &stopped) {
			disp, err = pipeline.Stopped, stopped
		}
	}
	if disp == pipeline.Hold {
		return held(err)
	}
	v.FinishedAt = h.now().UTC()
	v.Error = truncate(err.Error(), 4000)
	switch disp {
	case pipeline.Stopped:
		v.Status = pipeline.StatusStopped
		var stopped *pipeline.StoppedError
		if errors.As(err, &stopped) {
			v.Error = truncate(stopped.Reason, 4000)
		}
		if serr := h.record(ctx, v); serr != nil {
			return retryOrHold(errors.Join(err, serr), serr)
		}
		return Outcome{Action: Delete, Label: "stopped", Err: err}
	case pipeline.GiveUp:
		v.Status = pipeline.StatusFailed
		if serr := h.record(ctx, v); serr != nil {
			return retryOrHold(errors.Join(err, serr), serr)
		}
		return Outcome{Action: Delete, Label: "failed", Err: err}
	default:
		if !m.Final {
			return Outcome{Action: Retry, Label: "retry", After: after, Err: err}
		}
		// The queue's redrive takes the message to the DLQ on its next
		// receive; the row says why.
		v.Status = pipeline.StatusFailed
		if serr := h.record(ctx, v); serr != nil {
			err = errors.Join(err, serr)
		}
		return Outcome{Action: Retry, Label: "failed_final", After: after, Err: err}
	}
}

// save writes a verdict with a bounded context of its own, so that a
// failure caused by the job's deadline can still be recorded.
func (h *ReviewHandler) save(ctx context.Context, v pipeline.Verdict) error {
	_, err := h.commit(ctx, v)
	return err
}

// record saves the verdict that ends a job (as save does) and publishes its
// verdict event only when the save committed it: a stopped or failed
// verdict that the done-guard kept out of the store (the review was done
// meanwhile) must not tell the lake otherwise.
func (h *ReviewHandler) record(ctx context.Context, v pipeline.Verdict) error {
	committed, err := h.commit(ctx, v)
	if committed {
		h.publish(v)
	}
	return err
}

// commit is save, reporting whether the store committed v.
func (h *ReviewHandler) commit(ctx context.Context, v pipeline.Verdict) (bool, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.SaveTimeout)
	defer cancel()
	committed, err := h.store.Save(sctx, v)
	if err != nil {
		return false, fmt.Errorf("review: save %s verdict: %w", v.Status, err)
	}
	return committed, nil
}

func (h *ReviewHandler) observeStages(v pipeline.Verdict) {
	for _, st := range v.Stages {
		pool := string(st.Pool)
		if pool == "" {
			pool = "none"
		}
		h.m.stageLatency.WithLabelValues(string(st.Stage), pool).Observe(st.Latency.Seconds())
		if st.TTFT > 0 {
			h.m.stageTTFT.WithLabelValues(string(st.Stage), pool).Observe(st.TTFT.Seconds())
		}
		h.m.tokens.WithLabelValues(string(st.Stage), "in").Add(float64(st.TokensIn))
		h.m.tokens.WithLabelValues(string(st.Stage), "out").Add(float64(st.TokensOut))
	}
}

// publish hands the verdict event to the sink; a full sink drops it and
// counts the drop itself.
func (h *ReviewHandler) publish(v pipeline.Verdict) {
	if h.events == nil {
		return
	}
	fallback := false
	for _, st := range v.Stages {
		fallback = fallback || st.Pool == pipeline.PoolFallback
	}
	// The event is dated by the verdict, at the precision MySQL keeps
	// (DATETIME(6)), so that a copy sent again from the stored verdict
	// (see the duplicate admission) is the same event in the same
	// partition.
	started, finished := v.StartedAt.Truncate(time.Microsecond), v.FinishedAt.Truncate(time.Microsecond)
	var latency float64
	if !started.IsZero() && !finished.IsZero() {
		latency = float64(finished.Sub(started)) / float64(time.Millisecond)
	}
	occurred := finished
	if occurred.IsZero() {
		occurred = h.now()
	}
	h.events.Publish(pipeline.LakeEvent{
		EventID: pipeline.VerdictEventID(v.Key, v.Status), EventType: pipeline.EventVerdict, OccurredAt: occurred.UTC(), SchemaVersion: pipeline.LakeEventSchemaVersion,
		Payload: pipeline.VerdictEvent{
			RoomID: v.Key.RoomID, WindowStart: v.Key.WindowStart, WindowEnd: v.Key.WindowEnd, PipelineVersion: v.Key.PipelineVersion,
			RunID: v.RunID, Status: v.Status, Label: v.Label, Category: v.Category, Severity: v.Severity, Confidence: v.Confidence,
			Action: v.Action, EarlyExit: v.EarlyExit, FallbackUsed: fallback, Attempts: v.Attempts, LatencyMs: latency,
		},
	})
}

// truncate bounds a stored text by runes, never splitting one.
func truncate(s string, n int) string { return pipeline.ClipRunes(s, n) }
