package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Main is the consumer process without the process: tests boot it
// in-process with an admin address of 127.0.0.1:0.
type Main struct {
	Config Config
	Log    *slog.Logger
	// OnReady, when set, is called with the admin listener's address once
	// the consumer is about to receive; /readyz turns 200 a moment later,
	// when receiving has started.
	OnReady func(adminAddr string)
}

// Run starts the consumer and blocks until ctx is cancelled (SIGTERM), then
// stops receiving, writes every buffered event, closes the queue and
// returns nil. It returns an error when something cannot be set up at
// start (configuration, AWS configuration, the admin port), when a part
// fails while running, or when the drain timeout left messages unwritten
// (they are handed back to the queue for redelivery).
func (m *Main) Run(ctx context.Context) error {
	if err := m.Config.Validate(); err != nil {
		return fmt.Errorf("consumer: config: %w", err)
	}
	p := &parts{m: m, cfg: m.Config, log: m.Log, reg: cli.NewRegistry()}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	g := lifecycle.New(p.log, nil)
	g.Add(p.services()...)
	err := g.Run(ctx)
	p.log.Info("consumer: stopped receiving and drained", "cause", fmt.Sprint(context.Cause(ctx)), "err", err)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	return nil
}

// parts is what the consumer's services build as they start, for the
// services after them.
type parts struct {
	m   *Main
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	aws    aws.Config
	queue  *sqs.Queue
	engine *consumer.Consumer
	admin  *lifecycle.Server
}

// services lists the consumer's parts in dependency order; the group
// stops them in reverse, so the queue closes after the engine's drain,
// when every queue call has returned.
func (p *parts) services() []lifecycle.Service {
	return []lifecycle.Service{
		{Name: "aws", Start: p.startAWS},
		{Name: "feedback queue", Start: p.startQueue, Stop: func(ctx context.Context) error { return p.queue.Close(ctx) }},
		{Name: "engine", Start: p.startEngine},
		lifecycle.Serve("admin", &p.admin, p.listenAdmin, 2*time.Second),
		{Name: "ready", Start: p.ready},
		// The two-phase drain, timed by the group alone: the engine stops
		// receiving and writes what it buffered within --drain-timeout
		// (Drain), then the group ends drain.Hard and the engine hands
		// the rest back (Grace).
		{Name: "consumer", Run: func(ctx context.Context) error { return p.engine.Run(ctx) },
			Drain: p.cfg.DrainTimeout, Grace: consumer.HandBackTimeout + lifecycle.Grace},
	}
}

// awsOptions keep one retry layer: the engine retries writes until they
// succeed and the queue adapter (storage/sqs) retries failed entries, so
// the SDK does not retry too.
func (p *parts) awsOptions() awsclient.Options {
	return awsclient.Options{S3PathStyle: p.cfg.S3PathStyle, MaxAttempts: 1, HTTPTimeout: 60 * time.Second}
}

func (p *parts) startAWS(ctx context.Context) (err error) {
	p.aws, err = awsclient.Load(ctx, p.awsOptions())
	return err
}

func (p *parts) startQueue(context.Context) (err error) {
	p.queue, err = sqs.New(awsclient.SQS(p.aws), p.cfg.Queue)
	return err
}

func (p *parts) startEngine(context.Context) error {
	store := s3lake.NewStore(awsclient.S3(p.aws, p.awsOptions()), p.cfg.LakeBucket, p.cfg.S3PartSize)
	lake, err := s3lake.NewLake(store, p.cfg.LakePrefix, p.cfg.ErrorsPrefix)
	if err != nil {
		return err
	}
	ecfg := p.cfg.Config
	ecfg.Logger, ecfg.Registerer = p.log, p.reg
	p.engine, err = consumer.New(ecfg, p.queue, lake, consumer.Options{PauseAfterWrite: p.cfg.DebugPauseAfterWrite})
	return err
}

func (p *parts) listenAdmin() (*lifecycle.Server, error) {
	return lifecycle.Listen("admin", p.cfg.AdminAddr, &http.Server{Handler: lifecycle.AdminHandler(p.reg, p.engine, "not receiving"), ReadHeaderTimeout: 5 * time.Second})
}

// ready says the consumer is about to receive: the log line and the
// tests' callback, once the admin listener is up.
func (p *parts) ready(context.Context) error {
	cfg := p.cfg
	p.log.Info("consumer: receiving", "queue", cfg.Queue.URL, "bucket", cfg.LakeBucket, "prefix", cfg.LakePrefix,
		"admin_addr", p.admin.Addr())
	if cfg.DebugPauseAfterWrite > 0 {
		p.log.Warn("consumer: test hook active: pausing between object writes and deletes", "pause", cfg.DebugPauseAfterWrite)
	}
	if p.m.OnReady != nil {
		p.m.OnReady(p.admin.Addr())
	}
	return nil
}
