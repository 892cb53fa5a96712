package k8s_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"
)

// spendPhase is a stretch of minutes spending perMinute USD a minute.
type spendPhase struct {
	minutes   int
	perMinute float64
}

// spendSeries is the fleet's spend in promqltest's notation: the phases'
// per-minute spend split 70/30 between the pools, as two counters (one
// worker pod), and the budget gauge at budget on a worker and the console.
func spendSeries(budget float64, phases ...spendPhase) string {
	prim, fb := []string{"0"}, []string{"0"}
	var p, f float64
	n := 0
	for _, ph := range phases {
		for range ph.minutes {
			p += 0.7 * ph.perMinute
			f += 0.3 * ph.perMinute
			prim, fb = append(prim, fmt.Sprintf("%.6f", p)), append(fb, fmt.Sprintf("%.6f", f))
			n++
		}
	}
	const l = `namespace="chatguard",stage="judge",class="batch",pod="w1"`
	return "load 1m\n" +
		` chatguard_llm_cost_dollars_total{` + l + `,pool="primary"} ` + strings.Join(prim, " ") + "\n" +
		` chatguard_llm_cost_dollars_total{` + l + `,pool="fallback"} ` + strings.Join(fb, " ") + "\n" +
		fmt.Sprintf(` chatguard_llm_daily_budget_dollars{namespace="chatguard",pod="w1"} %g+0x%d`, budget, n) + "\n" +
		fmt.Sprintf(` chatguard_llm_daily_budget_dollars{namespace="chatguard",pod="c1"} %g+0x%d`, budget, n)
}

// normalDay is a day's spend at the budget's pace of 1 USD a minute
// (budget 1440): quiet nights, a busy afternoon peaking at 1.4x, and one
// five-minute burst at 6x (a backfill), about 0.97x on the whole.
func normalDay() []spendPhase {
	hourly := []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.6, 0.8, 1.0, 1.2, 1.3, 1.4, 1.4, 1.4, 1.4, 1.4, 1.3, 1.2, 1.2, 1.1, 1.0, 0.9, 0.8, 0.7, 0.6}
	var out []spendPhase
	for h, x := range hourly {
		if h == 14 {
			out = append(out, spendPhase{30, x}, spendPhase{5, 6}, spendPhase{25, x})
			continue
		}
		out = append(out, spendPhase{60, x})
	}
	return out
}

// TestSpendAlertsFireOnOverspend evaluates the budget's burn-rate alerts
// on synthetic spend: each fires on an overspend at its pace, both stay
// silent on a normal day and with no budget set, and the fast one stops
// once a spike is over.
func TestSpendAlertsFireOnOverspend(t *testing.T) {
	t.Parallel()
	const budget = 1440 // USD a day: 1 USD a minute is the budget's pace
	day := normalDay()
	cases := []struct {
		alert, name, series string
		until               time.Duration
		fires               bool
	}{
		{"ChatguardSpendBurnFast", "a runaway at 6x the budget's pace for 90 minutes",
			spendSeries(budget, spendPhase{120, 1}, spendPhase{90, 6}), 210 * time.Minute, true},
		{"ChatguardSpendBurnFast", "a normal day",
			spendSeries(budget, day...), 24 * time.Hour, false},
		{"ChatguardSpendBurnFast", "a 2x day is a slow burn, not a fast one",
			spendSeries(budget, spendPhase{8 * 60, 2}), 8 * time.Hour, false},
		{"ChatguardSpendBurnFast", "an hour at 6x, then back to pace for 30 minutes",
			spendSeries(budget, spendPhase{60, 1}, spendPhase{60, 6}, spendPhase{30, 1}), 150 * time.Minute, false},
		{"ChatguardSpendBurnFast", "no budget set",
			spendSeries(0, spendPhase{120, 1}, spendPhase{90, 6}), 210 * time.Minute, false},

		{"ChatguardSpendBurnSlow", "twice the budget's pace for 8 hours",
			spendSeries(budget, spendPhase{8 * 60, 2}), 8 * time.Hour, true},
		{"ChatguardSpendBurnSlow", "a normal day",
			spendSeries(budget, day...), 24 * time.Hour, false},
		{"ChatguardSpendBurnSlow", "no budget set",
			spendSeries(0, spendPhase{8 * 60, 2}), 8 * time.Hour, false},
	}
	for _, c := range cases {
		t.Run(c.alert+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			got := evalAlert(t, ruleOf(t, c.alert), c.series, c.until)
			if c.fires {
				require.Equal(t, rules.StateFiring, got, "%s must fire: %s", c.alert, c.name)
			} else {
				require.Equal(t, rules.StateInactive, got, "%s must stay silent: %s", c.alert, c.name)
			}
		})
	}
}
