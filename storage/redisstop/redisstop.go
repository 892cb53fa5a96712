// Package redisstop carries stop signals (pipeline.StopSignal) over Redis: each
// signal is published on one channel for the pods that are listening and
// stored under a key with a TTL for those that are not (pub/sub is
// at-most-once), and indexed by its expiry in one sorted set. Subscribers
// load the live signals through the index on start and after every
// resubscribe, so a pod that missed a publish still honours it.
//
// The layout works on one node and on a Redis Cluster alike: every key
// carries one hash tag (Config.Layout), so a lookup's MGET, a load's
// pages and a publish's transaction each touch one slot, and no SCAN is
// needed (a cluster's SCAN sees one node). On a Cluster
// (*redis.ClusterClient) the channel is a sharded one (SPUBLISH,
// SSUBSCRIBE): a plain PUBLISH is broadcast over the cluster bus to every
// node, a sharded one stays on the shard that owns the channel.
package redisstop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

var (
	_ pipeline.StopPublisher = (*Publisher)(nil)
	_ pipeline.StopFeed      = (*Subscriber)(nil)
)

// Config names the channel and keys and bounds the work of a subscriber.
type Config struct {
	// Channel is the pub/sub channel every pod subscribes to.
	Channel string
	// KeyPrefix prefixes each stored signal's key. When it carries no
	// {hash tag}, the store tags it whole (see Layout).
	KeyPrefix string
	// ScanCount is how many stored signals one MGET of a load reads.
	ScanCount int64
	// MaxScanKeys bounds how many stored signals one load reads.
	MaxScanKeys int
	// ReconnectMin and ReconnectMax shape the full-jitter backoff
	// (internal/retry) between subscribe attempts while Redis is down.
	ReconnectMin, ReconnectMax time.Duration
	// SweepEvery is how often expired signals are dropped from the holder.
	SweepEvery time.Duration
	// CheckTimeout bounds the one lookup each review makes in the stored
	// signals when it starts (stop.Guard.CheckTimeout), so that a slow
	// Redis delays no review by more than this.
	CheckTimeout time.Duration
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Channel:      "chatguard:stop",
		KeyPrefix:    "chatguard:stop:",
		ScanCount:    500,
		MaxScanKeys:  100_000,
		ReconnectMin: 200 * time.Millisecond,
		// A stop published while a pod was cut off must reach it within
		// a few seconds of Redis coming back (the fault suite's Redis row):
		// one subscribe attempt per pod every two seconds at worst.
		ReconnectMax: 2 * time.Second,
		SweepEvery:   time.Minute,
		CheckTimeout: 250 * time.Millisecond,
	}
}

// Validate reports every problem with the config, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Channel == "" {
		errs = append(errs, errors.New("redisstop: channel is empty"))
	}
	if c.KeyPrefix == "" {
		errs = append(errs, errors.New("redisstop: key prefix is empty"))
	}
	if c.ScanCount <= 0 || c.MaxScanKeys <= 0 {
		errs = append(errs, errors.New("redisstop: scan count and max scan keys must be positive"))
	}
	if c.ReconnectMin <= 0 || c.ReconnectMax < c.ReconnectMin {
		errs = append(errs, errors.New("redisstop: reconnect backoff must be positive with max >= min"))
	}
	if c.SweepEvery <= 0 {
		errs = append(errs, errors.New("redisstop: sweep interval must be positive"))
	}
	if c.CheckTimeout <= 0 {
		errs = append(errs, errors.New("redisstop: check timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Layout is where the signals live: Key(k) is the key of a signal whose
// pipeline key is k, Index the sorted set of live keys (score: expiry in
// Unix milliseconds). Every key shares one Redis Cluster slot: the
// prefix's own {hash tag} when it has one, else the prefix (without its
// last colon) tagged whole, "chatguard:stop:" giving "{chatguard:stop}:".
type Layout struct{ prefix string }

// Layout returns the key layout of the config's prefix.
func (c Config) Layout() Layout {
	p := c.KeyPrefix
	if i := strings.IndexByte(p, '{'); i >= 0 {
		if j := strings.IndexByte(p[i+1:], '}'); j > 0 {
			return Layout{prefix: p}
		}
	}
	return Layout{prefix: "{" + strings.TrimSuffix(p, ":") + "}:"}
}

// Key is the key of the stored signal whose pipeline key is k.
func (l Layout) Key(k string) string { return l.prefix + k }

// Index is the sorted set of stored signals' keys by expiry.
func (l Layout) Index() string { return l.prefix + "index" }

// sharded reports whether rdb is a Redis Cluster client, whose stop
// channel is a sharded one.
func sharded(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// Metrics are the stop-signal counters. Create them with NewMetrics.
type Metrics struct {
	Published prometheus.Counter
	Received  *prometheus.CounterVec // by source: pubsub, scan
	Invalid   prometheus.Counter
	Up        prometheus.Gauge
	Reconnect prometheus.Counter
	Applied   prometheus.Counter
	// Latency is the time from a signal's publish to the cancellation of a
	// running review it stopped.
	Latency prometheus.Histogram

	clk clock.Clock // reads the cancellation time; nil: the wall clock
}

// NewMetrics registers the stop-signal metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Published: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_published_total", Help: "Stop signals published from this process."}),
		Received:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_stop_received_total", Help: "Stop signals received, by source (pubsub or scan)."}, []string{"source"}),
		Invalid:   prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_invalid_total", Help: "Stop messages or keys that failed to decode and were ignored."}),
		Up:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_stop_subscriber_up", Help: "1 while subscribed to the stop channel; 0 while stop signals are unavailable."}),
		Reconnect: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_resubscribes_total", Help: "Subscriptions (re)established to the stop channel."}),
		Applied:   prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_stop_applied_total", Help: "Running reviews cancelled by a stop signal."}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chatguard_stop_publish_to_cancel_seconds", Help: "Time from a stop's publish to the cancellation of a review it stopped.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .2, .5, 1, 2.5, 5, 30},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Published, m.Received, m.Invalid, m.Up, m.Reconnect, m.Applied, m.Latency)
	}
	return m
}

// ObserveApplied records that s cancelled a running review; pass it as the
// holder's onApply callback.
func (m *Metrics) ObserveApplied(s pipeline.StopSignal) {
	m.Applied.Inc()
	m.Latency.Observe(max(clock.Or(m.clk).Since(s.PublishedAt), 0).Seconds())
}

// Option sets what a publisher or subscriber is built with besides its
// Config: the collaborators an operator does not configure.
type Option func(*options)

type options struct{ clk clock.Clock }

// WithClock runs a publisher's key TTLs, or a subscriber's sweeps and
// reconnect waits, on c instead of the wall clock (nil keeps the wall
// clock).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clk = c } }

func newOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	o.clk = clock.Or(o.clk)
	return o
}

// Publisher stores and broadcasts stop signals.
type Publisher struct {
	rdb redis.UniversalClient
	cfg Config
	m   *Metrics
	clk clock.Clock
}

// NewPublisher returns a publisher; m may be nil.
func NewPublisher(rdb redis.UniversalClient, cfg Config, m *Metrics, opts ...Option) *Publisher {
	return &Publisher{rdb: rdb, cfg: cfg, m: m, clk: newOptions(opts).clk}
}

// Publish validates s, stores it under its key with its TTL, indexes it
// (dropping expired entries from the index) and broadcasts it, in one
// MULTI/EXEC round trip on one node; on a Redis Cluster the broadcast is
// an SPUBLISH on the channel's shard, sent in the same pipeline. It
// returns the number of subscribers that received the broadcast (0 is not
// an error: the stored key still reaches pods when they next load). It
// honours ctx.
func (p *Publisher) Publish(ctx context.Context, s pipeline.StopSignal) (int64, error) {
	if err := s.Validate(); err != nil {
		return 0, fmt.Errorf("redisstop: publish: %w", err)
	}
	b, err := encode(s)
	if err != nil {
		return 0, err
	}
	ttl := p.clk.Until(s.ExpiresAt)
	if ttl <= 0 {
		return 0, errors.New("redisstop: publish: signal already expired")
	}
	var pub *redis.IntCmd
	l, now := p.cfg.Layout(), p.clk.Now()
	_, err = p.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, l.Key(s.Key()), b, ttl)
		pipe.ZAdd(ctx, l.Index(), redis.Z{Score: float64(s.ExpiresAt.UnixMilli()), Member: s.Key()})
		pipe.ZRemRangeByScore(ctx, l.Index(), "-inf", strconv.FormatInt(now.UnixMilli(), 10))
		if sharded(p.rdb) {
			pub = pipe.SPublish(ctx, p.cfg.Channel, b)
		} else {
			pub = pipe.Publish(ctx, p.cfg.Channel, b)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redisstop: publish: %w", err)
	}
	if p.m != nil {
		p.m.Published.Inc()
	}
	return pub.Val(), nil
}

// Subscriber feeds a pipeline.StopSink from Redis.
type Subscriber struct {
	rdb redis.UniversalClient
	cfg Config
	m   *Metrics
	log *slog.Logger
	up  atomic.Bool
	clk clock.Clock // sweeps and reconnect waits
}

// NewSubscriber returns a subscriber; m may be nil and log may be nil.
func NewSubscriber(rdb redis.UniversalClient, cfg Config, m *Metrics, log *slog.Logger, opts ...Option) *Subscriber {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Subscriber{rdb: rdb, cfg: cfg, m: m, log: log, clk: newOptions(opts).clk}
}

// Up reports whether the subscriber is currently subscribed.
func (s *Subscriber) Up() bool { return s.up.Load() }

// Run subscribes and adds signals to sink until ctx ends, then returns nil.
// While Redis is down it retries with full-jitter, capped backoff
// (internal/retry); reviews go on meanwhile, and the outage is logged and
// shown by the chatguard_stop_subscriber_up gauge. Every (re)subscription is
// followed by a load of the stored signals.
func (s *Subscriber) Run(ctx context.Context, sink pipeline.StopSink) error {
	sweep := s.clk.NewTicker(s.cfg.SweepEvery)
	defer sweep.Stop()
	backoff := retry.Policy{Initial: s.cfg.ReconnectMin, Max: s.cfg.ReconnectMax}
	failures := 0 // since the last healthy subscription
	for ctx.Err() == nil {
		err := s.session(ctx, sink, sweep.Chan(), func() { failures = 0 })
		s.setUp(false)
		if ctx.Err() != nil {
			break
		}
		failures++
		wait := backoff.Delay(failures)
		s.log.Warn("stop signals unavailable: redis subscription lost; reviews continue", "err", err, "retry_in", wait)
		if clock.Sleep(ctx, s.clk, wait) != nil {
			break
		}
	}
	return nil
}

// session runs one subscription until it fails or ctx ends.
func (s *Subscriber) session(ctx context.Context, sink pipeline.StopSink, sweep <-chan time.Time, healthy func()) error {
	subscribed := "subscribe"
	var ps *redis.PubSub
	if sharded(s.rdb) {
		subscribed, ps = "ssubscribe", s.rdb.SSubscribe(ctx, s.cfg.Channel)
	} else {
		ps = s.rdb.Subscribe(ctx, s.cfg.Channel)
	}
	defer ps.Close()
	// A blocked read does not watch ctx; closing the subscription does
	// interrupt it, so shutdown is not held up by the receive timeout.
	stopClose := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stopClose()
	for {
		// A bounded receive lets the loop sweep and notice ctx even when
		// the channel is quiet; go-redis pings on idle connections.
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-sweep:
			sink.Sweep()
		default:
		}
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				if _, perr := s.rdb.Ping(ctx).Result(); perr != nil {
					return fmt.Errorf("redisstop: ping: %w", perr)
				}
				continue
			}
			return fmt.Errorf("redisstop: receive: %w", err)
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "sunsubscribe" {
				// The channel's slot moved to another shard (a
				// resharding or failover): subscribe there anew.
				return errors.New("redisstop: the shard unsubscribed the channel")
			}
			if m.Kind != subscribed {
				continue
			}
			s.m.Reconnect.Inc()
			if n, err := s.Load(ctx, sink); err != nil {
				return err
			} else if !s.up.Load() {
				s.log.Info("stop signals available", "loaded", n)
			}
			s.setUp(true)
			healthy()
		case *redis.Message:
			sig, err := decode([]byte(m.Payload))
			if err != nil {
				s.m.Invalid.Inc()
				s.log.Warn("ignored an invalid stop message", "err", err)
				continue
			}
			s.m.Received.WithLabelValues("pubsub").Inc()
			sink.Add(sig)
		}
	}
}

func (s *Subscriber) setUp(v bool) {
	s.up.Store(v)
	if v {
		s.m.Up.Set(1)
	} else {
		s.m.Up.Set(0)
	}
}

// Load reads every live stored signal (bounded by MaxScanKeys, through the
// index, MGET in pages of ScanCount) into sink and returns how many it
// added. It honours ctx.
func (s *Subscriber) Load(ctx context.Context, sink pipeline.StopSink) (int, error) {
	l := s.cfg.Layout()
	now := strconv.FormatInt(s.clk.Now().UnixMilli(), 10)
	names, err := s.rdb.ZRangeByScore(ctx, l.Index(), &redis.ZRangeBy{Min: "(" + now, Max: "+inf", Count: int64(s.cfg.MaxScanKeys) + 1}).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstop: load index: %w", err)
	}
	if len(names) > s.cfg.MaxScanKeys {
		s.log.Warn("stop signal load truncated", "max_keys", s.cfg.MaxScanKeys)
		names = names[:s.cfg.MaxScanKeys]
	}
	added := 0
	for page := range slices.Chunk(names, int(s.cfg.ScanCount)) {
		keys := make([]string, len(page))
		for i, n := range page {
			keys[i] = l.Key(n)
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return added, fmt.Errorf("redisstop: mget: %w", err)
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // expired since it was indexed
			}
			sig, err := decode([]byte(str))
			if err != nil {
				s.m.Invalid.Inc()
				continue
			}
			if sink.Add(sig) {
				added++
				s.m.Received.WithLabelValues("scan").Inc()
			}
		}
	}
	return added, nil
}

// Lookup asks Redis once (a single MGET) for the stored signals that would
// stop t. A review calls it when it starts, so a signal published just
// before is honoured even if the broadcast was missed. Invalid stored values
// are counted and skipped. It honours ctx.
func (s *Subscriber) Lookup(ctx context.Context, t pipeline.StopTarget) ([]pipeline.StopSignal, error) {
	keys, l := t.Keys(), s.cfg.Layout()
	args := make([]string, len(keys))
	for i, k := range keys {
		args[i] = l.Key(k)
	}
	vals, err := s.rdb.MGet(ctx, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstop: lookup: %w", err)
	}
	var found []pipeline.StopSignal
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		sig, err := decode([]byte(str))
		if err != nil {
			s.m.Invalid.Inc()
			continue
		}
		found = append(found, sig)
	}
	return found, nil
}

func encode(s pipeline.StopSignal) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("redisstop: encode: %w", err)
	}
	return b, nil
}

func decode(b []byte) (pipeline.StopSignal, error) {
	if len(b) > 4096 || !strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
		return pipeline.StopSignal{}, errors.New("redisstop: not a stop signal")
	}
	return pipeline.DecodeStopSignal(b)
}
