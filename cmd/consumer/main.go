// Command consumer is the always-on lake writer: it long-polls the SQS
// feedback queue, writes inference-log, moderator-feedback and verdict
// events as Parquet under Hive partitions of the S3 lake (invalid messages
// as JSON lines under the errors prefix), deletes each message only once its
// object is written, and serves /healthz, /readyz and /metrics.
//
// Exit status: 0 after a clean drain (SIGTERM writes every buffered event
// first), 1 when something could not be set up or the drain left messages
// unwritten (they are handed back to the queue), 2 on bad usage. See --help
// for the flags and their CHATGUARD_ variables.
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

// run is main without the process: it parses and validates, turns SIGTERM
// and SIGINT into a cancellation with the signal as its cause, and maps the
// outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := cfg.flags()
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "consumer", err)
	}
	if len(fs.Args()) > 0 {
		return cli.Fail(stderr, "consumer", fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "consumer", err)
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
			log.Info("consumer: signal received, draining", "signal", s.String())
			cancel(fmt.Errorf("received %s", s))
		case <-ctx.Done():
		}
	}()

	m := &Main{Config: cfg, Log: log}
	if err := m.Run(ctx); err != nil {
		log.Error("consumer: stopped", "err", err)
		return 1
	}
	return 0
}
