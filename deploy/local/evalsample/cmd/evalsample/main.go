// Command evalsample regenerates the sample report of `worker eval`
// (make eval-sample): it starts three llmsim profiles (evalsample.Profiles),
// writes the sample lake's labelled rooms as a case file, and runs the
// worker binary's eval subcommand against them, unchanged from how it runs
// against real vLLM and managed endpoints.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/evalsample"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "evalsample:", err)
		os.Exit(1)
	}
}

func run() error {
	worker := flag.String("worker", "bin/worker", "the worker binary")
	out := flag.String("out", "docs/eval/sample", "report directory")
	rooms := flag.Int("rooms", 600, "labelled sample rooms to review")
	suite := flag.String("injection-suite", "pipeline/review/testdata/injection_suite.jsonl", "the injection suite")
	conc := flag.String("concurrency", "16,64", "the concurrency sweep")
	reps := flag.Int("repetitions", 2, "repetitions per step (2 or more measures the noise floor)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cases, err := evalsample.SampleCases(ctx, 7, 600, *rooms)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "evalsample-cases-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	casesPath := filepath.Join(tmp, "sample_cases.jsonl")
	f, err := os.Create(casesPath)
	if err != nil {
		return err
	}
	if err := errors.Join(eval.WriteCases(f, cases), f.Close()); err != nil {
		return err
	}
	profiles := evalsample.Profiles()
	sims, err := evalsample.Start(ctx, profiles)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range sims {
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.Stop(stopCtx)
			cancel()
		}
	}()
	args := []string{"eval", "--out", *out, "--cases", casesPath, "--injection-suite", *suite,
		"--sweep", *conc, "--repetitions", fmt.Sprint(*reps), "--ttft-slo", "1s",
		"--title", "chatguard endpoint evaluation: sample report (SIMULATORS)",
		"--reference", evalsample.Reference, "--max-recall-loss", "1,phishing_link=0.5", "--seed", "1",
		"--note", note(profiles)}
	for i, p := range profiles {
		args = append(args, "--endpoint", fmt.Sprintf("%s=%s,%s", p.Name, sims[i].URL, p.Config.Models[0]), "--price", p.Name+"="+p.Price,
			"--endpoint-note", p.Name+"="+p.Note)
	}
	fmt.Fprintf(os.Stderr, "%s %s\n", *worker, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, *worker, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func note(profiles []evalsample.Profile) string {
	var b strings.Builder
	b.WriteString("**These endpoints are simulators (deploy/local/llmsim), not models.** Their answers come from a rule engine " +
		"and their timing from the profile below, so this report measures the mechanics (prompts, prefix caching, queueing, " +
		"the report's arithmetic), not model quality or real GPU speed. Their mistakes are planted by a seeded error model " +
		"(llmsim's ErrorModel): the managed API and bf16 make the same few at the same rates, fp8 is planted worse " +
		"(phishing links most), so the paired comparison has a real difference to find. Made by `make eval-sample`; the same `worker eval` " +
		"command runs unchanged against real vLLM and managed endpoints. Prices are placeholders.\n\n")
	b.WriteString("| profile | shaped like | TTFT | time per output token | extra TTFT per image | per image URL fetched | misses (all; phishing_link) | price |\n| --- | --- | ---: | ---: | ---: | ---: | --- | --- |\n")
	like := map[string]string{"bf16": "self-hosted, BF16 weights", "fp8": "self-hosted, FP8 weights (faster decode)", "managed": "managed API (slower TTFT, slow image stage)"}
	for _, p := range profiles {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | `%s` |\n", p.Name, like[p.Name], p.Config.TTFT, p.Config.ITL, p.Config.ImageTTFT,
			p.Config.ImageURLFetch, missText(p.Config.Errors), p.Price)
	}
	return b.String()
}

// missText is an error model's miss rates, "*" first.
func missText(e llmsim.ErrorModel) string {
	parts := []string{fmt.Sprintf("%.0f %%", 100*e.Miss["*"])}
	for _, c := range []pipeline.Category{pipeline.CategoryPhishingLink} {
		if r, ok := e.Miss[c]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f %%", c, 100*r))
		}
	}
	return strings.Join(parts, "; ")
}
