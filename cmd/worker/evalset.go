package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/athenaflags"
	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/chatapi"
)

// buildSetDeps are what `worker eval build-set` talks to; nil fields are
// built from the flags and the AWS SDK's chain (tests inject them).
type buildSetDeps struct {
	Athena athena.API
	Clock  clock.Clock
}

// buildSetConfig is `worker eval build-set`'s configuration.
type buildSetConfig struct {
	From, To       string
	Size           int
	StratumSizes   string
	Seed           int
	Out            string
	QueryTimeout   time.Duration
	Athena         athena.Config
	Chat           chatapi.Config
	stratumSizeMap map[string]int
}

func defaultBuildSetConfig() buildSetConfig {
	return buildSetConfig{Size: 100, Seed: 1, Out: "labelled-set", QueryTimeout: 10 * time.Minute,
		Athena: athena.DefaultConfig(), Chat: chatapi.DefaultConfig()}
}

func (c *buildSetConfig) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("worker eval build-set", "Builds a frozen, stratified labelled set from moderators' decisions in the lake (Athena,\n"+
		"lake/queries/labelled_decisions.sql: the latest decision per verdict): one stratum per decided category,\n"+
		"hard negatives (flagged verdicts decided clean), clean (the console's audit items: randomly sampled clean verdicts,\n"+
		"kept clean or overturned, the manifest counting the overturned as missed_positives) and clean_unaudited (clean\n"+
		"verdicts kept clean outside the audit, chosen by a person). Chats are fetched through\n"+
		"the chat API and stored masked. Writes DIR/cases.jsonl (for worker eval --cases) and DIR/manifest.json.")
	fs.StringVar(&c.From, "from", "first day of the decisions, YYYY-MM-DD (UTC)")
	fs.StringVar(&c.To, "to", "last day of the decisions, inclusive, YYYY-MM-DD (UTC)")
	fs.IntVar(&c.Size, "stratum-size", "cases per stratum")
	fs.StringVar(&c.StratumSizes, "stratum-sizes", "sizes of named strata, STRATUM=N,... (a category, hard_negative, clean, clean_unaudited)")
	fs.IntVar(&c.Seed, "seed", "seed of the draw within each stratum (the same seed and decisions give the same set)")
	fs.StringVar(&c.Out, "out", "directory of cases.jsonl and manifest.json")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", "how long the Athena query may take")
	athenaflags.Bind(fs, &c.Athena, "Athena database of the lake's tables")
	depflags.BindChat(fs, &c.Chat, "chat-history API the chats are fetched from")
	return fs
}

// Validate reports every problem at once, naming the flags.
func (c *buildSetConfig) Validate() error {
	var errs []error
	from, err1 := time.Parse(time.DateOnly, c.From)
	to, err2 := time.Parse(time.DateOnly, c.To)
	switch {
	case err1 != nil || err2 != nil:
		errs = append(errs, fmt.Errorf("--from %q and --to %q must be days, YYYY-MM-DD", c.From, c.To))
	case to.Before(from):
		errs = append(errs, fmt.Errorf("--to %s is before --from %s", c.To, c.From))
	}
	if c.Size < 0 {
		errs = append(errs, errors.New("--stratum-size must not be negative"))
	}
	c.stratumSizeMap = map[string]int{}
	for _, part := range strings.Split(c.StratumSizes, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, val, _ := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 || strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Errorf("--stratum-sizes %q: want STRATUM=N,... with N >= 0", c.StratumSizes))
			break
		}
		c.stratumSizeMap[strings.TrimSpace(name)] = n
	}
	if c.Out == "" {
		errs = append(errs, errors.New("--out is required"))
	}
	if c.QueryTimeout <= 0 {
		errs = append(errs, errors.New("--query-timeout must be positive"))
	}
	if err := athenaflags.Resolve(c.Athena).Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Chat.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runBuildSet is `worker eval build-set`. Exit status: 0 set written, 1
// the query, a fetch or a write failed, 2 bad usage.
func runBuildSet(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, deps buildSetDeps) int {
	cfg := defaultBuildSetConfig()
	fs := cfg.flags()
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "worker eval build-set", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := cli.SignalContext(ctx, log, "worker eval build-set")
	defer stop()
	m, err := buildSet(ctx, cfg, deps)
	if err != nil {
		log.Error("worker eval build-set", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s/cases.jsonl: %d cases from %d decisions\n", cfg.Out, m.Cases, m.Decisions)
	return 0
}

// buildSet reads the decisions, builds the set and writes it with its
// manifest.
func buildSet(ctx context.Context, cfg buildSetConfig, deps buildSetDeps) (eval.Manifest, error) {
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.Athena == nil {
		aws, err := awsclient.Load(ctx, awsclient.Options{})
		if err != nil {
			return eval.Manifest{}, err
		}
		deps.Athena = awsclient.Athena(aws)
	}
	chat, err := chatapi.New(cfg.Chat)
	if err != nil {
		return eval.Manifest{}, err
	}
	// The dedup views inline, as common table expressions: the same
	// SELECTs as the views, so the query runs where they were not applied
	// (and on the local stand-in, which has none).
	query, err := lake.Query("labelled_decisions")
	if err == nil {
		query, err = lake.WithDedupViews(query)
	}
	if err != nil {
		return eval.Manifest{}, err
	}
	src, err := athena.New(deps.Athena, athenaflags.Resolve(cfg.Athena))
	if err != nil {
		return eval.Manifest{}, err
	}
	qctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
	rows, err := src.Rows(qctx, query, []string{"'" + cfg.From + "'", "'" + cfg.To + "'"})
	cancel()
	if err != nil {
		return eval.Manifest{}, err
	}
	decisions, err := eval.ParseDecisions(rows)
	if err != nil {
		return eval.Manifest{}, err
	}
	setCfg := eval.SetConfig{Size: cfg.Size, Sizes: cfg.stratumSizeMap, Seed: uint64(cfg.Seed)}
	cases, strata, err := eval.BuildSet(ctx, decisions, chat, setCfg)
	if err != nil {
		return eval.Manifest{}, err
	}
	m := eval.NewManifest(deps.Clock.Now(), cfg.From, cfg.To, query, setCfg, len(decisions), cases, strata)
	return m, writeSet(cfg.Out, cases, m)
}

// writeSet writes the cases and the manifest into dir.
func writeSet(dir string, cases []eval.Case, m eval.Manifest) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "cases.jsonl"))
	if err != nil {
		return err
	}
	if err := eval.WriteCases(f, cases); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
}
