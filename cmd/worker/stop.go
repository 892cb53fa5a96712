package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/stop"
	"github.com/chatguard/chatguard/storage/redisstop"
)

func (c *Config) stopFlags(fs *cli.FlagSet) {
	fs.StringVar(&c.RedisAddr, "redis-addr", "Redis host:port carrying stop signals; empty disables stop signals")
	fs.StringVar(&c.RedisPassword, "redis-password", "Redis password (prefer the environment variable; never logged)")
	fs.IntVar(&c.RedisDB, "redis-db", "Redis database number")
	fs.StringVar(&c.StopChannel, "stop-channel", "Redis pub/sub channel of stop signals")
	fs.StringVar(&c.StopKeyPrefix, "stop-key-prefix", "prefix of the Redis keys that keep live stop signals")
	fs.DurationVar(&c.StopCheckTimeout, "stop-check-timeout", "bound of the one Redis check each review makes when it starts")
}

func (c Config) validateStops() error {
	var errs []error
	if c.RedisDB < 0 {
		errs = append(errs, errors.New("--redis-db must not be negative"))
	}
	if c.StopCheckTimeout <= 0 {
		errs = append(errs, errors.New("--stop-check-timeout must be positive"))
	}
	rc := c.redisStop()
	if err := rc.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--stop-channel/--stop-key-prefix: %w", err))
	}
	return errors.Join(errs...)
}

func (c Config) redisStop() redisstop.Config {
	rc := redisstop.DefaultConfig()
	rc.Channel, rc.KeyPrefix = c.StopChannel, c.StopKeyPrefix
	return rc
}

// newRedis returns a client whose every wait is bounded, so a Redis outage
// costs a review at most the stop-check timeout.
func newRedis(addr, password string, db int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Password: password, DB: db,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		PoolTimeout: 2 * time.Second, MaxRetries: 1, PoolSize: 16,
	})
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
func startStops(ctx context.Context, cfg Config, reg prometheus.Registerer, log *slog.Logger) *stopSignals {
	if cfg.RedisAddr == "" {
		log.Warn("worker: stop signals disabled: no --redis-addr")
		return nil
	}
	m := redisstop.NewMetrics(reg)
	checkErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_check_errors_total", Help: "Start-of-review stop checks that failed (Redis unreachable); the reviews went on."})
	reg.MustRegister(checkErrors)
	holder := stop.NewHolder(nil, m.ObserveApplied)
	rdb := newRedis(cfg.RedisAddr, cfg.RedisPassword, cfg.RedisDB)
	var feed pipeline.StopFeed = redisstop.NewSubscriber(rdb, cfg.redisStop(), m, log)
	s := &stopSignals{
		guard: &stop.Guard{Holder: holder, Store: feed, CheckTimeout: cfg.StopCheckTimeout, OnCheckError: func(error) { checkErrors.Inc() }},
		pub:   redisstop.NewPublisher(rdb, cfg.redisStop(), m),
		rdb:   rdb,
		done:  make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = feed.Run(ctx, holder)
	}()
	return s
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

// stopHandler serves POST /v1/stop: a JSON pipeline.StopRequest in, the
// published signal and the number of pods that heard it out (202). Bad
// requests get 400 with every problem; a Redis failure gets 503.
func stopHandler(pub pipeline.StopPublisher) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if pub == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "stop signals are disabled on this worker (no --redis-addr)"})
			return
		}
		var req pipeline.StopRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 16<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not a stop request: " + err.Error()})
			return
		}
		sig, err := req.Signal(time.Now())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		n, err := pub.Publish(ctx, sig)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"signal": sig, "receivers": n})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// runStop is `worker stop`: it publishes one stop signal and prints it as a
// JSON line with the number of pods that heard the broadcast. Exit status:
// 0 published, 1 Redis failed, 2 bad usage.
func runStop(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	var (
		room, run, review, ttl, reason string
		timeout                        = 10 * time.Second
	)
	fs := cli.NewFlagSet("worker stop", "Stops in-flight and future reviews on every worker: one review, a room, or a batch run.\n"+
		"  worker stop --room R | --run ID | --review ROOM,START,END [--ttl D] [--reason TEXT]")
	fs.StringVar(&room, "room", "stop every review of this room")
	fs.StringVar(&run, "run", "stop every review published by this batch run id")
	fs.StringVar(&review, "review", "stop one review: ROOM,WINDOW_START,WINDOW_END (RFC 3339)")
	fs.StringVar(&ttl, "ttl", "how long the stop lasts (default 24h)")
	fs.StringVar(&reason, "reason", "why (stored with the stopped verdicts)")
	fs.DurationVar(&timeout, "timeout", "deadline of the publish")
	fs.StringVar(&cfg.RedisAddr, "redis-addr", "Redis host:port carrying stop signals")
	fs.StringVar(&cfg.RedisPassword, "redis-password", "Redis password (prefer the environment variable)")
	fs.IntVar(&cfg.RedisDB, "redis-db", "Redis database number")
	fs.StringVar(&cfg.StopChannel, "stop-channel", "Redis pub/sub channel of stop signals")
	fs.StringVar(&cfg.StopKeyPrefix, "stop-key-prefix", "prefix of the Redis keys that keep live stop signals")
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	req := pipeline.StopRequest{RoomID: room, RunID: run, TTL: ttl, Reason: reason}
	var errs []error
	given := 0
	for _, v := range []string{room, run, review} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		errs = append(errs, errors.New("give exactly one of --room, --run and --review"))
	}
	if review != "" {
		parts := strings.Split(review, ",")
		if len(parts) != 3 {
			errs = append(errs, errors.New("--review wants ROOM,WINDOW_START,WINDOW_END"))
		} else {
			req.RoomID = parts[0]
			var err1, err2 error
			req.WindowStart, err1 = time.Parse(time.RFC3339, parts[1])
			req.WindowEnd, err2 = time.Parse(time.RFC3339, parts[2])
			if err1 != nil || err2 != nil {
				errs = append(errs, errors.New("--review window times must be RFC 3339"))
			}
		}
	}
	if cfg.RedisAddr == "" {
		errs = append(errs, errors.New("--redis-addr is required"))
	}
	if len(fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	sig, err := req.Signal(time.Now())
	if err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	rdb := newRedis(cfg.RedisAddr, cfg.RedisPassword, cfg.RedisDB)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := redisstop.NewPublisher(rdb, cfg.redisStop(), nil).Publish(ctx, sig)
	if err != nil {
		fmt.Fprintf(stderr, "worker stop: %v\n", err)
		return 1
	}
	_ = json.NewEncoder(stdout).Encode(map[string]any{"signal": sig, "receivers": n})
	return 0
}
