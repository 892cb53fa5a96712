// Command evalpower runs the power suite of `worker eval`'s decisions
// (make eval-power; package evalpower): four scenarios over the sample
// lake's labelled rooms, --seeds sets each, and prints the table with
// Wilson intervals and the checks. Exit status 1 when a check fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/evalpower"
)

func main() {
	if err := run(os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "evalpower:", err)
		os.Exit(1)
	}
}

func run(stdout, stderr io.Writer) error {
	seeds := flag.Int("seeds", 500, "sets (seeds) per scenario (at 90 % power, 300 sets put the 85 % bound within sampling noise)")
	rooms := flag.Int("rooms", 6000, "sample-lake rooms to generate (the planned set must fit in their positives)")
	lakeSeed := flag.Int64("lake-seed", 7, "seed of the sample lake")
	pilotPositives := flag.Int("pilot", 600, "positives of the pilot set, and of the equal-endpoint and flag-rate sets")
	only := flag.String("scenarios", "equal,correlated,loss,flags", "the scenarios to run, comma-separated")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	all, err := evalpower.Rooms(ctx, *lakeSeed, *rooms)
	if err != nil {
		return err
	}
	base := evalpower.Base()
	one := evalpower.Set(all, *pilotPositives, 1)
	three := evalpower.Set(all, *pilotPositives, 3)
	lossCand := evalpower.CalibrateLoss(base, one, evalpower.PlantedLoss, 2_000_000, 200)
	in, plan := evalpower.Pilot(evalpower.Scenario{Set: one, Ref: base, Cand: lossCand}, 99_999, evalpower.PlantedLoss)
	big := evalpower.Set(all, plan.DetectPositives, 1)
	if got := evalpower.Positives(big); got < plan.DetectPositives {
		return fmt.Errorf("the plan asks for %d positives and %d rooms hold %d: raise --rooms", plan.DetectPositives, *rooms, got)
	}
	truth := evalpower.TrueLoss(big, base, lossCand, 1_000_000, 200)
	fmt.Fprintf(stderr, "evalpower: pilot ψ %.3f, design effect %.2f: %d positives for 90 %% power on a %.0f-point loss; true loss on that set %.2f points\n",
		in.Psi, in.Deff, plan.DetectPositives, 100*evalpower.PlantedLoss, 100*truth)
	scenarios := []struct {
		kind string
		sc   evalpower.Scenario
	}{
		{"equal", evalpower.Scenario{Name: "equal endpoints, one window per room", Set: one, Ref: base, Cand: base}},
		{"correlated", evalpower.Scenario{Name: "equal endpoints, three correlated windows per room", Set: three, Ref: base, Cand: base}},
		{"loss", evalpower.Scenario{Name: fmt.Sprintf("planted %.0f-point recall loss (%.2f true), the planned size", 100*evalpower.PlantedLoss, 100*truth),
			Set: big, Ref: base, Cand: lossCand, Truth: truth}},
		{"flags", evalpower.Scenario{Name: fmt.Sprintf("planted +%.0f-point flag rate, equal recall", 100*evalpower.PlantedFlag), Set: one, Ref: base,
			Cand: evalpower.PlantFlags(base, one, evalpower.PlantedFlag)}},
	}
	var names []string
	var outs []evalpower.Outcome
	var checks strings.Builder
	failed := false
	for i, s := range scenarios {
		if !slices.Contains(strings.Split(*only, ","), s.kind) {
			continue
		}
		t0 := time.Now()
		o := evalpower.Run(ctx, s.sc, uint64(i+1)*100_000, *seeds)
		fmt.Fprintf(stderr, "evalpower: %s: %d sets in %s\n", s.sc.Name, *seeds, time.Since(t0).Round(time.Second))
		names, outs = append(names, s.sc.Name), append(outs, o)
		for _, c := range evalpower.Checks(s.kind, o) {
			mark := "pass"
			if !c.OK {
				mark, failed = "FAIL", true
			}
			fmt.Fprintf(&checks, "- %s: %s: %s\n", s.sc.Name, c.What, mark)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fmt.Fprintf(stdout, "%d sets per scenario; sample lake seed %d, %d rooms; margin %.0f point, flag margin %.0f points, α 0.05; pilot ψ %.3f → %d positives (90 %% power); %s\n\n",
		*seeds, *lakeSeed, *rooms, 100*evalpower.Margin, 100*evalpower.FlagMargin, in.Psi, plan.DetectPositives, time.Since(start).Round(time.Second))
	fmt.Fprint(stdout, evalpower.Table(names, outs))
	fmt.Fprintf(stdout, "\n%s", checks.String())
	if failed {
		return errors.New("a check failed")
	}
	return nil
}
