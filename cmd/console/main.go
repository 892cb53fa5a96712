// Command console is the moderators' web console and the on-demand review
// API: the review queue from MySQL, room pages with the chat
// history fetched live from the chat API, confirm/overturn decisions (a
// moderator_decisions row and a moderator_feedback lake event), re-reviews
// streamed over SSE (POST /v1/reviews) and the stop button (the worker's
// operator API). /healthz, /readyz and /metrics are on --admin-addr.
//
//	console [flags]
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

// run is main without the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	return cli.Program{Name: "console", Flags: cfg.flags(), Config: &cfg, LogLevel: &cfg.LogLevel,
		Main: func(log *slog.Logger) cli.Runner { return &Main{Config: cfg, Log: log} },
	}.Run(ctx, args, getenv, stdout, stderr)
}
