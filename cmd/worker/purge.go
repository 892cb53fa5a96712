package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/storage/mysql"
)

// runPurge is `worker purge`: it applies the retention settings once, in
// small batches (see mysql.Store.Purge), and prints one report line. It is
// meant to run as a Kubernetes CronJob; --purge-timeout bounds a run, and
// the next run continues where it stopped. Exit status: 0 done, 1 failed or
// stopped before the end (timeout or signal; the report says what was
// deleted), 2 bad usage. clk times the run's pauses (nil: the wall clock).
func runPurge(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, clk clock.Clock) int {
	cfg := mysql.DefaultPurgeConfig()
	dbc, timeout, erase := commandDB(), time.Hour, ""
	fs := cli.NewFlagSet("worker purge", "Deletes stage rows and verdicts older than the retention, in small batches by primary-key range,\n"+
		"keeping every verdict a moderator decided on; prints what it deleted and how fast, then exits.")
	depflags.BindMySQLDSN(fs, &dbc)
	fs.DurationVar(&cfg.StageRetention, "stage-retention", "delete the stage rows of verdicts created longer ago than this")
	fs.DurationVar(&cfg.VerdictRetention, "verdict-retention", "delete verdicts created longer ago than this (at least --stage-retention)")
	fs.DurationVar(&cfg.TakeHistoryRetention, "take-history-retention", "delete take history rows (moderators' takes and releases) recorded longer ago than this")
	fs.IntVar(&cfg.BatchSize, "batch-size", "rows one DELETE removes at most")
	fs.DurationVar(&cfg.Pause, "pause", "wait after each batch that deleted rows (lets replicas keep up)")
	fs.BoolVar(&cfg.DryRun, "dry-run", "count what would be deleted, delete nothing")
	fs.DurationVar(&timeout, "purge-timeout", "deadline of the whole run; the next run continues")
	fs.StringVar(&erase, "erase-sender", "instead of the retention run, erase every verdict-subject and participant row naming this sender id (an erasure request); the verdicts stay")
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker purge", err)
	}
	errs := []error{validateCommandDB(dbc)}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if timeout <= 0 {
		errs = append(errs, errors.New("--purge-timeout must be positive"))
	}
	if len(erase) > 128 {
		errs = append(errs, errors.New("--erase-sender must be at most 128 bytes"))
	}
	if len(fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		return cli.Fail(stderr, "worker purge", err)
	}
	// SIGTERM (the CronJob's pod deleted) ends the run between batches; the
	// batch in flight is rolled back whole.
	ctx, stop := cli.SignalContext(ctx, slog.New(slog.NewJSONHandler(stderr, nil)), "worker purge")
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errors.New("--purge-timeout reached"))
	defer cancel()
	db, err := openCommandDB(ctx, dbc)
	if err != nil {
		fmt.Fprintf(stderr, "worker purge: %v\n", err)
		return 1
	}
	defer db.Close()
	if erase != "" {
		return eraseSender(ctx, mysql.New(db), erase, cfg.DryRun, stdout, stderr)
	}
	report, err := mysql.New(db).Purge(ctx, cfg, clk)
	fmt.Fprintln(stdout, report)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			fmt.Fprintf(stderr, "worker purge: stopped before the end (%v); the next run continues: %v\n", cause, err)
		} else {
			fmt.Fprintf(stderr, "worker purge: %v\n", err)
		}
		return 1
	}
	return 0
}

// eraseSender is `worker purge --erase-sender`: it deletes the sender's
// subject and participant rows and reports how many, never the id itself (the report goes
// to a CronJob's or an operator's log). dryRun changes nothing and says so.
func eraseSender(ctx context.Context, s *mysql.Store, sender string, dryRun bool, stdout, stderr io.Writer) int {
	if dryRun {
		n, err := s.CountSenderSubjects(ctx, sender)
		if err != nil {
			fmt.Fprintf(stderr, "worker purge: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "purge: would erase %d verdict-subject and participant rows of the sender\n", n)
		return 0
	}
	n, err := s.EraseSender(ctx, sender)
	if err != nil {
		fmt.Fprintf(stderr, "worker purge: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "purge: erased %d verdict-subject and participant rows of the sender\n", n)
	return 0
}
