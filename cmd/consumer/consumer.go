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

	"github.com/chatguard/chatguard/cmd/internal/cli"
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
// stops receiving, writes every buffered event and returns nil. It returns
// an error when something cannot be set up at start (configuration, AWS
// configuration, the admin port) or when the drain timeout left messages
// unwritten (they are handed back to the queue for redelivery).
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("consumer: config: %w", err)
	}
	log := m.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cli.NewRegistry()

	// One retry layer: the engine retries writes until they succeed and the
	// queue adapter (storage/sqs) retries failed entries, so the SDK does
	// not retry too.
	awsOpts := awsclient.Options{S3PathStyle: cfg.S3PathStyle, MaxAttempts: 1, HTTPTimeout: 60 * time.Second}
	awsCfg, err := awsclient.Load(ctx, awsOpts)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	store := s3lake.NewStore(awsclient.S3(awsCfg, awsOpts), cfg.LakeBucket, cfg.S3PartSize)
	qcfg := sqs.DefaultConfig()
	qcfg.Name, qcfg.URL = "feedback", cfg.FeedbackQueueURL
	queue, err := sqs.New(awsclient.SQS(awsCfg), qcfg)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	// After the engine's drain: every queue call has returned by then.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := queue.Close(cctx); err != nil {
			log.Warn("consumer: queue calls cut short at shutdown", "err", err)
		}
	}()

	ecfg := cfg.engine()
	ecfg.Logger = log
	ecfg.Registerer = reg
	lake, err := s3lake.NewLake(store, cfg.LakePrefix, cfg.ErrorsPrefix)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	c, err := consumer.New(ecfg, queue, lake, consumer.Options{PauseAfterWrite: cfg.DebugPauseAfterWrite})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("consumer: admin listen: %w", err)
	}
	srv := &http.Server{Handler: adminHandler(reg, c), ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("consumer: admin server", "err", err)
		}
	}()

	log.Info("consumer: receiving", "queue", cfg.FeedbackQueueURL, "bucket", cfg.LakeBucket, "prefix", cfg.LakePrefix,
		"admin_addr", ln.Addr().String())
	if cfg.DebugPauseAfterWrite > 0 {
		log.Warn("consumer: test hook active: pausing between object writes and deletes", "pause", cfg.DebugPauseAfterWrite)
	}
	if m.OnReady != nil {
		m.OnReady(ln.Addr().String())
	}
	err = c.Run(ctx)
	log.Info("consumer: stopped receiving and drained", "cause", fmt.Sprint(context.Cause(ctx)), "err", err)
	return err
}

// adminHandler serves the probes and the metrics.
//
//   - /healthz: the process is alive (always 200 while it serves).
//   - /readyz: 200 while receiving; 503 while draining.
//   - /metrics: the consumer's private registry.
func adminHandler(reg *prometheus.Registry, c interface{ Ready() bool }) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !c.Ready() {
			http.Error(w, "not receiving", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
