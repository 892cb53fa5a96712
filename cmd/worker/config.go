package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Config is every setting of the worker; each is a flag and a CHATGUARD_
// environment variable (see --help).
type Config struct {
	ReviewQueueURL    string
	ReviewDLQURL      string
	FeedbackQueueURL  string
	Concurrency       int
	Pollers           int
	WaitTime          time.Duration
	MaxAge            time.Duration
	MaxWindow         time.Duration
	MaxClockSkew      time.Duration
	VisibilityTimeout time.Duration
	HeartbeatInterval time.Duration
	JobTimeout        time.Duration
	DrainTimeout      time.Duration
	RetryBase         time.Duration
	RetryMax          time.Duration
	MaxReceiveCount   int
	BusyRetry         time.Duration

	depflags.MySQL

	depflags.Chat
	ChatMaxAttempts int

	depflags.Pools
	// Options: the stage engine's privacy, price and fleet settings,
	// shared with every binary that reviews (cmd/internal/reviewers).
	reviewers.Options

	EventBuffer   int
	EventFlushAge time.Duration

	// RedisAddr is the Redis that carries stop signals; empty disables
	// them (reviews run, but cannot be stopped by an operator).
	cli.RedisOptions
	depflags.Stops

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

	FaultConfig
	// Capacity: interactive reserve, adaptive and fleet-wide limits (capacity.go).
	Capacity CapacityConfig
}

// DefaultConfig returns the defaults shown by --help.
func DefaultConfig() Config {
	loop := jobloop.DefaultConfig()
	ev := sqs.DefaultLakeConfig()
	chat := chatapi.DefaultConfig()
	pools := depflags.DefaultPools()
	pools.PrimaryConcurrency, pools.FallbackConcurrency = llm.DefaultMaxConcurrency, llm.DefaultMaxConcurrency
	return Config{
		Options:           reviewers.DefaultOptions(),
		Concurrency:       loop.Concurrency,
		WaitTime:          loop.WaitTime,
		MaxAge:            6 * time.Hour,
		MaxWindow:         pipeline.DefaultMaxWindow,
		MaxClockSkew:      pipeline.DefaultMaxClockSkew,
		VisibilityTimeout: loop.VisibilityTimeout,
		HeartbeatInterval: loop.HeartbeatInterval,
		JobTimeout:        loop.JobTimeout,
		DrainTimeout:      loop.DrainTimeout,
		RetryBase:         loop.RetryBase,
		RetryMax:          loop.RetryMax,
		MaxReceiveCount:   loop.MaxReceiveCount,
		BusyRetry:         10 * time.Second,
		MySQL:             depflags.MySQL{MySQLMaxOpenConns: mysql.DefaultConfig().MaxOpenConns},
		Chat:              depflags.Chat{ChatTimeout: chat.Timeout},
		ChatMaxAttempts:   chat.MaxAttempts,
		Pools:             pools,
		EventBuffer:       ev.Buffer,
		EventFlushAge:     ev.FlushAge,
		Stops:             depflags.DefaultStops(),
		AdminAddr:         ":9090",
		LogLevel:          "info",
		FaultConfig:       defaultFaultConfig(),
		Capacity:          defaultCapacity(),
	}
}

func (c *Config) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("worker", "Reviews chat rooms from the SQS review queue with the LLM stages and stores verdicts in MySQL.\n"+
		"Subcommands: 'worker migrate --mysql-dsn DSN' applies the schema migrations and exits;\n"+
		"'worker stop --room R | --run ID | --review ROOM,START,END' stops reviews on every worker through a worker's operator API, with a token (see 'worker stop --help').")
	fs.StringVar(&c.ReviewQueueURL, "review-queue-url", "SQS review queue URL")
	fs.StringVar(&c.ReviewDLQURL, "review-dlq-url", "SQS dead-letter queue of the review queue (poison messages are copied there)")
	fs.StringVar(&c.FeedbackQueueURL, "feedback-queue-url", "SQS feedback queue URL for inference-log and verdict events")
	fs.IntVar(&c.Concurrency, "concurrency", "jobs in flight at most (and messages held)")
	fs.IntVar(&c.Pollers, "pollers", "receive calls in flight at once (0: concurrency/10, 1..8)")
	fs.DurationVar(&c.WaitTime, "wait-time", "SQS long-poll wait (at most 20s); keep --drain-timeout above it")
	fs.DurationVar(&c.MaxAge, "max-age", "events older than this (by published_at) are recorded expired without a model call; 0 disables")
	fs.DurationVar(&c.MaxWindow, "max-window", "longest review window an event may ask for; a longer one is dead-lettered")
	fs.DurationVar(&c.MaxClockSkew, "max-clock-skew", "how far in the future an event's published_at or window_end may be (producer clocks); further is dead-lettered")
	fs.DurationVar(&c.VisibilityTimeout, "visibility-timeout", "visibility asked for on receive and renewed by heartbeats (whole seconds)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", "how often visibilities are renewed; at most a third of --visibility-timeout")
	fs.DurationVar(&c.JobTimeout, "job-timeout", "deadline of one job")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", "on SIGTERM, how long in-flight jobs may finish before they are handed back")
	fs.DurationVar(&c.RetryBase, "retry-base", "backoff of a failed attempt: full jitter over min(retry-max, retry-base*2^(receives-1))")
	fs.DurationVar(&c.RetryMax, "retry-max", "cap of the failed-attempt backoff")
	fs.IntVar(&c.MaxReceiveCount, "max-receive-count", "the review queue's redrive maxReceiveCount; the last attempt records a failed verdict")
	fs.DurationVar(&c.BusyRetry, "busy-retry", "delay before a copy of an event whose review is running in this process is seen again")
	c.MySQL.Flags(fs)
	c.Chat.Flags(fs, "chat-history API base URL")
	fs.IntVar(&c.ChatMaxAttempts, "chat-max-attempts", "chat-history attempts per job (5xx and timeouts are retried)")
	c.Pools.Flags(fs, "primary model id", "calls in flight to the %s pool at most")
	fs.IntVar(&c.EventBuffer, "event-buffer", "lake events buffered for the feedback queue before drops")
	fs.DurationVar(&c.EventFlushAge, "event-flush-age", "longest a lake event waits for its batch")
	c.Options.Flags(fs)
	c.stopFlags(fs)
	c.faultFlags(fs)
	c.Capacity.flags(fs)
	c.Options.FleetFlags(fs)
	fs.StringVar(&c.AdminAddr, "admin-addr", "listen address of /healthz, /readyz and /metrics (cluster-internal; no operator API, no pprof)")
	c.operatorFlags(fs)
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// Validate reports every problem at once, naming the flags.
func (c Config) Validate() error {
	var errs []error
	req := func(v, name string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("--%s is required", name))
		}
	}
	req(c.ReviewQueueURL, "review-queue-url")
	req(c.ReviewDLQURL, "review-dlq-url")
	req(c.FeedbackQueueURL, "feedback-queue-url")
	req(c.MySQLDSN, "mysql-dsn")
	req(c.ChatAPIURL, "chat-api-url")
	req(c.PrimaryBaseURL, "primary-base-url")
	req(c.PrimaryModel, "primary-model")
	if c.FallbackBaseURL != "" {
		req(c.FallbackModel, "fallback-model")
	}
	if c.BusyRetry <= 0 {
		errs = append(errs, errors.New("--busy-retry must be positive"))
	}
	if c.MaxAge < 0 {
		errs = append(errs, errors.New("--max-age must not be negative"))
	}
	if c.MaxWindow <= 0 {
		errs = append(errs, errors.New("--max-window must be positive"))
	}
	if c.MaxClockSkew <= 0 || c.MaxClockSkew > time.Hour {
		errs = append(errs, errors.New("--max-clock-skew must be in (0, 1h]"))
	}
	if c.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, errors.New("--visibility-timeout must be whole seconds"))
	}
	if c.PrimaryConcurrency < 1 || (c.FallbackBaseURL != "" && c.FallbackConcurrency < 1) {
		errs = append(errs, errors.New("--primary-concurrency and --fallback-concurrency must be at least 1"))
	}
	if c.AttemptTimeout <= 0 || c.AttemptTimeout >= c.JobTimeout {
		errs = append(errs, fmt.Errorf("--attempt-timeout %s must be positive and below --job-timeout %s", c.AttemptTimeout, c.JobTimeout))
	}
	errs = append(errs, c.validateCapacity())
	if c.LLMMaxAttempts < 1 || c.LLMMaxAttempts > 20 {
		errs = append(errs, errors.New("--llm-max-attempts must be in 1..20"))
	}
	if c.AdminAddr == "" {
		errs = append(errs, errors.New("--admin-addr is required"))
	} else if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("--admin-addr %q: %v", c.AdminAddr, err))
	}
	if _, err := c.level(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateStops(), c.validateOperator(), c.Options.Validate(c.RedisAddr), c.validateFaults())
	// The parts validate their own ranges; a missing required value is
	// already reported above by its flag name, so stand-ins keep the parts
	// from reporting it twice.
	p := c
	fill := func(v *string, placeholder string) {
		if *v == "" {
			*v = placeholder
		}
	}
	fill(&p.ReviewQueueURL, "http://placeholder/review")
	fill(&p.ReviewDLQURL, "http://placeholder/review-dlq")
	fill(&p.FeedbackQueueURL, "http://placeholder/feedback")
	fill(&p.ChatAPIURL, "http://placeholder")
	fill(&p.MySQLDSN, "placeholder@tcp(placeholder:3306)/placeholder")
	errs = append(errs, p.loop().Validate(), p.reviewQueue().Validate(), p.reviewDLQ().Validate(), p.events().Validate(),
		p.chat().Validate(), p.MySQL.Config().Validate())
	return errors.Join(errs...)
}

func (c Config) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, fmt.Errorf("--log-level %q must be debug, info, warn or error", c.LogLevel)
	}
	return l, nil
}

func (c Config) loop() jobloop.Config {
	l := jobloop.DefaultConfig()
	l.Concurrency, l.Pollers, l.WaitTime = c.Concurrency, c.Pollers, c.WaitTime
	l.VisibilityTimeout, l.HeartbeatInterval = c.VisibilityTimeout, c.HeartbeatInterval
	l.JobTimeout, l.DrainTimeout = c.JobTimeout, c.DrainTimeout
	l.RetryBase, l.RetryMax = c.RetryBase, c.RetryMax
	l.MaxReceiveCount = c.MaxReceiveCount
	l.MaxHold = c.MaxHold
	l.Prefetch = c.Capacity.Prefetch
	return l
}

func (c Config) limits() pipeline.EventLimits {
	return pipeline.EventLimits{MaxWindow: c.MaxWindow, MaxClockSkew: c.MaxClockSkew}
}

// reviewQueue is the review queue the loop receives from and settles:
// a job's delete waits up to 5 ms to share a DeleteMessageBatch with other
// jobs', and failed entries are retried three times within a second or so.
func (c Config) reviewQueue() sqs.Config {
	q := sqs.DefaultConfig()
	q.Name, q.URL = "review", c.ReviewQueueURL
	q.Linger = 5 * time.Millisecond
	q.Retry = retry.Policy{Initial: 50 * time.Millisecond, Max: time.Second, Attempts: 3}
	return q
}

// reviewDLQ is where the loop copies poison messages.
func (c Config) reviewDLQ() sqs.Config {
	q := c.reviewQueue()
	q.Name, q.URL, q.Linger = "review-dlq", c.ReviewDLQURL, 0
	return q
}

func (c Config) events() sqs.LakeConfig {
	e := sqs.DefaultLakeConfig()
	e.URL, e.Buffer, e.FlushAge = c.FeedbackQueueURL, c.EventBuffer, c.EventFlushAge
	return e
}

func (c Config) chat() chatapi.Config {
	ch := c.Chat.Config()
	ch.MaxAttempts = c.ChatMaxAttempts
	return ch
}
