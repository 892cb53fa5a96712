package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/stop"
	"github.com/chatguard/chatguard/storage/redisstop"
)

func (c *Config) stopFlags(fs *cli.FlagSet) {
	c.RedisOptions.Flags(fs, "Redis host:port carrying stop signals; empty disables stop signals")
	c.Stops.Flags(fs)
}

func (c Config) validateStops() error {
	return errors.Join(c.RedisOptions.Validate(), c.Stops.Validate())
}

// stopSignals is the worker's side of the stop signals: the holder and
// guard the jobs use, the publisher behind POST /v1/stop, and the
// subscriber goroutine that Run owns.
type stopSignals struct {
	guard *stop.Guard
	pub   pipeline.StopPublisher
	rdb   *redis.Client
	done  chan struct{}
}

// startStops subscribes to stop signals until ctx ends. With no Redis
// configured it returns nil: reviews run without stop signals.
func startStops(ctx context.Context, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*stopSignals, error) {
	if cfg.RedisAddr == "" {
		log.Warn("worker: stop signals disabled: no --redis-addr")
		return nil, nil
	}
	// The start-of-review lookup's deadline (--stop-check-timeout) bounds
	// its socket waits too.
	rdb, err := cfg.RedisOptions.Client(cli.StopProfile)
	if err != nil {
		return nil, err
	}
	m := redisstop.NewMetrics(reg)
	checkErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_check_errors_total", Help: "Start-of-review stop checks that failed (Redis unreachable); the reviews went on."})
	reg.MustRegister(checkErrors)
	holder := stop.NewHolder(nil, m.ObserveApplied)
	var feed pipeline.StopFeed = redisstop.NewSubscriber(rdb, cfg.Stops.Config(), m, log)
	s := &stopSignals{
		guard: &stop.Guard{Holder: holder, Store: feed, CheckTimeout: cfg.StopCheckTimeout, OnCheckError: func(error) { checkErrors.Inc() }},
		pub:   redisstop.NewPublisher(rdb, cfg.Stops.Config(), m),
		rdb:   rdb,
		done:  make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = feed.Run(ctx, holder)
	}()
	return s, nil
}

// wait blocks until the subscriber has stopped (after ctx ended), bounded.
func (s *stopSignals) wait(timeout time.Duration) {
	if s == nil {
		return
	}
	select {
	case <-s.done:
	case <-time.After(timeout):
	}
	_ = s.rdb.Close()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
