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
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/stop"
	"github.com/chatguard/chatguard/storage/redisinfo"
	"github.com/chatguard/chatguard/storage/redisstop"
)

func (c *Config) stopFlags(fs *cli.FlagSet) {
	c.RedisOptions.Flags(fs, "Redis host:port carrying stop signals; empty disables stop signals")
	depflags.BindStops(fs, &c.Stop)
}

func (c Config) validateStops() error {
	return errors.Join(c.RedisOptions.Validate(), c.Stop.Validate())
}

// stopSignals is the worker's side of the stop signals: the holder and
// guard the jobs use, the publisher behind POST /v1/stop, and the
// subscriber the "stop signals" service runs. A nil *stopSignals is the
// worker without Redis: reviews run, but cannot be stopped.
type stopSignals struct {
	guard  *stop.Guard
	pub    pipeline.StopPublisher
	feed   pipeline.StopFeed
	holder *stop.Holder
	rdb    redis.UniversalClient
}

// newStopSignals builds the stop signals' parts over --redis-addr.
func newStopSignals(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*stopSignals, error) {
	// The start-of-review lookup's deadline (--stop-check-timeout) bounds
	// its socket waits too.
	rdb, err := cfg.RedisOptions.Client(cli.StopProfile)
	if err != nil {
		return nil, err
	}
	// The shared Redis's memory, evictions and rejected writes, for the
	// alerts; every worker reports the same Redis (the rules take the max).
	if err := redisinfo.Register(reg, rdb, "shared", 2*time.Second, nil); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	m := redisstop.NewMetrics(reg)
	checkErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_check_errors_total", Help: "Start-of-review stop checks that failed (Redis unreachable); the reviews went on."})
	reg.MustRegister(checkErrors)
	holder := stop.NewHolder(nil, m.ObserveApplied)
	feed := redisstop.NewSubscriber(rdb, cfg.Stop, m, log)
	return &stopSignals{
		guard:  &stop.Guard{Holder: holder, Store: feed, CheckTimeout: cfg.Stop.CheckTimeout, OnCheckError: func(error) { checkErrors.Inc() }},
		pub:    redisstop.NewPublisher(rdb, cfg.Stop, m),
		feed:   feed,
		holder: holder,
		rdb:    rdb,
	}, nil
}

// run applies the signals to the holder until ctx ends.
func (s *stopSignals) run(ctx context.Context) error {
	return s.feed.Run(ctx, s.holder)
}

// close closes the Redis client, once run has returned.
func (s *stopSignals) close() error {
	return s.rdb.Close()
}

// publisher is POST /v1/stop's publisher; nil without Redis.
func (s *stopSignals) publisher() pipeline.StopPublisher {
	if s == nil {
		return nil
	}
	return s.pub
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
