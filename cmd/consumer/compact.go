package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// CompactConfig is every setting of `consumer compact`. The lake settings
// share their flags and CHATGUARD_ variables with the consumer, so the
// CronJob takes the same ConfigMap.
type CompactConfig struct {
	LakeBucket  string
	S3PathStyle bool
	Timeout     time.Duration
	LogLevel    string
	// CompactConfig is the compactor's own: --compact-*, --dry-run and
	// --lake-prefix (its EventsPrefix).
	s3lake.CompactConfig
}

// DefaultCompactConfig returns the defaults shown by `consumer compact --help`.
func DefaultCompactConfig() CompactConfig {
	return CompactConfig{
		Timeout:       50 * time.Minute,
		LogLevel:      "info",
		CompactConfig: s3lake.DefaultCompactConfig(),
	}
}

func (c *CompactConfig) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("consumer compact", "Merges the small Parquet objects of every closed partition-hour of the lake into objects of about\n"+
		"--compact-target-bytes, then deletes the small ones; prints what it did and exits. Safe to rerun and to run on two pods at once.")
	fs.StringVar(&c.LakeBucket, "lake-bucket", "S3 bucket of the lake")
	fs.StringVar(&c.EventsPrefix, "lake-prefix", "key prefix of the Parquet tables (the Athena tables point at it)")
	fs.BoolVar(&c.S3PathStyle, "s3-path-style", "address S3 path-style (local S3 servers)")
	fs.Int64Var(&c.TargetBytes, "compact-target-bytes", "aim for objects of this size; an earlier output of at least half of it is left alone (memory: a few times this per --compact-concurrency)")
	fs.DurationVar(&c.Grace, "compact-grace", "compact an hour only this long after it ended, leaving time for late events (later ones are merged by the next run)")
	fs.DurationVar(&c.Lookback, "compact-lookback", "look this far back for closed hours")
	fs.IntVar(&c.Concurrency, "compact-concurrency", "partition-hours merged at once")
	fs.BoolVar(&c.DryRun, "dry-run", "say what would be merged; read, write and delete nothing")
	fs.DurationVar(&c.Timeout, "compact-timeout", "deadline of the whole run; partitions not reached are left to the next run")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// Validate reports every problem at once, naming the flags.
func (c CompactConfig) Validate() error {
	var errs []error
	if c.LakeBucket == "" {
		errs = append(errs, errors.New("--lake-bucket is required"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--compact-timeout %s must be positive", c.Timeout))
	}
	if err := c.CompactConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q must be debug, info, warn or error", c.LogLevel))
	}
	return errors.Join(errs...)
}

// runCompact is `consumer compact`, meant to run as an hourly CronJob. It
// prints the run's report line on stdout. Exit status: 0 done (every
// partition merged or nothing to do), 1 when a partition failed or the
// run was cut short (what was merged stays merged; the rest waits for the
// next run, and nothing is lost either way), 2 bad usage.
func runCompact(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultCompactConfig()
	fs := cfg.flags()
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "consumer compact", err)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// SIGTERM (the CronJob's pod deleted) stops between S3 calls; an
	// output is either written whole or not at all.
	ctx, stop := cli.SignalContext(ctx, log, "consumer compact")
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, errors.New("--compact-timeout reached"))
	defer cancel()

	awsOpts := awsclient.Options{S3PathStyle: cfg.S3PathStyle, MaxAttempts: 1, HTTPTimeout: 5 * time.Minute}
	awsCfg, err := awsclient.Load(ctx, awsOpts)
	if err != nil {
		log.Error("consumer compact: stopped", "err", err)
		return 1
	}
	ccfg := cfg.CompactConfig
	ccfg.Logger = log
	c, err := s3lake.NewCompactor(s3lake.NewStore(awsclient.S3(awsCfg, awsOpts), cfg.LakeBucket, 0), ccfg)
	if err != nil {
		log.Error("consumer compact: stopped", "err", err)
		return 1
	}
	t0 := time.Now()
	report, err := c.Run(ctx)
	fmt.Fprintf(stdout, "%s in %s\n", report, time.Since(t0).Round(time.Millisecond))
	if err != nil {
		log.Error("consumer compact: not every partition was compacted; the next run continues", "err", err)
		return 1
	}
	return 0
}
