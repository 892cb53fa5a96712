package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/outbox"
	"github.com/chatguard/chatguard/pipeline/reviewjob"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redisstop"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Config is every setting of the worker; each is a flag and a CHATGUARD_
// environment variable (see --help). The parts' own configurations are
// embedded whole: their flags are bound to their fields, and each part
// validates itself, so nothing is copied between configurations and each
// mistake is reported once.
type Config struct {
	// Loop: --concurrency, --pollers, --prefetch, --wait-time,
	// --visibility-timeout, --heartbeat-interval, --job-timeout,
	// --drain-timeout, --retry-base, --retry-max, --max-receive-count and
	// --max-hold.
	Loop jobloop.Config
	// ReviewQueue and ReviewDLQ: --review-queue-url and --review-dlq-url.
	ReviewQueue, ReviewDLQ sqs.Config
	// RealtimeQueue: --realtime-queue-url, polled before the review queue
	// when set (realtime.go).
	RealtimeQueue sqs.Config
	// Events: --feedback-queue-url, --event-buffer and --event-flush-age.
	Events sqs.LakeConfig
	// Outbox is the outbox relay's (relay.go): the --outbox-* flags. It
	// sends the outbox's lake events to --feedback-queue-url.
	Outbox outbox.Config
	// Actions are the protective actions': --actions-queue-url and
	// --actions-policy (actions.go).
	Actions depflags.Actions

	// Review is the review job's: --max-age, --busy-retry, --max-window,
	// --max-clock-skew, --claim-ttl, --claim-poll, --context-lookback and
	// --context-messages (its collaborators are set when the worker
	// starts).
	Review reviewjob.Config
	// Health is the dependencies' breakers': --breaker-failures and
	// --breaker-open-for.
	Health health.Config

	// MySQL is the store's: --mysql-dsn and --mysql-max-open-conns.
	MySQL mysql.Config
	// Chat is the chat-history client's: --chat-api-url, --chat-timeout
	// and --chat-max-attempts.
	Chat chatapi.Config

	depflags.Pools
	// Options: the stage engine's image gate and quote-digest key, shared
	// with every binary that reviews (cmd/internal/reviewers); the prices,
	// pseudonymisation and fleet limits are the pools' (depflags.Pools).
	reviewers.Options

	// Shadow is the shadow traffic's: the --shadow-* flags (shadow.go).
	Shadow ShadowConfig

	// RedisAddr is the Redis that carries stop signals; empty disables
	// them (reviews run, but cannot be stopped by an operator).
	cli.RedisOptions
	// Stop is the stop signals': --stop-channel, --stop-key-prefix and
	// --stop-check-timeout.
	Stop redisstop.Config

	// AdminAddr serves probes and metrics; OperatorAddr the authenticated
	// operator API; PprofAddr (loopback only) the profiles.
	AdminAddr         string
	OperatorAddr      string
	OperatorTokensDir string
	OperatorTLSCert   string
	OperatorTLSKey    string
	OperatorClientCA  string
	PprofAddr         string
	LogLevel          string
}

// DefaultConfig returns the defaults shown by --help.
func DefaultConfig() Config {
	pools := depflags.DefaultPools(llm.DefaultMaxConcurrency, llm.DefaultMaxConcurrency)
	pools.LLM.Primary.Adaptive.Min = defaultAdaptiveMin
	review := reviewQueue()
	c := Config{
		Loop:        jobloop.DefaultConfig(),
		ReviewQueue: review,
		ReviewDLQ:   reviewDLQ(review),
		Events:      sqs.DefaultLakeConfig(),
		Outbox:      outbox.DefaultConfig(),
		Actions:     depflags.DefaultActions(),
		Options:     reviewers.DefaultOptions(),
		Review:      reviewjob.DefaultConfig(),
		Health:      health.DefaultConfig(),
		MySQL:       mysql.DefaultConfig(),
		Chat:        chatapi.DefaultConfig(),
		Pools:       pools,
		Stop:        redisstop.DefaultConfig(),
		Shadow:      defaultShadow(),
		AdminAddr:   ":9090",
		LogLevel:    "info",
	}
	c.RealtimeQueue = realtimeQueue(review)
	return c
}

func (c *Config) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("worker", "Reviews chat rooms from the SQS review queue with the LLM stages and stores verdicts in MySQL.\n"+
		"Subcommands: 'worker migrate --mysql-dsn DSN' applies the schema migrations and exits;\n"+
		"'worker stop --room R | --run ID | --review ROOM,START,END' stops reviews on every worker through a worker's operator API, with a token (see 'worker stop --help');\n"+
		"'worker actions report --from T --to T' replays the protective-action policy over stored verdicts (see 'worker actions report --help').")
	fs.StringVar(&c.ReviewQueue.URL, "review-queue-url", "SQS review queue URL")
	fs.StringVar(&c.RealtimeQueue.URL, "realtime-queue-url", "SQS review-realtime queue URL, polled before the review queue so a batch backlog never delays real time; empty: the review queue only")
	fs.StringVar(&c.ReviewDLQ.URL, "review-dlq-url", "SQS dead-letter queue of the review queue (poison messages are copied there)")
	fs.StringVar(&c.Events.URL, "feedback-queue-url", "SQS feedback queue URL for inference-log and verdict events")
	c.loopFlags(fs)
	fs.DurationVar(&c.Review.MaxAge, "max-age", "events older than this (by published_at) are recorded expired without a model call; 0 disables")
	fs.DurationVar(&c.Review.Limits.MaxWindow, "max-window", "longest review window an event may ask for; a longer one is dead-lettered")
	fs.DurationVar(&c.Review.Limits.MaxClockSkew, "max-clock-skew", "how far in the future an event's published_at or window_end may be (producer clocks); further is dead-lettered")
	fs.DurationVar(&c.Review.BusyRetry, "busy-retry", "delay before a copy of an event whose review is running in this process is seen again")
	reviewers.ContextFlags(fs, &c.Review.Context)
	depflags.BindMySQL(fs, &c.MySQL)
	depflags.BindChat(fs, &c.Chat, "chat-history API base URL")
	c.Pools.Flags(fs, "primary model id", "calls in flight to the %s pool at most")
	fs.IntVar(&c.Events.Buffer, "event-buffer", "lake events buffered for the feedback queue before drops")
	fs.DurationVar(&c.Events.FlushAge, "event-flush-age", "longest a lake event waits for its batch")
	outboxFlags(fs, &c.Outbox)
	c.Actions.Flags(fs)
	c.Options.Flags(fs, &c.Pools)
	c.stopFlags(fs)
	c.faultFlags(fs)
	c.capacityFlags(fs)
	c.Pools.FleetFlags(fs)
	c.shadowFlags(fs)
	fs.StringVar(&c.AdminAddr, "admin-addr", "listen address of /healthz, /readyz and /metrics (cluster-internal; no operator API, no pprof)")
	c.operatorFlags(fs)
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// loopFlags binds the job loop's settings (jobloop.Config) to their flags.
func (c *Config) loopFlags(fs *cli.FlagSet) {
	l := &c.Loop
	fs.IntVar(&l.Concurrency, "concurrency", "jobs in flight at most (and messages held)")
	fs.IntVar(&l.Pollers, "pollers", "receive calls in flight at once (0: concurrency/10, 1..8)")
	fs.IntVar(&l.Prefetch, "prefetch", "messages received ahead of free slots and held until one frees, so a slot never idles for a receive (0..concurrency)")
	fs.DurationVar(&l.WaitTime, "wait-time", "SQS long-poll wait (at most 20s); keep --drain-timeout above it")
	fs.DurationVar(&l.VisibilityTimeout, "visibility-timeout", "visibility asked for on receive and renewed by heartbeats (whole seconds)")
	fs.DurationVar(&l.HeartbeatInterval, "heartbeat-interval", "how often visibilities are renewed; at most a third of --visibility-timeout")
	fs.DurationVar(&l.JobTimeout, "job-timeout", "deadline of one job")
	fs.DurationVar(&l.DrainTimeout, "drain-timeout", "on SIGTERM, how long in-flight jobs may finish before they are handed back")
	fs.DurationVar(&l.RetryBase, "retry-base", "backoff of a failed attempt: full jitter over min(retry-max, retry-base*2^(receives-1))")
	fs.DurationVar(&l.RetryMax, "retry-max", "cap of the failed-attempt backoff")
	fs.IntVar(&l.MaxReceiveCount, "max-receive-count", "the review queue's redrive maxReceiveCount; the last attempt records a failed verdict")
	fs.DurationVar(&l.MaxHold, "max-hold", "longest a job is held (message invisible, receive count unspent) for a dependency that is down before it is retried as a failure")
}

// Validate reports every problem at once: each part validates its own
// configuration, and the checks here are the worker's own (what it needs
// of the parts together) and its flags that no part holds.
func (c Config) Validate() error {
	var errs []error
	// SQS takes visibilities in whole seconds; the loop takes any.
	if c.Loop.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, errors.New("--visibility-timeout must be whole seconds"))
	}
	if c.LLM.AttemptTimeout >= c.Loop.JobTimeout {
		errs = append(errs, fmt.Errorf("--attempt-timeout %s must be below --job-timeout %s", c.LLM.AttemptTimeout, c.Loop.JobTimeout))
	}
	errs = append(errs, c.Pools.Validate(c.RedisAddr))
	if c.AdminAddr == "" {
		errs = append(errs, errors.New("--admin-addr is required"))
	} else if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("--admin-addr %q: %v", c.AdminAddr, err))
	}
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateCapacity(), c.validateStops(), c.validateOperator(), c.Options.Validate(), c.Options.ValidateCampaign(c.RedisAddr), c.validateShadow(), c.Actions.Validate())
	return errors.Join(append(errs, c.validateParts())...)
}

// validateParts is each part's own validation, once.
func (c Config) validateParts() error {
	return errors.Join(c.Loop.Validate(), c.Review.Validate(), c.Health.Validate(), c.ReviewQueue.Validate(), c.ReviewDLQ.Validate(),
		c.Events.Validate(), c.Outbox.Validate(), c.Chat.Validate(), c.MySQL.Validate())
}

// reviewQueue is the review queue's defaults: a job's delete waits up to
// 5 ms to share a DeleteMessageBatch with other jobs', and failed entries
// are retried three times within a second or so.
func reviewQueue() sqs.Config {
	q := sqs.DefaultConfig()
	q.Name = "review"
	q.Linger = 5 * time.Millisecond
	q.Retry = retry.Policy{Initial: 50 * time.Millisecond, Max: time.Second, Attempts: 3}
	return q
}

// reviewDLQ is where the loop copies poison messages: the review queue's
// settings, without the linger.
func reviewDLQ(review sqs.Config) sqs.Config {
	review.Name, review.Linger = "review-dlq", 0
	return review
}
