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
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
	"github.com/chatguard/chatguard/storage/mysql"
)

// runActions dispatches `worker actions <subcommand>`; report is the one.
func runActions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "report" {
		return cli.Fail(stderr, "worker actions", errors.New("want a subcommand: report"))
	}
	return runActionsReport(ctx, args[1:], getenv, stdout, stderr)
}

// runActionsReport is `worker actions report`: the dry-run evidence
// before turning a rule on. It replays a policy over the done, flagged
// verdicts finished in [--from, --to) (package protect) and prints, per
// rule, the actions it would have taken, on how many accounts, and its
// precision against the moderators' decisions with a 95 % interval. Exit
// status: 0 printed, 1 failed, 2 bad usage.
func runActionsReport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	dbc, path, limit := commandDB(), "", 100000
	var from, to time.Time
	fs := cli.NewFlagSet("worker actions report", "Replays the protective-action policy over the verdicts finished in [--from, --to) and prints, per rule,\n"+
		"the actions it would have taken, the accounts, and its precision against moderators' decisions (docs/actions.md).")
	depflags.BindMySQLDSN(fs, &dbc)
	fs.StringVar(&path, "actions-policy", "policy file to replay (JSON); empty: the shipped default")
	fs.TimeVar(&from, "from", "start of the period (RFC 3339), inclusive")
	fs.TimeVar(&to, "to", "end of the period (RFC 3339), exclusive")
	fs.IntVar(&limit, "limit", "verdicts read at most; the report says when the period has more")
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	pol, err := policy.Load(path)
	errs := []error{validateCommandDB(dbc), err}
	if from.IsZero() || to.IsZero() || !to.After(from) {
		errs = append(errs, errors.New("--from and --to are required, --to after --from"))
	}
	if limit < 1 {
		errs = append(errs, errors.New("--limit must be at least 1"))
	}
	if err := errors.Join(errs...); err != nil {
		return cli.Fail(stderr, "worker actions report", err)
	}
	ctx, stop := cli.SignalContext(ctx, slog.New(slog.NewJSONHandler(stderr, nil)), "worker actions report")
	defer stop()
	db, err := openCommandDB(ctx, dbc)
	if err != nil {
		fmt.Fprintf(stderr, "worker actions report: %v\n", err)
		return 1
	}
	defer db.Close()
	cases, more, err := mysql.New(db).BacktestCases(ctx, from, to, limit)
	if err != nil {
		fmt.Fprintf(stderr, "worker actions report: %v\n", err)
		return 1
	}
	if err := protect.WriteReport(stdout, pol, from, to, len(cases), more, protect.Backtest(pol, cases)); err != nil {
		fmt.Fprintf(stderr, "worker actions report: %v\n", err)
		return 1
	}
	return 0
}
