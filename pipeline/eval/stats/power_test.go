package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// simRow is one row of the published power and false-alarm table.
type simRow struct {
	loss                           float64 // planted recall loss (share)
	detected, noLoss, inconclusive int
}

// The simulated comparison: 600 positive cases, the reference right on
// 90 %, both endpoints flipping 2 % of cases each way against each other
// (noise), the candidate losing a further planted share. These are the
// figures of the table in docs/performance.md.
const (
	simPositives = 600
	simBase      = 0.90
	simNoise     = 0.02
	simTrials    = 1000
	simAlpha     = 0.05
	simPower     = 0.8
	simMargin    = 0.01
	simResamples = 200
)

// simTrial draws one paired set and decides it as `worker eval` does:
// McNemar on the pairs, the clustered bootstrap for the interval, the MDE
// from the observed discordance.
func simTrial(rng *rand.Rand, loss float64, seed uint64) Outcome {
	cs := make([]Cluster, simPositives)
	b, c := 0, 0
	for i := range cs {
		refRight := rng.Float64() < simBase
		candRight := refRight
		u := rng.Float64()
		switch {
		case refRight && u < simNoise+loss/simBase:
			candRight = false
		case !refRight && u < simNoise*simBase/(1-simBase):
			candRight = true // the same number of flips back: noise is symmetric
		}
		cs[i] = Cluster{A: hit(refRight), B: hit(candRight)}
		if refRight && !candRight {
			b++
		}
		if !refRight && candRight {
			c++
		}
	}
	var a, bb Counts
	for _, x := range cs {
		a, bb = a.Add(x.A), bb.Add(x.B)
	}
	loss, p := a.Recall()-bb.Recall(), McNemarExact(b, c)
	// The bootstrap is the slow part, and two outcomes do not need it: a
	// detected loss, and an upper bound whose Wilson floor alone already
	// reaches the margin. Skipping it there gives the outcome Decide
	// would (the bootstrap draws from its own seed, not from rng).
	var d Deltas
	if !(loss > 0 && p < simAlpha) && LossInterval(Interval{}, b, c, simPositives, 0.95).Hi < simMargin {
		d = PairedBootstrap(cs, simResamples, 0.95, seed)
	} else {
		d.Recall = Interval{Lo: -1, Hi: 1} // unused: the outcome is settled
	}
	// The MDE only words the inconclusive line; it does not change the
	// outcome, so the trials leave it out.
	return Decide(loss, LossInterval(d.Recall, b, c, simPositives, 0.95), p, simAlpha, simMargin, 0, simPositives).Outcome
}

func hit(right bool) Counts {
	if right {
		return Counts{TP: 1}
	}
	return Counts{FN: 1}
}

// TestPowerAndFalseAlarms checks the decision on simulated paired
// outcomes: with identical endpoints "loss detected" comes up at most at
// alpha, and with a planted loss at least at the power the tool itself
// predicts for it, both within binomial slack (three standard errors of
// the simulated rate). Run with -v, it prints the table docs/performance.md
// publishes.
func TestPowerAndFalseAlarms(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2026, 12))
	var table strings.Builder
	fmt.Fprintf(&table, "| planted recall loss | trials | discordant pairs ψ | predicted power | loss detected | no loss beyond %.0f-point margin | inconclusive |\n", 100*simMargin)
	table.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, loss := range []float64{0, 0.01, 0.02, 0.03, 0.05} {
		row := simRow{loss: loss}
		for i := range simTrials {
			switch simTrial(rng, loss, uint64(i)) {
			case LossDetected:
				row.detected++
			case NoLossBeyondMargin:
				row.noLoss++
			default:
				row.inconclusive++
			}
		}
		psi := 2*simNoise*simBase + loss
		rate := float64(row.detected) / simTrials
		predicted := ExactPairedPower(simPositives, loss, psi, simAlpha)
		if loss == 0 {
			predicted = math.NaN()
			if slack := 3 * math.Sqrt(simAlpha*(1-simAlpha)/simTrials); rate > simAlpha+slack {
				t.Errorf("identical endpoints: loss detected in %.3f of trials, more than alpha %.2f + %.3f", rate, simAlpha, slack)
			}
		} else if slack := 3 * math.Sqrt(predicted*(1-predicted)/simTrials); rate < predicted-slack {
			t.Errorf("planted loss %.2f: detected in %.3f of trials, below the predicted power %.3f - %.3f", loss, rate, predicted, slack)
		}
		// At a loss exactly the margin, "no loss beyond the margin" is the
		// wrong call: it must come up at most at α/2 (the interval's
		// one-sided level), within slack.
		if noLoss := float64(row.noLoss) / simTrials; loss == simMargin && noLoss > simAlpha/2+3*math.Sqrt(simAlpha/2*(1-simAlpha/2)/simTrials) {
			t.Errorf("planted loss at the margin: called no loss in %.3f of trials", noLoss)
		}
		pred := "(α = 0.05)"
		if !math.IsNaN(predicted) {
			pred = fmt.Sprintf("%.3f", predicted)
		}
		fmt.Fprintf(&table, "| %.0f points | %d | %.3f | %s | %.3f | %.3f | %.3f |\n", 100*loss, simTrials, psi, pred,
			rate, float64(row.noLoss)/simTrials, float64(row.inconclusive)/simTrials)
	}
	t.Logf("%d positive cases, reference recall %.2f, noise %.0f %% flips each way, α %.2f, power %.1f, %d bootstrap resamples per trial:\n%s",
		simPositives, simBase, 100*simNoise, simAlpha, simPower, simResamples, table.String())
}
