// Command worker is the always-on review worker: it long-polls the SQS
// review queue, runs each room's window through the LLM stages, upserts the
// verdict in MySQL, publishes inference-log and verdict events to the
// feedback queue, and serves /healthz, /readyz, /metrics and /debug/pprof.
//
//	worker [flags]                       run the worker
//	worker migrate --mysql-dsn DSN       apply the schema migrations and exit
//	worker stop --room R | --run ID | --review ROOM,START,END [--ttl D] [--reason TEXT]
//	                                     stop in-flight and future reviews on every pod
//
// Exit status: 0 after a clean drain, 1 on a start-up failure, 2 on bad
// usage. See --help for the flags and their CHATGUARD_ variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], cli.Environ, os.Stdout, os.Stderr))
}

// run is main without the process: it dispatches the subcommand, parses,
// validates, turns SIGTERM and SIGINT into a cancellation with the signal
// as its cause, and maps the outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "migrate" {
		return runMigrate(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "stop" {
		return runStop(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg := DefaultConfig()
	fs := cfg.flags()
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker", err)
	}
	if len(fs.Args()) > 0 {
		return cli.Fail(stderr, "worker", fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "worker", err)
	}
	level, _ := cfg.level()
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			log.Info("worker: signal received, draining", "signal", s.String())
			cancel(fmt.Errorf("received %s", s))
		case <-ctx.Done():
		}
	}()

	m := &Main{Config: cfg, Log: log, Stdout: stdout}
	if err := m.Run(ctx); err != nil {
		log.Error("worker: stopped", "err", err)
		return 1
	}
	return 0
}
