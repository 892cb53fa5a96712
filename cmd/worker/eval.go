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
	f := newEvalFlags()
	if err := f.fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		f.fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker eval", err)
	}
	mods, err := f.configure(getenv)
	if err != nil {
		return cli.Fail(stderr, "worker eval", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := cli.SignalContext(ctx, log, "worker eval")
	defer stop()
	return f.run(ctx, log, commandLine(args), mods, stdout, stderr)
}

// evalFlags are `worker eval`'s flags and the configuration they fill.
type evalFlags struct {
	fs                               *cli.FlagSet
	endpoints, cases, suites, prices listFlag
	conc, out, format                string
	title, note, feedback            string
	notes                            listFlag
	maxLoss                          string
	maxFlag                          float64
	seed                             int
	img                              reviewers.Options
	cfg                              eval.Config
}

// newEvalFlags declares `worker eval`'s flags with their defaults.
func newEvalFlags() *evalFlags {
	f := &evalFlags{
		conc: "1,4,16", out: "eval-report", format: "svg", maxLoss: "1", maxFlag: 2.0, seed: 1,
		img: reviewers.DefaultOptions(),
		// The run's own settings are bound to its configuration; what
		// needs parsing (endpoints, prices, the sweep) is added by
		// configure.
		cfg: eval.Config{Repetitions: 1, TTFTSLO: 2 * time.Second, ReviewTimeout: 3 * time.Minute, Power: eval.DefaultPower},
	}
	fs := cli.NewFlagSet("worker eval", "Runs a labelled set (case files, the injection suite) through OpenAI-compatible endpoints with the\n"+
		"production stages and prompts, and writes DIR/report.md with plots: latency, tokens, goodput, quality, injection\n"+
		"robustness, agreement, cost, and with --reference a paired comparison and decision lines per candidate (recall,\n"+
		"overall and per category under Holm; flag rate), clustered by room (and account and campaign where the cases name\n"+
		"them), with the set size the next run needs. `worker eval plan` sizes a set from a pilot's figures. With\n"+
		"--image-hosts images pass the worker's gate; --image-inline reviews the image cases once more inline, to compare.\n"+
		"API keys come from CHATGUARD_EVAL_<NAME>_API_KEY, never from flags.")
	fs.Var(&f.endpoints, "endpoint", "an endpoint under test, name=base_url,model (repeat the flag; ';' separates several in the environment)")
	fs.Var(&f.cases, "cases", "a labelled case file, JSONL of pipeline/eval.Case (repeatable)")
	fs.Var(&f.suites, "injection-suite", "an injection suite file (pipeline/review/testdata/injection_suite.jsonl format; repeatable)")
	fs.Var(&f.prices, "price", "an endpoint's price, NAME=prompt=..,cached=..,completion=.. (USD per 1M tokens) and/or gpu_hour=..,shared_by=.. (repeatable)")
	// Not --concurrency: CHATGUARD_CONCURRENCY is the worker's own setting
	// and is set in the pods where this runs.
	fs.StringVar(&f.conc, "sweep", "the concurrency sweep: reviews in flight per step, comma-separated")
	fs.IntVar(&f.cfg.Repetitions, "repetitions", "passes over the cases per concurrency step")
	fs.DurationVar(&f.cfg.TTFTSLO, "ttft-slo", "time-to-first-token objective of goodput (every stage of a review within it)")
	fs.DurationVar(&f.cfg.ReviewTimeout, "review-timeout", "deadline of one review")
	fs.StringVar(&f.out, "out", "report directory (report.md and plots)")
	fs.StringVar(&f.format, "plot-format", "plot format: svg or png")
	fs.StringVar(&f.title, "title", "report title")
	fs.StringVar(&f.note, "note", "a paragraph printed under the title (say what the endpoints are)")
	fs.StringVar(&f.feedback, "moderator-feedback", "lake events as JSONL; its moderator_feedback events add the agreement with moderators")
	fs.Var(&f.notes, "endpoint-note", "how an endpoint is served, printed in the report: NAME=dtype=fp8,kv-cache-dtype=fp8,tp=2,spec-decode=off (free text after NAME=; repeatable)")
	fs.StringVar(&f.cfg.Reference, "reference", "the endpoint the others are compared with pair by pair (clustered intervals, flips, decision lines); empty: none")
	fs.Float64Var(&f.cfg.Power, "power", "power at which the report states the smallest recall loss the set can detect")
	fs.StringVar(&f.maxLoss, "max-recall-loss", "the recall loss (points) a candidate may have against --reference: N for overall and every category, then CATEGORY=N,... (e.g. 1,phishing_link=0.5)")
	fs.Float64Var(&f.maxFlag, "max-flag-rate-increase", "the flag-rate increase (points of the labelled cases flagged; the moderators' load) a candidate may have against --reference")
	f.img.ImageFlags(fs)
	fs.IntVar(&f.seed, "seed", "seed of the paired bootstrap (the same seed gives the same intervals)")
	f.fs = fs
	return f
}

// configure completes f.cfg from the parsed flags (endpoints with their
// keys and prices, the sweep, the cases) and reads the moderators'
// feedback; it reports every bad flag at once.
func (f *evalFlags) configure(getenv func(string) string) ([]eval.ModeratorPrecision, error) {
	cfg := &f.cfg
	cfg.Seed = uint64(f.seed) // a flag of int, as the help has always shown it
	var errs []error
	margins, err := parseMargins(f.maxLoss)
	errs = append(errs, err)
	cfg.MaxRecallLoss = margins
	cfg.MaxFlagRateIncrease = f.maxFlag / 100
	for _, s := range f.endpoints {
		ep, err := eval.ParseEndpoint(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ep.APIKey = getenv(evalKeyEnv(ep.Name))
		cfg.Endpoints = append(cfg.Endpoints, ep)
	}
	errs = append(errs, applyPrices(cfg.Endpoints, f.prices)...)
	errs = append(errs, applyNotes(cfg.Endpoints, f.notes), imageGates(cfg, f.img))
	for _, c := range strings.Split(f.conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			errs = append(errs, fmt.Errorf("--sweep %q is not a comma-separated list of numbers", f.conc))
			break
		}
		cfg.Concurrency = append(cfg.Concurrency, n)
	}
	errs = append(errs, f.readCases()...)
	var mods []eval.ModeratorPrecision
	if f.feedback != "" {
		fh, err := os.Open(f.feedback)
		if err != nil {
			errs = append(errs, err)
		} else {
			mods, err = eval.ReadModeratorFeedback(fh)
			fh.Close()
			errs = append(errs, err)
		}
	}
	if f.format != "svg" && f.format != "png" {
		errs = append(errs, fmt.Errorf("--plot-format %q is neither svg nor png", f.format))
	}
	if len(f.fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", f.fs.Args()))
	}
	errs = append(errs, cfg.Validate())
	return mods, errors.Join(errs...)
}

// applyPrices sets each --price NAME=... on the endpoint of that name.
func applyPrices(eps []eval.Endpoint, prices []string) []error {
	var errs []error
	for _, s := range prices {
		name, text, _ := strings.Cut(s, "=")
		p, err := llm.ParsePrice(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("--price %s: %w", name, err))
			continue
		}
		found := false
		for i := range eps {
			if eps[i].Name == name {
				eps[i].Price, found = p, true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("--price %s: no endpoint of that name", name))
		}
	}
	return errs
}

// readCases adds the cases of every --cases and --injection-suite file to
// f.cfg.
func (f *evalFlags) readCases() []error {
	var errs []error
	read := func(path string, fn func(io.Reader) ([]eval.Case, error)) {
		fh, err := os.Open(path)
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer fh.Close()
		cs, err := fn(fh)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		f.cfg.Cases = append(f.cfg.Cases, cs...)
	}
	for _, p := range f.cases {
		read(p, eval.ReadCases)
	}
	for _, p := range f.suites {
		read(p, eval.ReadInjectionSuite)
	}
	return errs
}

// run runs the configured evaluation, with a progress bar on a terminal,
// and writes its report; a run that failed part-way still reports the
// reviews it has, and exits 1.
func (f *evalFlags) run(ctx context.Context, log *slog.Logger, cmd string, mods []eval.ModeratorPrecision, stdout, stderr io.Writer) int {
	cfg := f.cfg
	if fh, ok := stderr.(*os.File); ok && term.IsTerminal(int(fh.Fd())) {
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
	opts := eval.ReportOptions{Title: f.title, Note: f.note, Command: cmd, Moderators: mods, Format: f.format}
	if err := eval.WriteReport(f.out, res, eval.Summarise(res), opts); err != nil {
		log.Error("worker eval: report", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s/report.md\n", f.out)
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
