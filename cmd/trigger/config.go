package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/trigger"
	"github.com/chatguard/chatguard/storage/redisdebounce"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Config is every setting of the trigger; each is a flag and a CHATGUARD_
// environment variable (see --help). AWS settings come from the SDK's
// chain. The parts' configurations are embedded whole and validate
// themselves.
type Config struct {
	// Events, EventsDLQ and Reviews: --chat-events-queue-url,
	// --chat-events-dlq-url and --review-realtime-queue-url.
	Events, EventsDLQ, Reviews sqs.Config
	// Rooms is the debounce state's: --quiet, --max-delay, --max-window,
	// --arrival-slack, --claim-lease, --seen-cap, --state-retention,
	// --shards and --key-prefix.
	Rooms redisdebounce.Config
	// Engine is the engine's: --pollers, --wait-time,
	// --visibility-timeout, --retry-base, --retry-max, --fire-interval,
	// --fire-batch, --call-timeout and --max-clock-skew; its StaleAfter
	// follows from Rooms (see engineConfig).
	Engine trigger.Config
	// RedisOptions: --redis-*, the deployment's shared Redis; the room
	// state lives there unless StateRedis names a Redis of its own.
	cli.RedisOptions
	// StateRedis: --state-redis-*, a Redis of the room state's own
	// (noeviction, sized by the rooms active in the last hour); empty
	// --state-redis-addr: the shared one.
	StateRedis cli.RedisOptions

	AdminAddr string
	LogLevel  string
}

// DefaultConfig returns the defaults shown by --help.
func DefaultConfig() Config {
	events := sqs.DefaultConfig()
	events.Name = "chat-events"
	dlq := sqs.DefaultConfig()
	dlq.Name = "chat-events-dlq"
	reviews := sqs.DefaultReviewConfig()
	reviews.Name = "review-realtime"
	return Config{Events: events, EventsDLQ: dlq, Reviews: reviews, Rooms: redisdebounce.DefaultConfig(), Engine: trigger.DefaultConfig(),
		AdminAddr: ":9092", LogLevel: "info"}
}

func (c *Config) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("trigger", "Debounces the chat service's per-message events per room in Redis and publishes a real-time review event\n"+
		"for a room once it has been quiet for --quiet, or --max-delay after its first unreviewed message (being built).")
	fs.StringVar(&c.Events.URL, "chat-events-queue-url", "SQS chat-events queue URL (one metadata-only event per chat message)")
	fs.StringVar(&c.EventsDLQ.URL, "chat-events-dlq-url", "SQS dead-letter queue of chat-events (malformed events are copied there with their reason)")
	fs.StringVar(&c.Reviews.URL, "review-realtime-queue-url", "SQS review-realtime queue URL the review events go to")
	fs.DurationVar(&c.Rooms.Quiet, "quiet", "fire a room once it has been quiet this long")
	fs.DurationVar(&c.Rooms.MaxDelay, "max-delay", "fire a busy room this long after its first unreviewed message")
	fs.DurationVar(&c.Rooms.MaxWindow, "max-window", "longest window published; must not exceed the workers' --max-window")
	fs.DurationVar(&c.Rooms.Slack, "arrival-slack", "a window starts this long before its first event arrived, covering the chat service's delivery delay")
	fs.DurationVar(&c.Rooms.Lease, "claim-lease", "how long a replica holds a due room; after it another replica republishes the same window")
	fs.IntVar(&c.Rooms.SeenCap, "seen-cap", "message ids kept per room to drop duplicates (bounds Redis memory per room)")
	fs.DurationVar(&c.Rooms.Retention, "state-retention", "a room's state expires this long after its last event")
	fs.IntVar(&c.Rooms.Shards, "shards", "due-set shards, each its own Redis Cluster slot; fixed per deployment")
	fs.StringVar(&c.Rooms.Prefix, "key-prefix", "Redis key prefix of the room state")
	fs.IntVar(&c.Engine.Pollers, "pollers", "long polls of chat-events in flight")
	fs.DurationVar(&c.Engine.WaitTime, "wait-time", "long-poll wait of one receive (whole seconds, at most 20s)")
	fs.DurationVar(&c.Engine.Visibility, "visibility-timeout", "visibility of received events, renewed while Redis is down and they are held")
	fs.DurationVar(&c.Engine.Retry.Initial, "retry-base", "backoff while Redis is down: full jitter over min(retry-max, base*2^attempt)")
	fs.DurationVar(&c.Engine.Retry.Max, "retry-max", "cap of the Redis backoff")
	fs.DurationVar(&c.Engine.FireInterval, "fire-interval", "how often due rooms are looked for")
	fs.IntVar(&c.Engine.FireBatch, "fire-batch", "rooms claimed per shard per look")
	fs.DurationVar(&c.Engine.CallTimeout, "call-timeout", "bound of each Redis and SQS call")
	fs.DurationVar(&c.Engine.MaxClockSkew, "max-clock-skew", "an event's sent_at further than this after its arrival in chat-events is taken as its arrival (counted); 0: never")
	c.RedisOptions.Flags(fs, "the shared Redis: the room state lives there unless --state-redis-addr is set")
	c.StateRedis.FlagsNamed(fs, "state-redis", "a Redis of the room state's own, that must not evict (maxmemory-policy noeviction); empty: --redis-addr")
	fs.StringVar(&c.AdminAddr, "admin-addr", "listen address of /healthz, /readyz and /metrics")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// State is the Redis the room state lives in: --state-redis-* when
// --state-redis-addr is set, the shared --redis-* otherwise.
func (c Config) State() cli.RedisOptions {
	if c.StateRedis.RedisAddr != "" {
		return c.StateRedis
	}
	return c.RedisOptions
}

// Validate reports every problem at once, naming the flags.
func (c Config) Validate() error {
	var errs []error
	if c.Events.URL == "" {
		errs = append(errs, errors.New("--chat-events-queue-url is required"))
	}
	if c.EventsDLQ.URL == "" {
		errs = append(errs, errors.New("--chat-events-dlq-url is required: malformed events are copied there"))
	}
	if c.Reviews.URL == "" {
		errs = append(errs, errors.New("--review-realtime-queue-url is required"))
	}
	if c.RedisAddr == "" && c.StateRedis.RedisAddr == "" {
		errs = append(errs, errors.New("--redis-addr or --state-redis-addr is required: the room state lives there"))
	}
	if c.Engine.WaitTime%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--wait-time %s must be whole seconds", c.Engine.WaitTime))
	}
	if c.Engine.Visibility%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--visibility-timeout %s must be whole seconds", c.Engine.Visibility))
	}
	if c.AdminAddr == "" {
		errs = append(errs, errors.New("--admin-addr is required"))
	} else if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("--admin-addr %q: %v", c.AdminAddr, err))
	}
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.RedisOptions.Validate(), c.StateRedis.Validate(), c.Rooms.Validate(), c.Engine.Validate())
	return errors.Join(errs...)
}

// engineConfig is the engine's configuration with StaleAfter set from the
// room state's limits: an event older than the max window less the max
// delay and the arrival slack is out of reach of its room's next window.
func (c Config) engineConfig() trigger.Config {
	e := c.Engine
	e.StaleAfter = max(c.Rooms.MaxWindow-c.Rooms.MaxDelay-c.Rooms.Slack, time.Millisecond)
	return e
}
