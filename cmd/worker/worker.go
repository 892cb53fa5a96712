package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/protect"
	"github.com/chatguard/chatguard/pipeline/reviewjob"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Main is the worker process without the process: tests boot it in-process
// with an admin address of 127.0.0.1:0.
type Main struct {
	Config Config
	Log    *slog.Logger
	Stdout io.Writer
	// Reviewer, when set, replaces the stage engine built from Config
	// (tests that count model calls or fake them).
	Reviewer pipeline.Reviewer
	// OnReady, when set, is called with the admin listener's address once
	// the worker is about to poll.
	OnReady func(adminAddr string)
	// OnOperator, when set, is called with the operator API's and the pprof
	// listeners' addresses ("" when off) just before OnReady.
	OnOperator func(operatorAddr, pprofAddr string)
	// SchemaWait bounds how long Run waits for MySQL at start (default 30 s).
	SchemaWait time.Duration
}

// Run starts the worker and blocks until ctx is cancelled (SIGTERM), then
// drains: it stops polling, lets in-flight jobs finish within the drain
// timeout, hands the rest back, flushes lake events, closes the queues
// and returns nil. It returns an error when a dependency cannot be set up
// at start (bad configuration, MySQL unreachable or not migrated, the
// admin port taken), when a part fails while running, or when the stop
// left work undone (lake events unsent, queue calls cut short).
func (m *Main) Run(ctx context.Context) error {
	if err := m.Config.Validate(); err != nil {
		return fmt.Errorf("worker: config: %w", err)
	}
	w := &worker{m: m, cfg: m.Config, log: m.Log, reg: cli.NewRegistry()}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	g := lifecycle.New(w.log, nil)
	g.Add(w.services()...)
	err := g.Run(ctx)
	w.log.Info("worker: drained", "cause", fmt.Sprint(context.Cause(ctx)))
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// worker is what the services build as they start, for the services
// after them. Each field is set by one service's Start.
type worker struct {
	m   *Main
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	sqs         *awssqs.Client
	review, dlq *sqs.Queue
	realtime    *sqs.Queue // nil without --realtime-queue-url
	pub         *sqs.LakePublisher
	reviewer    pipeline.Reviewer
	engine      *reviewers.Engine // nil when Main.Reviewer replaces it
	shadow      *shadowTraffic    // nil without --shadow-rate and --shadow-base-url
	db          *sql.DB
	store       *mysql.Store
	// actMetrics and actionsQueue are the protective actions' (nil
	// without --actions-queue-url; actions.go).
	actMetrics   *protect.Metrics
	actionsQueue *sqs.Queue
	stops        *stopSignals
	health       *health.Monitor
	loop         *jobloop.Loop

	admin, operator, prof *lifecycle.Server
}

// services lists the worker's parts in dependency order; the group stops
// them in reverse, so the queues close after the lake events are flushed,
// which happens after the loop's drain, and the stop signals keep
// reaching jobs until the loop is done.
func (w *worker) services() []lifecycle.Service {
	svcs := []lifecycle.Service{
		{Name: "aws", Start: w.startAWS},
		w.queue("review queue", &w.review, w.cfg.ReviewQueue),
		w.queue("review dlq", &w.dlq, w.cfg.ReviewDLQ),
	}
	if w.cfg.RealtimeQueue.URL != "" {
		svcs = append(svcs, w.queue("review-realtime queue", &w.realtime, w.cfg.RealtimeQueue))
	}
	svcs = append(svcs,
		lifecycle.Service{Name: "lake events", Start: w.startEvents, Stop: func(ctx context.Context) error { return w.pub.Stop(ctx) }},
		// The stage engine is built, and its settings logged, before the
		// first dial: a pod waiting for MySQL already says which privacy
		// controls and pipeline version it will review with (the deploy
		// boot tests compare them with the console's).
		lifecycle.Service{Name: "stage engine", Start: w.startReviewer, Stop: w.stopReviewer},
		// Shadow traffic publishes to the lake events and is offered reviews
		// by the loop: it stops after the loop's drain (its reviews in
		// flight canceled and counted) and before the events are flushed.
		lifecycle.Service{Name: "shadow traffic", Start: w.startShadow, Stop: w.stopShadow},
		lifecycle.Service{Name: "mysql", Start: w.startMySQL, Stop: func(context.Context) error { return w.db.Close() }},
		w.relayService(),
	)
	if w.cfg.RedisAddr != "" {
		svcs = append(svcs, w.stopSignals())
	} else {
		w.log.Warn("worker: stop signals disabled: no --redis-addr")
	}
	svcs = append(svcs, lifecycle.Service{Name: "review handler", Start: w.startLoop},
		lifecycle.Serve("admin", &w.admin, w.listenAdmin, serverDrain))
	if w.cfg.OperatorAddr != "" {
		svcs = append(svcs, lifecycle.Serve("operator", &w.operator, w.listenOperator, serverDrain))
	}
	if w.cfg.PprofAddr != "" {
		svcs = append(svcs, lifecycle.Serve("pprof", &w.prof, w.listenPprof, serverDrain))
	}
	return append(svcs,
		lifecycle.Service{Name: "ready", Start: w.ready},
		// Stopping the loop is the two-phase drain, timed by the group
		// alone: the loop stops polling and lets jobs finish within
		// --drain-timeout (Drain), then the group cancels drain.Hard and
		// the loop cancels the jobs and hands their messages back, each
		// settle bounded by the call timeout (Grace).
		lifecycle.Service{Name: "job loop", Run: func(ctx context.Context) error { return w.loop.Run(ctx) },
			Drain: w.cfg.Loop.DrainTimeout, Grace: w.cfg.Loop.CallTimeout + lifecycle.Grace})
}

func (w *worker) startAWS(ctx context.Context) error {
	awsCfg, err := awsclient.Load(ctx, awsclient.Options{HTTPTimeout: 45 * time.Second})
	if err != nil {
		return err
	}
	w.sqs = awsclient.SQS(awsCfg)
	return nil
}

// queue is one SQS queue of the loop's: closed after the loop's drain,
// when every settle has returned.
func (w *worker) queue(name string, q **sqs.Queue, cfg sqs.Config) lifecycle.Service {
	return lifecycle.Service{
		Name: name,
		Start: func(context.Context) (err error) {
			*q, err = sqs.New(w.sqs, cfg)
			return err
		},
		Stop: func(ctx context.Context) error { return (*q).Close(ctx) },
	}
}

func (w *worker) startEvents(context.Context) (err error) {
	if w.pub, err = sqs.NewLakePublisher(w.sqs, w.cfg.Events, w.reg); err != nil {
		return err
	}
	w.pub.Start()
	return nil
}

func (w *worker) startReviewer(context.Context) error {
	if w.m.Reviewer != nil {
		w.reviewer = w.m.Reviewer
		return nil
	}
	engine, err := newReviewer(w.cfg, w.pub, w.reg, w.log, w.history)
	if err != nil {
		return err
	}
	w.engine, w.reviewer = engine, engine
	return nil
}

// history is the verdict store's account history once MySQL is open: the
// stage engine is built first, and no review runs before the store is.
func (w *worker) history() pipeline.AccountHistory {
	if w.store == nil {
		return nil
	}
	return w.store
}

// stopReviewer ends the engine's background work (router, fleet store)
// and returns the error that work ended with.
func (w *worker) stopReviewer(context.Context) error {
	if w.engine != nil {
		return w.engine.Close()
	}
	return nil
}

// startShadow builds the shadow candidate's engine and runner when
// --shadow-rate and --shadow-base-url are set.
func (w *worker) startShadow(context.Context) (err error) {
	s := w.cfg.Shadow
	if !s.on() {
		return nil
	}
	if w.shadow, err = newShadow(w.cfg, w.pub, w.reg, w.engine, w.history); err != nil {
		return err
	}
	w.log.Info("worker: shadow traffic on", "rate", s.Rate, "candidate", s.Model, "concurrency", s.Concurrency,
		"pseudonymize", s.Pseudonymize, "candidate_pipeline_version", w.shadow.engine.PipelineVersion(),
		"budget_tpm", s.BudgetTPM, "budget_usd_per_day", s.BudgetUSDPerDay)
	return nil
}

// stopShadow cancels the shadow reviews in flight, within ctx.
func (w *worker) stopShadow(ctx context.Context) error {
	if w.shadow == nil {
		return nil
	}
	return w.shadow.stop(ctx)
}

func (w *worker) startMySQL(ctx context.Context) error {
	db, err := mysql.OpenDB(w.cfg.MySQL)
	if err != nil {
		return err
	}
	w.db, w.store = db, mysql.New(db)
	wait := w.m.SchemaWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	return checkSchema(ctx, db, wait)
}

// stopSignals subscribes to operator stop signals. It starts before the
// loop and so stops after it: stops still reach jobs that are draining.
func (w *worker) stopSignals() lifecycle.Service {
	return lifecycle.Service{
		Name: "stop signals",
		Start: func(context.Context) (err error) {
			w.stops, err = newStopSignals(w.cfg, w.reg, w.log)
			return err
		},
		Run:  func(ctx context.Context) error { return w.stops.run(ctx) },
		Stop: func(context.Context) error { return w.stops.close() },
	}
}

// startLoop builds the review handler and the job loop over what the
// services before it opened.
func (w *worker) startLoop(context.Context) error {
	cfg := w.cfg
	chatCfg := cfg.Chat
	chatCfg.Registerer = w.reg
	chat, err := chatapi.New(chatCfg)
	if err != nil {
		return err
	}
	mon, err := health.New(cfg.Health, w.reg, w.log)
	if err != nil {
		return err
	}
	// The settings are the flags'; the collaborators are this process's.
	rc := cfg.Review
	rc.Owner = claimOwner()
	deps := reviewjob.Gated(reviewjob.Deps{Store: w.store, Chat: chat, Reviewer: w.reviewer, Events: w.pub,
		Claims: mysql.NewClaims(w.db, nil), ClaimsInStore: true}, mon)
	if w.shadow != nil {
		deps.Mirror = w.shadow.runner
	}
	planner, err := w.actionPlanner()
	if err != nil {
		return err
	}
	if planner != nil {
		deps.Actions = planner
	}
	metrics := jobloop.NewMetrics(w.reg)
	var handler jobloop.Handler = reviewjob.New(rc, deps, clock.Real(), reviewjob.NewMetrics(w.reg, metrics), w.log)
	if w.stops != nil {
		handler = reviewjob.StopGuarded(handler, w.stops.guard)
	}
	if w.loop, err = jobloop.New(cfg.Loop, w.inbox(), w.dlq, handler, clock.Real(), metrics, w.log); err != nil {
		return err
	}
	w.loop.HoldOn(mon)
	w.health = mon
	return nil
}

// listenAdmin opens the probes' and metrics' listener.
func (w *worker) listenAdmin() (*lifecycle.Server, error) {
	return listen("admin", w.cfg.AdminAddr, adminHandler(w.reg, w.loop, readiness{db: w.store, health: w.health}), nil)
}

// listenOperator opens the operator API (--operator-addr).
func (w *worker) listenOperator() (*lifecycle.Server, error) {
	return openOperator(w.cfg, w.stops.publisher(), w.store, w.reg, w.log)
}

// listenPprof opens the profiles' loopback listener (--pprof-addr).
func (w *worker) listenPprof() (*lifecycle.Server, error) {
	return listen("pprof", w.cfg.PprofAddr, pprofHandler(), nil)
}

// ready says the worker is about to poll: the log line and the tests'
// callbacks, once every listener is up.
func (w *worker) ready(context.Context) error {
	w.log.Info("worker: polling", "queue", w.cfg.ReviewQueue.URL, "concurrency", w.cfg.Loop.Concurrency,
		"pipeline_version", w.reviewer.PipelineVersion(), "admin_addr", w.admin.Addr(),
		"operator_addr", w.operator.AddrOrEmpty(), "pprof_addr", w.prof.AddrOrEmpty())
	if w.m.OnOperator != nil {
		w.m.OnOperator(w.operator.AddrOrEmpty(), w.prof.AddrOrEmpty())
	}
	if w.m.OnReady != nil {
		w.m.OnReady(w.admin.Addr())
	}
	return nil
}

// checkSchema waits (bounded) for MySQL and refuses to start on a schema
// older than this build (migrations are applied by `worker migrate`, never
// by a starting pod) or on tables that are not utf8mb4 (a
// *migrations.CharsetError naming them).
func checkSchema(ctx context.Context, db *sql.DB, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(wctx, 3*time.Second)
		err := db.PingContext(pctx)
		pcancel()
		if err == nil {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("mysql unreachable after %s: %w", wait, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	v, err := migrations.Version(wctx, db)
	if err != nil {
		return fmt.Errorf("reading the schema version (run 'worker migrate'): %w", err)
	}
	if v < latest {
		return fmt.Errorf("the database schema is at version %d, this build needs %d: run 'worker migrate'", v, latest)
	}
	// A latin1 table takes every ASCII verdict and fails on the first
	// Korean one, after its model calls were paid for: refuse up front.
	return migrations.CheckCharset(wctx, db)
}
