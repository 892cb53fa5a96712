package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/pipeline/llm"
)

// listFlag is a repeatable string flag; from the environment it takes one
// value, or several separated by ';'.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ";") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ";") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// evalKeyEnv is the environment variable of an endpoint's API key.
func evalKeyEnv(name string) string {
	return cli.EnvPrefix + "EVAL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"
}

// runEval is `worker eval`: it runs a labelled set through N endpoints and
// writes a Markdown report with plots (pipeline/eval). Exit status: 0
// report written, 1 the run or the report failed, 2 bad usage.
func runEval(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "build-set" {
		return runBuildSet(ctx, args[1:], getenv, stdout, stderr, buildSetDeps{})
	}
	if len(args) > 0 && args[0] == "shadow" {
		return runShadowEval(ctx, args[1:], getenv, stdout, stderr, shadowEvalDeps{})
	}
	if len(args) > 0 && args[0] == "plan" {
		return runEvalPlan(ctx, args[1:], getenv, stdout, stderr)
	}
	var (
		endpoints, cases, suites, prices listFlag
		conc                             = "1,4,16"
		out                              = "eval-report"
		format                           = "svg"
		title, note, feedback            string
		notes                            listFlag
		maxLoss                          = "1"
		maxFlag                          = 2.0
		seed                             = 1
		img                              = reviewers.DefaultOptions()
		// The run's own settings are bound to its configuration; what
		// needs parsing (endpoints, prices, the sweep) is added below.
		cfg = eval.Config{Repetitions: 1, TTFTSLO: 2 * time.Second, ReviewTimeout: 3 * time.Minute, Power: eval.DefaultPower}
	)
	fs := cli.NewFlagSet("worker eval", "Runs a labelled set (case files, the injection suite) through OpenAI-compatible endpoints with the\n"+
		"production stages and prompts, and writes DIR/report.md with plots: latency, tokens, goodput, quality, injection\n"+
		"robustness, agreement, cost, and with --reference a paired comparison and decision lines per candidate (recall,\n"+
		"overall and per category under Holm; flag rate), clustered by room (and account and campaign where the cases name\n"+
		"them), with the set size the next run needs. `worker eval plan` sizes a set from a pilot's figures. With\n"+
		"--image-hosts images pass the worker's gate; --image-inline reviews the image cases once more inline, to compare.\n"+
		"API keys come from CHATGUARD_EVAL_<NAME>_API_KEY, never from flags.")
	fs.Var(&endpoints, "endpoint", "an endpoint under test, name=base_url,model (repeat the flag; ';' separates several in the environment)")
	fs.Var(&cases, "cases", "a labelled case file, JSONL of pipeline/eval.Case (repeatable)")
	fs.Var(&suites, "injection-suite", "an injection suite file (pipeline/review/testdata/injection_suite.jsonl format; repeatable)")
	fs.Var(&prices, "price", "an endpoint's price, NAME=prompt=..,cached=..,completion=.. (USD per 1M tokens) and/or gpu_hour=..,shared_by=.. (repeatable)")
	// Not --concurrency: CHATGUARD_CONCURRENCY is the worker's own setting
	// and is set in the pods where this runs.
	fs.StringVar(&conc, "sweep", "the concurrency sweep: reviews in flight per step, comma-separated")
	fs.IntVar(&cfg.Repetitions, "repetitions", "passes over the cases per concurrency step")
	fs.DurationVar(&cfg.TTFTSLO, "ttft-slo", "time-to-first-token objective of goodput (every stage of a review within it)")
	fs.DurationVar(&cfg.ReviewTimeout, "review-timeout", "deadline of one review")
	fs.StringVar(&out, "out", "report directory (report.md and plots)")
	fs.StringVar(&format, "plot-format", "plot format: svg or png")
	fs.StringVar(&title, "title", "report title")
	fs.StringVar(&note, "note", "a paragraph printed under the title (say what the endpoints are)")
	fs.StringVar(&feedback, "moderator-feedback", "lake events as JSONL; its moderator_feedback events add the agreement with moderators")
	fs.Var(&notes, "endpoint-note", "how an endpoint is served, printed in the report: NAME=dtype=fp8,kv-cache-dtype=fp8,tp=2,spec-decode=off (free text after NAME=; repeatable)")
	fs.StringVar(&cfg.Reference, "reference", "the endpoint the others are compared with pair by pair (clustered intervals, flips, decision lines); empty: none")
	fs.Float64Var(&cfg.Power, "power", "power at which the report states the smallest recall loss the set can detect")
	fs.StringVar(&maxLoss, "max-recall-loss", "the recall loss (points) a candidate may have against --reference: N for overall and every category, then CATEGORY=N,... (e.g. 1,phishing_link=0.5)")
	fs.Float64Var(&maxFlag, "max-flag-rate-increase", "the flag-rate increase (points of the labelled cases flagged; the moderators' load) a candidate may have against --reference")
	img.ImageFlags(fs)
	fs.IntVar(&seed, "seed", "seed of the paired bootstrap (the same seed gives the same intervals)")
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker eval", err)
	}
	cfg.Seed = uint64(seed) // a flag of int, as the help has always shown it
	var errs []error
	margins, err := parseMargins(maxLoss)
	errs = append(errs, err)
	cfg.MaxRecallLoss = margins
	cfg.MaxFlagRateIncrease = maxFlag / 100
	for _, s := range endpoints {
		ep, err := eval.ParseEndpoint(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ep.APIKey = getenv(evalKeyEnv(ep.Name))
		cfg.Endpoints = append(cfg.Endpoints, ep)
	}
	for _, s := range prices {
		name, text, _ := strings.Cut(s, "=")
		p, err := llm.ParsePrice(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("--price %s: %w", name, err))
			continue
		}
		found := false
		for i := range cfg.Endpoints {
			if cfg.Endpoints[i].Name == name {
				cfg.Endpoints[i].Price, found = p, true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("--price %s: no endpoint of that name", name))
		}
	}
	errs = append(errs, applyNotes(cfg.Endpoints, notes), imageGates(&cfg, img))
	for _, c := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			errs = append(errs, fmt.Errorf("--sweep %q is not a comma-separated list of numbers", conc))
			break
		}
		cfg.Concurrency = append(cfg.Concurrency, n)
	}
	read := func(path string, fn func(io.Reader) ([]eval.Case, error)) {
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer f.Close()
		cs, err := fn(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		cfg.Cases = append(cfg.Cases, cs...)
	}
	for _, p := range cases {
		read(p, eval.ReadCases)
	}
	for _, p := range suites {
		read(p, eval.ReadInjectionSuite)
	}
	var mods []eval.ModeratorPrecision
	if feedback != "" {
		f, err := os.Open(feedback)
		if err != nil {
			errs = append(errs, err)
		} else {
			mods, err = eval.ReadModeratorFeedback(f)
			f.Close()
			errs = append(errs, err)
		}
	}
	if format != "svg" && format != "png" {
		errs = append(errs, fmt.Errorf("--plot-format %q is neither svg nor png", format))
	}
	if len(fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return cli.Fail(stderr, "worker eval", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := cli.SignalContext(ctx, log, "worker eval")
	defer stop()
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(cfg.Total(), progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("reviews"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond))
		cfg.Progress = func() { _ = bar.Add(1) }
		defer func() { _ = bar.Finish() }()
	}
	res, err := eval.Run(ctx, cfg)
	if err != nil {
		log.Error("worker eval: run", "err", err)
		if len(res.Reviews) == 0 {
			return 1
		}
	}
	cmd := commandLine(args)
	if err := eval.WriteReport(out, res, eval.Summarise(res), eval.ReportOptions{Title: title, Note: note, Command: cmd, Moderators: mods, Format: format}); err != nil {
		log.Error("worker eval: report", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s/report.md\n", out)
	if err != nil {
		return 1
	}
	return 0
}

// commandLine is the eval command as a shell would take it, for the
// report; the --note text is shown above it instead of repeated.
func commandLine(args []string) string {
	parts := []string{"worker", "eval"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--note" || a == "-note") && i+1 < len(args) {
			parts = append(parts, a, "'(the note above)'")
			i++
			continue
		}
		if strings.HasPrefix(a, "--note=") {
			parts = append(parts, "--note='(the note above)'")
			continue
		}
		if a == "" || strings.ContainsAny(a, " \t\n'\"$`\\|&;<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// parseMargins reads --max-recall-loss: points for overall and every
// category, then CATEGORY=points pairs.
func parseMargins(s string) (eval.Margins, error) {
	m := eval.Margins{PerCategory: map[string]float64{}}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, val, named := strings.Cut(part, "=")
		if !named {
			val = name
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || v < 0 || v >= 100 || (i == 0) == named {
			return m, fmt.Errorf("--max-recall-loss %q: want N (points) then CATEGORY=N,... with N in [0, 100)", s)
		}
		if named {
			m.PerCategory[strings.TrimSpace(name)] = v / 100
		} else {
			m.Default = v / 100
		}
	}
	return m, nil
}

// applyNotes sets each --endpoint-note NAME=text on its endpoint.
func applyNotes(eps []eval.Endpoint, notes []string) error {
	var errs []error
	for _, n := range notes {
		name, text, _ := strings.Cut(n, "=")
		i := slices.IndexFunc(eps, func(e eval.Endpoint) bool { return e.Name == name })
		if i < 0 {
			errs = append(errs, fmt.Errorf("--endpoint-note %s: no endpoint of that name", name))
			continue
		}
		eps[i].Notes = strings.TrimSpace(text)
	}
	return errors.Join(errs...)
}

// imageGates sets the worker's image gate on cfg when --image-hosts is
// given (without it the chats' URLs go as they are, as before the flags
// existed), and with --image-inline the inlining gate of the extra pass.
func imageGates(cfg *eval.Config, img reviewers.Options) error {
	if len(img.Images.Hosts) == 0 {
		if img.Images.Inline {
			return errors.New("--image-inline needs --image-hosts")
		}
		return nil
	}
	g, err := img.ImageGate(false)
	if err != nil {
		return err
	}
	cfg.Images = g
	if img.Images.Inline {
		in, err := img.ImageGate(true)
		if err != nil {
			return err
		}
		cfg.InlineImages = in
	}
	return nil
}
