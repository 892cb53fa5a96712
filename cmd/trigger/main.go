// Command trigger is the always-on real-time trigger: it receives the chat
// service's per-message events from the SQS chat-events queue, keeps each
// room's activity in Redis (shared by every replica), and when a room has
// been quiet for --quiet, or --max-delay after its first unreviewed
// message, publishes one review event for the room's new messages to the
// review-realtime queue. It serves /healthz, /readyz and /metrics.
//
// Exit status: 0 after a clean stop, 1 when something could not be set up,
// 2 on bad usage. See --help for the flags and their CHATGUARD_ variables.
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

// run is main without the process: it parses and validates, turns SIGTERM
// and SIGINT into a cancellation, and maps the outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	return cli.Program{Name: "trigger", Flags: cfg.flags(), Config: &cfg, LogLevel: &cfg.LogLevel,
		Main: func(log *slog.Logger) cli.Runner { return &Main{Config: cfg, Log: log} },
	}.Run(ctx, args, getenv, stdout, stderr)
}
