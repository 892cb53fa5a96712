// Package console is the moderators' web console as an HTTP app: the
// review queue, room pages with the chat history fetched live, confirm
// and overturn decisions with their moderator_feedback events (and the
// outbox that resends those SQS did not take), on-demand reviews streamed
// over SSE with resume on any pod, and the stop button. cmd/console builds
// its dependencies, binds Config to flags and runs the App's parts as
// services; the templates and static files are embedded (web/).
package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/pipeline/stop"
)

// Deps are what the App is built on; the caller owns and closes them.
type Deps struct {
	// Store, Feedback, Chat and Reviewer are required. Store is the
	// moderation side's ports (storage/mysql's Store in production).
	Store    moderation.Store
	Feedback FeedbackSender
	Chat     pipeline.ChatSource
	// HistoryTimeout bounds the room page's chat history fetch (zero:
	// unbounded here; the chat client's own timeout still applies).
	HistoryTimeout time.Duration
	Reviewer       pipeline.Reviewer
	// Hub is required: on-demand reviews' streams (built from
	// Config.Hub()). LiveLog, when set, serves resumes of reviews that
	// run on other pods or have ended.
	Hub     *live.Hub
	LiveLog pipeline.LiveLog
	// Guard, when set, lets stop signals reach on-demand reviews.
	Guard *stop.Guard
	// Actions, when set, reverses the protective actions of a verdict a
	// moderator overturns (after the decision's audit row and its row).
	Actions moderation.ProtectiveActions
	// Control, when set, lets a moderator reverse or confirm one action
	// of a room by its key (the room page's Reverse and Confirm).
	Control moderation.ActionControl
	// Planner, when set (--actions-queue-url), decides the protective
	// actions of each on-demand verdict before its save, which writes
	// them in the verdict's transaction (pipeline/protect's Planner, the
	// workers' own).
	Planner pipeline.ActionPlanner
	// Events, when set, takes the verdict event of each on-demand review
	// the store committed (a revision of its window), for the lake.
	Events pipeline.EventSink
	// Registerer takes the console's metrics (nil: unregistered).
	Registerer prometheus.Registerer
	// Log is the audit and error log (nil: discarded).
	Log *slog.Logger
	// Clock times sessions, CSRF tokens, heartbeats and the outbox's
	// sweeps and backoffs (nil: the wall clock).
	Clock clock.Clock
	// Keys derive moderator ids from sign-in e-mails (nil: the public
	// dev keys, for tests only).
	Keys *pseudonym.Keys
	// RekeyModerator, when set (--legacy-pseudonyms), moves what the store
	// holds under a signing-in moderator's legacy id to their current one,
	// once per moderator and process (mysql.Store.RekeyModerator).
	RekeyModerator func(ctx context.Context, legacy, current string, at time.Time) (int64, error)
	// History, when set, keeps the take history the shift page reads
	// (storage/mysql's Store in production); nil keeps none.
	History moderation.TakeHistory
}

// App is the console's web app. Its parts run as the caller's services:
// Handler behind an HTTP server, Run for the reviews' drain, RunOutbox for
// the feedback outbox, Wait at the end.
type App struct {
	log        *slog.Logger
	srv        *server
	rv         *reviews
	outbox     *outbox
	handler    http.Handler
	cancelWork context.CancelCauseFunc
}

// New builds the App from a valid cfg (it returns Validate's error
// otherwise), reading the session key and parsing the templates. It
// starts nothing.
func New(cfg Config, d Deps) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("console: config: %w", err)
	}
	if d.Store == nil || d.Feedback == nil || d.Chat == nil || d.Reviewer == nil || d.Hub == nil {
		return nil, errors.New("console: Store, Feedback, Chat, Reviewer and Hub are required")
	}
	key, err := loadKey(cfg.SessionKeyFile)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	log, clk, reg := d.Log, clock.Or(d.Clock), d.Registerer
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	work, cancel := context.WithCancelCause(context.Background())
	rv := &reviews{cfg: cfg, hub: d.Hub, liveLog: d.LiveLog, reviewer: d.Reviewer, store: d.Store,
		guard: d.Guard, events: d.Events, planner: d.Planner, log: log, clock: clk, slots: make(chan struct{}, cfg.MaxReviews), ctx: work}
	// On-demand reviews read their windows with context, as the workers'
	// do; the room page shows the chat as it is.
	rv.chat = chatcontext.New(cfg.Context, d.Chat, registerReviewMetrics(reg, rv), log)
	fbm := newFeedbackMetrics(reg)
	srv := &server{cfg: cfg, auth: newAuth(cfg, key, clk, &moderatorIDs{keys: d.Keys, rekey: d.RekeyModerator, log: log}), store: d.Store, chat: d.Chat, feedback: d.Feedback, fbm: fbm,
		reviews: rv, hub: d.Hub, log: log, tmpl: tmpl, clock: clk, historyTimeout: d.HistoryTimeout, actions: d.Actions, control: d.Control}
	srv.withShift(cfg.Shift, d.History)
	if cfg.OperatorURL != "" {
		srv.stops = newOperatorClient(cfg.OperatorURL, cfg.OperatorTokenFile)
	}
	return &App{log: log, srv: srv, rv: rv, handler: traced(srv.routes()), cancelWork: cancel,
		outbox: newOutbox(cfg.Outbox, d.Store, d.Feedback, fbm, log, clk)}, nil
}

// Handler is the console's HTTP handler: static files and /login open,
// the pages and the review API behind sign-in.
func (a *App) Handler() http.Handler { return a.handler }

// Run holds the on-demand reviews until ctx is done, then drains: new
// reviews are refused (503 with Retry-After), every open stream gets a
// reconnect event (clients resume on other pods, from the live log), and
// Run waits for the running reviews. They run until they finish or
// drain.Hard(ctx) is done (the drain deadline, kept by whoever runs the
// app: they are cancelled then, their verdicts still saved); Run returns
// nil once every review has ended. Without a hard context the reviews are
// cancelled as soon as ctx is.
func (a *App) Run(ctx context.Context) error {
	hard := drain.Hard(ctx)
	stopWork := context.AfterFunc(hard, func() { a.cancelWork(context.Cause(hard)) })
	defer stopWork()
	<-ctx.Done()
	a.rv.beginDrain()
	ended := make(chan struct{})
	go func() { a.rv.running.Wait(); close(ended) }()
	finished := true
	select {
	case <-ended:
	case <-hard.Done():
		finished = false
		<-ended // cancelled: each review saves what it has and ends
	}
	a.log.Info("console: drained", "reviews_finished", finished, "cause", fmt.Sprint(context.Cause(ctx)))
	return nil
}

// RunOutbox resends, every Config.Outbox.FeedbackSweepEvery, the
// moderator_feedback events SQS did not take, until ctx is done; the batch
// in flight then finishes (its rows marked) before it returns nil.
func (a *App) RunOutbox(ctx context.Context) error { return a.outbox.Run(ctx) }

// Wait waits, after Run, for the streams handed to their own goroutines
// (see detach) to end at their reconnect event or their client's next
// write. It returns an error when ctx ends first.
func (a *App) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { a.rv.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("console: streams still open: %w", context.Cause(ctx))
	}
}

// beginDrain refuses new reviews and tells every open stream to reconnect.
func (rv *reviews) beginDrain() {
	rv.mu.Lock()
	rv.draining = true
	rv.mu.Unlock()
	rv.hub.Drain()
}

// registerReviewMetrics registers the admission gauges and counters, and
// returns the counter of the reviews' context fetches (chatcontext).
func registerReviewMetrics(reg prometheus.Registerer, rv *reviews) (contextFetches *prometheus.CounterVec) {
	rv.admission = newAdmissionMetrics(reg)
	contextFetches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_context_fetches_total",
		Help: chatcontext.FetchesHelp}, []string{"outcome"})
	reg.MustRegister(contextFetches)
	rv.panics = prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_console_review_panics_total",
		Help: "On-demand reviews that panicked; each ended its stream with an error event and the pod went on."})
	reg.MustRegister(rv.panics)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_console_reviews_running",
		Help: "On-demand reviews running on this pod (admission slots taken)."}, func() float64 { return float64(len(rv.slots)) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_console_reviews_slots",
		Help: "On-demand review slots of this pod (--max-reviews)."}, func() float64 { return float64(cap(rv.slots)) }))
	return contextFetches
}
