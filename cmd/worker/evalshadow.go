package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/athenaflags"
	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/storage/athena"
)

// shadowEvalDeps are what `worker eval shadow` talks to; a nil Athena is
// built from the AWS SDK's chain (tests inject it).
type shadowEvalDeps struct {
	Athena athena.API
}

// shadowEvalConfig is `worker eval shadow`'s configuration: the events
// come from an export (--shadow-events) or from the lake (--from, --to).
type shadowEvalConfig struct {
	Events       string
	From, To     string
	Out          string
	Title, Note  string
	MaxLoss      string
	Seed         int
	Power        float64
	QueryTimeout time.Duration
	Athena       athena.Config
	margins      eval.Margins
}

func defaultShadowEvalConfig() shadowEvalConfig {
	return shadowEvalConfig{Out: "shadow-report", MaxLoss: "1", Seed: 1, Power: eval.DefaultPower, QueryTimeout: 10 * time.Minute,
		Athena: athena.DefaultConfig()}
}

func (c *shadowEvalConfig) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("worker eval shadow", "Compares shadow reviews (--shadow-rate) with the live verdicts they mirrored and writes DIR/report.md:\n"+
		"the offline report's paired comparison (kept flags, flips, κ, McNemar, per category, a decision line per candidate)\n"+
		"with the live path as the reference, which is agreement with live, not recall; split by whether the candidate saw\n"+
		"pseudonymised text; and, on windows moderators decided, both sides against the latest decision. The events come\n"+
		"from an export (--shadow-events, lake events as JSON lines) or from the lake through Athena (--from, --to).")
	fs.StringVar(&c.Events, "shadow-events", "lake events as JSON lines (the feedback queue's format): shadow_verdict and moderator_feedback events; empty: read the lake")
	fs.StringVar(&c.From, "from", "first day of the shadow events and decisions in the lake, YYYY-MM-DD (UTC)")
	fs.StringVar(&c.To, "to", "last day, inclusive, YYYY-MM-DD (UTC)")
	fs.StringVar(&c.Out, "out", "report directory (report.md)")
	fs.StringVar(&c.Title, "title", "report title")
	fs.StringVar(&c.Note, "note", "a paragraph printed under the title (say what the live path and the candidates are)")
	fs.StringVar(&c.MaxLoss, "max-recall-loss", "the loss (points) a candidate may have against the live path: N for overall and every category, then CATEGORY=N,...")
	fs.IntVar(&c.Seed, "seed", "seed of the paired bootstrap (the same seed gives the same intervals)")
	fs.Float64Var(&c.Power, "power", "power at which the report states the smallest loss the traffic can detect")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", "how long the Athena queries may take together")
	athenaflags.Bind(fs, &c.Athena, "Athena database of the lake's tables (shadow_verdict, moderator_feedback, verdict)")
	return fs
}

// Validate reports every problem at once, naming the flags.
func (c *shadowEvalConfig) Validate() error {
	var errs []error
	if c.Events == "" {
		from, err1 := time.Parse(time.DateOnly, c.From)
		to, err2 := time.Parse(time.DateOnly, c.To)
		switch {
		case err1 != nil || err2 != nil:
			errs = append(errs, fmt.Errorf("--from %q and --to %q must be days, YYYY-MM-DD (or give --shadow-events)", c.From, c.To))
		case to.Before(from):
			errs = append(errs, fmt.Errorf("--to %s is before --from %s", c.To, c.From))
		}
		errs = append(errs, athenaflags.Resolve(c.Athena).Validate())
	} else if c.From != "" || c.To != "" {
		errs = append(errs, errors.New("--shadow-events reads an export: --from and --to are for the lake"))
	}
	m, err := parseMargins(c.MaxLoss)
	c.margins = m
	errs = append(errs, err)
	if c.Out == "" {
		errs = append(errs, errors.New("--out is required"))
	}
	if c.Power <= 0 || c.Power >= 1 {
		errs = append(errs, fmt.Errorf("--power %v must be in (0, 1)", c.Power))
	}
	if c.QueryTimeout <= 0 {
		errs = append(errs, errors.New("--query-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// runShadowEval is `worker eval shadow`. Exit status: 0 report written,
// 1 reading the events or writing the report failed, 2 bad usage.
func runShadowEval(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, deps shadowEvalDeps) int {
	cfg := defaultShadowEvalConfig()
	fs := cfg.flags()
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "worker eval shadow", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := cli.SignalContext(ctx, log, "worker eval shadow")
	defer stop()
	recs, decisions, source, err := readShadow(ctx, cfg, deps)
	if err != nil {
		log.Error("worker eval shadow", "err", err)
		return 1
	}
	set := eval.PairShadow(recs)
	sc := eval.ShadowConfig{MaxRecallLoss: cfg.margins, Seed: uint64(cfg.Seed), Power: cfg.Power}
	var b bytes.Buffer
	err = eval.WriteShadowReport(&b, set, eval.SummariseShadow(set, eval.LatestDecisions(decisions), sc), sc,
		eval.ShadowReportOptions{Title: cfg.Title, Note: cfg.Note, Command: commandLine(append([]string{"shadow"}, args...)), Source: source})
	if err == nil {
		err = os.MkdirAll(cfg.Out, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(cfg.Out, "report.md"), b.Bytes(), 0o644)
	}
	if err != nil {
		log.Error("worker eval shadow: report", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s/report.md\n", cfg.Out)
	return 0
}

// readShadow reads the shadow events and moderator decisions from the
// export or the lake, and says where they came from.
func readShadow(ctx context.Context, cfg shadowEvalConfig, deps shadowEvalDeps) ([]eval.ShadowRecord, []eval.Decision, string, error) {
	if cfg.Events != "" {
		f, err := os.Open(cfg.Events)
		if err != nil {
			return nil, nil, "", err
		}
		defer f.Close()
		recs, ds, err := eval.ReadShadowExport(f)
		return recs, ds, fmt.Sprintf("the export `%s`", filepath.Base(cfg.Events)), err
	}
	if deps.Athena == nil {
		aws, err := awsclient.Load(ctx, awsclient.Options{})
		if err != nil {
			return nil, nil, "", err
		}
		deps.Athena = awsclient.Athena(aws)
	}
	src, err := athena.New(deps.Athena, athenaflags.Resolve(cfg.Athena))
	if err != nil {
		return nil, nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
	defer cancel()
	days := []string{"'" + cfg.From + "'", "'" + cfg.To + "'"}
	rows, err := lakeQuery(ctx, src, "shadow_pairs", days)
	if err != nil {
		return nil, nil, "", err
	}
	recs, err := eval.ParseShadowRows(rows)
	if err != nil {
		return nil, nil, "", err
	}
	if rows, err = lakeQuery(ctx, src, "labelled_decisions", days); err != nil {
		return nil, nil, "", err
	}
	ds, err := eval.ParseDecisions(rows)
	source := fmt.Sprintf("the lake (Athena database `%s`, lake queries shadow_pairs and labelled_decisions, days %s to %s)",
		cfg.Athena.Database, cfg.From, cfg.To)
	return recs, ds, source, err
}

// lakeQuery runs a named lake query with its dedup views inlined
// as common table expressions, so that it runs where the views were not
// applied (and on the local stand-in, which has none).
func lakeQuery(ctx context.Context, src *athena.Source, name string, params []string) ([][]string, error) {
	q, err := lake.Query(name)
	if err == nil {
		q, err = lake.WithDedupViews(q)
	}
	if err != nil {
		return nil, err
	}
	rows, err := src.Rows(ctx, q, params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rows, nil
}
