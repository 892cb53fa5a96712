package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/stop"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redislive"
	"github.com/chatguard/chatguard/storage/redisstop"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Main is the console process without the process: tests boot it
// in-process with listen addresses of 127.0.0.1:0.
type Main struct {
	Config Config
	Log    *slog.Logger
	// OnReady, when set, is called with the console's and the admin
	// listener's addresses once both serve.
	OnReady func(addr, adminAddr string)
	// Reviewer, when set, replaces the stage engine built from Config.
	Reviewer pipeline.Reviewer
}

// Run serves until ctx is cancelled (SIGTERM), then drains: new reviews are
// refused, every open stream gets a reconnect event, running reviews get
// the drain timeout to finish (their events stay in Redis for resumes on
// other pods) and are cancelled after it, lake events are flushed. It
// returns an error when a dependency cannot be set up at start.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("console: config: %w", err)
	}
	log := m.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cli.NewRegistry()
	key, err := loadKey(cfg.SessionKeyFile)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}

	awsCfg, err := awsclient.Load(ctx, awsclient.Options{HTTPTimeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	sqsc := awsclient.SQS(awsCfg)
	feedback, err := sqs.New(sqsc, cfg.feedback())
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = feedback.Close(cctx)
	}()
	lakeCfg := sqs.DefaultLakeConfig()
	lakeCfg.URL = cfg.FeedbackQueueURL
	events, err := sqs.NewLakePublisher(sqsc, lakeCfg, reg)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	events.Start()
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := events.Stop(fctx); err != nil {
			log.Warn("console: inference-log events left unsent at shutdown", "err", err)
		}
	}()

	// The workers' stage engine with the interactive class
	// (reviewer.go): the same privacy controls, pools, fleet limits and
	// pipeline version. Built, and its settings logged, before the first
	// dial, as the worker's is: the two lines can be compared on pods (and
	// in the deploy boot tests) before MySQL answers.
	reviewer := m.Reviewer
	if reviewer == nil {
		engine, err := newReviewer(cfg, events, reg, log)
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		defer engine.Close()
		reviewer = engine
	}

	db, err := mysql.OpenDB(cfg.MySQL.Config())
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	defer db.Close()
	if err := checkSchema(ctx, db, 10*time.Second); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	store := mysql.New(db)

	// The outbox sweeper resends feedback events SQS did not accept
	// (feedback.go); it stops before the queue and the database close.
	fbm := newFeedbackMetrics(reg)
	outboxCtx, stopOutbox := context.WithCancel(context.WithoutCancel(ctx))
	outboxDone := make(chan struct{})
	go func() { defer close(outboxDone); _ = newOutbox(cfg.Outbox, store, feedback, fbm, log).Run(outboxCtx) }()
	defer func() { stopOutbox(); <-outboxDone }()

	chatCfg := cfg.Chat.Config()
	chatCfg.Registerer = reg
	chat, err := chatapi.New(chatCfg)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}

	rdb, err := cfg.RedisOptions.Client(func(o *redis.Options) {
		// Resumes block on XREAD for up to tailWait; streams are many.
		o.ReadTimeout, o.PoolSize = 2*time.Second+tailWait, 64
	})
	if err != nil {
		return fmt.Errorf("console: redis: %w", err)
	}
	defer rdb.Close()
	// Resumed clients tail the live log with blocking reads; they get a
	// pool of their own so that they never starve the log writer's
	// appends (redislive.WithTailClient).
	tailRdb, err := cfg.RedisOptions.Client(func(o *redis.Options) {
		o.ReadTimeout, o.PoolSize = 2*time.Second+tailWait, 1024
	})
	if err != nil {
		return fmt.Errorf("console: redis: %w", err)
	}
	defer tailRdb.Close()
	liveLog, err := redislive.New(rdb, cfg.liveLog())
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	liveLog = liveLog.WithTailClient(tailRdb)
	hub, err := live.NewHub(cfg.hub(), liveLog, reg)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}

	// Stops reach this pod's reviews as they reach the workers', through
	// a client of the workers' stop profile: the lookup each review makes
	// at its start is bounded by --stop-check-timeout, socket included.
	stopRdb, err := cfg.RedisOptions.Client(cli.StopProfile)
	if err != nil {
		return fmt.Errorf("console: redis: %w", err)
	}
	defer stopRdb.Close()
	stopCtx, stopSubscriber := context.WithCancel(context.WithoutCancel(ctx))
	sm := redisstop.NewMetrics(reg)
	holder := stop.NewHolder(nil, sm.ObserveApplied)
	feed := redisstop.NewSubscriber(stopRdb, cfg.Stops.Config(), sm, log)
	subDone := make(chan struct{})
	go func() { defer close(subDone); _ = feed.Run(stopCtx, holder) }()
	defer func() { stopSubscriber(); <-subDone }()

	reviewCtx, cancelReviews := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelReviews(nil)
	rv := &reviews{cfg: cfg, hub: hub, liveLog: liveLog, reviewer: reviewer, chat: chat, store: store,
		guard: &stop.Guard{Holder: holder, Store: feed, CheckTimeout: cfg.StopCheckTimeout}, log: log, now: time.Now,
		slots: make(chan struct{}, cfg.MaxReviews), ctx: reviewCtx}
	tmpl, err := parseTemplates()
	if err != nil {
		return fmt.Errorf("console: templates: %w", err)
	}
	srv := &server{cfg: cfg, auth: cfg.auth(key),
		store: store, chat: chat, feedback: feedback, fbm: fbm, reviews: rv, hub: hub, log: log, tmpl: tmpl, now: time.Now}
	if cfg.OperatorURL != "" {
		srv.stops = newOperatorClient(cfg.OperatorURL, cfg.OperatorTokenFile)
	}
	newConsoleMetrics(reg, rv)

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("console: listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("console: admin listen: %w", err)
	}
	web := &http.Server{Handler: srv.routes(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	admin := &http.Server{Handler: adminRoutes(reg, store, hub), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- web.Serve(ln) }()
	go func() { errc <- admin.Serve(adminLn) }()
	url := cfg.PublicURL
	if url == "" {
		url = "http://" + ln.Addr().String()
	}
	log.Info("console: serving", "url", url, "admin_addr", adminLn.Addr().String(), "max_reviews", cfg.MaxReviews,
		"dev_login", cfg.DevLogin, "stop_button", cfg.OperatorURL != "")
	if m.OnReady != nil {
		m.OnReady(ln.Addr().String(), adminLn.Addr().String())
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}

	// Drain: clients reconnect elsewhere while reviews finish here.
	finished := rv.drain(cfg.DrainTimeout)
	if !finished {
		cancelReviews(errors.New("console: drain timeout"))
		rv.running.Wait()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = web.Shutdown(sctx)
	_ = admin.Shutdown(sctx)
	// Detached streams end at their reconnect event (or the next log read).
	streamsDone := make(chan struct{})
	go func() { rv.streams.Wait(); close(streamsDone) }()
	select {
	case <-streamsDone:
	case <-sctx.Done():
		log.Warn("console: streams still open at shutdown")
	}
	if err := hub.Wait(sctx); err != nil {
		log.Warn("console: live events not all kept at shutdown", "err", err)
	}
	log.Info("console: drained", "reviews_finished", finished, "cause", fmt.Sprint(context.Cause(ctx)))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("console: serve: %w", serveErr)
	}
	return nil
}

// adminRoutes serves the probes and the metrics.
func adminRoutes(reg *prometheus.Registry, db interface{ Ping(context.Context) error }, hub *live.Hub) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hub.Draining():
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		default:
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			http.Error(w, "mysql unreachable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// newConsoleMetrics registers the admission gauges and counters.
func newConsoleMetrics(reg prometheus.Registerer, rv *reviews) {
	rv.admission = newAdmissionMetrics(reg)
	rv.panics = prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_console_review_panics_total",
		Help: "On-demand reviews that panicked; each ended its stream with an error event and the pod went on."})
	reg.MustRegister(rv.panics)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_console_reviews_running",
		Help: "On-demand reviews running on this pod (admission slots taken)."}, func() float64 { return float64(len(rv.slots)) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_console_reviews_slots",
		Help: "On-demand review slots of this pod (--max-reviews)."}, func() float64 { return float64(cap(rv.slots)) }))
}
