// Command consumer is the always-on lake writer: it long-polls the SQS
// feedback queue, writes inference-log, moderator-feedback and verdict
// events as Parquet under Hive partitions of the S3 lake (invalid messages
// as JSON lines under the errors prefix), deletes each message only once its
// object is written, and serves /healthz, /readyz and /metrics.
//
//	consumer [flags]          run the consumer
//	consumer compact [flags]  merge the small objects of closed partition-hours and exit
//
// Exit status: 0 after a clean drain (SIGTERM writes every buffered event
// first), 1 when something could not be set up or the drain left messages
// unwritten (they are handed back to the queue), 2 on bad usage. See --help
// for the flags and their CHATGUARD_ variables.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], cli.Environ, os.Stdout, os.Stderr))
}

// run is main without the process: it dispatches the subcommand, parses and validates, turns SIGTERM
// and SIGINT into a cancellation with the signal as its cause, and maps the
// outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compact" {
		return runCompact(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg := DefaultConfig()
	return cli.Program{Name: "consumer", Flags: cfg.flags(), Config: &cfg, LogLevel: &cfg.LogLevel,
		Main: func(log *slog.Logger) cli.Runner { return &Main{Config: cfg, Log: log} },
	}.Run(ctx, args, getenv, stdout, stderr)
}
