package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Config is every setting of the consumer; each is a flag and a CHATGUARD_
// environment variable (see --help). AWS settings come from the SDK's chain.
// The engine's configuration is embedded whole: its flags are bound to its
// fields and it validates itself.
type Config struct {
	// Queue is the feedback queue's: --feedback-queue-url.
	Queue        sqs.Config
	LakeBucket   string
	LakePrefix   string
	ErrorsPrefix string
	S3PathStyle  bool
	S3PartSize   int64

	// Config is the engine's: --flush-*, --max-buffered-*,
	// --visibility-timeout, --wait-time, --*-concurrency, --drain-timeout,
	// --write-retry-* and the --debug-pause-after-write test hook.
	consumer.Config

	AdminAddr string
	LogLevel  string

	// DebugPauseAfterWrite is a test hook (consumer.Options.PauseAfterWrite),
	// kept out of the engine's configuration.
	DebugPauseAfterWrite time.Duration
}

// DefaultConfig returns the defaults shown by --help.
func DefaultConfig() Config {
	return Config{
		Queue:        feedbackQueue(),
		LakePrefix:   s3lake.DefaultEventsPrefix,
		ErrorsPrefix: s3lake.DefaultErrorsPrefix,
		S3PartSize:   s3lake.DefaultPartSize,
		Config:       consumer.DefaultConfig(),
		AdminAddr:    ":9091",
		LogLevel:     "info",
	}
}

func (c *Config) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("consumer", "Drains the SQS feedback queue into the S3 Parquet lake: <lake-prefix>event_type=<t>/dt=YYYY-MM-DD/hour=HH/*.parquet,\n"+
		"invalid messages as JSON lines with their reason under <errors-prefix>dt=YYYY-MM-DD/hour=HH/. A message is deleted only after its object is written.")
	fs.StringVar(&c.Queue.URL, "feedback-queue-url", "SQS feedback queue URL")
	fs.StringVar(&c.LakeBucket, "lake-bucket", "S3 bucket of the lake")
	fs.StringVar(&c.LakePrefix, "lake-prefix", "key prefix of the Parquet tables (the Athena tables point at it)")
	fs.StringVar(&c.ErrorsPrefix, "errors-prefix", "key prefix of invalid messages")
	fs.BoolVar(&c.S3PathStyle, "s3-path-style", "address S3 path-style (local S3 servers)")
	fs.Int64Var(&c.S3PartSize, "s3-part-size", "multipart part size in bytes; larger objects are uploaded in parts (at least 5 MiB)")
	fs.Int64Var(&c.FlushBytes, "flush-bytes", "write a partition when its buffered message bytes reach this")
	fs.IntVar(&c.FlushRows, "flush-rows", "write a partition when it holds this many events")
	fs.DurationVar(&c.FlushAge, "flush-age", "write a partition when its oldest event was received this long ago")
	fs.Int64Var(&c.MaxBufferedBytes, "max-buffered-bytes", "stop receiving and write the largest partitions when this many message bytes are held (buffered or being written)")
	fs.IntVar(&c.MaxBufferedEvents, "max-buffered-events", "the same bound in messages; all replicas together must stay under SQS's ~120000 in-flight messages per queue")
	fs.DurationVar(&c.VisibilityTimeout, "visibility-timeout", "visibility asked for on receive and renewed while a message is held (whole seconds)")
	fs.DurationVar(&c.WaitTime, "wait-time", "long-poll wait of one receive (whole seconds, at most 20s)")
	fs.IntVar(&c.ReceiveConcurrency, "receive-concurrency", "long polls in flight")
	fs.IntVar(&c.FlushConcurrency, "flush-concurrency", "partitions written at once")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", "on SIGTERM, how long writing the buffered events may take before the rest is handed back")
	fs.DurationVar(&c.RetryInitial, "write-retry-base", "backoff of a failed object write: full jitter over min(write-retry-max, base*2^attempt); writes are retried until they succeed")
	fs.DurationVar(&c.RetryMax, "write-retry-max", "cap of the write backoff")
	fs.StringVar(&c.AdminAddr, "admin-addr", "listen address of /healthz, /readyz and /metrics")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	fs.DurationVar(&c.DebugPauseAfterWrite, "debug-pause-after-write", "TEST HOOK, never in production: wait this long between writing an object and deleting its messages")
	return fs
}

// Validate reports every problem at once, naming the flags.
func (c Config) Validate() error {
	var errs []error
	if err := c.Queue.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.LakeBucket == "" {
		errs = append(errs, errors.New("--lake-bucket is required"))
	}
	if c.S3PartSize < 5<<20 {
		errs = append(errs, fmt.Errorf("--s3-part-size %d must be at least 5 MiB", c.S3PartSize))
	}
	// SQS takes waits in whole seconds; the engine checks the range.
	if c.WaitTime%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--wait-time %s must be whole seconds", c.WaitTime))
	}
	if c.AdminAddr == "" {
		errs = append(errs, errors.New("--admin-addr is required"))
	} else if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("--admin-addr %q: %v", c.AdminAddr, err))
	}
	if err := s3lake.ValidatePrefixes(c.LakePrefix, c.ErrorsPrefix); err != nil {
		errs = append(errs, err)
	}
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// feedbackQueue is the queue client's defaults, named so that its
// problems say which queue they are about.
func feedbackQueue() sqs.Config {
	q := sqs.DefaultConfig()
	q.Name = "feedback"
	return q
}
