package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

// evalPlanConfig is `worker eval plan`'s configuration: a pilot's figures
// (as a report's "Set size for the next run" table prints them) and what
// the next set must decide.
type evalPlanConfig struct {
	Discordance, DesignEffect, PerRoom float64
	Loss, Margin                       float64
}

func defaultEvalPlanConfig() evalPlanConfig {
	return evalPlanConfig{DesignEffect: 1, PerRoom: 1, Loss: 3, Margin: 1}
}

func (c *evalPlanConfig) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("worker eval plan", "Sizes a labelled set before it is built: from a pilot run's discordance (the share of positives\n"+
		"the reference and the candidate scored differently, ψ in the report's \"Set size for the next run\" table), its design\n"+
		"effect and positives per room, prints the positives and rooms `worker eval` needs to detect a recall loss of --loss\n"+
		"points and to show no loss beyond --margin points when there is none, at 80 % and 90 % power, α 0.05, clustered.")
	fs.Float64Var(&c.Discordance, "discordance", "the pilot's discordant share ψ of positives, in (0, 1)")
	fs.Float64Var(&c.DesignEffect, "design-effect", "the pilot's design effect (clustered variance over independent; 1: rooms of one window, nothing shared)")
	fs.Float64Var(&c.PerRoom, "positives-per-room", "positives per cluster (room, or account or campaign where the set names them) the set will have")
	fs.Float64Var(&c.Loss, "loss", "the recall loss (points) the set must detect")
	fs.Float64Var(&c.Margin, "margin", "the non-inferiority margin (points): the set must show no loss beyond it when there is none")
	return fs
}

// Validate reports every problem at once, naming the flags.
func (c evalPlanConfig) Validate() error {
	var errs []error
	if c.Discordance <= 0 || c.Discordance >= 1 {
		errs = append(errs, fmt.Errorf("--discordance %v must be in (0, 1)", c.Discordance))
	}
	if c.DesignEffect < 1 {
		errs = append(errs, fmt.Errorf("--design-effect %v must be at least 1", c.DesignEffect))
	}
	if c.PerRoom < 1 {
		errs = append(errs, fmt.Errorf("--positives-per-room %v must be at least 1", c.PerRoom))
	}
	if c.Loss <= 0 || c.Loss >= 100 || c.Margin <= 0 || c.Margin >= 100 {
		errs = append(errs, fmt.Errorf("--loss %v and --margin %v must be in (0, 100) points", c.Loss, c.Margin))
	}
	return errors.Join(errs...)
}

// runEvalPlan is `worker eval plan`: it prints the set sizes as a
// Markdown table. Exit status: 0 printed, 2 bad usage.
func runEvalPlan(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := defaultEvalPlanConfig()
	fs := cfg.flags()
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	if err := cfg.Validate(); err != nil {
		return cli.Fail(stderr, "worker eval plan", err)
	}
	writeEvalPlan(stdout, cfg)
	return 0
}

func writeEvalPlan(w io.Writer, cfg evalPlanConfig) {
	in := stats.PlanInput{Psi: cfg.Discordance, Deff: cfg.DesignEffect, PerCluster: cfg.PerRoom,
		Loss: cfg.Loss / 100, Margin: cfg.Margin / 100, Alpha: eval.Alpha}
	fmt.Fprintf(w, "ψ %.3f, design effect %.2f, %.2f positives per room, α %.2f (two-sided interval; a loss is detected when it lies above zero)\n\n",
		cfg.Discordance, cfg.DesignEffect, cfg.PerRoom, eval.Alpha)
	fmt.Fprintf(w, "| power | detect a %.1f-point loss | show no loss beyond %.1f points (no true loss) |\n| ---: | --- | --- |\n", cfg.Loss, cfg.Margin)
	for _, r := range stats.Plan(in, 0.8, 0.9) {
		fmt.Fprintf(w, "| %.0f %% | %d positives in %d rooms | %d positives in %d rooms |\n",
			100*r.Power, r.DetectPositives, r.DetectClusters, r.NoLossPositives, r.NoLossClusters)
	}
}
