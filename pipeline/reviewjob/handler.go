// Package reviewjob is the review job: the jobloop.Handler that turns one
// review message into a saved verdict and its verdict event. Its steps, each
// a small function of its own: admission (decode, busy, duplicate, expiry;
// admission.go), the cross-pod claim (claim.go), the verdict a held job
// kept (unsaved.go), obtain (chat history and the reviewer's stages;
// obtain.go), commit (the verdict's save; commit.go), failure (fail.go) and
// the verdict event, written with the verdict's save into the store's
// outbox (publish.go). The stop guard (stopguard.go) and the dependency
// gate (gate.go) are wrappers composed where the handler is built.
package reviewjob

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// Config is the review job's operator settings.
type Config struct {
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
	// Limits bound an event's window and clock skew (zero fields take
	// pipeline's defaults); an event beyond them is poison.
	Limits pipeline.EventLimits
	// Owner names this process in the cross-pod claims (each delivery
	// adds its message id and receive count). ClaimTTL (DefaultClaimTTL
	// when zero) is how long a dead holder blocks a review; ClaimPoll
	// (DefaultClaimPoll when zero) how often a duplicate looks again.
	Owner               string
	ClaimTTL, ClaimPoll time.Duration
	// Context is the context a window is read with (package
	// chatcontext): the room's newest messages of a lookback before the
	// window start.
	Context chatcontext.Config
}

// Deps are what a review calls.
type Deps struct {
	// Store saves verdicts with their verdict events (Verdict.Outbox):
	// a store that keeps an outbox (pipeline.OutboxStore) writes them in
	// the verdict's transaction, and the outbox's relay sends them.
	Store    pipeline.VerdictStore
	Chat     pipeline.ChatSource
	Reviewer pipeline.Reviewer
	// Events receives, best effort, the stored verdict's event again when
	// a duplicate delivery finds its review done (for a verdict saved
	// without an outbox message); nil sends none.
	Events pipeline.EventSink
	// Claims, when set, is the cross-pod claim taken before a review's
	// first model call (see claim.go); without it only one copy of a
	// review runs at a time in this process.
	Claims pipeline.ReviewClaims
	// ClaimsInStore says that Claims live in the store's database: when
	// the store is a pipeline.ReleasingSaver, a review's verdict and the
	// release of its claim are then one transaction (a statement and a
	// commit fewer per review, and no release phase on the slot).
	ClaimsInStore bool
	// Mirror, when set, is offered every done verdict the store committed,
	// with the chat it was reviewed on (shadow traffic; pipeline/shadow).
	Mirror Mirror
	// Actions, when set, decides the protective actions of every done
	// verdict before its save (pipeline/protect); the store writes them
	// in the save's transaction (Verdict.Actions).
	Actions ActionPlanner
}

// ActionPlanner decides a done verdict's protective actions
// (pipeline.ActionPlanner): an error from Plan holds the job, so that no
// verdict is saved without the actions it owes.
type ActionPlanner = pipeline.ActionPlanner

// Mirror takes committed live reviews for a candidate to review beside
// them. Offer must return at once and never change its arguments: it runs
// on the live job's path, after the commit, before the message is deleted.
type Mirror interface {
	Offer(live pipeline.Verdict, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage)
}

// Handler is the jobloop.Handler for review messages: decode, admission
// (expired, duplicate), chat history, the Reviewer's stages, the verdict
// upsert, and the verdict event. It is safe for concurrent use.
type Handler struct {
	cfg   Config
	store pipeline.VerdictStore
	// window is the chat source, read with the window's context
	// (context.go).
	window   *chatcontext.Source
	reviewer pipeline.Reviewer
	events   pipeline.EventSink
	claims   pipeline.ReviewClaims
	mirror   Mirror
	actions  ActionPlanner
	m        *Metrics
	log      *slog.Logger
	// clk times the job, paces a duplicate waiting for another
	// worker's claim and the claim's renewals.
	clk     clock.Clock
	unsaved unsavedVerdicts
	// saveDone writes a done verdict; chosen once by New (commit.go).
	saveDone saveDoneFunc

	mu     sync.Mutex
	active map[pipeline.ReviewKey]struct{}
}

// New wires a handler on clk (nil: the wall clock). m and log may be nil.
func New(cfg Config, deps Deps, clk clock.Clock, m *Metrics, log *slog.Logger) *Handler {
	if m == nil {
		m = NewMetrics(nil, nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = withDefaults(cfg)
	h := &Handler{cfg: cfg, store: deps.Store, reviewer: deps.Reviewer, events: deps.Events, claims: deps.Claims,
		mirror: deps.Mirror, actions: deps.Actions, m: m, log: log, clk: clock.Or(clk), active: map[pipeline.ReviewKey]struct{}{}}
	h.window = chatcontext.New(cfg.Context, deps.Chat, m.contextFetches, log)
	h.saveDone = h.chooseSaveDone(deps)
	return h
}

func withDefaults(cfg Config) Config {
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
	return cfg
}

// Handle runs one review message to an Outcome. It never panics out of a
// Reviewer (a panic is a failed attempt) and logs one line per outcome with
// the room, window, run id and duration, never chat text. Its context's
// cancellation cause (jobloop.ErrDraining, ErrLeaseLost, ErrJobTimeout, a
// *pipeline.StoppedError) decides what a cancelled review ends as.
func (h *Handler) Handle(ctx context.Context, m jobloop.Message) jobloop.Outcome {
	start := h.clk.Now()
	ev, out, ok := h.decode(m, start)
	if !ok {
		return out
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(h.spanAttributes(ev)...)
	}
	out = h.review(ctx, newJob(m, ev, h.reviewer.PipelineVersion(), start))
	span.SetAttributes(attribute.String("chatguard.review.outcome", out.Label))
	if out.Action != jobloop.Hold {
		h.unsaved.take(m) // a kept verdict ends with its delivery's hold
	}
	h.logJob(ctx, m, ev, out, start)
	return out
}

// job is one review in flight: what its steps share.
type job struct {
	m     jobloop.Message
	ev    pipeline.ReviewEvent
	key   pipeline.ReviewKey
	start time.Time
	// base is the verdict row a failure records.
	base pipeline.Verdict
	// phase is when the current phase began (see lap).
	phase time.Time
	// claim is the cross-pod claim held, nil without claims.
	claim *heldClaim
	// msgs is the chat the review ran on, for the Mirror; nil for a
	// verdict kept from an earlier delivery.
	msgs []pipeline.ChatMessage
}

func newJob(m jobloop.Message, ev pipeline.ReviewEvent, version string, start time.Time) *job {
	key := ev.Key(version)
	return &job{m: m, ev: ev, key: key, start: start,
		base: pipeline.Verdict{Key: key, RunID: ev.RunID, PublishedAt: ev.PublishedAt, StartedAt: start.UTC(), Attempts: m.ReceiveCount}}
}

// review runs a decoded job's steps in order; a step that ends the job
// returns its outcome and false.
func (h *Handler) review(ctx context.Context, j *job) jobloop.Outcome {
	h.m.eventAge.Observe(j.age().Seconds())
	if !h.enter(j.key) {
		h.m.admissions.WithLabelValues("busy").Inc()
		return jobloop.Outcome{Action: jobloop.Retry, Label: "busy", After: h.cfg.BusyRetry}
	}
	defer h.leave(j.key)
	if ctx.Err() != nil { // stopped (or ended) before it started: no lookups, no model calls
		return h.fail(ctx, j, fmt.Errorf("review: %w", context.Cause(ctx)))
	}
	j.phase = h.clk.Now()
	ctx, out, ok := h.claim(ctx, j)
	if !ok {
		return out
	}
	released := false // the verdict's save released the claim
	defer func() { h.endClaim(j, released) }()
	if out, ok := h.admit(ctx, j); !ok {
		return out
	}
	v, kept := h.unsaved.take(j.m)
	if out, ok := h.expire(ctx, j, kept); !ok {
		return out
	}
	h.m.admissions.WithLabelValues("admitted").Inc()
	if !kept {
		if v, out, ok = h.obtain(ctx, j); !ok {
			return out
		}
	}
	out, released = h.commitDone(ctx, j, v)
	return out
}

func (j *job) age() time.Duration { return max(j.start.Sub(j.ev.PublishedAt), 0) }

// lap records the time since the current phase began under phase, and
// starts the next.
func (h *Handler) lap(j *job, phase string) {
	now := h.clk.Now()
	h.m.loop.ObservePhase(phase, now.Sub(j.phase))
	j.phase = now
}

// spanAttributes describe the review on the job's span: the room by its
// keyed pseudonym (none without a key: a raw room id never goes on a
// span), the window, the source and the class; never chat text.
func (h *Handler) spanAttributes(ev pipeline.ReviewEvent) []attribute.KeyValue {
	as := []attribute.KeyValue{
		attribute.String("chatguard.review.window_start", ev.WindowStart.UTC().Format(time.RFC3339)),
		attribute.String("chatguard.review.window_end", ev.WindowEnd.UTC().Format(time.RFC3339)),
		attribute.String("chatguard.review.source", string(ev.Source)),
		attribute.String("chatguard.review.class", ev.Class().String()),
	}
	if ps := h.subjectPseudonyms([]string{ev.RoomID}); len(ps) == 1 {
		as = append(as, attribute.String("chatguard.room.pseudonym", ps[0]))
	}
	return as
}

// logJob writes the job's one line.
func (h *Handler) logJob(ctx context.Context, m jobloop.Message, ev pipeline.ReviewEvent, out jobloop.Outcome, start time.Time) {
	attrs := []any{
		"room_id", ev.RoomID, "window_start", ev.WindowStart.Format(time.RFC3339), "window_end", ev.WindowEnd.Format(time.RFC3339),
		"run_id", ev.RunID, "message_id", m.ID, "attempt", m.ReceiveCount, "outcome", out.Label,
		"duration_ms", h.clk.Now().Sub(start).Milliseconds(),
	}
	level := slog.LevelInfo
	if out.Err != nil {
		attrs = append(attrs, "err", out.Err.Error())
		if out.Action == jobloop.Retry {
			level = slog.LevelWarn
		}
	}
	h.log.Log(context.WithoutCancel(ctx), level, "review: job", attrs...)
}
