package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/console"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/protect"
	"github.com/chatguard/chatguard/pipeline/stop"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redislive"
	"github.com/chatguard/chatguard/storage/redisstop"
	sqsq "github.com/chatguard/chatguard/storage/sqs"
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
	// Clock is the web app's and the group's clock (nil: the wall clock).
	Clock clock.Clock
}

// Run serves until ctx is cancelled (SIGTERM), then drains: new reviews are
// refused, every open stream gets a reconnect event, running reviews get
// the drain timeout to finish (their events stay in Redis for resumes on
// other pods) and are cancelled after it, lake events are flushed. It
// returns an error when a dependency cannot be set up at start, or when a
// background service (the servers, the outbox, the stop subscriber) fails:
// the others are then stopped in the same order.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Config.Validate(); err != nil {
		return fmt.Errorf("console: config: %w", err)
	}
	p := &parts{m: m, cfg: m.Config, log: m.Log, reg: cli.NewRegistry(), clock: clock.Or(m.Clock)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	g := lifecycle.New(p.log, p.clock)
	g.Add(p.services()...)
	if err := g.Run(ctx); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// parts are the console's pieces, each built by its service's Start, so
// that what was built is closed by the group when a later piece fails.
type parts struct {
	m     *Main
	cfg   Config
	log   *slog.Logger
	reg   *prometheus.Registry
	clock clock.Clock

	sqs      *sqs.Client
	feedback *sqsq.Queue
	events   *sqsq.LakePublisher
	reviewer pipeline.Reviewer
	db       *sql.DB
	store    *mysql.Store
	rdbs     redisClients
	liveLog  *redislive.Log
	hub      *live.Hub
	holder   *stop.Holder
	stops    *redisstop.Subscriber
	app      *console.App
	joiner   *campaign.Joiner
	web      *httpServer
	admin    *httpServer
}

// services are the console's services in dependency order; the group stops
// them in reverse. The drain ("reviews") is last so that it runs first at
// a stop, while the web server still answers (refusals, reconnects) and
// the stop subscriber still reaches the running reviews.
func (p *parts) services() []lifecycle.Service {
	p.web = &httpServer{name: "console", addr: p.cfg.ListenAddr, log: p.log,
		srv: &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}}
	p.admin = &httpServer{name: "admin", addr: p.cfg.AdminAddr, log: p.log, srv: &http.Server{ReadHeaderTimeout: 5 * time.Second}}
	return []lifecycle.Service{
		{Name: "feedback queue", Start: p.openFeedback, Stop: func(ctx context.Context) error { return p.feedback.Close(ctx) }},
		{Name: "lake publisher", Start: p.startEvents, Stop: p.stopEvents},
		{Name: "stage engine", Start: p.buildReviewer, Stop: p.closeReviewer},
		{Name: "mysql", Start: p.openMySQL, Stop: func(context.Context) error { return p.db.Close() }},
		{Name: "redis", Start: p.openRedis, Stop: func(context.Context) error { return p.rdbs.close() }},
		{Name: "live feed", Start: p.openLive, Stop: p.waitLive},
		{Name: "stop subscriber", Start: p.buildStops, Run: func(ctx context.Context) error { return p.stops.Run(ctx, p.holder) }},
		{Name: "web app", Start: p.buildApp},
		{Name: "feedback outbox", Run: func(ctx context.Context) error { return p.app.RunOutbox(ctx) }},
		{Name: "campaign join", Start: p.buildJoiner, Run: func(ctx context.Context) error {
			return p.joiner.Run(ctx, func(err error) { p.log.Warn("console: campaign join failed; the next run tries again", "err", err) })
		}},
		p.admin.service(func() http.Handler { return adminRoutes(p.reg, p.store, p.hub) }),
		p.web.service(func() http.Handler { return p.app.Handler() }),
		{Name: "reviews", Start: p.ready, Run: p.drain, Stop: p.waitStreams, Drain: p.cfg.DrainTimeout},
	}
}

// buildJoiner builds the campaign join over the store, its re-reviews
// (when --campaign-rereview-max turns them on) run by the web app.
func (p *parts) buildJoiner(context.Context) error {
	j, err := campaign.NewJoiner(p.cfg.CampaignJoin, p.store, p.reg, p.clock)
	if err != nil {
		return fmt.Errorf("campaign join: %w", err)
	}
	// Linked rooms are re-reviewed on the on-demand path, in-process.
	j.SetReReviewer(p.app)
	p.joiner = j
	return nil
}

func (p *parts) openFeedback(ctx context.Context) error {
	awsCfg, err := awsclient.Load(ctx, awsclient.Options{HTTPTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	p.sqs = awsclient.SQS(awsCfg)
	p.feedback, err = sqsq.New(p.sqs, p.cfg.Feedback)
	return err
}

func (p *parts) startEvents(context.Context) error {
	// The inference logs go to the feedback queue with the lake
	// publisher's own batching and retries.
	lakeCfg := sqsq.DefaultLakeConfig()
	lakeCfg.URL = p.cfg.Feedback.URL
	events, err := sqsq.NewLakePublisher(p.sqs, lakeCfg, p.reg)
	if err != nil {
		return err
	}
	p.events = events
	events.Start()
	return nil
}

// stopEvents flushes the inference-log events; what is left unsent is
// counted as dropped by the publisher and logged here, as it does not
// make the drain a failure.
func (p *parts) stopEvents(ctx context.Context) error {
	if err := p.events.Stop(ctx); err != nil {
		p.log.Warn("console: inference-log events left unsent at shutdown", "err", err)
	}
	return nil
}

// buildReviewer builds the workers' stage engine with the interactive
// class (reviewer.go): the same privacy controls, pools, fleet limits and
// pipeline version. Built, and its settings logged, before the first
// dial, as the worker's is: the two lines can be compared on pods (and in
// the deploy boot tests) before MySQL answers.
func (p *parts) buildReviewer(context.Context) error {
	if p.m.Reviewer != nil {
		p.reviewer = p.m.Reviewer
		return nil
	}
	engine, err := newReviewer(p.cfg, p.events, p.reg, p.log, p.history)
	if err != nil {
		return err
	}
	p.reviewer = engine
	return nil
}

// history is the verdict store's account history once MySQL is open: the
// stage engine is built first, and no review runs before the store is.
func (p *parts) history() pipeline.AccountHistory {
	if p.store == nil {
		return nil
	}
	return p.store
}

func (p *parts) closeReviewer(context.Context) error {
	if e, ok := p.reviewer.(*reviewers.Engine); ok {
		return e.Close()
	}
	return nil
}

func (p *parts) openMySQL(ctx context.Context) error {
	db, err := mysql.OpenDB(p.cfg.MySQL)
	if err != nil {
		return err
	}
	if err := console.CheckSchema(ctx, db, 10*time.Second); err != nil {
		return errors.Join(err, db.Close())
	}
	p.db, p.store = db, mysql.New(db)
	return nil
}

// redisClients are the console's three Redis pools.
type redisClients struct{ main, tail, stop redis.UniversalClient }

func (r redisClients) close() error {
	var errs []error
	for _, c := range []redis.UniversalClient{r.stop, r.tail, r.main} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// openRedis opens the three pools; when one cannot be made, those made
// are closed (the group stops only the services that started).
func (p *parts) openRedis(context.Context) error {
	if err := p.redisClients(); err != nil {
		return errors.Join(err, p.rdbs.close())
	}
	return nil
}

func (p *parts) redisClients() error {
	var err error
	if p.rdbs.main, err = p.cfg.RedisOptions.Client(func(o *redis.UniversalOptions) {
		// Resumes block on XREAD for up to console.TailWait; streams are many.
		o.ReadTimeout, o.PoolSize = 2*time.Second+console.TailWait, 64
	}); err != nil {
		return err
	}
	// Resumed clients tail the live log with blocking reads; they get a
	// pool of their own so that they never starve the log writer's
	// appends (redislive.WithTailClient).
	if p.rdbs.tail, err = p.cfg.RedisOptions.Client(func(o *redis.UniversalOptions) {
		o.ReadTimeout, o.PoolSize = 2*time.Second+console.TailWait, 1024
	}); err != nil {
		return err
	}
	// Stops reach this pod's reviews as they reach the workers', through
	// a client of the workers' stop profile: the lookup each review makes
	// at its start is bounded by --stop-check-timeout, socket included.
	p.rdbs.stop, err = p.cfg.RedisOptions.Client(cli.StopProfile)
	return err
}

func (p *parts) openLive(context.Context) error {
	liveLog, err := redislive.New(p.rdbs.main, p.cfg.Live)
	if err != nil {
		return err
	}
	p.liveLog = liveLog.WithTailClient(p.rdbs.tail)
	p.hub, err = live.NewHub(p.cfg.Hub(), p.liveLog, p.reg)
	return err
}

// waitLive waits for the live log to hold every event; events it could
// not keep only cost resumes on other pods, so they are logged.
func (p *parts) waitLive(ctx context.Context) error {
	if err := p.hub.Wait(ctx); err != nil {
		p.log.Warn("console: live events not all kept at shutdown", "err", err)
	}
	return nil
}

func (p *parts) buildStops(context.Context) error {
	sm := redisstop.NewMetrics(p.reg)
	p.holder = stop.NewHolder(nil, sm.ObserveApplied)
	p.stops = redisstop.NewSubscriber(p.rdbs.stop, p.cfg.Stop, sm, p.log)
	return nil
}

func (p *parts) buildApp(context.Context) error {
	chatCfg := p.cfg.Chat
	chatCfg.Registerer = p.reg
	chat, err := chatapi.New(chatCfg)
	if err != nil {
		return err
	}
	keys, err := p.cfg.Options.Keys()
	if err != nil {
		return err
	}
	d := console.Deps{Store: p.store, Feedback: p.feedback, Chat: chat,
		HistoryTimeout: p.cfg.Chat.Timeout + 2*time.Second, Reviewer: p.reviewer, Hub: p.hub, LiveLog: p.liveLog,
		Guard:  &stop.Guard{Holder: p.holder, Store: p.stops, CheckTimeout: p.cfg.Stop.CheckTimeout},
		Events: p.events, Registerer: p.reg, Log: p.log, Clock: p.clock, Keys: keys, History: p.store, Actions: p.store, Control: p.store}
	if d.Planner, err = p.actionPlanner(); err != nil {
		return err
	}
	if p.cfg.Options.LegacyPseudonyms {
		d.RekeyModerator = p.store.RekeyModerator
	}
	p.app, err = console.New(p.cfg.Config, d)
	return err
}

// actionPlanner is the on-demand verdicts' action step, the workers' own
// planner over the store; nil when actions are off.
func (p *parts) actionPlanner() (pipeline.ActionPlanner, error) {
	pol, err := p.cfg.Actions.Load()
	if err != nil || pol == nil {
		return nil, err
	}
	p.log.Info("console: protective actions on", "policy_version", pol.Version, "policy_hash", pol.Hash)
	return protect.New(pol, p.store, p.clock, protect.NewMetrics(p.reg), p.log), nil
}

// ready announces the console once both servers listen.
func (p *parts) ready(context.Context) error {
	addr, adminAddr := p.web.ln.Addr().String(), p.admin.ln.Addr().String()
	url := p.cfg.PublicURL
	if url == "" {
		url = "http://" + addr
	}
	p.log.Info("console: serving", "url", url, "admin_addr", adminAddr, "max_reviews", p.cfg.MaxReviews,
		"dev_login", p.cfg.DevLogin, "stop_button", p.cfg.OperatorURL != "")
	if p.m.OnReady != nil {
		p.m.OnReady(addr, adminAddr)
	}
	return nil
}

// drain is the two-phase stop of the on-demand reviews: at ctx's end they
// are refused and streams told to reconnect; the running ones keep the
// drain timeout (the service's Drain), after which the group cancels
// drain.Hard(ctx) and with it the reviews.
func (p *parts) drain(ctx context.Context) error { return p.app.Run(ctx) }

// waitStreams waits for the detached streams to end at their reconnect
// event; one still open only holds a socket the process exit closes.
func (p *parts) waitStreams(ctx context.Context) error {
	if err := p.app.Wait(ctx); err != nil {
		p.log.Warn("console: streams still open at shutdown", "err", err)
	}
	return nil
}

// httpServer is a listener and its server as one service.
type httpServer struct {
	name, addr string
	log        *slog.Logger
	srv        *http.Server
	ln         net.Listener
}

// service listens at Start (with the handler built then) and serves until
// ctx is done; it then shuts down, closing what is still open when the
// drain deadline passes. A failing Serve ends the group with its error.
func (h *httpServer) service(handler func() http.Handler) lifecycle.Service {
	return lifecycle.Service{Name: h.name + " server",
		Start: func(context.Context) error {
			ln, err := net.Listen("tcp", h.addr)
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			h.ln, h.srv.Handler = ln, handler()
			return nil
		},
		Run: func(ctx context.Context) error {
			errc := make(chan error, 1)
			go func() { errc <- h.srv.Serve(h.ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("serve: %w", err)
			case <-ctx.Done():
			}
			if err := h.srv.Shutdown(drain.Hard(ctx)); err != nil {
				h.log.Warn("console: connections still open at shutdown; closing them", "server", h.name, "err", err)
				_ = h.srv.Close() // the only error is the listener's, closed already
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		}}
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
	// OpenMetrics when asked for: the only format that carries the latency
	// histograms' exemplars (a sampled trace's id).
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	return mux
}
