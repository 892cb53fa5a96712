// Command worker is the always-on review worker: it long-polls the SQS
// review queue, runs each room's window through the LLM stages, upserts the
// verdict in MySQL, publishes inference-log and verdict events to the
// feedback queue, and serves /healthz, /readyz and /metrics; the operator
// API (POST /v1/stop, bearer tokens, audited) on --operator-addr, and
// /debug/pprof only on a loopback --pprof-addr.
//
//	worker [flags]                       run the worker
//	worker migrate --mysql-dsn DSN       apply the schema migrations and exit
//	worker purge --mysql-dsn DSN [--dry-run]
//	                                     delete stage rows and verdicts past retention and exit
//	worker stop --operator-url URL --token-file F --room R | --run ID | --review ROOM,START,END [--ttl D] [--reason TEXT]
//	                                     stop in-flight and future reviews on every pod (through the operator API)
//	worker eval --endpoint NAME=URL,MODEL ... --cases FILE [--injection-suite FILE] [--out DIR]
//	                                     compare endpoints on a labelled set; writes a Markdown report
//	worker eval build-set --from DAY --to DAY --chat-api-url URL [--stratum-size N] [--out DIR]
//	                                     build a labelled set from moderators' decisions in the lake
//	worker eval shadow --shadow-events FILE | --from DAY --to DAY [--out DIR]
//	                                     compare shadow reviews with the live verdicts; writes a Markdown report
//	worker eval plan --discordance PSI [--design-effect D] [--positives-per-room N] [--loss PTS] [--margin PTS]
//	                                     the positives and rooms a set needs for 80 % and 90 % power
//
// Exit status: 0 after a clean drain, 1 on a start-up failure, 2 on bad
// usage. See --help for the flags and their CHATGUARD_ variables.
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

// run is main without the process: it dispatches the subcommand, parses,
// validates, turns SIGTERM and SIGINT into a cancellation with the signal
// as its cause, and maps the outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "migrate" {
		return runMigrate(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "purge" {
		return runPurge(ctx, args[1:], getenv, stdout, stderr, nil)
	}
	if len(args) > 0 && args[0] == "stop" {
		return runStop(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "eval" {
		return runEval(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "actions" {
		return runActions(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg := DefaultConfig()
	return cli.Program{Name: "worker", Flags: cfg.flags(), Config: &cfg, LogLevel: &cfg.LogLevel,
		Main: func(log *slog.Logger) cli.Runner { return &Main{Config: cfg, Log: log, Stdout: stdout} },
	}.Run(ctx, args, getenv, stdout, stderr)
}
