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
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/telemetry"
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
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	cfg = cfg.WithDefaultWindow(time.Now())
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "batch", err)
	}
	level, _ := cli.ParseLevel(cfg.LogLevel)
	stderr = &lockedWriter{w: stderr}
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})))
	shutdown, err := telemetry.Setup(ctx, "chatguard-batch", getenv)
	if err != nil {
		return cli.Fail(stderr, "batch", err)
	}
	defer shutdown()

	ctx, stop := cli.SignalContext(ctx, log, "batch")
	defer stop()

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
