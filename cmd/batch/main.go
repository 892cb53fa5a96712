// Command batch is the hourly job Airflow runs: it asks Athena for the chat
// rooms that had messages in a window and publishes one review event per
// room to the SQS review queue, recording each attempt in batch_runs.
//
//	batch --window-start 2026-11-01T00:00:00Z --window-end 2026-11-01T01:00:00Z
//
// Exit status: 0 success, 1 failed run, 2 bad usage. See --help for flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], cli.Environ, os.Stdout, os.Stderr))
}

// run is main without the process: it parses, validates, turns SIGTERM and
// SIGINT into a cancellation with the signal as its cause, and maps the
// outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := cfg.flags()
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "batch", err)
	}
	if len(fs.Args()) > 0 {
		return cli.Fail(stderr, "batch", fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	cfg = cfg.WithDefaultWindow(time.Now())
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "batch", err)
	}
	level, _ := cfg.level()
	stderr = &lockedWriter{w: stderr}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			log.Warn("signal received, stopping the run", "signal", s.String())
			cancel(fmt.Errorf("received %s", s))
		case <-ctx.Done():
		}
	}()

	m := &Main{Config: cfg, Log: log, Stdout: stdout, Stderr: stderr}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "batch: run %s failed: %v\n", cfg.RunID, err)
		return 1
	}
	return 0
}

// lockedWriter serializes writes, so that log records and progress lines
// from different goroutines never interleave on stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
