package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
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

// eventFlushTimeout bounds flushing buffered lake events at shutdown;
// queueCloseTimeout the queue calls still in flight then.
const (
	eventFlushTimeout = 5 * time.Second
	queueCloseTimeout = 5 * time.Second
)

// Run starts the worker and blocks until ctx is cancelled (SIGTERM), then
// drains: it stops polling, lets in-flight jobs finish within the drain
// timeout, hands the rest back, flushes lake events and returns nil. It
// returns an error when a dependency cannot be set up at start (bad
// configuration, MySQL unreachable or not migrated, the admin port taken).
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("worker: config: %w", err)
	}
	log := m.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cli.NewRegistry()

	awsCfg, err := awsclient.Load(ctx, awsclient.Options{HTTPTimeout: 45 * time.Second})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	sqsc := awsclient.SQS(awsCfg)
	// Queues close after the loop's drain (deferred first, run last):
	// every settle has returned by then.
	closeQueue := func(q *sqs.Queue) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueCloseTimeout)
		defer cancel()
		if err := q.Close(cctx); err != nil {
			log.Warn("worker: queue calls cut short at shutdown", "err", err)
		}
	}
	review, err := sqs.New(sqsc, cfg.reviewQueue())
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer closeQueue(review)
	dlq, err := sqs.New(sqsc, cfg.reviewDLQ())
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer closeQueue(dlq)

	pub, err := sqs.NewLakePublisher(sqsc, cfg.events(), reg)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	pub.Start()
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventFlushTimeout)
		defer cancel()
		if err := pub.Stop(fctx); err != nil {
			log.Warn("worker: lake events left unsent at shutdown", "err", err)
		}
	}()

	// The stage engine is built, and its settings logged, before the first
	// dial: a pod waiting for MySQL already says which privacy controls and
	// pipeline version it will review with (the deploy boot tests compare
	// them with the console's against dead dependencies).
	reviewer := m.Reviewer
	if reviewer == nil {
		engine, err := newReviewer(cfg, pub, reg, log)
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer engine.Close()
		reviewer = engine
	}

	db, err := mysql.OpenDB(cfg.MySQL.Config())
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer db.Close()
	wait := m.SchemaWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	if err := checkSchema(ctx, db, wait); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	store := mysql.New(db)

	chatCfg := cfg.chat()
	chatCfg.Registerer = reg
	chat, err := chatapi.New(chatCfg)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}

	// The subscriber outlives the loop's drain, so stops still reach jobs
	// that are finishing; it ends when Run returns.
	stopCtx, stopSubscriber := context.WithCancel(context.WithoutCancel(ctx))
	stops, err := startStops(stopCtx, cfg, reg, log)
	if err != nil {
		stopSubscriber()
		return fmt.Errorf("worker: %w", err)
	}
	defer func() {
		stopSubscriber()
		stops.wait(5 * time.Second)
	}()
	reviewCfg := reviewjob.Config{MaxAge: cfg.MaxAge, BusyRetry: cfg.BusyRetry, Limits: cfg.limits(),
		Owner: claimOwner(), ClaimTTL: cfg.ClaimTTL, ClaimPoll: cfg.ClaimPoll}
	var stopPub pipeline.StopPublisher
	if stops != nil {
		stopPub = stops.pub
	}

	mon, err := health.New(cfg.health(), reg, log)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	deps := reviewjob.Gated(reviewjob.Deps{Store: store, Chat: chat, Reviewer: reviewer, Events: pub,
		Claims: mysql.NewClaims(db, nil), ClaimsInStore: true}, mon)

	metrics := jobloop.NewMetrics(reg)
	var handler jobloop.Handler = reviewjob.New(reviewCfg, deps, clock.Real(), reviewjob.NewMetrics(reg, metrics), log)
	if stops != nil {
		handler = reviewjob.StopGuarded(handler, stops.guard)
	}
	loop, err := jobloop.New(cfg.loop(), review, dlq, handler, clock.Real(), metrics, log)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	loop.HoldOn(mon)

	admin, err := listen("admin", cfg.AdminAddr, adminHandler(reg, loop, readiness{db: store, health: mon}), nil)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer admin.close(ctx, log)
	var operator, prof *server
	if cfg.OperatorAddr != "" {
		if operator, err = startOperator(cfg, stopPub, store, reg, log); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer operator.close(ctx, log)
	}
	if cfg.PprofAddr != "" {
		if prof, err = listen("pprof", cfg.PprofAddr, pprofHandler(), nil); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer prof.close(ctx, log)
	}

	log.Info("worker: polling", "queue", cfg.ReviewQueueURL, "concurrency", cfg.Concurrency,
		"pipeline_version", reviewer.PipelineVersion(), "admin_addr", admin.addr(),
		"operator_addr", operator.addrOrEmpty(), "pprof_addr", prof.addrOrEmpty())
	if m.OnOperator != nil {
		m.OnOperator(operator.addrOrEmpty(), prof.addrOrEmpty())
	}
	if m.OnReady != nil {
		m.OnReady(admin.addr())
	}
	err = loop.Run(ctx)
	log.Info("worker: drained", "cause", fmt.Sprint(context.Cause(ctx)))
	return err
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
