package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/trigger"
	"github.com/chatguard/chatguard/storage/redisdebounce"
	"github.com/chatguard/chatguard/storage/redisinfo"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Main is the trigger process without the process: tests boot it
// in-process with an admin address of 127.0.0.1:0.
type Main struct {
	Config Config
	Log    *slog.Logger
	// Queues, when set, replaces the SQS queues built from Config (tests
	// that run without an SQS endpoint).
	Queues *Queues
	// Clock, when set, replaces the wall clock of the engine and the room
	// state (tests).
	Clock clock.Clock
	// OnReady, when set, is called with the admin listener's address once
	// the trigger is about to receive.
	OnReady func(adminAddr string)
}

// Queues are the three queues the trigger talks to.
type Queues struct {
	Events  pipeline.Inbox
	DLQ     pipeline.Sender
	Reviews pipeline.Sender
}

// Run starts the trigger and blocks until ctx is cancelled (SIGTERM), then
// stops receiving, hands held events back, closes its clients and returns
// nil. It returns an error when something cannot be set up at start.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Config.Validate(); err != nil {
		return fmt.Errorf("trigger: config: %w", err)
	}
	p := &parts{m: m, cfg: m.Config, log: m.Log, reg: cli.NewRegistry(), clk: clock.Or(m.Clock)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	g := lifecycle.New(p.log, nil)
	g.Add(p.services()...)
	err := g.Run(ctx)
	p.log.Info("trigger: stopped", "cause", fmt.Sprint(context.Cause(ctx)), "err", err)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	return nil
}

// parts is what the trigger's services build as they start.
type parts struct {
	m   *Main
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry
	clk clock.Clock

	aws    aws.Config
	owned  []*sqs.Queue
	queues Queues
	rdb    redis.UniversalClient
	engine *trigger.Engine
	admin  *lifecycle.Server
}

// services lists the parts in dependency order; the group stops them in
// reverse, so the queues and Redis close after the engine has stopped.
func (p *parts) services() []lifecycle.Service {
	return []lifecycle.Service{
		{Name: "queues", Start: p.startQueues, Stop: p.closeQueues},
		{Name: "redis", Start: p.startRedis, Stop: func(context.Context) error { return p.rdb.Close() }},
		{Name: "engine", Start: p.startEngine},
		lifecycle.Serve("admin", &p.admin, p.listenAdmin, 2*time.Second),
		{Name: "ready", Start: p.ready},
		{Name: "trigger", Run: func(ctx context.Context) error { return p.engine.Run(ctx) }, Drain: p.cfg.Engine.CallTimeout + 5*time.Second},
	}
}

func (p *parts) startQueues(ctx context.Context) error {
	if p.m.Queues != nil {
		p.queues = *p.m.Queues
		return nil
	}
	// One retry layer: storage/sqs retries entries, the SDK does not.
	var err error
	if p.aws, err = awsclient.Load(ctx, awsclient.Options{MaxAttempts: 1, HTTPTimeout: 30 * time.Second}); err != nil {
		return err
	}
	var qs [3]*sqs.Queue
	for i, qc := range []sqs.Config{p.cfg.Events, p.cfg.EventsDLQ, p.cfg.Reviews} {
		if qs[i], err = sqs.New(awsclient.SQS(p.aws), qc); err != nil {
			return err
		}
		p.owned = append(p.owned, qs[i])
	}
	p.queues = Queues{Events: qs[0], DLQ: qs[1], Reviews: qs[2]}
	return nil
}

func (p *parts) closeQueues(ctx context.Context) error {
	for _, q := range p.owned {
		if err := q.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (p *parts) startRedis(context.Context) (err error) {
	if p.rdb, err = p.cfg.State().Client(nil); err != nil {
		return err
	}
	// The room state's Redis must never evict: its memory, evictions and
	// rejected writes are exported for the alerts.
	return redisinfo.Register(p.reg, p.rdb, "state", 2*time.Second, p.clk)
}

func (p *parts) startEngine(context.Context) error {
	rooms, err := redisdebounce.New(p.rdb, p.cfg.Rooms, p.clk)
	if err != nil {
		return err
	}
	p.engine, err = trigger.New(p.cfg.engineConfig(), trigger.Deps{Events: p.queues.Events, DLQ: p.queues.DLQ, Reviews: p.queues.Reviews,
		Rooms: rooms, Clock: p.clk, Log: p.log, Registerer: p.reg})
	return err
}

// listenAdmin opens /healthz, /readyz and /metrics; /readyz is 503 while
// the engine holds events for Redis and while it stops; /healthz is 503
// once a receive loop has not advanced for the engine's LiveAfter.
func (p *parts) listenAdmin() (*lifecycle.Server, error) {
	return lifecycle.Listen("admin", p.cfg.AdminAddr, &http.Server{Handler: lifecycle.AdminHandler(p.reg, p.engine, "not receiving"), ReadHeaderTimeout: 5 * time.Second})
}

func (p *parts) ready(context.Context) error {
	p.log.Info("trigger: receiving", "chat_events", p.cfg.Events.URL, "review_realtime", p.cfg.Reviews.URL,
		"quiet", p.cfg.Rooms.Quiet, "max_delay", p.cfg.Rooms.MaxDelay, "admin_addr", p.admin.Addr())
	if p.m.OnReady != nil {
		p.m.OnReady(p.admin.Addr())
	}
	return nil
}
